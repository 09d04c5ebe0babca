"""WAL frames whose CRCs are right but whose contents are wrong (see fuzz/__init__.py).

`store_files` replaces a whole file, so nearly every WAL it makes fails the first frame's CRC and
recovery never reads a frame's contents. Here the input is a recipe of edits to the frames of the
crashed template store's three WAL files, taken as one list (entry types, timestamps, sequences,
slot bitmaps, slot metadata, payload bytes, cuts, synced frames with any range, frames duplicated,
dropped or swapped, also across the files, a slot moved to the progress slot 63); every frame is
then given its correct length and CRC, each rotated chunk gets back as many frames as it held
(the next ones in the list) and the active file the rest and its pre-extended zero tail, and the
store goes through the same tools and opens as in `store_files`. The ad-hoc loop this target replaces found three bugs in 159 runs
(docs/reliability.md)."""

from __future__ import annotations

import functools
import os

import atheris
import crc32c

from quiver_store.wal import format as wal
from quiver_store.wal.format import Entry
from quiver_store.wal.reader import scan

from .harness import fuzz, seed_each_kind
from .store_files import WALS, check_with, template

EDITS = 10  # at most, per input
KINDS = 13
SLOTS_AT = wal.ENTRY_HEAD_LEN
# Offsets of the fields of a record bundle frame's first slot record, and their widths.
SLOT_FIELDS = ((SLOTS_AT, 2), (SLOTS_AT + 2, 32), (SLOTS_AT + 34, 4), (SLOTS_AT + 38, 4))
EXTREMES = (0, 1, 2, 255, 256, 65535, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1)


@functools.cache
def original() -> tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...], int]:
    """The template WAL files' headers, their frames' bodies (no length, no CRC) in order, how many
    of those each file holds, and the length of the active file's pre-extended zero tail."""
    headers, bodies, counts = [], [], []
    for name in WALS:
        with open(os.path.join(template(), name), "rb") as f:
            data = f.read()
        frames = scan(memoryview(data), wal.HEADER_LEN, resync=False)  # ends at a pre-extended zero tail
        headers.append(data[: wal.HEADER_LEN])
        entries = [bytes(f.body) for f in frames if isinstance(f, Entry)]
        bodies += entries
        counts.append(len(entries))
    tail = len(data) - wal.HEADER_LEN - sum(wal.LEN.size + len(b) + wal.CRC.size for b in entries)
    return tuple(headers), tuple(bodies), tuple(counts), tail


def number(fdp: atheris.FuzzedDataProvider, width: int) -> int:
    """An extreme value or any value of `width` bytes, as the input says."""
    if fdp.ConsumeBool():
        return EXTREMES[fdp.ConsumeIntInRange(0, len(EXTREMES) - 1)] % (1 << (8 * width))
    return fdp.ConsumeIntInRange(0, (1 << (8 * width)) - 1)


def put(body: bytearray, offset: int, width: int, value: int) -> None:
    if offset + width <= len(body):
        body[offset : offset + width] = value.to_bytes(width, "little")


def edit(fdp: atheris.FuzzedDataProvider, frames: list[bytearray]) -> None:
    """One edit to one frame (or to the frame list), chosen by the input."""
    if not frames:
        return
    k = fdp.ConsumeIntInRange(0, len(frames) - 1)
    body = frames[k]
    kind = fdp.ConsumeIntInRange(0, KINDS - 1)
    if kind == 0:
        put(body, 0, 1, fdp.ConsumeIntInRange(0, 255))  # entry type
    elif kind == 1:
        put(body, 1, 8, number(fdp, 8))  # ingestion timestamp
    elif kind == 2:
        put(body, 9, 8, number(fdp, 8))  # sequence
    elif kind == 3:
        put(body, 17, 8, number(fdp, 8))  # slot bitmap
    elif kind == 4:
        offset, width = SLOT_FIELDS[fdp.ConsumeIntInRange(0, len(SLOT_FIELDS) - 1)]
        put(body, offset, width, number(fdp, width))
    elif kind == 5:  # bytes inside the slot records and payloads
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if len(body) > SLOTS_AT:
                body[fdp.ConsumeIntInRange(SLOTS_AT, len(body) - 1)] = fdp.ConsumeIntInRange(0, 255)
    elif kind == 6:  # a cut body (the frame stays whole: its length and CRC are rewritten)
        del body[fdp.ConsumeIntInRange(0, len(body)) :]
    elif kind == 7:  # bytes appended
        body += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
    elif kind == 8:  # a synced frame with any range, in place of this one or before it
        synced = bytearray(wal.ENTRY_HEAD.pack(wal.ENTRY_SYNCED, 0, number(fdp, 8), 0) + wal.SYNCED_FROM.pack(number(fdp, 8)))
        if fdp.ConsumeBool():
            frames.insert(k, synced)
        else:
            frames[k] = synced
    elif kind == 9:
        frames.insert(fdp.ConsumeIntInRange(0, len(frames)), bytearray(body))  # a duplicate anywhere
    elif kind == 10:
        del frames[k]
    elif kind == 11:
        j = fdp.ConsumeIntInRange(0, len(frames) - 1)
        frames[k], frames[j] = frames[j], frames[k]
    else:
        to_progress_slot(body)


def to_progress_slot(body: bytearray) -> None:
    """The frame's last slot record moved to slot 63 (its bitmap bit and payload type id), its batch
    unchanged: the store then reads another slot's batch as a producer progress record."""
    if len(body) < SLOTS_AT:
        return
    bitmap = wal.ENTRY_HEAD.unpack_from(body)[3]
    pos, last = SLOTS_AT, None
    for _ in range(bitmap.bit_count()):
        if pos + wal.SLOT_META_LEN > len(body):
            break
        last, pos = pos, pos + wal.SLOT_META_LEN + wal.SLOT_META.unpack_from(body, pos)[3]
    if last is not None:
        put(body, 17, 8, bitmap & ~(1 << (bitmap.bit_length() - 1)) | 1 << 63)
        put(body, last, 2, 63)


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    headers, bodies, counts, tail = original()
    frames = [bytearray(b) for b in bodies]
    for _ in range(fdp.ConsumeIntInRange(1, EDITS)):
        edit(fdp, frames)
    framed = [wal.LEN.pack(len(b)) + bytes(b) + wal.CRC.pack(crc32c.crc32c(bytes(b))) for b in frames]
    files, at = {}, 0
    for name, header, count in zip(WALS, headers, counts, strict=True):
        files[name] = header + b"".join(framed[at : at + count] if name != WALS[-1] else framed[at:])
        at += count
    check_with(WALS[-1], files.pop(WALS[-1]) + bytes(tail), files)


def first_kind(data: bytes, frames: int) -> int:
    """The kind of the first edit `data` asks for (as `one` reads it)."""
    fdp = atheris.FuzzedDataProvider(data)
    fdp.ConsumeIntInRange(1, EDITS)
    fdp.ConsumeIntInRange(0, frames - 1)
    return fdp.ConsumeIntInRange(0, KINDS - 1)


def seed(directory: str) -> None:
    frames = len(original()[1])
    seed_each_kind(directory, KINDS, lambda data: first_kind(data, frames), 48)


if __name__ == "__main__":
    fuzz(one)
