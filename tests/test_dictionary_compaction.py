"""Dictionary compaction before a batch is logged: the values of every row stay, the dictionary
keeps only the entries the batch references, and a stream whose dictionary grows batch after
batch no longer makes each WAL entry larger than the last."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_arrow import Decoder, Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import Signal, generate, to_otlp
from otap_model.otlp.order import canonical_order
from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig, WalConfig, compaction
from quiver_store.compaction import compact_batch, compact_dictionary, compactable_paths
from quiver_store.wal.bundle_codec import BundleEncoder

from .test_segment_support import same_values

INDEX_TYPES = [pa.uint8(), pa.uint16(), pa.uint32(), pa.int16(), pa.int32()]


@st.composite
def dictionary_arrays(draw: st.DrawFn) -> pa.DictionaryArray:
    """A dictionary array over any slice of its indices, nulls anywhere, garbage under nulls."""
    index_type = draw(st.sampled_from(INDEX_TYPES))
    size = draw(st.integers(1, 120))
    values = pa.array([f"value-{i:04d}" if draw(st.booleans()) or i else None for i in range(size)], pa.string())
    rows = draw(st.integers(0, 60))
    raw = draw(st.lists(st.integers(0, size - 1), min_size=rows, max_size=rows))
    nulls = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
    indices = pa.array(raw, index_type, mask=np.array(nulls, dtype=bool))
    arr = pa.DictionaryArray.from_arrays(indices, values)
    start = draw(st.integers(0, rows))
    return arr.slice(start, draw(st.integers(0, rows - start)))


@pytest.fixture
def no_minimum(monkeypatch):
    """Compact dictionaries of any size (the byte minimum only saves CPU)."""
    monkeypatch.setattr(compaction, "MIN_DICTIONARY_BYTES", 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arr=dictionary_arrays())
def test_compaction_keeps_every_value_and_only_referenced_entries(no_minimum, arr):
    out = compact_dictionary(arr)
    referenced = {i for i in arr.indices.to_pylist() if i is not None}
    if out is None:  # mostly referenced (or empty): left as it is
        assert not len(arr) or len(referenced) > compaction.MAX_USED_FRACTION * len(arr.dictionary)
        return
    assert out.type == arr.type
    assert out.to_pylist() == arr.to_pylist()
    assert out.null_count == arr.null_count
    assert len(out.dictionary) == len(referenced)
    # entries keep their relative order, so a compacted prefix-chained dictionary stays chained
    assert out.dictionary.to_pylist() == [arr.dictionary[i].as_py() for i in sorted(referenced)]
    out.validate(full=True)


def test_small_or_mostly_used_dictionaries_are_left_alone():
    big = pa.array([f"v{i:06d}" for i in range(20_000)])  # about 230 KB
    assert big.nbytes >= compaction.MIN_DICTIONARY_BYTES
    few = pa.DictionaryArray.from_arrays(pa.array([0, 5, 5, 19_999], pa.uint16()), big)
    most = pa.DictionaryArray.from_arrays(pa.array(np.arange(16_000), pa.uint16()), big)
    small = pa.DictionaryArray.from_arrays(pa.array([0], pa.uint16()), big.slice(0, 100))
    assert compact_dictionary(few).dictionary.to_pylist() == ["v000000", "v000005", "v019999"]
    assert compact_dictionary(most) is None  # 80% referenced
    assert compact_dictionary(small) is None  # under the byte minimum


def test_out_of_range_indices_are_not_compacted():
    big = pa.array([f"v{i:06d}" for i in range(20_000)])
    bad = pa.DictionaryArray.from_arrays(pa.array([1, 70_000], pa.uint32()), big, safe=False)
    negative = pa.DictionaryArray.from_arrays(pa.array([1, -3], pa.int32()), big, safe=False)
    assert compact_dictionary(bad) is None and compact_dictionary(negative) is None


def test_struct_children_are_compacted_and_the_schema_is_kept(no_minimum):
    words = pa.array(["a", "b", "c", "d", "e", "f", "g", "h"])
    body = pa.StructArray.from_arrays(
        [pa.array([1, 2, None, 4], pa.uint8()), pa.DictionaryArray.from_arrays(pa.array([7, None, 7, 0], pa.uint16()), words)],
        names=["type", "str"],
        mask=pa.array([False, False, True, False]),
    )
    top = pa.DictionaryArray.from_arrays(pa.array([3, 3, 3, 3], pa.uint8()), words)
    schema = pa.schema([("body", body.type), ("key", top.type), ("n", pa.int64())], metadata={b"k": b"v"})
    batch = pa.RecordBatch.from_arrays([body, top, pa.array([1, 2, 3, 4])], schema=schema)
    paths = compactable_paths(schema)
    assert paths == ((0, 1), (1,))
    out = compact_batch(batch, paths)
    assert out.schema.equals(schema, check_metadata=True)
    assert out.to_pylist() == batch.to_pylist()
    assert out.column(0).field(1).dictionary.to_pylist() == ["a", "h"]
    assert out.column(1).dictionary.to_pylist() == ["d"]
    out.validate(full=True)


def test_dictionaries_under_lists_are_not_rewritten():
    typ = pa.list_(pa.dictionary(pa.uint16(), pa.string()))
    assert compactable_paths(pa.schema([("tags", typ)])) == ()


def _logs_stream(batches: int, size: int = 2_000) -> list[RecordBundle]:
    encoder = Encoder(Signal.LOGS)
    return [encoder.encode_records(b) for b in generate(Signal.LOGS, batches * size, batch_size=size, seed=3)]


def test_wal_entries_of_a_long_stream_stop_growing(monkeypatch):
    """The encoder's dictionaries grow with every batch; the logged entries must not."""
    records = _logs_stream(12)
    codec = BundleEncoder(OTAP_LAYOUT)
    raw_dictionaries = sum(len(d.dictionary) for d in records[-1].slots[31].columns if pa.types.is_dictionary(d.type))
    assert raw_dictionaries > 3 * sum(
        len(d.dictionary) for d in records[0].slots[31].columns if pa.types.is_dictionary(d.type)
    )  # the stream's dictionaries did grow
    sizes = [codec.encode(r)[2] for r in records]
    assert max(sizes[6:]) < 1.25 * min(sizes[:3]), sizes
    monkeypatch.setattr(compaction, "MIN_DICTIONARY_BYTES", 1 << 62)  # compaction off: the same entries grow
    uncompacted = [BundleEncoder(OTAP_LAYOUT).encode(r)[2] for r in records]
    assert uncompacted[-1] > 1.5 * sizes[-1] and uncompacted[-1] > 1.5 * uncompacted[0]


@pytest.mark.parametrize("crash", [False, True])
def test_compacted_entries_replay_to_the_same_values(tmp_path, crash):
    """Logged compacted, kept whole in the open segment: after a close, or a crash that replays the
    WAL (compacted entries into a fresh segment), every bundle comes back with its values and
    decodes to the telemetry the encoder was given."""
    encoder = Encoder(Signal.LOGS)
    sources = list(generate(Signal.LOGS, 10 * 2_000, batch_size=2_000, seed=5))
    records = [encoder.encode_records(b) for b in sources]
    logged = [BundleEncoder(OTAP_LAYOUT).check(r)[0] for r in records]
    assert sum(batch is not r.slots[slot] for r, c in zip(records, logged) for slot, _, batch, _ in c) >= 5  # compacted
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    store = QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT)
    for r in records:
        store.ingest(r)
    if crash:
        store._abandon()
    else:
        store.close()
    with QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT) as again:  # replays, finalizes on close
        assert again.stats()["replayed_entries"] == (len(records) if crash else 0)
    with QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT) as again:
        back = [b for _, _, b in again.bundles()]
    assert len(back) == len(records)
    assert all(same_values(a, b) for a, b in zip(back, records))
    decoder = Decoder()  # sorting renumbers ids and reorders rows: compare the telemetry, canonically ordered
    for b, source in zip(back, sources):
        assert canonical_order(to_otlp(decoder.decode_records(b))) == canonical_order(to_otlp(source))


def test_a_stream_that_goes_on_after_a_crash_mixes_compacted_and_whole_chunks(tmp_path):
    """The producer keeps its encoder across a crash and reopen: the open segment then holds the
    replayed (compacted) chunks and the new (cumulative) ones of the same stream, which unify
    through the general path; every bundle keeps its values."""
    encoder = Encoder(Signal.LOGS)
    records = [encoder.encode_records(b) for b in generate(Signal.LOGS, 12 * 2_000, batch_size=2_000, seed=9)]
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    store = QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT)
    for r in records[:8]:
        store.ingest(r)
    store._abandon()
    with QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT) as again:
        assert again.stats()["replayed_entries"] == 8
        for r in records[8:]:
            again.ingest(r)
    with QuiverStore.open(tmp_path, config, layout=OTAP_LAYOUT) as again:
        back = [b for _, _, b in again.bundles()]
        assert len(again.segments()) == 1  # replayed and new chunks were unified in one segment
    assert len(back) == len(records) and all(same_values(a, b) for a, b in zip(back, records))


def test_a_bundle_large_only_by_its_dictionaries_is_logged_not_written_direct(tmp_path):
    """The direct-write threshold counts what would be logged: a small batch carrying a huge
    stream dictionary goes through the WAL, compacted."""
    words = pa.array([f"word-{i:07d}" for i in range(200_000)])  # about 3 MB
    batch = pa.record_batch({"w": pa.DictionaryArray.from_arrays(pa.array(np.arange(0, 1_000, 10), pa.uint32()), words)})
    assert batch.nbytes > 2 << 20
    config = StoreConfig(wal=WalConfig(direct_bundle_size=1 << 20))
    with QuiverStore.open(tmp_path, config) as store:
        receipt = store.ingest(RecordBundle({0: batch}, ingestion_time_ns=7))
        assert receipt.segment_sequence is None and store.stats()["direct_bundles"] == 0
    with QuiverStore.open(tmp_path, config) as store:
        (_, _, back), = store.bundles()
    assert back.slots[0].to_pylist() == batch.to_pylist()
