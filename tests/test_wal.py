"""WAL framing, scanning and recovery: torn tails, corruption modes, unknown types, headers, sidecar."""

from __future__ import annotations

import os
import shutil
import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store import (
    CorruptionError,
    Layout,
    QuiverError,
    QuiverStore,
    RecordBundle,
    SegmentConfig,
    StoreConfig,
    WalConfig,
)
from quiver_store.fs import DEFAULT_FS
from quiver_store.layout import DEFAULT_LAYOUT
from quiver_store.wal import sidecar
from quiver_store.wal.bundle_codec import BundleEncoder, decode_bundle
from quiver_store.wal.format import ENTRY_SYNCED, HEADER_LEN, LEN, encode_entry, encode_header
from quiver_store.wal.reader import Damage, frame_at, scan
from quiver_store.wal.replay import apply_plan, plan_recovery

HASH = DEFAULT_LAYOUT.cfg_hash
QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))


def bundle(i: int, rows: int = 3) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array(np.full(rows, i, dtype=np.int64))})})


def frames_file(path: str, n: int) -> list[int]:
    """A WAL file of n small entries (sequence = payload value); returns frame start offsets."""
    enc = BundleEncoder(DEFAULT_LAYOUT)
    offsets, data = [], bytearray(encode_header(HASH))
    for i in range(n):
        bitmap, slots = enc.encode_bytes(bundle(i))
        offsets.append(len(data))
        data += encode_entry(0, 1000 + i, i, bitmap, slots)
    with open(path, "wb") as f:
        f.write(data)
    return offsets


def replayed_values(plan) -> list[int]:
    return [decode_bundle(e, DEFAULT_LAYOUT, p).slots[0]["i"][0].as_py() for e, _, p in plan.entries]


def all_values(store: QuiverStore) -> list[int]:
    return [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]


# -- framing -------------------------------------------------------------------------------------
def test_header_is_30_bytes_with_magic_version_and_hash():
    h = encode_header(HASH)
    assert len(h) == 30 and h[:10] == b"QUIVER\0WAL" and struct.unpack_from("<HH", h, 10) == (1, 0) and h[14:] == HASH


def test_entry_layout_and_crc_cover_type_through_payloads():
    enc = BundleEncoder(DEFAULT_LAYOUT)
    b = RecordBundle({1: pa.record_batch({"x": [1, 2]}), 5: pa.record_batch({"y": ["a"]})})
    bitmap, slots = enc.encode_bytes(b)
    frame = encode_entry(0, 42, 7, bitmap, slots)
    (length,) = LEN.unpack_from(frame, 0)
    assert len(frame) == 4 + length + 4
    assert struct.unpack_from("<BqQQ", frame, 4) == (0, 42, 7, (1 << 1) | (1 << 5))
    assert struct.unpack_from("<I", frame, 4 + length)[0] == crc32c.crc32c(frame[4 : 4 + length])
    assert struct.unpack_from("<H", frame, 29)[0] == 1  # first slot block: payload type id = slot 1
    entry = frame_at(memoryview(frame), 0)
    back = decode_bundle(entry, DEFAULT_LAYOUT, "mem")
    assert back.equals(b) and back.ingestion_time_ns == 42


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 62),  # slot 63 holds only progress records (tests/test_progress.py)
        st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=0, max_size=20),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
)
def test_bundle_codec_round_trip(columns, dictionary):
    slots = {}
    for slot, values in columns.items():
        arr = pa.array(values, type=pa.int64())
        cols = {"v": arr, "s": pa.array([None if v is None else str(v) for v in values], type=pa.string())}
        if dictionary:
            cols["s"] = cols["s"].dictionary_encode()
        slots[slot] = pa.record_batch(cols)
    b = RecordBundle(slots, ingestion_time_ns=5)
    bitmap, blob = BundleEncoder(DEFAULT_LAYOUT).encode_bytes(b)
    entry = frame_at(memoryview(encode_entry(0, 5, 1, bitmap, blob)), 0)
    assert decode_bundle(entry, DEFAULT_LAYOUT, "mem").equals(b)


def _crc_valid_frame(blob: bytes) -> memoryview:
    return memoryview(encode_entry(0, 5, 1, 1, blob))


def test_a_crc_valid_frame_with_offsets_past_its_buffer_is_corruption_not_a_crash():
    """Found by fuzzing CRC-valid frames (session 21): a string payload whose last offset points
    past its data decoded without a check, and `quiver dump`'s to_pylist raised SystemError
    ("Negative size passed to PyUnicode_New"; an out-of-bounds read). Now every decoded payload is
    validated in full, and the frame is a CorruptionError naming it."""
    b = RecordBundle({0: pa.record_batch({"s": pa.array(["ab", "cd"])})})
    _, blob = BundleEncoder(DEFAULT_LAYOUT).encode_bytes(b)
    offsets = struct.pack("<3i", 0, 2, 4)
    assert blob.count(offsets) == 1
    bad = blob.replace(offsets, struct.pack("<3i", 0, 2, 0x7FFF_FFF0))
    with pytest.raises(CorruptionError, match=r"^mem at offset 0: entry seq 1: slot 0 payload is not a valid Arrow IPC stream \(.*offset"):
        decode_bundle(frame_at(_crc_valid_frame(bad), 0), DEFAULT_LAYOUT, "mem")


def test_every_pyarrow_error_of_a_crc_valid_payload_is_corruption():
    """pyarrow raises ArrowKeyError (here: a record batch whose dictionary message is missing) and
    ArrowNotImplementedError (the fuzzing saw a 128-bit integer type) for some bytes; decode_bundle
    let them through (it caught ArrowInvalid only) and `quiver dump` printed a traceback."""
    b = RecordBundle({0: pa.record_batch({"d": pa.array(["x", "y", "x"]).dictionary_encode()})})
    _, blob = BundleEncoder(DEFAULT_LAYOUT).encode_bytes(b)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, b.slots[0].schema) as w:
        w.write_batch(b.slots[0])
    stream = sink.getvalue().to_pybytes()
    reader = pa.BufferReader(stream)
    schema, dictionary, batch = (pa.ipc.read_message(reader).serialize().to_pybytes() for _ in range(3))
    assert pa.ipc.read_message(pa.BufferReader(dictionary)).type == "dictionary"
    no_dictionary = schema + batch + stream[-8:]  # the record batch without the dictionary it refers to
    with pytest.raises(pa.ArrowKeyError):  # the case: not an ArrowInvalid
        pa.ipc.read_record_batch(pa.ipc.read_message(pa.BufferReader(batch)), pa.ipc.read_schema(pa.BufferReader(schema)))
    assert blob.endswith(stream)
    block = blob[: len(blob) - len(stream) - 4] + struct.pack("<I", len(no_dictionary)) + no_dictionary
    with pytest.raises(CorruptionError, match=r"slot 0 payload is not a valid Arrow IPC stream \(Dictionary field not found\)"):
        decode_bundle(frame_at(_crc_valid_frame(block), 0), DEFAULT_LAYOUT, "mem")


# -- torn tails ------------------------------------------------------------------------------------
def test_torn_tail_at_every_byte_of_the_last_entry_recovers_the_exact_prefix(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    offsets = frames_file(str(src / "quiver.wal"), 4)
    size = os.path.getsize(src / "quiver.wal")
    last = offsets[-1]
    for cut in range(last, size):
        wal = tmp_path / f"w{cut}"
        wal.mkdir()
        data = (src / "quiver.wal").read_bytes()[:cut]
        (wal / "quiver.wal").write_bytes(data)
        plan = plan_recovery(DEFAULT_FS, str(wal), HASH, "point_in_time", -1)
        assert replayed_values(plan) == [0, 1, 2], cut
        assert plan.corruptions == []
        assert (plan.torn is not None) == (cut > last)
        apply_plan(DEFAULT_FS, plan)
        assert os.path.getsize(wal / "quiver.wal") == last
        shutil.rmtree(wal)


def test_torn_tail_through_the_store_keeps_every_complete_bundle(tmp_path):
    store = QuiverStore.open(tmp_path, QUIET)
    receipts = [store.ingest(bundle(i)) for i in range(5)]
    store._abandon()
    wal = tmp_path / "wal" / "quiver.wal"
    torn = wal.read_bytes()[receipts[-1].wal_offset : receipts[-1].wal_offset + 30]
    os.truncate(wal, receipts[-1].wal_offset + 30)
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert again.stats()["corrupt_entries"] == 0
        assert again.stats()["torn_tail_bytes"] == len(torn.rstrip(b"\0"))  # counted up to the last non-zero byte
        assert again.ingest(bundle(5)).sequence == 4  # the torn entry's number is free again
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert all_values(again) == [0, 1, 2, 3, 5]


# -- unknown types, headers ---------------------------------------------------------------------------
def test_unknown_entry_type_is_skipped_by_length(tmp_path):
    enc = BundleEncoder(DEFAULT_LAYOUT)
    data = bytearray(encode_header(HASH))
    for seq, etype in enumerate([0, 9, 0]):
        bitmap, slots = enc.encode_bytes(bundle(seq))
        data += encode_entry(etype, 1, seq, bitmap, slots)
    (tmp_path / "quiver.wal").write_bytes(bytes(data))
    plan = plan_recovery(DEFAULT_FS, str(tmp_path), HASH, "strict", -1)
    assert replayed_values(plan) == [0, 2]
    assert plan.files[0].unknown == 1 and plan.corruptions == []


def test_layout_hash_mismatch_is_refused_with_instructions(tmp_path):
    a = Layout("alpha", slots={0: "logs"})
    store = QuiverStore.open(tmp_path, QUIET, layout=a)
    store.ingest(bundle(1))
    store._abandon()
    with pytest.raises(QuiverError, match="different layout contract") as info:
        QuiverStore.open(tmp_path, QUIET, layout=Layout("beta", slots={0: "logs"}))
    assert "flush()" in str(info.value) and "quiver.wal" in str(info.value)
    with QuiverStore.open(tmp_path, QUIET, layout=a) as again:  # the right layout still opens it
        assert again.stats()["replayed_entries"] == 1


def test_unknown_wal_version_is_refused(tmp_path):
    store = QuiverStore.open(tmp_path, QUIET)
    store.ingest(bundle(1))
    store._abandon()
    wal = tmp_path / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    data[10:12] = struct.pack("<H", 9)
    wal.write_bytes(bytes(data))
    with pytest.raises(QuiverError, match="WAL format version 9"):
        QuiverStore.open(tmp_path, QUIET)


def test_not_a_wal_file_is_corruption_naming_the_file(tmp_path):
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / "quiver.wal").write_bytes(b"NOTAWALFILE" * 10)
    with pytest.raises(CorruptionError, match="not a Quiver WAL file") as info:
        QuiverStore.open(tmp_path, QUIET)
    assert info.value.path.endswith("quiver.wal") and info.value.offset == 0


# -- sidecar ------------------------------------------------------------------------------------------
def test_sidecar_round_trip_and_rejection():
    point = sidecar.TruncatePoint(1234, 7)
    data = sidecar.encode(point)
    assert len(data) == 32 and data[:8] == b"QUIVER\0T"
    assert sidecar.decode(data) == (point, None)
    bad = bytearray(data)
    bad[12] ^= 1
    assert sidecar.decode(bytes(bad))[0] is None
    assert "CRC" in sidecar.decode(bytes(bad))[1]


def test_corrupt_sidecar_falls_back_to_a_full_scan_without_duplicates(tmp_path):
    store = QuiverStore.open(tmp_path, QUIET)
    for i in range(3):
        store.ingest(bundle(i))
    store.flush()  # segment 0 holds 0..2, the sidecar points past them
    for i in range(3, 5):
        store.ingest(bundle(i))
    store._abandon()
    side = tmp_path / "wal" / "truncate.offset"
    data = bytearray(side.read_bytes())
    data[16] ^= 0xFF
    side.write_bytes(bytes(data))
    with QuiverStore.open(tmp_path, QUIET) as again:
        stats = again.stats()
        assert stats["sidecar_fallbacks"] == 1
        assert stats["wal_entries_covered"] == 3  # scanned from the start, skipped by sequence
        assert stats["replayed_entries"] == 2
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert all_values(again) == [0, 1, 2, 3, 4]


# -- corruption in the middle --------------------------------------------------------------------------
def _corrupt_middle(tmp_path, n=6, victim=2):
    """n entries, one byte of entry `victim` flipped; (receipts, WAL path, end of the last entry)."""
    store = QuiverStore.open(tmp_path, QUIET)
    receipts = [store.ingest(bundle(i)) for i in range(n)]
    end = store._wal.end_position().offset  # the file may go on with its pre-extended zeros
    store._abandon()
    wal = tmp_path / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    bad = receipts[victim].wal_offset + 40
    data[bad] ^= 0x55
    wal.write_bytes(bytes(data))
    return receipts, wal, end


def test_point_in_time_reports_corruption_and_quarantines_the_rest(tmp_path):
    receipts, wal, end = _corrupt_middle(tmp_path)
    tail = wal.read_bytes()[receipts[2].wal_offset : end]  # every byte up to the zero tail
    with QuiverStore.open(tmp_path, QUIET) as store:
        stats = store.stats()
        assert stats["corrupt_entries"] == 1
        report = stats["corruption_reports"][0]
        assert report["path"] == str(wal) and report["offset"] == receipts[2].wal_offset
        assert "CRC32C mismatch" in report["error"]
        assert stats["quarantined_bytes"] == len(tail)
    quarantine = list((tmp_path / "wal" / "quarantine").iterdir())
    assert len(quarantine) == 1 and quarantine[0].read_bytes() == tail
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert all_values(store) == [0, 1]
        # The quarantined bytes still hold the valid later entries.
        data = memoryview(b"\0" * 0 + quarantine[0].read_bytes())
        later = [x for x in scan(data, 0, resync=True) if not isinstance(x, Damage) and x.entry_type != ENTRY_SYNCED]
        assert [e.sequence for e in later] == [3, 4, 5]


def test_skip_corrupt_recovers_the_later_entries(tmp_path):
    _corrupt_middle(tmp_path)
    cfg = StoreConfig(segment=QUIET.segment, wal=WalConfig(recovery="skip_corrupt"))
    with QuiverStore.open(tmp_path, cfg) as store:
        assert store.stats()["corrupt_entries"] == 1
        assert store.stats()["replayed_entries"] == 5
    assert len(list((tmp_path / "wal" / "quarantine").iterdir())) == 1
    with QuiverStore.open(tmp_path, cfg) as store:
        assert all_values(store) == [0, 1, 3, 4, 5]
        assert store.stats()["corrupt_entries"] == 0  # the region was zeroed after quarantine


def test_strict_refuses_naming_file_and_offset(tmp_path):
    receipts, wal, _ = _corrupt_middle(tmp_path)
    cfg = StoreConfig(segment=QUIET.segment, wal=WalConfig(recovery="strict"))
    with pytest.raises(CorruptionError, match="strict") as info:
        QuiverStore.open(tmp_path, cfg)
    assert info.value.path == str(wal) and info.value.offset == receipts[2].wal_offset
    assert str(wal) in str(info.value) and f"offset {receipts[2].wal_offset}" in str(info.value)
    with QuiverStore.open(tmp_path, QUIET) as store:  # point_in_time then opens it
        assert store.stats()["corrupt_entries"] == 1


@pytest.mark.parametrize("recovery", ["point_in_time", "skip_corrupt"])
def test_flipped_bit_in_a_complete_last_entry_is_reported_and_quarantined_not_dropped(tmp_path, recovery):
    receipts, wal, end = _corrupt_middle(tmp_path, n=3, victim=2)
    last = wal.read_bytes()[receipts[2].wal_offset : end]
    cfg = StoreConfig(segment=QUIET.segment, wal=WalConfig(recovery=recovery))
    with QuiverStore.open(tmp_path, cfg) as store:
        stats = store.stats()
        assert stats["corrupt_entries"] == 1 and stats["torn_tail_bytes"] == 0
        report = stats["corruption_reports"][0]
        assert report["offset"] == receipts[2].wal_offset and "complete final entry" in report["error"]
    with QuiverStore.open(tmp_path, cfg) as store:
        assert all_values(store) == [0, 1]
    quarantine = list((tmp_path / "wal" / "quarantine").iterdir())
    assert [q.read_bytes() for q in quarantine] == [last]
    strict = StoreConfig(segment=QUIET.segment, wal=WalConfig(recovery="strict"))
    _corrupt_middle(tmp_path / "again", n=3, victim=2)
    with pytest.raises(CorruptionError, match="complete final entry"):
        QuiverStore.open(tmp_path / "again", strict)


def test_corrupted_length_prefix_is_corruption_not_a_torn_tail(tmp_path):
    offsets = frames_file(str(tmp_path / "quiver.wal"), 5)
    path = tmp_path / "quiver.wal"
    data = bytearray(path.read_bytes())
    data[offsets[1] + 3] = 0x7F  # huge length that runs past the end of the file
    path.write_bytes(bytes(data))
    plan = plan_recovery(DEFAULT_FS, str(tmp_path), HASH, "skip_corrupt", -1)
    assert replayed_values(plan) == [0, 2, 3, 4]
    assert plan.torn is None and plan.corruptions[0].offset == offsets[1]


def test_zero_filled_region_is_a_hole_not_corruption(tmp_path):
    offsets = frames_file(str(tmp_path / "quiver.wal"), 4)
    path = tmp_path / "quiver.wal"
    data = bytearray(path.read_bytes())
    data[HEADER_LEN : offsets[2]] = bytes(offsets[2] - HEADER_LEN)
    path.write_bytes(bytes(data))
    plan = plan_recovery(DEFAULT_FS, str(tmp_path), HASH, "strict", -1)
    assert replayed_values(plan) == [2, 3]
    assert plan.files[0].holes == offsets[2] - HEADER_LEN and plan.corruptions == []


def test_sequence_numbers_continue_after_restart(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        first = [store.ingest(bundle(i)).sequence for i in range(3)]
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.ingest(bundle(9)).sequence == first[-1] + 1
    store = QuiverStore.open(tmp_path, QUIET)
    seq = store.ingest(bundle(10)).sequence
    store._abandon()
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.ingest(bundle(11)).sequence == seq + 1


# -- pre-extended active file (a zero tail after the last entry) ------------------------------------
def _with_zero_tail(path, n: int, tail: int) -> tuple[list[int], int, bytes]:
    """A WAL of n entries followed by `tail` zero bytes; (frame offsets, end of the log, entries)."""
    offsets = frames_file(str(path), n)
    data = path.read_bytes()
    path.write_bytes(data + bytes(tail))
    return offsets, len(data), data


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 5), tail=st.integers(1, 70_000))
def test_zero_tail_is_the_clean_end_of_the_active_file(tmp_path_factory, n, tail):
    from quiver_store.cli import main

    d = tmp_path_factory.mktemp("store")
    (d / "wal").mkdir()
    wal = d / "wal" / "quiver.wal"
    _, end, _ = _with_zero_tail(wal, n, tail)
    plan = plan_recovery(DEFAULT_FS, str(d / "wal"), HASH, "strict", -1)
    assert replayed_values(plan) == list(range(n))
    assert plan.torn is None and plan.corruptions == [] and plan.actions == []
    assert plan.active_end == end
    apply_plan(DEFAULT_FS, plan)
    assert os.path.getsize(wal) == end + tail  # the zero tail is kept for the next appends
    assert main(["verify", str(d)]) == 0


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), tail=st.integers(0, 9_000), data=st.data())
def test_torn_write_into_the_zero_tail_is_cut_not_reported(tmp_path_factory, n, tail, data):
    d = tmp_path_factory.mktemp("wal")
    wal = d / "quiver.wal"
    offsets, end, full = _with_zero_tail(wal, n, tail)
    last = offsets[-1]
    # The write of the last frame stopped part way (before its CRC field): the rest is still zero.
    cut = data.draw(st.integers(last, end - 4), label="bytes written")
    wal.write_bytes(full[:cut] + bytes(end - cut + tail))
    plan = plan_recovery(DEFAULT_FS, str(d), HASH, "strict", -1)  # strict: a torn write is no corruption
    assert replayed_values(plan) == list(range(n - 1))
    assert plan.corruptions == []
    written = any(full[last:cut])
    assert (plan.torn is not None) == written
    if written:
        assert plan.torn == (str(wal), last, len(full[last:cut].rstrip(b"\0")))
    else:
        assert plan.active_end == last  # nothing but zeros reached the disk: the log simply ends there
    apply_plan(DEFAULT_FS, plan)
    again = plan_recovery(DEFAULT_FS, str(d), HASH, "strict", -1)
    assert replayed_values(again) == list(range(n - 1)) and again.torn is None and again.actions == []


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5), tail=st.integers(1, 9_000), data=st.data())
def test_corrupt_entry_before_the_zero_tail_is_reported_and_quarantined_without_the_zeros(tmp_path_factory, n, tail, data):
    d = tmp_path_factory.mktemp("wal")
    wal = d / "quiver.wal"
    offsets, end, full = _with_zero_tail(wal, n, tail)
    victim = data.draw(st.integers(0, n - 1), label="victim")
    frame_end = offsets[victim + 1] if victim + 1 < n else end
    at = data.draw(st.integers(offsets[victim] + 4, frame_end - 1), label="flipped byte")  # not the length field
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(full)
    damaged[at] ^= 1 << bit
    wal.write_bytes(bytes(damaged) + bytes(tail))
    plan = plan_recovery(DEFAULT_FS, str(d), HASH, "point_in_time", -1)
    assert replayed_values(plan) == list(range(victim))
    assert plan.torn is None and [c.offset for c in plan.corruptions] == [offsets[victim]]
    quarantine = [a for a in plan.actions if a.kind == "quarantine"]
    assert [(a.offset, a.length) for a in quarantine] == [(offsets[victim], end - offsets[victim])]
    with pytest.raises(CorruptionError, match="strict"):
        plan_recovery(DEFAULT_FS, str(d), HASH, "strict", -1)
    apply_plan(DEFAULT_FS, plan)
    kept = list((d / "quarantine").iterdir())
    assert [q.read_bytes() for q in kept] == [bytes(damaged[offsets[victim] :])]
    assert os.path.getsize(wal) == offsets[victim]


def test_torn_write_ending_inside_the_crc_field_is_quarantined_not_dropped(tmp_path):
    """Documented limit: a write that stopped inside the 4-byte CRC field leaves a complete frame
    with a non-zero, wrong CRC, which is indistinguishable from a damaged final entry: it is
    reported and quarantined (nothing is lost; the entry was never acknowledged)."""
    wal = tmp_path / "quiver.wal"
    offsets, end, full = _with_zero_tail(wal, 3, 4096)
    crc = full[end - 4 : end]
    keep = next(k for k in (3, 2, 1) if any(crc[:k]))
    wal.write_bytes(full[: end - 4 + keep] + bytes(4 - keep + 4096))
    plan = plan_recovery(DEFAULT_FS, str(tmp_path), HASH, "point_in_time", -1)
    assert replayed_values(plan) == [0, 1]
    assert [c.offset for c in plan.corruptions] == [offsets[2]] and "complete final entry" in str(plan.corruptions[0])


def test_store_keeps_its_zero_tail_across_a_crash_and_appends_where_the_log_ends(tmp_path):
    cfg = StoreConfig(segment=QUIET.segment, wal=WalConfig(preallocate=64 << 10))
    store = QuiverStore.open(tmp_path, cfg)
    receipts = [store.ingest(bundle(i)) for i in range(5)]
    store._wal.extend_tail()  # whatever the background thread has done by now, the tail is there
    end = store._wal.end_position().offset
    wal = tmp_path / "wal" / "quiver.wal"
    assert os.path.getsize(wal) == end + (64 << 10) and not any(wal.read_bytes()[end:])
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as again:
        stats = again.stats()
        assert stats["replayed_entries"] == 5 and stats["torn_tail_bytes"] == 0 and stats["corrupt_entries"] == 0
        assert stats["wal_bytes"] == end  # the zero tail is not counted as WAL data
        receipt = again.ingest(bundle(5))
        assert receipt.wal_offset == end and receipt.sequence == receipts[-1].sequence + 1
    with QuiverStore.open(tmp_path, cfg) as again:
        assert all_values(again) == list(range(6))


@pytest.mark.parametrize("durability", ["os", "none"])
def test_no_preallocation_without_fdatasync(tmp_path, durability):
    cfg = StoreConfig(segment=QUIET.segment, wal=WalConfig(durability=durability))
    with QuiverStore.open(tmp_path, cfg) as store:
        store.ingest(bundle(0))
        store.flush()
        assert store.stats()["preallocated_bytes"] == 0
        assert os.path.getsize(tmp_path / "wal" / "quiver.wal") == store.stats()["wal_bytes"]


def test_quiver_replay_and_verify_do_not_flag_the_zero_tail(tmp_path, capsys):
    from quiver_store.cli import main

    store = QuiverStore.open(tmp_path, QUIET)
    for i in range(3):
        store.ingest(bundle(i))
    store._wal.extend_tail()
    store._abandon()
    wal = tmp_path / "wal" / "quiver.wal"
    assert not any(wal.read_bytes()[-1024:])  # the file ends in its zero tail
    capsys.readouterr()
    assert main(["replay", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "entries to replay into the open segment: 3" in out and "bytes that would be quarantined: 0" in out
    assert "torn tail" not in out and "truncate" not in out  # no action on the zero tail
    assert main(["verify", str(tmp_path)]) == 0
    assert "CORRUPT" not in capsys.readouterr().out
