"""Sequential frame scanner: valid entries, torn tails, holes and corruption, told apart.

A failure at offset p is classified as follows. Bytes [p, end of file) all zero -> the zero-filled
tail (ZERO_TAIL): the end of the log, which the writer pre-extends with zeros so that appends
overwrite allocated blocks (no entry_len is 0, so a zero length field there is unambiguous).
Otherwise look for the next valid frame (plausible length, known entry type, matching CRC32C)
after p: none -> torn tail (a write that stopped part way: the end of log), unless the failing
frame is complete, its CRC field is non-zero and does not match (damage, reported and quarantined
like any other; a write that stopped before the frame's end leaves that field zero); found and the
bytes between are all zero -> a hole (a punched prefix or a quarantined region zeroed by us);
found otherwise -> corruption, after a leading zero run of at least MIN_HOLE bytes, which is a
hole of its own (a punched prefix right before a damaged entry). Tail damage ends where the
trailing zeros begin. The candidate search is vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import crc32c
import numpy as np

from .format import (
    CRC,
    ENTRY_DIRECT,
    ENTRY_HEAD,
    ENTRY_RECORD_BUNDLE,
    ENTRY_SYNCED,
    FRAME_OVERHEAD,
    LEN,
    MAX_ENTRY_LEN,
    MAX_SEQUENCE,
    MIN_ENTRY_LEN,
    Entry,
)

KNOWN_ENTRY_TYPES = (ENTRY_RECORD_BUNDLE, ENTRY_DIRECT, ENTRY_SYNCED)
_WINDOW = 1 << 22
CRC_MISMATCH = "CRC32C mismatch"
SEQUENCE_TOO_LARGE = "sequence above 2**63-1 (more than any store numbers) in a frame whose CRC32C matches"
ZERO_TAIL = "zero-filled tail"  # the reason of the clean end of a pre-extended (or zero-padded) file


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
    if seq > MAX_SEQUENCE:
        return SEQUENCE_TOO_LARGE
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


MIN_HOLE = 4096  # zero runs this long are reclaimed space (holes are punched in whole blocks), not a
# damaged frame whose length field was zeroed (4 bytes)


def _zero_run(data: memoryview, start: int, stop: int) -> int:
    """Zero bytes from `start` (up to `stop`, which holds a non-zero byte)."""
    return int(np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start))[0])


def _all_zero(data: memoryview, start: int, stop: int) -> bool:
    return not np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start).any()


def data_end(data: memoryview, start: int) -> int:
    """Offset just past the last non-zero byte at or after `start` (`start` if there is none)."""
    stop = len(data)
    while stop > start:
        lo = max(start, stop - _WINDOW)
        nonzero = np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=stop - lo, offset=lo))
        if nonzero.size:
            return lo + int(nonzero[-1]) + 1
        stop = lo
    return start


def _stored_crc(data: memoryview, pos: int) -> tuple[int, int]:
    """(stored CRC32C, end) of the complete frame at `pos`."""
    (length,) = LEN.unpack_from(data, pos)
    (stored,) = CRC.unpack_from(data, pos + LEN.size + length)
    return int(stored), pos + FRAME_OVERHEAD + length


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
        stop = data_end(data, pos)  # searched backwards from the end: cheap when data follows
        if stop == pos:
            yield Damage("torn", pos, end - pos, ZERO_TAIL, None)
            return
        hint = None
        if end - pos >= LEN.size:
            (length,) = LEN.unpack_from(data, pos)
            hint = pos + FRAME_OVERHEAD + length
        nxt = find_next_frame(data, pos, hint)
        if nxt is None:
            if found == SEQUENCE_TOO_LARGE:  # whole and intact as written: damage, not an interrupted write
                frame_end = _stored_crc(data, pos)[1]
                yield Damage("corrupt", pos, max(stop, frame_end) - pos, f"{found}, the final entry", None)
                return
            if found == CRC_MISMATCH:
                stored, frame_end = _stored_crc(data, pos)
                if stored != 0:
                    # The whole frame is there, CRC included, but its bytes are wrong: damage, not an
                    # interrupted write (which leaves the CRC field of a pre-extended file zero).
                    yield Damage("corrupt", pos, max(stop, frame_end) - pos, "CRC32C mismatch in a complete final entry", None)
                    return
            yield Damage("torn", pos, stop - pos, found, None)
            return
        if _all_zero(data, pos, nxt):
            yield Damage("hole", pos, nxt - pos, "zero-filled region", nxt)
            pos = nxt
            continue
        lead = _zero_run(data, pos, nxt)
        if lead >= MIN_HOLE:  # a punched prefix, then damage: report the damage where it starts
            yield Damage("hole", pos, lead, "zero-filled region", pos + lead)
            pos += lead
            continue
        yield Damage("corrupt", pos, nxt - pos, found, nxt)
        if not resync:
            return
        pos = nxt


def content_end(view: memoryview, start: int) -> int:
    """End of the bytes after `start` worth keeping (quarantine): the last non-zero byte, or the end
    of the last frame if later, since a frame may end in zero bytes; the zero tail is left out."""
    end = data_end(view, start)
    for item in scan(view, start, resync=True):
        if isinstance(item, Entry):
            end = max(end, item.offset + item.size)
        elif item.reason != ZERO_TAIL:
            end = max(end, item.offset + item.length)
    return end
