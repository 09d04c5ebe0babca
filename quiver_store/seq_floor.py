"""segments/next.seq: the durable floor below which segment (and WAL) sequence numbers were used.

Written (tmp + fdatasync + rename + directory fsync) before a segment sequence number is used,
reserving a run of numbers at a time, so a number is never handed out twice, even after every
segment file was deleted. It also carries the WAL sequence floor: replay skips WAL entries below
it because they are already in segments.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import crc32c

from .fs import FileSystem
from .wal.format import MAX_SEQUENCE

MAGIC = b"QVNXTSEQ"
VERSION = 1
BODY = struct.Struct("<8sHHQQ")
SIZE = BODY.size + 4  # 32
NAME = "next.seq"


@dataclass(frozen=True)
class SequenceFloor:
    next_segment: int = 0  # every segment sequence below this may have been used
    wal_covered: int = 0  # WAL entries with sequence < this are in durable segments


def read(fs: FileSystem, segments_dir: str) -> tuple[SequenceFloor, str | None]:
    """The floor, or the zero floor and why the file was unusable."""
    path = os.path.join(segments_dir, NAME)
    if not fs.exists(path):
        return SequenceFloor(), None
    data = fs.read_file(path)
    if len(data) != SIZE or struct.unpack_from("<I", data, BODY.size)[0] != crc32c.crc32c(data[: BODY.size]):
        return SequenceFloor(), f"{path}: damaged ({len(data)} bytes or CRC mismatch); using segment file names"
    magic, version, reserved, nxt, wal = BODY.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or reserved != 0:
        return SequenceFloor(), f"{path}: unknown magic/version or a non-zero reserved field; using segment file names"
    if max(nxt, wal) > MAX_SEQUENCE + 1:  # (a floor is one past the numbers it covers)
        return SequenceFloor(), f"{path}: a floor above 2**63 ({nxt}, {wal}), more than any store numbers; using segment file names"
    return SequenceFloor(nxt, wal), None


def write(fs: FileSystem, segments_dir: str, floor: SequenceFloor) -> None:
    path = os.path.join(segments_dir, NAME)
    body = BODY.pack(MAGIC, VERSION, 0, floor.next_segment, floor.wal_covered)
    tmp = path + ".tmp"
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write(fd, body + struct.pack("<I", crc32c.crc32c(body)))
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(segments_dir)
