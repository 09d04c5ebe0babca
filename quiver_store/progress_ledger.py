"""segments/progress.ledger: producer offsets that outlive the segments which recorded them.

A producer's offset lives in the progress records of its bundles (progress.py), so it would vanish
with them when retention deletes their segments, and a writer running again would store its
input a second time. Before a segment holding progress records is deleted, its offsets are merged
into this file (written through `FileSystem.replace_file`); `QuiverStore.committed_offset` takes
the larger of the ledger's offset and those of the segments still held.

A damaged ledger cannot be guessed around (an offset too low stores items twice), so reading it
raises CorruptionError: committed_offset and segment deletion stop until the file is restored or
removed. Layout (docs/formats.md, "Progress ledger"), little-endian:

    magic "QVPRGLDG" | u16 version 1 | u16 reserved 0 | u32 entry count
    per entry: u32 producer length | producer (UTF-8) | i64 offset
    u32 CRC32C of every byte before it
"""

from __future__ import annotations

import os
import struct

import crc32c

from .errors import CorruptionError
from .fs import FileSystem

NAME = "progress.ledger"
MAGIC = b"QVPRGLDG"
VERSION = 1
_HEAD = struct.Struct("<8sHHI")
_LENGTH = struct.Struct("<I")
_OFFSET = struct.Struct("<q")
_CRC = struct.Struct("<I")


def read(fs: FileSystem, segments_dir: str) -> dict[str, int]:
    """The offsets of deleted segments ({} when no segment with progress was ever deleted)."""
    path = os.path.join(segments_dir, NAME)
    if not fs.exists(path):
        return {}
    return decode(fs.read_file(path), path)


def write(fs: FileSystem, segments_dir: str, offsets: dict[str, int]) -> None:
    fs.replace_file(os.path.join(segments_dir, NAME), encode(offsets))


def encode(offsets: dict[str, int]) -> bytes:
    parts = [_HEAD.pack(MAGIC, VERSION, 0, len(offsets))]
    for producer, offset in sorted(offsets.items()):
        name = producer.encode("utf-8")
        parts += [_LENGTH.pack(len(name)), name, _OFFSET.pack(offset)]
    body = b"".join(parts)
    return body + _CRC.pack(crc32c.crc32c(body))


def decode(data: bytes, path: str) -> dict[str, int]:
    def damaged(why: str, offset: int | None = None) -> CorruptionError:
        return CorruptionError(
            f"progress ledger {why}: the offsets of producers whose segments retention deleted are unknown, so "
            "committed_offset and segment deletion refuse to go on; restore the file from a backup, or remove it "
            "to accept that those producers' deleted items are stored again when their writers run again",
            path=path, offset=offset,
        )

    if len(data) < _HEAD.size + _CRC.size:
        raise damaged(f"is {len(data)} bytes, shorter than its header", 0)
    body, (crc,) = data[: -_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
    if crc != crc32c.crc32c(body):
        raise damaged("fails its CRC32C check", len(body))
    magic, version, reserved, count = _HEAD.unpack_from(body, 0)
    if magic != MAGIC or version != VERSION:
        raise damaged(f"has magic {magic!r} version {version}, expected {MAGIC!r} version {VERSION}", 0)
    if reserved:
        raise damaged(f"has reserved field {reserved}, not 0", 10)
    offsets: dict[str, int] = {}
    at = _HEAD.size
    for _ in range(count):
        if at + _LENGTH.size > len(body):
            raise damaged(f"ends inside entry {len(offsets)}", at)
        (length,) = _LENGTH.unpack_from(body, at)
        end = at + _LENGTH.size + length + _OFFSET.size
        if end > len(body):
            raise damaged(f"ends inside entry {len(offsets)}", at)
        try:
            producer = body[at + _LENGTH.size : end - _OFFSET.size].decode("utf-8")
        except UnicodeDecodeError:
            raise damaged(f"entry {len(offsets)} has a producer name that is not UTF-8", at) from None
        (offset,) = _OFFSET.unpack_from(body, end - _OFFSET.size)
        if offset < 0 or producer in offsets or not producer:  # none of which `encode` writes
            why = "a negative offset" if offset < 0 else "an empty producer" if not producer else f"producer {producer!r} a second time"
            raise damaged(f"entry {len(offsets)} holds {why}", at)
        offsets[producer] = offset
        at = end
    if at != len(body):
        raise damaged(f"holds {len(body) - at} bytes after its {count} entries", at)
    return offsets
