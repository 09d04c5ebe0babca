"""WAL byte layout: the 30-byte file header and CRC32C-framed entries (docs/formats.md)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from ..errors import CorruptionError

MAGIC = b"QUIVER\0WAL"
VERSION = 1
HEADER = struct.Struct("<10sHH16s")
HEADER_LEN = HEADER.size  # 30

LEN = struct.Struct("<I")
ENTRY_HEAD = struct.Struct("<BqQQ")  # entry_type, ingestion_ts_nanos, sequence, slot_bitmap
ENTRY_HEAD_LEN = ENTRY_HEAD.size  # 25
SLOT_META = struct.Struct("<H32sII")  # payload_type_id, schema_fingerprint, row_count, payload_len
SLOT_META_LEN = SLOT_META.size  # 42
CRC = struct.Struct("<I")
FRAME_OVERHEAD = LEN.size + CRC.size  # length prefix + CRC trailer

ENTRY_RECORD_BUNDLE = 0
ENTRY_DIRECT = 1  # no slots: this sequence's bundle went straight into a segment file of its own
ENTRY_SYNCED = 2  # no sequence of its own: "frames of sequences [from, sequence] were fdatasynced"
SYNCED_FROM = struct.Struct("<Q")  # the synced frame's one field after the entry header
SYNCED_ENTRY_LEN = ENTRY_HEAD_LEN + SYNCED_FROM.size  # 33
# The largest WAL sequence (and segment number) the store takes from its files. Stores number from
# 0 and never reach 2**63; a CRC-valid number above it is damage: its successor would not fit the
# fields that hold it (the next frame, the sequence floor, the ack log checkpoint's i64).
MAX_SEQUENCE = (1 << 63) - 1
MIN_ENTRY_LEN = ENTRY_HEAD_LEN
MAX_ENTRY_LEN = (1 << 31) - 1  # frames larger than this are treated as a corrupt length


def decimal(text: str) -> int | None:
    """A number as the store writes it into file names and segment metadata (ASCII decimal digits,
    at most MAX_SEQUENCE); None for anything else, such as another writer's value. (`str.isdigit`
    also takes digits such as "\u00b2" that int() refuses, and int() refuses over 4,300 digits.)"""
    if text.isascii() and text.isdigit() and len(text) <= len(str(MAX_SEQUENCE)) and int(text) <= MAX_SEQUENCE:
        return int(text)
    return None


def encode_header(cfg_hash: bytes) -> bytes:
    return HEADER.pack(MAGIC, VERSION, 0, cfg_hash)


@dataclass(frozen=True)
class FileHeader:
    version: int
    reserved: int
    cfg_hash: bytes


def decode_header(data: bytes, path: str) -> FileHeader:
    """Parse a WAL header; CorruptionError if the file is not a WAL at all."""
    if len(data) < HEADER_LEN:
        raise CorruptionError(f"WAL header is truncated ({len(data)} of {HEADER_LEN} bytes)", path, 0)
    magic, version, reserved, cfg_hash = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CorruptionError(f"not a Quiver WAL file (magic {magic!r}, expected {MAGIC!r})", path, 0)
    return FileHeader(version, reserved, cfg_hash)


def entry_parts(entry_type: int, ts_nanos: int, sequence: int, bitmap: int, parts: list, parts_len: int) -> list:
    """A whole frame as three buffers for a gather write: u32 entry_len | entry header + slot blocks
    (joined: one copy, then one CRC call and one iovec instead of one per part) | u32 crc32c."""
    body = b"".join((ENTRY_HEAD.pack(entry_type, ts_nanos, sequence, bitmap), *parts))
    return [LEN.pack(ENTRY_HEAD_LEN + parts_len), body, CRC.pack(crc32c.crc32c(body))]


def synced_parts(ts_nanos: int, first: int, last: int) -> list:
    """The frame that opens a group commit: every frame of sequences first..last was fdatasynced
    before this group was written (recovery tells lost frames from never-synced ones by it)."""
    return entry_parts(ENTRY_SYNCED, ts_nanos, last, 0, [SYNCED_FROM.pack(first)], SYNCED_FROM.size)


def encode_entry(entry_type: int, ts_nanos: int, sequence: int, bitmap: int, slots_bytes: bytes) -> bytes:
    """The same frame as one bytes object (tools and tests)."""
    return b"".join(bytes(p) for p in entry_parts(entry_type, ts_nanos, sequence, bitmap, [slots_bytes], len(slots_bytes)))


@dataclass(frozen=True)
class SlotRecord:
    slot: int
    payload_type_id: int
    fingerprint: bytes
    rows: int
    payload: memoryview


@dataclass(frozen=True)
class Entry:
    """A CRC-verified frame. `offset` is the frame start in its file; `size` the whole frame."""

    entry_type: int
    ingestion_ts_nanos: int
    sequence: int
    slot_bitmap: int
    body: memoryview  # entry_type .. end of payloads (CRC-covered bytes)
    offset: int
    size: int

    def synced(self) -> tuple[int, int] | None:
        """(first, last) sequences a well-formed synced frame vouches for; None for any other frame."""
        if self.entry_type != ENTRY_SYNCED or self.slot_bitmap or len(self.body) != SYNCED_ENTRY_LEN:
            return None
        (first,) = SYNCED_FROM.unpack_from(self.body, ENTRY_HEAD_LEN)
        return (first, self.sequence) if first <= self.sequence else None

    def slots(self, path: str) -> list[SlotRecord]:
        """Split the body into slot blocks (ascending slot ids); CorruptionError if inconsistent."""
        out: list[SlotRecord] = []
        pos = ENTRY_HEAD_LEN
        body = self.body
        bitmap = self.slot_bitmap
        while bitmap:
            low = bitmap & -bitmap
            slot = low.bit_length() - 1
            bitmap ^= low
            if pos + SLOT_META_LEN > len(body):
                raise CorruptionError(f"entry seq {self.sequence}: slot {slot} metadata runs past the entry", path, self.offset)
            tid, fp, rows, plen = SLOT_META.unpack_from(body, pos)
            pos += SLOT_META_LEN
            if pos + plen > len(body):
                raise CorruptionError(f"entry seq {self.sequence}: slot {slot} payload runs past the entry", path, self.offset)
            out.append(SlotRecord(slot, tid, bytes(fp), rows, body[pos : pos + plen]))
            pos += plen
        if pos != len(body):
            raise CorruptionError(
                f"entry seq {self.sequence}: {len(body) - pos} unexpected trailing bytes after the last slot", path, self.offset
            )
        return out
