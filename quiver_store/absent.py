"""WAL sequences that no segment will ever hold, and why: the durable record `quiver verify` reads.

Every WAL sequence number names one bundle (or the marker of one written straight into a segment
file), and segments are written in log order, so a sequence in no segment file is either lost or a
bundle that was never stored. Three kinds are recorded:

* ``lost``: acknowledged bundles that recovery found gone: a sequence gap between intact WAL frames
  (deleted or cut WAL files, frames removed), or damaged, zeroed or quarantined frames that a later
  synced frame says were fdatasynced (wal/format.py, ENTRY_SYNCED). `QuiverStore.open` reports each
  loss once, in ``stats()["corruption_reports"]``; this record keeps it afterwards.
* ``damaged``: frames gone after damage (or zeros) that no synced frame vouches for: either
  acknowledged bundles whose frames the disk damaged, or the never-acknowledged frames of a commit
  a power loss interrupted, which leaves the same bytes. The log cannot tell which.
* ``unacknowledged``: large (direct) bundles whose segment write failed (their producer got the
  error) or that a crash cut before their segment was durable (no producer was told they were stored).

The store keeps the ranges it learns of (at open, or when a direct bundle fails) and writes them
into the metadata of the next segment it finalizes, key ``quiver.wal.absent``, as ``LO-HI KIND``
items joined by ``;`` (``15-24 lost;30-31 damaged;40-40 unacknowledged``). The segment's checksummed, fsynced
metadata makes the record durable; until then a reopen finds the same gap or marker again.
"""

from __future__ import annotations

from collections.abc import Iterable

from .wal.format import decimal

META_KEY = "quiver.wal.absent"
LOST = "lost"
DAMAGED = "damaged"
UNACKNOWLEDGED = "unacknowledged"
KINDS = (LOST, DAMAGED, UNACKNOWLEDGED)

Range = tuple[int, int, str]  # (first sequence, last sequence, kind)


def merge(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, with overlapping or adjacent ranges of one kind joined."""
    out: list[Range] = []
    for lo, hi, kind in sorted(ranges, key=lambda r: (r[2], r[0], r[1])):
        if out and out[-1][2] == kind and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi), kind)
        else:
            out.append((lo, hi, kind))
    return sorted(out)


def encode(ranges: Iterable[Range]) -> str:
    return ";".join(f"{lo}-{hi} {kind}" for lo, hi, kind in merge(ranges))


def decode(text: str) -> list[Range]:
    """The ranges of a metadata value; items that do not parse (another writer's) are left out."""
    out: list[Range] = []
    for item in text.split(";"):
        span, _, kind = item.strip().partition(" ")
        lo, _, hi = span.partition("-")
        first, last = decimal(lo), decimal(hi)
        if kind in KINDS and first is not None and last is not None and first <= last:
            out.append((first, last, kind))
    return out


def uncovered(lo: int, hi: int, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of sequences lo..hi that none of `ranges` (inclusive pairs) covers, in order."""
    left = [(lo, hi)] if lo <= hi else []
    for a, b in ranges:
        left = [part for x, y in left for part in ((x, min(y, a - 1)), (max(x, b + 1), y)) if part[0] <= part[1]]
    return left


def label(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}..{hi}"
