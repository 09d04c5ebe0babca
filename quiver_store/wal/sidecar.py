"""The truncate sidecar (wal/truncate.offset): where replay may start, written atomically."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import crc32c

from ..fs import FileSystem

MAGIC = b"QUIVER\0T"
VERSION = 1
BODY = struct.Struct("<8sHHQQ")
CRC = struct.Struct("<I")
SIZE = BODY.size + CRC.size  # 32
NAME = "truncate.offset"


@dataclass(frozen=True)
class TruncatePoint:
    """First byte still needed: `offset` inside the WAL file of generation `generation`."""

    offset: int
    generation: int


def encode(point: TruncatePoint) -> bytes:
    body = BODY.pack(MAGIC, VERSION, 0, point.offset, point.generation)
    return body + CRC.pack(crc32c.crc32c(body))


def decode(data: bytes) -> tuple[TruncatePoint | None, str | None]:
    """The point, or None and the reason it was rejected (the caller then scans from the start)."""
    if len(data) != SIZE:
        return None, f"sidecar is {len(data)} bytes, expected {SIZE}"
    magic, version, reserved, offset, generation = BODY.unpack_from(data, 0)
    (crc,) = CRC.unpack_from(data, BODY.size)
    if crc != crc32c.crc32c(data[: BODY.size]):
        return None, "sidecar CRC32C mismatch"
    if magic != MAGIC:
        return None, f"sidecar magic {magic!r} is not {MAGIC!r}"
    if version != VERSION or reserved != 0:
        return None, f"sidecar version {version} (reserved {reserved}) is not supported"
    return TruncatePoint(offset, generation), None


def read(fs: FileSystem, wal_dir: str) -> tuple[TruncatePoint | None, str | None]:
    path = os.path.join(wal_dir, NAME)
    if not fs.exists(path):
        return None, None
    return decode(fs.read_file(path))


def write(fs: FileSystem, wal_dir: str, point: TruncatePoint) -> None:
    """tmp file + fdatasync + rename + directory fsync: readers see the old or the new point."""
    path = os.path.join(wal_dir, NAME)
    tmp = path + ".tmp"
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write(fd, encode(point))
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(wal_dir)
