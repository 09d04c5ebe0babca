"""Sequential frame scanner: valid entries, torn tails, holes and corruption, told apart.

A failure at offset p is classified by looking for the next valid frame (plausible length, known
entry type, matching CRC32C) after p: none -> torn tail (a normal end of log), unless the failing
frame is complete and only its CRC is wrong (damage, reported and quarantined like any other);
found and the bytes between are all zero -> a hole (a punched prefix or a quarantined region
zeroed by us); found otherwise -> corruption. The candidate search is vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import crc32c
import numpy as np

from .format import (
    CRC,
    ENTRY_HEAD,
    ENTRY_RECORD_BUNDLE,
    FRAME_OVERHEAD,
    LEN,
    MAX_ENTRY_LEN,
    MIN_ENTRY_LEN,
    Entry,
)

KNOWN_ENTRY_TYPES = (ENTRY_RECORD_BUNDLE,)
_WINDOW = 1 << 22
CRC_MISMATCH = "CRC32C mismatch"


@dataclass(frozen=True)
class Damage:
    """Bytes [offset, offset+length) that are not valid frames. `next_valid` is None for tails."""

    kind: Literal["torn", "hole", "corrupt"]
    offset: int
    length: int
    reason: str
    next_valid: int | None


def frame_at(data: memoryview, pos: int) -> Entry | str:
    """The valid frame starting at `pos`, or why there is none."""
    end = len(data)
    if end - pos < LEN.size:
        return f"{end - pos} bytes left, too few for a length prefix"
    (length,) = LEN.unpack_from(data, pos)
    if length < MIN_ENTRY_LEN or length > MAX_ENTRY_LEN:
        return f"entry length {length} is implausible"
    if pos + FRAME_OVERHEAD + length > end:
        return f"entry length {length} runs past the end of the file ({end - pos} bytes left)"
    body = data[pos + LEN.size : pos + LEN.size + length]
    (stored,) = CRC.unpack_from(data, pos + LEN.size + length)
    if crc32c.crc32c(body) != stored:
        return CRC_MISMATCH
    entry_type, ts, seq, bitmap = ENTRY_HEAD.unpack_from(body, 0)
    return Entry(entry_type, ts, seq, bitmap, body, pos, FRAME_OVERHEAD + length)


def find_next_frame(data: memoryview, after: int, hint: int | None = None) -> int | None:
    """Offset of the first valid frame of a known type starting after `after` (the hint first)."""
    end = len(data)
    if hint is not None and after < hint < end:
        found = frame_at(data, hint)
        if isinstance(found, Entry) and found.entry_type in KNOWN_ENTRY_TYPES:
            return hint
    arr = np.frombuffer(data, dtype=np.uint8)
    start = after + 1
    while start + FRAME_OVERHEAD + MIN_ENTRY_LEN <= end:
        stop = min(end - (FRAME_OVERHEAD + MIN_ENTRY_LEN) + 1, start + _WINDOW)
        n = stop - start
        a = arr[start : stop + 4].astype(np.uint32)
        lens = a[:n] | (a[1 : n + 1] << 8) | (a[2 : n + 2] << 16) | (a[3 : n + 3] << 24)
        offs = np.arange(start, stop, dtype=np.int64)
        ok = (lens >= MIN_ENTRY_LEN) & (lens <= MAX_ENTRY_LEN) & (offs + FRAME_OVERHEAD + lens <= end)
        ok &= np.isin(a[4 : n + 4], KNOWN_ENTRY_TYPES)
        for cand in offs[ok].tolist():
            if isinstance(frame_at(data, cand), Entry):
                return int(cand)
        start = stop
    return None


def _all_zero(data: memoryview, start: int, stop: int) -> bool:
    return not np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start).any()


def scan(data: memoryview, start: int, *, resync: bool) -> Iterator[Entry | Damage]:
    """Frames from `start`; damage is yielded, then the scan resumes (holes, or `resync`) or stops."""
    pos = start
    end = len(data)
    while pos < end:
        found = frame_at(data, pos)
        if isinstance(found, Entry):
            yield found
            pos += found.size
            continue
        hint = None
        if end - pos >= LEN.size:
            (length,) = LEN.unpack_from(data, pos)
            hint = pos + FRAME_OVERHEAD + length
        nxt = find_next_frame(data, pos, hint)
        if nxt is None:
            zero = _all_zero(data, pos, end)
            if found == CRC_MISMATCH and not zero:
                # The whole frame is there but its bytes are wrong: damage, not an interrupted append.
                yield Damage("corrupt", pos, end - pos, "CRC32C mismatch in a complete final entry", None)
                return
            yield Damage("torn", pos, end - pos, "zero-filled tail" if zero else found, None)
            return
        if _all_zero(data, pos, nxt):
            yield Damage("hole", pos, nxt - pos, "zero-filled region", nxt)
            pos = nxt
            continue
        yield Damage("corrupt", pos, nxt - pos, found, nxt)
        if not resync:
            return
        pos = nxt
