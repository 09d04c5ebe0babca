"""docs/formats.md is exact: readers written from the document alone read what the code writes.

Every parser here was written from docs/formats.md (not from the implementation), with only the
standard library, pyarrow (for the parts the document calls Arrow IPC), crc32c and blake3. The
store is driven through its public API with small configs so that WAL rotation, the zero tail,
prefix reclaim, segment finalisation, the truncate sidecar, the sequence floor, subscriber
outcomes and ack log checkpoints all happen (a FileSystem without hole punching forces the WAL
rewrite); the files are copied while the store runs and parsed field by field, checksums are
recomputed, the Arrow data is compared with what was ingested (OTAP data also decoded back to
the generator's tables), and every parser must consume its file exactly to its end (or to the
documented zero tail). Changing any documented constant below makes a test fail, except the two
lower bounds (WAL_ENTRY_MIN_LEN, SEG_MIN_SIZE), which no file the store writes reaches.
"""

from __future__ import annotations

import errno
import json
import shutil
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import blake3
import crc32c
import pyarrow as pa
import pytest

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from adaptive_arrow.envelope_file import write_envelopes
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model.otlp.order import canonical_order
from otap_model.payload import ROOT_PAYLOAD, Signal, relations
from quiver_store import (
    DEFAULT_LAYOUT,
    BundleReceipt,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    SubscriberConfig,
    WalConfig,
    with_progress,
)
from quiver_store.fs import FileSystem

# ---------------------------------------------------------------------------------------------
# Constants as docs/formats.md states them.

WAL_MAGIC = b"QUIVER\0WAL"
WAL_VERSION = 1
WAL_HEADER_SIZE = 30
WAL_ENTRY_MIN_LEN = 25
WAL_RECORD_BUNDLE = 0
WAL_DIRECT_MARKER = 1
WAL_SYNCED = 2
WAL_SYNCED_LEN = 33  # entry_len of a synced frame: 41 bytes on disk
WAL_SLOT_BLOCK_HEAD = 42
IPC_EOS = bytes.fromhex("FFFFFFFF00000000")

SIDECAR_MAGIC = b"QUIVER\0T"
NEXT_SEQ_MAGIC = b"QVNXTSEQ"
SMALL_FILE_SIZE = 32
FLOOR_RESERVE = 16

SEG_MAGIC = b"QUIVER\0S"
SEG_VERSION = 1
SEG_HEADER_SIZE = 64
SEG_DIR_ENTRY = 96
SEG_FOOTER_SIZE = 112
SEG_TRAILER_SIZE = 24
SEG_MIN_SIZE = 200

ACK_MAGIC = b"QUIVACK\0"
ACK_HEADER_SIZE = 24
ACK_CKPT_MAGIC = b"QUIVACKC"
ACK_SEGMENT, ACK_SUBSCRIBE, ACK_UNSUBSCRIBE, ACK_OUTCOME, ACK_ORPHANED = 1, 2, 3, 4, 5
ACK_OUTCOME_FRAME = 34
OUTCOME_ACK, OUTCOME_NACK, OUTCOME_DROPPED = 0, 1, 2

TEST_START_NS = time.time_ns()


def crc(data: bytes) -> int:
    return crc32c.crc32c(data)


class Cursor:
    """Little-endian reader over bytes that remembers how far it got."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def one(self, fmt: str) -> int:
        return self.take(fmt)[0]

    def raw(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), f"{n} bytes at {self.pos} run past {len(self.data)}"
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def same_telemetry(a: otap_model.OtapBundle, b: otap_model.OtapBundle) -> bool:
    """Equal telemetry: the encoder sorts rows, so compare the OTLP requests in canonical order."""
    return canonical_order(otap_model.to_otlp(a)) == canonical_order(otap_model.to_otlp(b))


def values(batch: pa.RecordBatch) -> tuple[list[str], list[dict]]:
    """Field names and per-row values: what the doc promises survives (dictionaries may change)."""
    return batch.schema.names, batch.to_pylist()


# ---------------------------------------------------------------------------------------------
# WAL


@dataclass
class SlotBlock:
    slot: int
    payload_type_id: int
    fingerprint: bytes
    row_count: int
    batch: pa.RecordBatch


@dataclass
class WalEntry:
    offset: int
    entry_type: int
    ingestion_ts: int
    sequence: int
    slot_bitmap: int
    blocks: list[SlotBlock]
    size: int  # bytes on disk: entry_len + 8


@dataclass
class WalFile:
    cfg_hash: bytes
    entries: list[WalEntry]  # bundle entries and direct markers: the frames with a sequence of their own
    end: int  # E: where the log ends (the next frame goes)
    synced: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, F, L) of each synced frame


def ipc_messages(data: bytes) -> list[str]:
    """Kinds of the encapsulated IPC messages that fill `data` exactly (no end-of-stream marker)."""
    source = pa.BufferReader(pa.py_buffer(data))
    kinds = []
    while source.tell() < len(data):
        kinds.append(pa.ipc.read_message(source).type)
    assert source.tell() == len(data)
    return kinds


def parse_ipc_stream_payload(payload: bytes) -> pa.RecordBatch:
    """One Arrow IPC stream: schema, dictionaries, exactly one record batch, end-of-stream."""
    assert payload.endswith(IPC_EOS), "payload does not end with the end-of-stream marker"
    kinds = ipc_messages(payload[: -len(IPC_EOS)])
    assert kinds[0] == "schema" and kinds[-1] == "record batch", kinds
    assert set(kinds[1:-1]) <= {"dictionary"}, kinds
    batches = list(pa.ipc.open_stream(payload))
    assert len(batches) == 1
    return batches[0]


def parse_synced_frame(data: bytes, pos: int) -> tuple[int, int, int] | None:
    """(offset, F, L) when the frame at `pos` is a synced frame (CRC checked here), else None."""
    entry_len, entry_type = struct.unpack_from("<IB", data, pos)
    if entry_type != WAL_SYNCED:
        return None
    assert entry_len == WAL_SYNCED_LEN, f"frame at {pos}: synced frame of {entry_len} bytes"
    assert crc(data[pos + 4 : pos + 4 + entry_len]) == struct.unpack_from("<I", data, pos + 4 + entry_len)[0]
    _ts, last, bitmap, first = struct.unpack_from("<qQQQ", data, pos + 5)
    assert bitmap == 0 and first <= last, f"frame at {pos}: synced frame fields"
    return pos, first, last


def parse_wal_frame(data: bytes, pos: int) -> WalEntry:
    cur = Cursor(data, pos)
    entry_len = cur.one("I")
    assert WAL_ENTRY_MIN_LEN <= entry_len < 2**31
    end = pos + 4 + entry_len
    stored_crc = struct.unpack_from("<I", data, end)[0]
    assert stored_crc == crc(data[pos + 4 : end]), f"frame at {pos}: CRC"
    entry_type, ts, seq, bitmap = cur.take("BqQQ")
    assert entry_type in (WAL_RECORD_BUNDLE, WAL_DIRECT_MARKER)
    assert entry_type == WAL_RECORD_BUNDLE or (bitmap == 0 and entry_len == WAL_ENTRY_MIN_LEN), f"frame at {pos}: marker with slots"
    blocks = []
    for slot in range(64):
        if not bitmap >> slot & 1:
            continue
        head = cur.pos
        pt, fp, rows, plen = cur.take("H32sII")
        assert cur.pos - head == WAL_SLOT_BLOCK_HEAD
        batch = parse_ipc_stream_payload(cur.raw(plen))
        assert batch.num_rows == rows
        blocks.append(SlotBlock(slot, pt, fp, rows, batch))
    assert cur.pos == end, f"frame at {pos}: slot blocks end at {cur.pos}, entry_len says {end}"
    return WalEntry(pos, entry_type, ts, seq, bitmap, blocks, entry_len + 8)


def parse_wal_file(data: bytes, *, active: bool, start: int = WAL_HEADER_SIZE) -> WalFile:
    """Header, frames back to back from `start`; the active file may end in a zero tail."""
    magic, version, reserved, cfg_hash = struct.unpack_from("<10sHH16s", data, 0)
    assert magic == WAL_MAGIC and version == WAL_VERSION and reserved == 0
    entries = []
    synced = []
    pos = start
    while pos < len(data):
        if active and not any(data[pos:]):
            break  # zero-filled tail: the end of the log
        vouch = parse_synced_frame(data, pos)
        if vouch is not None:
            synced.append(vouch)
            pos += WAL_SYNCED_LEN + 8
            continue
        entry = parse_wal_frame(data, pos)
        entries.append(entry)
        pos += entry.size
    assert pos <= len(data)
    return WalFile(cfg_hash, entries, pos, synced)


def wal_generations(names: list[str], sidecar_generation: int | None) -> dict[str, int]:
    """File name -> generation: `quiver.wal.<g>` chunks, the active one after the newest chunk."""
    chunks = {n: int(n.rsplit(".", 1)[1]) for n in names if n.startswith("quiver.wal.")}
    if chunks:
        active = max(chunks.values()) + 1
    else:
        active = sidecar_generation if sidecar_generation is not None else 0
    return {**chunks, "quiver.wal": active}


# ---------------------------------------------------------------------------------------------
# Truncate sidecar and sequence floor (same 32-byte shape)


def parse_small_file(data: bytes, magic: bytes) -> tuple[int, int]:
    assert len(data) == SMALL_FILE_SIZE
    got, version, reserved, a, b, stored = struct.unpack("<8sHHQQI", data)
    assert got == magic and version == 1 and reserved == 0
    assert stored == crc(data[:28])
    return a, b


# ---------------------------------------------------------------------------------------------
# Segment files


@dataclass
class Stream:
    stream_id: int
    slot: int
    flags: int
    fingerprint: bytes
    offset: int
    length: int
    rows: int
    chunks: int
    batches: int
    crc: int
    bitmap_offset: int
    event_min: int
    event_max: int
    present: list[bool] = field(default_factory=list)
    reader: pa.ipc.RecordBatchFileReader | None = None


@dataclass
class Segment:
    seq: int
    streams: list[Stream]
    bundles: list[tuple[int, int]]  # (ingestion time, slot bitmap)
    refs: list[list[tuple[int, int, int, int]]]  # per bundle: (stream, batch, row offset, count)
    meta: dict
    schemas: dict[int, pa.Schema]
    footer: dict

    def bundle(self, index: int) -> dict[int, pa.RecordBatch]:
        out = {}
        for stream_id, batch, row, count in self.refs[index]:
            stream = self.streams[stream_id]
            out[stream.slot] = stream.reader.get_batch(batch).slice(row, count)
        return out


def assert_zero(data: bytes, start: int, end: int, what: str) -> None:
    assert not any(data[start:end]), f"{what}: padding [{start}, {end}) is not zero"


def dictionary_fields(typ: pa.DataType) -> int:
    """Dictionary-encoded columns at any depth of a type."""
    if pa.types.is_dictionary(typ):
        return 1 + dictionary_fields(typ.value_type)
    return sum(dictionary_fields(typ.field(i).type) for i in range(typ.num_fields))


def widest(types: list[pa.DataType]) -> pa.DataType:
    """The representative type of a column (the cases this run produces): structs merged field by
    field (a field absent from one is nullable), plain over dictionary, the wider index."""
    if all(pa.types.is_struct(t) for t in types):
        names = list(dict.fromkeys(f.name for t in types for f in t))
        fields = []
        for name in names:
            found = [t.field(name) for t in types if t.get_field_index(name) >= 0]
            nullable = len(found) < len(types) or any(f.nullable for f in found)
            fields.append(pa.field(name, widest([f.type for f in found]), nullable, found[0].metadata))
        return pa.struct(fields)
    plain = [t for t in types if not pa.types.is_dictionary(t)]
    if plain:
        assert all(t == plain[0] for t in plain)
        return plain[0]
    assert len({t.value_type for t in types}) == 1
    return max(types, key=lambda t: t.index_type.bit_width)


def column(batch: pa.RecordBatch, dotted: str) -> pa.Array:
    parts = dotted.split(".")
    arr = batch.column(parts[0])
    for part in parts[1:]:
        arr = arr.field(part)
    return arr


def parse_segment(data: bytes) -> Segment:
    size = len(data)
    assert size >= SEG_MIN_SIZE
    # trailer
    t = Cursor(data, size - SEG_TRAILER_SIZE)
    footer_len, footer_crc, version, t_reserved, t_crc = t.take("IIHHI")
    assert t.raw(8) == SEG_MAGIC and t.pos == size
    assert t_crc == crc(data[size - 24 : size - 12])
    assert version == SEG_VERSION and t_reserved == 0 and footer_len == SEG_FOOTER_SIZE
    F = size - SEG_TRAILER_SIZE - SEG_FOOTER_SIZE
    assert footer_crc == crc(data[F : F + SEG_FOOTER_SIZE])
    names = [
        "seq",
        "stream_count",
        "bundle_count",
        "ingest_min",
        "ingest_max",
        "created_at",
        "opened_at",
        "dir_off",
        "dir_len",
        "man_off",
        "man_len",
        "meta_off",
        "meta_len",
        "dir_crc",
        "man_crc",
        "meta_crc",
        "reserved",
    ]
    footer = dict(zip(names, struct.unpack_from("<QIIqqqqQQQQQQIIII", data, F)))
    assert footer["reserved"] == 0
    # header
    h = Cursor(data)
    magic, hver, hsize, flags, hseq = h.take("8sHHIQ")
    assert magic == SEG_MAGIC and hver == SEG_VERSION and hsize == SEG_HEADER_SIZE and flags == 0
    assert hseq == footer["seq"]
    assert_zero(data, 24, 60, "header reserved")
    assert struct.unpack_from("<I", data, 60)[0] == crc(data[:60])
    # section placement and checksums
    D, M, X = footer["dir_off"], footer["man_off"], footer["meta_off"]
    assert D % 64 == 0 and align(D + footer["dir_len"], 8) == M
    assert align(M + footer["man_len"], 8) == X and align(X + footer["meta_len"], 8) == F
    assert_zero(data, D + footer["dir_len"], M, "after directory")
    assert_zero(data, M + footer["man_len"], X, "after manifest")
    assert_zero(data, X + footer["meta_len"], F, "after metadata")
    directory = data[D : D + footer["dir_len"]]
    manifest = data[M : M + footer["man_len"]]
    metadata = data[X : X + footer["meta_len"]]
    assert footer["dir_crc"] == crc(directory)
    assert footer["man_crc"] == crc(manifest)
    assert footer["meta_crc"] == crc(metadata)

    # metadata section
    mc = Cursor(metadata)
    jlen = mc.one("I")
    text = mc.raw(jlen)
    meta = json.loads(text.decode("utf-8"))
    canonical = {
        "metadata": dict(sorted(meta["metadata"].items())),
        "event_time_columns": dict(sorted(meta["event_time_columns"].items(), key=lambda kv: int(kv[0]))),
    }
    assert text == json.dumps(canonical, separators=(",", ":")).encode(), "canonical JSON"
    pad_to = align(mc.pos, 8)
    assert_zero(metadata, mc.pos, pad_to, "metadata JSON")
    mc.pos = pad_to
    schema_count, m_reserved = mc.take("II")
    assert m_reserved == 0
    schemas = {}
    for _ in range(schema_count):
        slot, s_reserved, slen = mc.take("HHI")
        assert s_reserved == 0
        schemas[slot] = pa.ipc.read_schema(pa.py_buffer(mc.raw(slen)))
        pad_to = align(mc.pos, 8)
        assert_zero(metadata, mc.pos, pad_to, "schema")
        mc.pos = pad_to
    assert mc.pos == len(metadata), "metadata section not consumed to its end"
    assert list(schemas) == sorted(schemas)

    # stream directory + bitmap area
    n = footer["stream_count"]
    streams = []
    dc = Cursor(directory)
    for i in range(n):
        s = Stream(*dc.take("IHH32sQQQIIIIqq"))
        assert dc.pos == SEG_DIR_ENTRY * (i + 1)
        assert s.stream_id == i and s.slot < 64 and s.flags in (0, 1)
        if not s.flags & 1:
            assert s.event_min == 0 and s.event_max == 0
        streams.append(s)
    area = directory[dc.pos :]
    expected_bitmap_offset = 0
    for s in streams:
        k = len(schemas[s.slot])
        nbytes = (k + 7) // 8
        assert s.bitmap_offset == expected_bitmap_offset
        bits = int.from_bytes(area[s.bitmap_offset : s.bitmap_offset + nbytes], "little")
        assert bits >> k == 0, "bits past k must be zero"
        s.present = [bool(bits >> i & 1) for i in range(k)]
        expected_bitmap_offset += nbytes
    assert expected_bitmap_offset == len(area), "bitmap area not consumed to its end"

    # stream slices: 64-aligned, back to back with zero padding, CRC, Arrow IPC file
    pos = SEG_HEADER_SIZE
    for s in streams:
        assert s.offset == align(pos, 64), f"stream {s.stream_id} at {s.offset}, expected {pos}"
        assert_zero(data, pos, s.offset, "before slice")
        body = data[s.offset : s.offset + s.length]
        assert s.crc == crc(body)
        assert body[:6] == b"ARROW1" and body[-6:] == b"ARROW1"
        s.reader = pa.ipc.open_file(pa.py_buffer(body))
        assert s.reader.num_record_batches == s.batches
        messages = list(pa.ipc.MessageReader.open_stream(pa.py_buffer(body[8:])))
        assert {m.metadata_version for m in messages} == {pa.ipc.MetadataVersion.V5}
        kinds = [m.type for m in messages]
        n_dict = dictionary_fields(pa.struct(list(s.reader.schema)))
        assert kinds == ["schema"] + ["dictionary"] * n_dict + ["record batch"] * s.batches
        pos = s.offset + s.length
    assert align(pos, 64) == D
    assert_zero(data, pos, D, "before directory")

    # batch manifest
    bc = Cursor(manifest)
    bundle_count, ref_count = bc.take("II")
    assert bundle_count == footer["bundle_count"]
    bundles = [bc.take("qQ") for _ in range(bundle_count)]
    assert ref_count == sum(bin(bitmap).count("1") for _, bitmap in bundles)
    refs = []
    for _, bitmap in bundles:
        refs.append([bc.take("IIII") for _ in range(bin(bitmap).count("1"))])
    assert bc.pos == len(manifest), "manifest not consumed to its end"
    first_seen = list(dict.fromkeys(stream_id for bundle_refs in refs for stream_id, *_ in bundle_refs))
    assert first_seen == list(range(n)), "stream ids follow first appearance"
    return Segment(footer["seq"], streams, bundles, refs, meta, schemas, footer)


# ---------------------------------------------------------------------------------------------
# Ack log and checkpoint


@dataclass
class AckRecord:
    offset: int
    type: int
    fields: tuple


ACK_BODIES = {
    ACK_SEGMENT: "QI",
    ACK_UNSUBSCRIBE: "Iq",
    ACK_OUTCOME: "IQIBq",
    ACK_ORPHANED: "Iq",
}


def parse_ack_log(data: bytes) -> tuple[int, list[AckRecord]]:
    magic, version, reserved, generation, stored = struct.unpack_from("<8sHHQI", data, 0)
    assert magic == ACK_MAGIC and version == 1 and reserved == 0
    assert stored == crc(data[:20])
    records = []
    pos = ACK_HEADER_SIZE
    while pos < len(data):
        length, rtype = struct.unpack_from("<IB", data, pos)
        assert 1 <= length <= 1025
        body = data[pos + 5 : pos + 4 + length]
        (frame_crc,) = struct.unpack_from("<I", data, pos + 4 + length)
        assert frame_crc == crc(data[pos : pos + 4 + length]), f"ack frame at {pos}: CRC"
        if rtype == ACK_SUBSCRIBE:
            sub_id, mark, ts, name_len = struct.unpack_from("<IqqB", body)
            name = body[21 : 21 + name_len].decode("utf-8")
            assert len(body) == 21 + name_len and 1 <= name_len <= 64
            fields: tuple = (sub_id, mark, ts, name)
        else:
            fmt = "<" + ACK_BODIES[rtype]
            assert len(body) == struct.calcsize(fmt), f"type {rtype} body of {len(body)} bytes"
            fields = struct.unpack(fmt, body)
        if rtype == ACK_OUTCOME:
            assert 4 + length + 4 == ACK_OUTCOME_FRAME
        records.append(AckRecord(pos, rtype, fields))
        pos += 4 + length + 4
    assert pos == len(data), "ack log not consumed to its end"
    return generation, records


@dataclass
class Checkpoint:
    replay_generation: int
    replay_offset: int
    created_ns: int
    max_seen_seq: int
    next_sub_id: int
    segments: dict[int, int]
    subscribers: dict[str, dict]


def parse_checkpoint(data: bytes) -> Checkpoint:
    c = Cursor(data)
    magic, version, reserved = c.take("8sHH")
    assert magic == ACK_CKPT_MAGIC and version == 1 and reserved == 0
    gen, off, created, max_seen, next_sub = c.take("QQqqI")
    segments = dict(c.take("QI") for _ in range(c.one("I")))
    assert list(segments) == sorted(segments)
    subscribers = {}
    for _ in range(c.one("I")):
        sub_id, flags, mark, last_seen, dropped, name_len = c.take("IBqqQB")
        name = c.raw(name_len).decode("utf-8")
        done = [c.one("Q") for _ in range(c.one("I"))]
        partial = {}
        for _ in range(c.one("I")):
            seq, k = c.take("QI")
            partial[seq] = [c.one("I") for _ in range(k)]
        subscribers[name] = dict(
            sub_id=sub_id,
            flags=flags,
            mark=mark,
            last_seen=last_seen,
            dropped=dropped,
            done=done,
            partial=partial,
        )
    assert c.one("I") == crc(data[: c.pos - 4])
    assert c.pos == len(data), "checkpoint not consumed to its end"
    return Checkpoint(gen, off, created, max_seen, next_sub, segments, subscribers)


def replay_resolved(
    ckpt: Checkpoint, logs: dict[int, bytes], known: dict[int, int]
) -> dict[str, set[tuple[int, int]]]:
    """The doc's replay: checkpoint state, then records from (replay_generation, replay_offset) on."""
    names = {}
    resolved: dict[str, set[tuple[int, int]]] = {}
    for name, sub in ckpt.subscribers.items():
        names[sub["sub_id"]] = name
        got = {(s, i) for s, n in known.items() if s <= sub["mark"] for i in range(n)}
        got |= {(s, i) for s in sub["done"] for i in range(known.get(s, 0))}
        got |= {(s, i) for s, idx in sub["partial"].items() for i in idx}
        resolved[name] = got
    for generation in sorted(logs):
        if generation < ckpt.replay_generation:
            continue
        start = ckpt.replay_offset if generation == ckpt.replay_generation else ACK_HEADER_SIZE
        _, records = parse_ack_log(logs[generation])
        for rec in records:
            if rec.offset < start:
                continue
            if rec.type == ACK_SUBSCRIBE:
                sub_id, _, _, name = rec.fields
                names[sub_id] = name
                resolved.setdefault(name, set())
            elif rec.type == ACK_UNSUBSCRIBE:
                resolved.pop(names[rec.fields[0]], None)
            elif rec.type == ACK_OUTCOME:
                sub_id, seq, index, outcome, _ = rec.fields
                if outcome in (OUTCOME_ACK, OUTCOME_DROPPED):
                    resolved[names[sub_id]].add((seq, index))
    return resolved


# ---------------------------------------------------------------------------------------------
# OTAP envelope files (length-prefixed BatchArrowRecords, protobuf wire format)


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def proto_fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    out = []
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
            out.append((number, wire, value))
        elif wire == 2:
            n, pos = varint(data, pos)
            out.append((number, wire, data[pos : pos + n]))
            pos += n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    assert pos == len(data)
    return out


def parse_envelope_file(data: bytes) -> list[tuple[int, list[tuple[str, int, bytes]]]]:
    """Messages as (batch_id, [(schema_id, payload type, record bytes), ...])."""
    messages = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<I", data, pos)
        message = data[pos + 4 : pos + 4 + length]
        assert len(message) == length
        pos += 4 + length
        batch_id = 0
        payloads = []
        for number, wire, value in proto_fields(message):
            if number == 1:
                assert wire == 0 and value != 0, "default values are omitted"
                batch_id = value
            elif number == 2:
                assert wire == 2
                schema_id, ptype, record = "", 0, b""
                for n2, w2, v2 in proto_fields(value):
                    if n2 == 1:
                        assert w2 == 2
                        schema_id = v2.decode("utf-8")
                    elif n2 == 2:
                        assert w2 == 0
                        ptype = v2
                    else:
                        assert n2 == 3 and w2 == 2
                        record = v2
                payloads.append((schema_id, ptype, record))
            else:
                raise AssertionError(f"field {number}: headers are never written")
        messages.append((batch_id, payloads))
    assert pos == len(data)
    return messages


class EnvelopeStreams:
    """One Arrow IPC reader per payload type, restarted on a new schema_id or a Schema message."""

    def __init__(self) -> None:
        self.streams: dict[int, tuple[str, list[bytes]]] = {}
        self.stats: dict[tuple[int, str], pa.ipc.ReadStats] = {}

    def read(self, schema_id: str, ptype: int, record: bytes) -> pa.RecordBatch:
        kinds = ipc_messages(record)  # the record batch is the last message: no end-of-stream
        assert kinds[-1] == "record batch" and kinds.count("record batch") == 1
        assert set(kinds[:-1]) <= {"schema", "dictionary"} and "schema" not in kinds[1:]
        current = self.streams.get(ptype)
        if current is None or current[0] != schema_id or kinds[0] == "schema":
            assert kinds[0] == "schema", f"payload type {ptype}: new stream without a schema"
            current = (schema_id, [])
            self.streams[ptype] = current
        current[1].append(record)
        reader = pa.ipc.open_stream(b"".join(current[1]) + IPC_EOS)
        batches = list(reader)
        assert len(batches) == len(current[1])
        self.stats[ptype, schema_id] = reader.stats  # cumulative over the stream so far
        return batches[-1]


# ---------------------------------------------------------------------------------------------
# Producing real files


@dataclass
class Run:
    """Byte snapshots of a store taken at chosen moments, and what was ingested."""

    snapshots: dict[str, dict[str, bytes]]
    ingested: dict[int, tuple[RecordBundle, BundleReceipt]]  # WAL sequence -> (bundle, receipt)
    plain: dict[int, otap_model.OtapBundle]  # WAL sequence -> the plain tables it encodes
    acked: dict[str, set[tuple[int, int]]]
    layout_hash: bytes


def wait_for_zero_tail(root: Path) -> None:
    """The preallocator writes the zero tail in the background: wait until the active file has one."""
    active = root / "wal" / "quiver.wal"
    end = parse_wal_file(active.read_bytes(), active=True).end
    deadline = time.monotonic() + 10
    while active.stat().st_size <= end and time.monotonic() < deadline:
        time.sleep(0.01)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "LOCK"
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("formats") / "store"
    config = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(rotation_size=48 << 10, max_chunks=64, preallocate=8 << 10),
        # no redelivery of the nacked bundle while the test runs
        subscribers=SubscriberConfig(
            ack_log_checkpoint_interval=10, nack_backoff_initial=600.0, nack_backoff_max=600.0
        ),
    )
    ingested: dict[int, tuple[RecordBundle, BundleReceipt]] = {}
    plain: dict[int, otap_model.OtapBundle] = {}
    snaps: dict[str, dict[str, bytes]] = {}
    with QuiverStore.open(root, config, layout=OTAP_LAYOUT) as store:
        for signal, seed in (("logs", 1), ("traces", 2)):
            encoder = Encoder(signal)
            for bundle in otap_model.generate(signal, 120, batch_size=20, seed=seed):
                records = encoder.encode_records(bundle)
                receipt = store.ingest(records)
                ingested[receipt.sequence] = (records, receipt)
                plain[receipt.sequence] = bundle
            wait_for_zero_tail(root)
            snaps[f"wal-{signal}"] = snapshot(root)
            store.flush()
        snaps["segments"] = snapshot(root)

        alpha, beta = store.subscribe("alpha"), store.subscribe("beta")
        store.subscribe("gamma")
        store.unsubscribe("gamma")
        acked: dict[str, set[tuple[int, int]]] = {"alpha": set(), "beta": set()}
        for k in range(len(ingested)):
            d = alpha.next(timeout=5)
            if k == 8:  # segment 1, bundle 2 stays unresolved
                d.nack()
            else:
                d.ack()
                acked["alpha"].add((d.segment_seq, d.bundle_index))
        for _ in range(6):  # all of segment 0: resolved by everyone, so it is deleted
            d = beta.next(timeout=5)
            d.ack()
            acked["beta"].add((d.segment_seq, d.bundle_index))
        snaps["acks"] = snapshot(root)
    snaps["closed"] = snapshot(root)
    shutil.rmtree(root)
    layout_hash = blake3.blake3(OTAP_LAYOUT.canonical_bytes()).digest()[:16]
    return Run(snaps, ingested, plain, acked, layout_hash)


# ---------------------------------------------------------------------------------------------
# Tests


def wal_files(snap: dict[str, bytes]) -> dict[str, bytes]:
    return {k.split("/")[1]: v for k, v in snap.items() if k.startswith("wal/quiver.wal")}


def test_layout_contract_is_the_documented_json() -> None:
    text = OTAP_LAYOUT.canonical_bytes()
    doc = json.loads(text)
    assert (
        list(doc)
        == sorted(doc)
        == [
            "checksum",
            "event_time_columns",
            "name",
            "payload_type_ids",
            "root_slots",
            "slots",
            "version",
        ]
    )
    assert json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() == text
    for key in ("event_time_columns", "payload_type_ids", "root_slots", "slots"):
        pairs = doc[key]
        assert all(len(p) == 2 for p in pairs) and [p[0] for p in pairs] == sorted(p[0] for p in pairs)


@pytest.mark.parametrize("phase", ["wal-logs", "wal-traces", "segments"])
def test_wal_files(run: Run, phase: str) -> None:
    snap = run.snapshots[phase]
    files = wal_files(snap)
    sidecar = snap.get("wal/truncate.offset")
    side_off, side_gen = parse_small_file(sidecar, SIDECAR_MAGIC) if sidecar else (None, None)
    gens = wal_generations(list(files), side_gen)
    if phase == "wal-logs":
        assert sidecar is None and len(files) >= 3, "small rotation_size must have rotated"
    else:
        # the point: the end of the last entry in a segment; older chunks are deleted
        last = 5 if phase == "wal-traces" else 11
        _, receipt = run.ingested[last]
        by_gen = {g: n for n, g in gens.items()}
        chunk = files[by_gen[receipt.wal_generation]]
        frame_end = receipt.wal_offset + 4 + struct.unpack_from("<I", chunk, receipt.wal_offset)[0] + 4
        assert (side_gen, side_off) == (receipt.wal_generation, frame_end)
        assert min(gens.values()) == side_gen
    seen = []
    for name in sorted(files, key=gens.get):
        data = files[name]
        active = name == "quiver.wal"
        start = side_off if gens[name] == side_gen else WAL_HEADER_SIZE
        wal = parse_wal_file(data, active=active, start=start)
        assert wal.cfg_hash == run.layout_hash
        if active:
            assert wal.end < len(data), "an fsync WAL keeps a zero tail after its last frame"
            assert len(data) - wal.end <= 8 << 10 and len(data) <= max(wal.end, 48 << 10)
        else:
            assert wal.end == len(data), "a rotated chunk ends with its last frame"
        for entry in wal.entries:
            records, receipt = run.ingested[entry.sequence]
            assert (receipt.wal_generation, receipt.wal_offset) == (gens[name], entry.offset)
            assert entry.ingestion_ts == records.ingestion_time_ns == receipt.ingestion_time_ns
            assert entry.slot_bitmap == sum(1 << s for s in records.slots)
            assert [b.slot for b in entry.blocks] == sorted(records.slots)
            for block in entry.blocks:
                assert block.payload_type_id == block.slot  # OTAP layout: slot = payload type id
                assert block.fingerprint == records.fingerprints[block.slot]
                assert values(block.batch) == values(records.slots[block.slot])
            seen.append(entry.sequence)
        for offset, first, last in wal.synced:  # names frames written and synced before it
            after = [e.sequence for e in wal.entries if e.offset > offset]
            assert first <= last < (after[0] if after else len(run.ingested)), (offset, first, last)
        assert wal.synced or len(wal.entries) <= 1, "an fsync WAL's commits open with synced frames"
    # a file rotates before a write that would take it past rotation_size, unless it holds
    # nothing but its header (that write then makes it longer)
    whole = {gens[n]: parse_wal_file(d, active=n == "quiver.wal") for n, d in files.items()}
    for g, wal in whole.items():
        if g + 1 in whole:
            first = whole[g + 1].entries[0]
            first_write = first.offset + first.size - WAL_HEADER_SIZE  # with the synced frame before it
            assert wal.end + first_write > 48 << 10
            assert wal.end <= 48 << 10 or len(wal.entries) == 1
    # sequences continue +1 per entry across generations, from the sidecar's point on: the
    # entries not yet in a segment file
    assert seen == {"wal-logs": list(range(6)), "wal-traces": list(range(6, 12)), "segments": []}[phase]


def test_next_seq(run: Run) -> None:
    # next.seq: written when segment 0 reserved its run of numbers (nothing covered yet), again
    # before segment 0 was deleted (every entry covered), and at close with the next unused number
    floors = {
        phase: parse_small_file(run.snapshots[phase]["segments/next.seq"], NEXT_SEQ_MAGIC)
        for phase in ("segments", "acks", "closed")
    }
    assert floors == {
        "segments": (FLOOR_RESERVE, 0),
        "acks": (FLOOR_RESERVE, len(run.ingested)),
        "closed": (2, len(run.ingested)),
    }


def test_segment_files(run: Run) -> None:
    snap = run.snapshots["segments"]
    names = sorted(k for k in snap if k.endswith(".qseg"))
    assert names == [f"segments/{s:016d}.qseg" for s in range(2)]
    decoder = Decoder()
    sequences = sorted(run.ingested)
    for seq_no, name in enumerate(names):
        seg = parse_segment(snap[name])
        assert seg.seq == seq_no
        wal_seqs = sequences[6 * seq_no : 6 * seq_no + 6]
        md = seg.meta["metadata"]
        assert (int(md["quiver.wal.first_sequence"]), int(md["quiver.wal.last_sequence"])) == (
            wal_seqs[0],
            wal_seqs[-1],
        )
        assert md["quiver.finalize_reason"] == "flush" and md["quiver.layout"] == "otap"
        assert md["quiver.signals"] == ("logs", "traces")[seq_no]
        assert set(md) == {
            "quiver.finalize_reason",
            "quiver.layout",
            "quiver.signals",
            "quiver.wal.first_sequence",
            "quiver.wal.last_sequence",
        }
        layout = json.loads(OTAP_LAYOUT.canonical_bytes())
        assert seg.meta["event_time_columns"] == {str(k): v[0] for k, v in layout["event_time_columns"]}
        assert seg.footer["bundle_count"] == 6 and seg.footer["stream_count"] == len(seg.streams)
        times = [t for t, _ in seg.bundles]
        assert (seg.footer["ingest_min"], seg.footer["ingest_max"]) == (min(times), max(times))
        assert TEST_START_NS <= seg.footer["opened_at"] <= seg.footer["created_at"] <= time.time_ns()
        event_columns = {int(k): v for k, v in seg.meta["event_time_columns"].items()}

        # bundles: manifest refs -> record batches equal to what was ingested
        rows = {s.stream_id: 0 for s in seg.streams}
        chunks = {s.stream_id: 0 for s in seg.streams}
        for index, wal_seq in enumerate(wal_seqs):
            records, receipt = run.ingested[wal_seq]
            ts, bitmap = seg.bundles[index]
            assert ts == receipt.ingestion_time_ns
            assert bitmap == sum(1 << s for s in records.slots)
            stored = seg.bundle(index)
            assert sorted(stored) == sorted(records.slots)
            for (stream_id, batch, row, count), slot in zip(seg.refs[index], sorted(records.slots)):
                stream = seg.streams[stream_id]
                # small chunks are concatenated into one record batch, in arrival order
                assert (batch, row) == (0, rows[stream_id])
                assert stream.slot == slot and stream.fingerprint == records.fingerprints[slot]
                assert stream.reader.schema.equals(records.slots[slot].schema, check_metadata=True)
                assert values(stored[slot]) == values(records.slots[slot])
                rows[stream_id] += count
                chunks[stream_id] += 1
            assert same_telemetry(decoder.decode_records(RecordBundle(stored)), run.plain[wal_seq])

        # directory statistics recomputed from the slices
        for s in seg.streams:
            assert (s.rows, s.chunks, s.batches) == (rows[s.stream_id], chunks[s.stream_id], 1)
            rep = seg.schemas[s.slot]
            assert s.present == [name in s.reader.schema.names for name in rep.names]
            table = s.reader.read_all()
            if s.slot in event_columns:
                col = pa.chunked_array(
                    [column(b, event_columns[s.slot]).cast(pa.int64()) for b in table.to_batches()]
                )
                assert s.flags & 1
                assert (s.event_min, s.event_max) == (
                    pa.compute.min(col).as_py(),
                    pa.compute.max(col).as_py(),
                )
            else:
                assert s.flags == 0
        # representative schema: every stream's columns, in order of first appearance
        for slot, rep in seg.schemas.items():
            names_seen: list[str] = []
            for s in seg.streams:
                if s.slot == slot:
                    names_seen += [n for n in s.reader.schema.names if n not in names_seen]
            assert rep.names == names_seen
            schemas = [s.reader.schema for s in seg.streams if s.slot == slot]
            for f in rep:
                if any(f.name not in schema.names for schema in schemas):
                    assert f.nullable, f"slot {slot}: {f.name} is absent from a stream"
                assert f.type == widest(
                    [schema.field(f.name).type for schema in schemas if f.name in schema.names]
                )


class NoPunchFileSystem(FileSystem):
    """A file system without hole punching: the WAL reclaims its prefix by rewriting."""

    def punch_hole(self, fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "hole punching not supported")


@pytest.mark.parametrize("punch", [True, False])
def test_wal_prefix_reclaim(tmp_path: Path, punch: bool) -> None:
    """Once 1 MiB of the active file is in segments: a punched hole [30, point), or a rewrite."""
    root = tmp_path / "store"
    config = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(rotation_size=8 << 20),
    )
    payload = pa.record_batch({"x": pa.array(range(40_000), pa.int64())})  # 320 KB per entry
    with QuiverStore.open(root, config, fs=FileSystem() if punch else NoPunchFileSystem()) as store:
        for _ in range(4):
            store.ingest(RecordBundle({0: payload}))
        store.flush()
        covered, _ = parse_small_file((root / "wal" / "truncate.offset").read_bytes(), SIDECAR_MAGIC)
        receipt = store.ingest(RecordBundle({1: payload.slice(0, 10)}))  # reclaims, then appends
        data = (root / "wal" / "quiver.wal").read_bytes()
        point, generation = parse_small_file((root / "wal" / "truncate.offset").read_bytes(), SIDECAR_MAGIC)
        stats = store.stats()
    assert generation == receipt.wal_generation == 0 and covered > 1 << 20
    # the receipt's offset is logical: the physical one plus what rewrites of the file dropped; the
    # commit opens with a synced frame for the four entries before
    assert receipt.wal_offset == covered + WAL_SYNCED_LEN + 8
    if punch:
        assert (stats["holes_punched"], stats["rewrites"]) == (1, 0) and point == covered
        assert_zero(data, WAL_HEADER_SIZE, point, "punched prefix")  # a hole reads as zeros
    else:  # the tail behind a fresh header, the sidecar at offset 30 of the same generation
        assert (stats["holes_punched"], stats["rewrites"]) == (0, 1) and point == WAL_HEADER_SIZE
    wal = parse_wal_file(data, active=True, start=point)
    assert [(e.sequence, e.offset) for e in wal.entries] == [(4, point + WAL_SYNCED_LEN + 8)]  # right after the prefix
    assert [(f, last) for _, f, last in wal.synced] == [(0, 3)]


def test_wal_sequence_continues_across_restarts(tmp_path: Path) -> None:
    root = tmp_path / "store"
    batch = pa.record_batch({"x": pa.array([1, 2], pa.int64())})
    for reopen in range(3):
        with QuiverStore.open(root) as store:
            receipt = store.ingest(RecordBundle({0: batch}))
            wal = parse_wal_file((root / "wal" / "quiver.wal").read_bytes(), active=True)
        assert receipt.sequence == reopen
        assert [(e.sequence, e.offset) for e in wal.entries][-1] == (reopen, receipt.wal_offset)
    floor = parse_small_file((root / "segments" / "next.seq").read_bytes(), NEXT_SEQ_MAGIC)
    # three segments; the last reserving write (for segment 2) covered the entries of segments 0, 1
    assert floor == (3, 2)


def test_direct_bundle_has_a_sequence_and_a_marker_frame_but_no_wal_entry(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(direct_bundle_size=100_000),
    )
    big = RecordBundle({0: pa.record_batch({"x": pa.array(range(20_000), pa.int64())})})
    with QuiverStore.open(root, config) as store:
        receipts = [store.ingest(RecordBundle({0: big.slots[0].slice(0, 5)})), store.ingest(big)]
        receipts.append(store.ingest(RecordBundle({0: big.slots[0].slice(0, 7)})))
        wal = parse_wal_file((root / "wal" / "quiver.wal").read_bytes(), active=True)
        store.flush()
        segments = [parse_segment(p.read_bytes()) for p in sorted((root / "segments").glob("*.qseg"))]
    assert [r.sequence for r in receipts] == [0, 1, 2]
    assert receipts[1].wal_offset is None and receipts[1].segment_sequence == 1
    assert [(e.entry_type, e.sequence, e.slot_bitmap, len(e.blocks), e.size) for e in wal.entries][1] == (1, 1, 0, 0, 33)
    assert [(e.entry_type, e.sequence) for e in wal.entries] == [(0, 0), (1, 1), (0, 2)]
    described = [
        (
            seg.seq,
            seg.meta["metadata"]["quiver.finalize_reason"],
            int(seg.meta["metadata"]["quiver.wal.first_sequence"]),
            int(seg.meta["metadata"]["quiver.wal.last_sequence"]),
            [rows for *_, rows in (ref for refs in seg.refs for ref in refs)],
        )
        for seg in segments
    ]
    assert described == [
        (0, "direct bundle", 0, 0, [5]),
        (1, "direct", 1, 1, [20_000]),
        (2, "flush", 2, 2, [7]),
    ]


def dict_array(indices: list[int], dictionary: list[str], index_type: str = "uint8") -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(indices, index_type), pa.array(dictionary))


def test_wal_dictionary_cut_and_segment_unification(tmp_path: Path) -> None:
    """What the WAL and segment sections say about dictionaries and record batch coalescing."""
    big = [f"value-{i:08d}" for i in range(20_000)]  # 280 KB of values: at least 64 KiB
    v, w = [f"v{i}" for i in range(200)], [f"w{i}" for i in range(200)]
    x, y = [f"x{i}" for i in range(150)], [f"y{i}" for i in range(150)]
    slots = [
        {0: dict_array([1, 1, 0], ["a", "b", "z"])},
        {0: dict_array([0, 2], ["c", "a", "b"])},
        {0: dict_array(list(range(200)), v)},
        {0: dict_array(list(range(200)), w)},  # 404 entries > max_dictionary_size: rotates
        {3: dict_array(list(range(150)), x)},
        {3: dict_array(list(range(150)), y)},  # 300 entries: index widened u8 -> u16
        {1: pa.array(range(30_000), pa.int32())},
        {1: pa.array(range(30_000), pa.int32())},
        {1: pa.array(range(30_000), pa.int32())},  # 90,000 rows > 65,536: a new record batch
        {2: pa.array(range(40_000), pa.int64())},  # 320 KB >= 256 KiB: a batch of its own
        {2: pa.array(range(10), pa.int64())},
        {4: dict_array(list(range(0, 20_000, 1_000)), big, "uint16")},  # 20 of 20,000 referenced
        {4: dict_array(list(range(20_000)), big, "uint16")},  # all referenced
    ]
    bundles = [RecordBundle({s: pa.record_batch({"c": arr}) for s, arr in b.items()}) for b in slots]
    root = tmp_path / "store"
    config = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0, max_dictionary_size=300)
    )
    with QuiverStore.open(root, config) as store:
        for b in bundles:
            store.ingest(b)
        wal = parse_wal_file((root / "wal" / "quiver.wal").read_bytes(), active=True)
        store.flush()
        seg = parse_segment((root / "segments" / f"{0:016d}.qseg").read_bytes())

    assert wal.cfg_hash == blake3.blake3(DEFAULT_LAYOUT.canonical_bytes()).digest()[:16]
    assert seg.meta["event_time_columns"] == {} and seg.meta["metadata"]["quiver.layout"] == "generic"
    logged = [e.blocks[0].batch.column(0) for e in wal.entries]
    assert [values(e.blocks[0].batch) for e in wal.entries] == [
        values(b.slots[s]) for b in bundles for s in b.slots
    ]
    assert logged[11].dictionary.to_pylist() == big[::1_000]  # cut to the referenced, in order
    assert logged[11].indices.to_pylist() == list(range(20))
    assert logged[12].dictionary.equals(pa.array(big))  # all referenced: logged as given
    assert logged[4].equals(bundles[4].slots[3].column(0))  # small: as given

    def stream(i: int) -> tuple[int, bytes, list[int], pa.Array | None]:
        s = seg.streams[i]
        batches = [s.reader.get_batch(k) for k in range(s.batches)]
        col = s.reader.schema.field(0).type
        dictionary = batches[0].column(0).dictionary if pa.types.is_dictionary(col) else None
        for b in batches[1:]:
            assert dictionary is None or b.column(0).dictionary.equals(dictionary)
        return s.slot, s.fingerprint, [b.num_rows for b in batches], dictionary

    fp = {s: b.fingerprints[s] for b in bundles for s in b.slots}
    assert stream(0) == (0, fp[0], [205], pa.array(["a", "b", "z", "c", *v]))  # union, first appearance
    assert stream(1) == (0, fp[0], [200], pa.array(w))  # the rotated stream: next id, same fingerprint
    assert stream(2)[:3] == (3, fp[3], [300]) and stream(2)[3].equals(pa.array(x + y))
    assert seg.streams[2].reader.schema.field(0).type.index_type == pa.uint16()
    assert stream(3) == (1, fp[1], [60_000, 30_000], None)
    assert stream(4) == (2, fp[2], [40_000, 10], None)
    assert stream(5)[:3] == (4, fp[4], [20_020]) and stream(5)[3].equals(pa.array(big))
    for index, bundle in enumerate(bundles):
        assert {s: values(b) for s, b in seg.bundle(index).items()} == {
            s: values(b) for s, b in bundle.slots.items()
        }


def test_ack_log_and_checkpoint(run: Run) -> None:
    for phase in ("acks", "closed"):
        snap = run.snapshots[phase]
        on_disk = {int(Path(k).stem): 6 for k in snap if k.endswith(".qseg")}
        assert on_disk == {1: 6}, "segment 0 was resolved by every subscriber and deleted"
        ckpt = parse_checkpoint(snap["ack.checkpoint"])
        logs = {}
        for name, data in snap.items():
            if name.startswith("ack.log"):
                generation, _ = parse_ack_log(data)
                assert name == "ack.log" or name == f"ack.log.{generation}"
                logs[generation] = data
        assert ckpt.replay_generation in logs and ckpt.replay_offset >= ACK_HEADER_SIZE
        # 24 records with a checkpoint every 10: generations 1, 2, 3 (and 4 after the close)
        assert sorted(logs) == [3 if phase == "acks" else 4]
        assert ckpt.max_seen_seq == 1 and ckpt.next_sub_id == 3
        assert 1 in ckpt.segments and ckpt.segments.items() <= {0: 6, 1: 6}.items()
        assert TEST_START_NS <= ckpt.created_ns <= time.time_ns()
        assert set(ckpt.subscribers) == {"alpha", "beta"}
        resolved = replay_resolved(ckpt, logs, on_disk)
        assert {name: {r for r in got if r[0] in on_disk} for name, got in resolved.items()} == {
            name: {r for r in got if r[0] in on_disk} for name, got in run.acked.items()
        }
    # the closed store: one ack.log right after a checkpoint that points at its header's end
    closed = run.snapshots["closed"]
    generation, records = parse_ack_log(closed["ack.log"])
    ckpt = parse_checkpoint(closed["ack.checkpoint"])
    assert (ckpt.replay_generation, ckpt.replay_offset, records) == (generation, ACK_HEADER_SIZE, [])
    assert ckpt.segments == {1: 6}
    alpha, beta = ckpt.subscribers["alpha"], ckpt.subscribers["beta"]
    assert (alpha["mark"], alpha["done"], alpha["partial"]) == (0, [], {1: [0, 1, 3, 4, 5]})
    assert (beta["mark"], beta["done"], beta["partial"]) == (0, [], {})
    assert alpha["flags"] == beta["flags"] == 0 and alpha["dropped"] == beta["dropped"] == 0
    assert (alpha["sub_id"], beta["sub_id"]) == (0, 1)


def test_ack_log_records(tmp_path: Path) -> None:
    """Every record type, with the exact fields the calls that produced them imply."""
    root = tmp_path / "acks"
    config = StoreConfig(
        segment=SegmentConfig(max_open_duration=3600.0),
        retention=RetentionConfig(max_age=1.0, maintenance_interval=0.05),
        subscribers=SubscriberConfig(orphan_timeout=0.5),
    )
    with QuiverStore.open(root, config) as store:
        for i in range(2):
            store.ingest(RecordBundle({0: pa.record_batch({"x": pa.array([i], pa.int64())})}))
        store.flush()
        a, _ = store.subscribe("a"), store.subscribe("b")
        store.subscribe("c")
        store.unsubscribe("c")
        store.subscribe("d", start="latest")
        a.next(timeout=5).ack()
        a.next(timeout=5).nack()
        deadline = time.monotonic() + 10
        while store.segments() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not store.segments(), "max_age must have deleted segment 0"
        while time.monotonic() < deadline:  # every subscriber left is orphaned
            orphaned = {
                r.fields[0]
                for r in parse_ack_log((root / "ack.log").read_bytes())[1]
                if r.type == ACK_ORPHANED
            }
            if orphaned == {0, 1, 3}:
                break
            time.sleep(0.05)
        store.subscribe("a")  # the return of an orphan
        data = (root / "ack.log").read_bytes()
    generation, records = parse_ack_log(data)
    returned = records.pop()
    assert returned.type == ACK_SUBSCRIBE and returned.fields[::3] == (0, "a")
    ckpt = parse_checkpoint((root / "ack.checkpoint").read_bytes())
    assert (ckpt.replay_generation, ckpt.replay_offset) == (2, ACK_HEADER_SIZE)
    assert (ckpt.max_seen_seq, ckpt.next_sub_id, ckpt.segments) == (0, 4, {})
    subs = {
        n: (sub["sub_id"], sub["flags"], sub["mark"], sub["dropped"]) for n, sub in ckpt.subscribers.items()
    }
    assert subs == {"a": (0, 0, 0, 1), "b": (1, 1, 0, 2), "d": (3, 1, 0, 0)}  # flags bit 0: orphaned
    assert generation == 1
    head = [(r.type, r.fields) for r in records[:8]]
    ts = [r.fields[2] if r.type == ACK_SUBSCRIBE else r.fields[-1] for r in records[1:8]]
    assert all(TEST_START_NS <= t <= time.time_ns() for t in ts)
    assert head == [
        (ACK_SEGMENT, (0, 2)),
        (ACK_SUBSCRIBE, (0, -1, ts[0], "a")),
        (ACK_SUBSCRIBE, (1, -1, ts[1], "b")),
        (ACK_SUBSCRIBE, (2, -1, ts[2], "c")),
        (ACK_UNSUBSCRIBE, (2, ts[3])),
        (ACK_SUBSCRIBE, (3, 0, ts[4], "d")),  # latest: the mark is the newest segment
        (ACK_OUTCOME, (0, 0, 0, OUTCOME_ACK, ts[5])),
        (ACK_OUTCOME, (0, 0, 1, OUTCOME_NACK, ts[6])),
    ]
    tail = {(r.type, r.fields[:-1]) for r in records[8:]}
    assert len(tail) == len(records) - 8
    assert tail == {
        (ACK_ORPHANED, (0,)),
        (ACK_ORPHANED, (1,)),
        (ACK_ORPHANED, (3,)),
        (ACK_OUTCOME, (0, 0, 1, OUTCOME_DROPPED)),
        (ACK_OUTCOME, (1, 0, 0, OUTCOME_DROPPED)),
        (ACK_OUTCOME, (1, 0, 1, OUTCOME_DROPPED)),
    }


@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_envelope_file(tmp_path: Path, signal: str) -> None:
    path = tmp_path / f"{signal}.otap"
    encoder = Encoder(signal, EncoderConfig(ipc_compression="zstd"))
    inputs = list(otap_model.generate(signal, 1_000, batch_size=250, seed=5))
    with path.open("wb") as out:
        write_envelopes(out, (encoder.encode(b) for b in inputs))
    messages = parse_envelope_file(path.read_bytes())
    assert [m[0] for m in messages] == list(range(len(inputs)))
    parents = {r.child: r.parent for r in relations(Signal(signal))}
    streams = EnvelopeStreams()
    created: list[str] = []
    for (batch_id, payloads), bundle in zip(messages, inputs, strict=True):
        types = [pt for _, pt, _ in payloads]
        assert types[0] == ROOT_PAYLOAD[Signal(signal)] and sorted(types) == sorted(bundle.tables)
        for i, pt in enumerate(types):
            assert pt not in parents or parents[pt] in types[:i], f"{pt} before its parent"
        decoder = Decoder()
        slots = {}
        for schema_id, ptype, record in payloads:
            if schema_id not in created:
                created.append(schema_id)
            slots[ptype] = streams.read(schema_id, ptype, record)
        assert same_telemetry(decoder.decode_records(RecordBundle(slots)), bundle), batch_id
    assert created == [str(i) for i in range(len(created))]
    # later messages of a stream send dictionaries as deltas (isDelta) where they only grew
    assert sum(stats.num_dictionary_deltas for stats in streams.stats.values()) > 0


def test_envelope_file_of_empty_requests(tmp_path: Path) -> None:
    """An empty request is a message without payloads; batch_id 0 is omitted like any default."""
    path = tmp_path / "empty.otap"
    encoder = Encoder("logs")
    empty = otap_model.from_otlp(b"", signal="logs")
    with path.open("wb") as out:
        write_envelopes(out, [encoder.encode(empty), encoder.encode(empty)])
    data = path.read_bytes()
    assert data == bytes.fromhex("00000000020000000801")
    assert parse_envelope_file(data) == [(0, []), (1, [])]
    assert parse_envelope_file(b"") == []


def test_ack_log_rotates_past_its_size(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = StoreConfig(subscribers=SubscriberConfig(ack_log_rotation_size=100))
    with QuiverStore.open(root, config) as store:
        store.ingest(RecordBundle({0: pa.record_batch({"x": pa.array([1], pa.int64())})}))
        store.flush()
        sub = store.subscribe("s")
        log = (root / "ack.log").read_bytes()  # header 24 + SEGMENT 21 + SUBSCRIBE 31 = 76 bytes
        sub.next(timeout=5).ack()  # + one 34-byte OUTCOME: past 100 bytes, so a checkpoint
        after = parse_ack_log((root / "ack.log").read_bytes())
        ckpt = parse_checkpoint((root / "ack.checkpoint").read_bytes())
    generation, records = parse_ack_log(log)
    assert (len(log), generation, [r.type for r in records]) == (76, 1, [ACK_SEGMENT, ACK_SUBSCRIBE])
    assert after == (2, []) and (ckpt.replay_generation, ckpt.replay_offset) == (2, ACK_HEADER_SIZE)


# ---------------------------------------------------------------------------------------------
# Progress ledger


def parse_progress_ledger(data: bytes) -> dict[str, int]:
    magic, version, reserved, count = struct.unpack_from("<8sHHI", data, 0)
    assert (magic, version, reserved) == (b"QVPRGLDG", 1, 0)
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == crc(data[:-4])
    offsets, at = {}, 16
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, at)
        producer = data[at + 4 : at + 4 + name_len].decode("utf-8")
        (offsets[producer],) = struct.unpack_from("<q", data, at + 4 + name_len)
        at += 4 + name_len + 8
    assert at == len(data) - 4  # consumed exactly to the CRC
    assert list(offsets) == sorted(offsets)
    return offsets


def test_progress_ledger(tmp_path: Path) -> None:
    """Retention deleting segments with progress records leaves their largest offsets in the ledger."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), retention=RetentionConfig(max_age=0.001))
    batch = pa.record_batch({"x": pa.array([1], pa.int64())})
    with QuiverStore.open(tmp_path, config) as store:
        assert not (tmp_path / "segments" / "progress.ledger").exists()
        for producer, offset in (("spark/job-7/p-0", 40), ("ünï", 2**40), ("spark/job-7/p-0", 41)):
            store.ingest(with_progress(RecordBundle({0: batch}), producer, offset))
    time.sleep(0.01)
    with QuiverStore.open(tmp_path, config) as store:
        store.maintain()
        assert store.segments() == []
    assert parse_progress_ledger((tmp_path / "segments" / "progress.ledger").read_bytes()) == {"spark/job-7/p-0": 41, "ünï": 2**40}
