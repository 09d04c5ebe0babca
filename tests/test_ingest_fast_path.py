"""The ingest fast path: one schema cache for check and encoder, the hints the applier reuses
(IPC sizes, check epoch), and the joined WAL frame, all without changing what is stored."""

from __future__ import annotations

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import QuiverError, QuiverStore, RecordBundle, SegmentConfig, StoreConfig
from quiver_store.layout import DEFAULT_LAYOUT
from quiver_store.segment.accumulator import OpenSegment
from quiver_store.wal import bundle_codec
from quiver_store.wal.bundle_codec import BundleEncoder
from quiver_store.wal.format import CRC, ENTRY_HEAD, LEN, entry_parts

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
FP = b"f" * 32


def batch(n: int, *, extra: bool = False, meta: dict[bytes, bytes] | None = None) -> pa.RecordBatch:
    cols = {"id": pa.array(np.arange(n, dtype=np.uint16)), "body": pa.array([f"log {i}" for i in range(n)])}
    if extra:
        cols["severity"] = pa.array(np.full(n, 9, dtype=np.int32))
    b = pa.record_batch(cols)
    return b.replace_schema_metadata(meta) if meta else b


def values(store: QuiverStore) -> list[list[int]]:
    return [b.slots[0].column(0).to_pylist() for _, _, b in store.bundles()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(0, 300), offset=st.integers(0, 50), nulls=st.booleans())
def test_encoder_ipc_sizes_are_what_the_accumulator_would_measure(rows, offset, nulls):
    data = [None if nulls and i % 7 == 0 else f"v{i}" * (i % 5) for i in range(rows + offset)]
    b = pa.record_batch({"s": pa.array(data), "i": pa.array(range(rows + offset), pa.int64())}).slice(offset, rows)
    keyed = pa.record_batch({"k": pa.array(["a", "b"] * 3).dictionary_encode()})
    bundle = RecordBundle({0: b, 3: keyed})
    _, _, _, sizes = BundleEncoder(DEFAULT_LAYOUT).encode(bundle)
    assert sizes == [pa.ipc.get_record_batch_size(b), None]  # dictionary slots are measured later


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(0, 200), min_size=1, max_size=12))
def test_hinted_append_predicts_the_same_size_as_a_measured_one(lengths):
    enc = BundleEncoder(DEFAULT_LAYOUT)
    hinted, measured = OpenSegment(QUIET.segment), OpenSegment(QUIET.segment)
    for i, n in enumerate(lengths):
        bundle = RecordBundle({0: batch(n, extra=i % 3 == 0), 1: batch(n + 1)}, ingestion_time_ns=i)
        checked, epoch = enc.check(bundle)
        _, _, _, sizes = enc.encode(bundle, checked)
        hinted.append(bundle, sizes, epoch)
        measured.append(bundle)
    assert hinted.serialized_size == measured.serialized_size
    assert [s.placements for s in hinted.streams] == [s.placements for s in measured.streams]


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "dictionary"])
def test_check_refuses_a_contradicting_schema_and_accepts_new_metadata(keyed):
    def make(**kw) -> pa.RecordBatch:
        b = batch(3, **kw)
        return b.add_column(0, "k", pa.array(["a", "b", "a"]).dictionary_encode()) if keyed else b

    enc = BundleEncoder(DEFAULT_LAYOUT)
    ((_, _, _, head),), _ = enc.check(RecordBundle({0: make()}, {0: FP}))
    assert (head is None) if keyed else head.to_pybytes() == make().schema.serialize().to_pybytes()
    ((_, _, _, again),), _ = enc.check(RecordBundle({0: make()}, {0: FP}))  # another, equal schema object
    assert again is head
    with pytest.raises(QuiverError, match=r"(?s)slot 0: schema fingerprint 6666666666666666 was first seen .*severity: int32.*different fingerprint"):
        enc.check(RecordBundle({0: make(extra=True)}, {0: FP}))
    relabeled = RecordBundle({0: make(meta={b"k": b"v"})}, {0: FP})
    ((_, _, _, head),), _ = enc.check(relabeled)
    if not keyed:  # its own metadata, not the cached message
        assert head.to_pybytes() == relabeled.slots[0].schema.serialize().to_pybytes()
    _, parts, _, _ = enc.encode(relabeled)
    stream = pa.ipc.open_stream(pa.py_buffer(b"".join(bytes(p) for p in parts[1:])))
    assert stream.schema.metadata == {b"k": b"v"}


def test_epoch_is_none_when_the_cache_resets_mid_bundle(monkeypatch):
    monkeypatch.setattr(bundle_codec, "_SCHEMA_CACHE_LIMIT", 2)
    enc = BundleEncoder(DEFAULT_LAYOUT)
    assert enc.check(RecordBundle({0: batch(1), 1: batch(1)}, {0: FP, 1: FP}))[1] == 0
    assert enc.check(RecordBundle({0: batch(1), 1: batch(1)}, {0: FP, 1: FP}))[1] == 0  # hits, no reset
    assert enc.check(RecordBundle({2: batch(1), 3: batch(1)}, {2: FP, 3: FP}))[1] is None
    assert enc.check(RecordBundle({2: batch(1)}, {2: FP}))[1] == 1


def test_a_stream_from_another_epoch_is_compared_again():
    seg = OpenSegment(QUIET.segment)
    seg.append(RecordBundle({0: batch(2)}, {0: FP}, 1), None, 0)
    seg.append(RecordBundle({0: batch(2)}, {0: FP}, 2), None, 0)  # same epoch: no comparison needed
    with pytest.raises(QuiverError, match=r"slot 0: batch schema contradicts stream 0"):
        seg.append(RecordBundle({0: batch(2, extra=True)}, {0: FP}, 3), None, 1)
    with pytest.raises(QuiverError, match=r"slot 0: batch schema contradicts stream 0"):
        seg.append(RecordBundle({0: batch(2, extra=True)}, {0: FP}, 3))  # replayed: no hints
    assert seg.bundle_count == 2


def test_a_fingerprint_reused_after_the_cache_reset_lands_in_a_new_segment(tmp_path, monkeypatch):
    """The check forgets schemas at its limit; the open segment still tells them apart."""
    monkeypatch.setattr(bundle_codec, "_SCHEMA_CACHE_LIMIT", 1)
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(RecordBundle({0: batch(2)}, {0: FP}))
        store.ingest(RecordBundle({1: batch(1)}, {1: FP}))  # resets the cache
        store.ingest(RecordBundle({0: batch(2, extra=True)}, {0: FP}))  # accepted: nothing to contradict
        store.flush()
        assert store.stats()["finalize_trigger_schema_conflict"] == 1
        assert [s.bundle_count for s in store.segments()] == [2, 1]
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert [b.slots.get(0, b.slots.get(1)).num_columns for _, _, b in again.bundles()] == [2, 2, 3]


def test_round_trip_keeps_metadata_and_replays_without_hints(tmp_path):
    bundles = [RecordBundle({0: batch(i + 1, meta={b"n": str(i % 2).encode()})}, {0: FP}) for i in range(6)]
    store = QuiverStore.open(tmp_path, QUIET)
    for b in bundles[:3]:
        store.ingest(b)
    store.flush()
    for b in bundles[3:]:
        store.ingest(b)
    store._abandon()  # the last three come back through WAL replay
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert again.stats()["replayed_entries"] == 3
        again.flush()
        assert values(again) == [list(range(i + 1)) for i in range(6)]
        got = [b.slots[0].schema.metadata for _, _, b in again.bundles()]
    assert got[:3] == [{b"n": b"0"}] * 3  # a segment stream keeps its first schema's metadata
    assert got[3:] == [{b"n": b"1"}] * 3


def test_joined_frame_is_the_documented_layout():
    parts = [b"abc", memoryview(b"defg"), pa.py_buffer(b"hi")]
    frame = entry_parts(0, 7, 9, 5, parts, 9)
    assert len(frame) == 3
    raw = b"".join(bytes(p) for p in frame)
    head = ENTRY_HEAD.pack(0, 7, 9, 5)
    assert raw == LEN.pack(len(head) + 9) + head + b"abcdefghi" + CRC.pack(crc32c.crc32c(head + b"abcdefghi"))


def test_two_producers_claiming_a_fingerprint_at_once_cannot_both_win(monkeypatch):
    """Serializing the schema releases the GIL: another producer may claim the same (slot,
    fingerprint) with a contradicting schema meanwhile. The first claim stands, the second is refused."""
    enc = BundleEncoder(DEFAULT_LAYOUT)
    real_plain = bundle_codec._plain
    rival = RecordBundle({0: batch(2, extra=True)}, {0: FP})
    calls = []

    def interleaved(schema):
        if not calls:
            calls.append(schema)
            enc.check(rival)  # the other producer gets in between
        return real_plain(schema)

    monkeypatch.setattr(bundle_codec, "_plain", interleaved)
    with pytest.raises(QuiverError, match=r"(?s)slot 0: schema fingerprint 6666666666666666 was first seen .*severity: int32"):
        enc.check(RecordBundle({0: batch(2)}, {0: FP}))
    monkeypatch.setattr(bundle_codec, "_plain", real_plain)
    ((_, _, b, _),), _ = enc.check(RecordBundle({0: batch(3, extra=True)}, {0: FP}))
    assert b.num_columns == 3  # the rival's schema holds the key
