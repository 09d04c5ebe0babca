"""Segment files: accumulate, write, read back (round trips, dictionaries, rotation, zero-copy)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig
from quiver_store.errors import QuiverError
from quiver_store.fs import DEFAULT_FS
from quiver_store.segment import OpenSegment, SegmentReader, write_segment
from quiver_store.segment.dictionary import index_capacity
from tests.test_segment_support import attrs, dict_array, logs_l1, logs_l2, plain, same_values

LOGS, LOG_ATTRS, SCOPE_ATTRS, RESOURCE_ATTRS = 30, 31, 2, 1


def write_read(tmp_path, bundles, config=None, **kw):
    seg = OpenSegment(config or SegmentConfig())
    for b in bundles:
        seg.append(b)
    path = str(tmp_path / "0000000000000001.qseg")
    info = write_segment(seg, path, 1, fs=DEFAULT_FS, metadata=kw.pop("metadata", {"signal": "logs"}), **kw)
    return seg, info, path


def seed_bundles():
    """The seed's three-bundle example: absent slots, then schema drift for Logs and LogAttrs."""
    return [
        RecordBundle({LOGS: logs_l1(37), LOG_ATTRS: attrs(37, ["a", "b"])}, ingestion_time_ns=10),
        RecordBundle(
            {
                LOGS: logs_l1(54, 37),
                LOG_ATTRS: attrs(54, ["a", "b", "c"]),
                SCOPE_ATTRS: attrs(2, ["s"]),
                RESOURCE_ATTRS: attrs(1, ["host"]),
            },
            ingestion_time_ns=20,
        ),
        RecordBundle(
            {LOGS: logs_l2(49), LOG_ATTRS: attrs(49, ["z"], variant=2), RESOURCE_ATTRS: attrs(1, ["host"])},
            ingestion_time_ns=15,
        ),
    ]


def test_seed_example_round_trip(tmp_path):
    bundles = seed_bundles()
    seg, info, path = write_read(tmp_path, bundles, event_time_columns={LOGS: "time_unix_nano"})
    # the seed's diagram: SL1, SA1 (91 rows each), SR1 (2 chunks), SS1, SL2, SA2, ids by first appearance
    assert [(s.slot, s.rows, s.chunks) for s in info.streams] == [
        (LOGS, 91, 2), (LOG_ATTRS, 91, 2), (RESOURCE_ATTRS, 2, 2), (SCOPE_ATTRS, 2, 1), (LOGS, 49, 1), (LOG_ATTRS, 49, 1)
    ]  # fmt: skip
    assert info.bundle_count == 3 and info.stream_count == 6
    assert (info.ingestion_time_min_ns, info.ingestion_time_max_ns) == (10, 20)
    logs = [s for s in info.streams if s.slot == LOGS]
    assert (logs[0].event_time_min_ns, logs[0].event_time_max_ns) == (1_000, 1_090)
    assert (logs[1].event_time_min_ns, logs[1].event_time_max_ns) == (5_000, 5_048)
    assert info.event_time_range_ns(LOGS) == (1_000, 5_048)
    assert logs[0].present_columns == ("id", "time_unix_nano", "severity_text")
    rep = info.representative_schemas[LOGS]
    assert rep.names == ["id", "time_unix_nano", "severity_text", "trace_id"]
    assert rep.field("severity_text").type == pa.string()  # plain beats dictionary
    with SegmentReader.open(path) as reader:
        assert reader.info == info
        got = list(reader.bundles())
        assert len(got) == 3
        for a, b in zip(bundles, got):
            assert same_values(a, b)
        reader.verify()
        # hydrate only what is asked for
        only = reader.bundle(1, slots=[SCOPE_ATTRS, 63])
        assert set(only.slots) == {SCOPE_ATTRS}
        assert only.fingerprint(SCOPE_ATTRS) == bundles[1].fingerprint(SCOPE_ATTRS)
    assert not os.path.exists(path + ".tmp")
    assert seg.bundle_count == 3  # the open segment is untouched


def test_explicit_fingerprints_and_metadata_round_trip(tmp_path):
    fp = bytes(range(32))
    bundles = [RecordBundle({5: logs_l1(3)}, {5: fp}, ingestion_time_ns=7)]
    _, _info, path = write_read(tmp_path, bundles, metadata={"signal": "traces", "ü": "✓"})
    with SegmentReader.open(path) as reader:
        assert reader.info.metadata == {"signal": "traces", "ü": "✓"}
        assert reader.bundle(0).fingerprint(5) == fp
        assert reader.info.seq == 1 and reader.info.size_bytes == os.path.getsize(path)


def test_schema_contradiction_raises_without_changing_state():
    seg = OpenSegment(SegmentConfig())
    fp = b"\x01" * 32
    seg.append(RecordBundle({LOGS: logs_l1(4)}, {LOGS: fp}, ingestion_time_ns=1))
    size, streams = seg.serialized_size, seg.stream_count
    bad = RecordBundle({LOG_ATTRS: attrs(2, ["k"]), LOGS: logs_l2(3)}, {LOGS: fp}, ingestion_time_ns=2)
    with pytest.raises(QuiverError, match="slot 30: batch schema contradicts stream 0"):
        seg.append(bad)
    assert (seg.bundle_count, seg.stream_count, seg.serialized_size) == (1, streams, size)
    assert seg.max_ingestion_time_ns == 1


def test_empty_segment_is_refused(tmp_path):
    with pytest.raises(QuiverError, match="nothing to write"):
        write_segment(OpenSegment(SegmentConfig()), str(tmp_path / "x.qseg"), 0, fs=DEFAULT_FS, metadata={})


def test_dictionaries_prefix_overlapping_disjoint(tmp_path):
    """Prefix (fast path, indices untouched), overlapping and disjoint dictionaries all read back."""
    prefix = [["a"], ["a", "b"], ["a", "b", "c"]]
    overlap = [["a", "b"], ["b", "c"], ["c", "a", "d"]]
    disjoint = [["p"], ["q", "r"], ["s"]]
    bundles = []
    for i in range(3):
        batch = pa.record_batch(
            {
                "prefix": dict_array(list(range(len(prefix[i]))), prefix[i]),
                "overlap": dict_array(list(range(len(overlap[i])))[:1] * len(prefix[i]), overlap[i]),
                "disjoint": dict_array([0] * len(prefix[i]), disjoint[i], pa.int8()),
            }
        )
        bundles.append(RecordBundle({LOGS: batch}, ingestion_time_ns=i))
    _, _info, path = write_read(tmp_path, bundles)
    with SegmentReader.open(path) as reader:
        (batch,) = reader.stream_batches(0)  # coalesced into one record batch
        assert batch.column("prefix").dictionary.to_pylist() == ["a", "b", "c"]
        assert batch.column("overlap").dictionary.to_pylist() == ["a", "b", "c", "d"]  # first appearance
        assert batch.column("disjoint").dictionary.to_pylist() == ["p", "q", "r", "s"]
        assert batch.column("disjoint").type.index_type == pa.int8()
        for a, b in zip(bundles, reader.bundles()):
            assert same_values(a, b)


def test_prefix_fast_path_keeps_indices_buffer(tmp_path):
    from quiver_store.segment.dictionary import unify_chunks

    seg = OpenSegment(SegmentConfig())
    chunks = [pa.record_batch({"k": dict_array([0, 1], ["a", "b"])}), pa.record_batch({"k": dict_array([2], ["a", "b", "c"])})]
    for c in chunks:
        seg.append(RecordBundle({1: c}, ingestion_time_ns=0))
    (stream,) = seg.streams
    _, out = unify_chunks(stream.schema, stream.chunks, stream.dictionaries)
    assert out[0].column(0).indices.buffers()[1].address == chunks[0].column(0).indices.buffers()[1].address
    assert out[0].column(0).dictionary.to_pylist() == ["a", "b", "c"]


def test_index_width_widens_when_needed(tmp_path):
    bundles = [
        RecordBundle({1: pa.record_batch({"k": dict_array(list(range(200)), [f"a{i}" for i in range(200)])})}, ingestion_time_ns=0),
        RecordBundle({1: pa.record_batch({"k": dict_array(list(range(200)), [f"b{i}" for i in range(200)])})}, ingestion_time_ns=1),
    ]
    _, info, path = write_read(tmp_path, bundles)
    assert info.stream_count == 1
    with SegmentReader.open(path) as reader:
        got = list(reader.bundles())
        assert got[1].slots[1].column("k").type.index_type == pa.uint16()
        assert len(got[1].slots[1].column("k").dictionary) == 400
        assert all(same_values(a, b) for a, b in zip(bundles, got))
        assert reader.info.representative_schemas[1].field("k").type.index_type == pa.uint16()


def test_dictionary_rotation_at_limit(tmp_path):
    config = SegmentConfig(max_dictionary_size=5)
    bundles = [
        RecordBundle({1: pa.record_batch({"k": dict_array([0, 1, 2], [f"v{i}{j}" for j in range(3)])})}, ingestion_time_ns=i)
        for i in range(5)
    ]
    seg, info, path = write_read(tmp_path, bundles, config=config)
    # every stream's unified dictionary stays within 5 entries: 3 + 3 > 5, so each bundle rotates
    assert seg.stream_count == 5 and info.stream_count == 5
    assert {s.fingerprint for s in info.streams} == {bundles[0].fingerprint(1)}
    with SegmentReader.open(path) as reader:
        for s in reader.info.streams:
            (batch,) = reader.stream_batches(s.stream_id)
            assert len(batch.column("k").dictionary) <= 5
        assert all(same_values(a, b) for a, b in zip(bundles, reader.bundles()))


def test_rotation_keeps_prefix_extensions_together():
    seg = OpenSegment(SegmentConfig(max_dictionary_size=4))
    for n in (2, 3, 4, 5, 6):
        seg.append(RecordBundle({1: pa.record_batch({"k": dict_array([0], [f"v{j}" for j in range(n)])})}, ingestion_time_ns=0))
    # 2, 3, 4 entries share a stream; 5 exceeds the limit and rotates; so does 6 (a chunk whose own
    # dictionary is over the limit still gets a stream: chunks are never split)
    assert [len(s.chunks) for s in seg.streams] == [3, 1, 1]


def test_nested_struct_and_list_columns(tmp_path):
    def batch(values, n):
        body = pa.StructArray.from_arrays(
            [pa.array([0] * n, pa.uint8()), dict_array([i % len(values) for i in range(n)], values)],
            names=["type", "str"],
            mask=pa.array([i == 1 for i in range(n)]),
        )
        tags = pa.ListArray.from_arrays(pa.array([0, *range(1, n + 1)], pa.int32()), dict_array([0] * n, values))
        nums = pa.array([[i, i + 1] if i % 2 else None for i in range(n)], pa.list_(pa.int32()))
        return pa.record_batch({"body": body, "tags": tags, "nums": nums})

    bundles = [
        RecordBundle({LOGS: batch(["x", "y"], 4)}, ingestion_time_ns=1),
        RecordBundle({LOGS: batch(["y", "z"], 3)}, ingestion_time_ns=2),
        RecordBundle({LOGS: batch(["x", "y", "w"], 5).slice(1, 3)}, ingestion_time_ns=3),
    ]
    _, _, path = write_read(tmp_path, bundles)
    with SegmentReader.open(path) as reader:
        got = list(reader.bundles())
        assert all(same_values(a, b) for a, b in zip(bundles, got))
        reader.verify()


def test_empty_batches_and_many_bundles(tmp_path):
    bundles = []
    for i in range(300):
        slots = {LOGS: logs_l1(i % 7, i)}  # i % 7 == 0 gives 0-row batches
        if i % 3 == 0:
            slots[LOG_ATTRS] = attrs(i % 5, ["k", "v", f"k{i % 11}"])
        bundles.append(RecordBundle(slots, ingestion_time_ns=1_000 + i))
    seg, info, path = write_read(tmp_path, bundles)
    with SegmentReader.open(path) as reader:
        assert reader.info.bundle_count == 300
        for i, (a, b) in enumerate(zip(bundles, reader.bundles())):
            assert same_values(a, b), i
        assert reader.bundle(0).slots[LOGS].num_rows == 0
    stream_bytes = sum(s.bytes for s in info.streams)
    assert abs(seg.serialized_size - stream_bytes) <= 0.15 * stream_bytes


def test_serialized_size_tracks_ipc_size_without_coalescing(tmp_path, monkeypatch):
    from quiver_store.segment import accumulator

    monkeypatch.setattr(accumulator, "COALESCE_ROWS", 0)
    bundles = [RecordBundle({LOGS: logs_l1(500, i), LOG_ATTRS: attrs(300, ["a", "b", f"c{i}"])}, ingestion_time_ns=i) for i in range(20)]
    seg, info, _ = write_read(tmp_path, bundles)
    stream_bytes = sum(s.bytes for s in info.streams)
    assert all(s.batches == 20 for s in info.streams)
    assert abs(seg.serialized_size - stream_bytes) <= 0.1 * stream_bytes


def test_zero_copy_read(tmp_path):
    big = [RecordBundle({LOGS: logs_l1(20_000, i * 20_000)}, ingestion_time_ns=i) for i in range(3)]
    _, _, path = write_read(tmp_path, big)
    with SegmentReader.open(path) as reader:
        reader.bundle(0)  # first touch reads the stream's footer and dictionaries
        before = pa.total_allocated_bytes()
        got = [reader.bundle(i) for i in range(3)]
        allocated = pa.total_allocated_bytes() - before
        assert allocated < 1024, allocated
        assert same_values(big[2], got[2])


def test_batches_outlive_close(tmp_path):
    _, _, path = write_read(tmp_path, [RecordBundle({LOGS: logs_l1(10)}, ingestion_time_ns=0)])
    reader = SegmentReader.open(path)
    batch = reader.bundle(0).slots[LOGS]
    reader.close()
    assert plain(batch).column("severity_text").to_pylist()[:3] == ["INFO", "WARN", "ERROR"]
    with pytest.raises(QuiverError, match="reader is closed"):
        reader.bundle(0)


def test_write_failure_keeps_segment_and_removes_temp(tmp_path):
    from quiver_store.fs import FileSystem

    class FailingFsync(FileSystem):
        def fsync(self, fd):
            raise OSError(5, "injected EIO")

    seg = OpenSegment(SegmentConfig())
    seg.append(RecordBundle({LOGS: logs_l1(5)}, ingestion_time_ns=0))
    path = str(tmp_path / "a.qseg")
    with pytest.raises(OSError, match="injected EIO"):
        write_segment(seg, path, 3, fs=FailingFsync(), metadata={})
    assert os.listdir(tmp_path) == []
    info = write_segment(seg, path, 3, fs=DEFAULT_FS, metadata={})  # retry with the same data
    assert info.bundle_count == 1


def test_an_ipc_stream_abandoned_by_a_write_error_never_writes_later(tmp_path):
    """The segment writer gathers small IPC writes in a buffer; when a write fails, what the buffer
    still holds must not reach the file later (closing or garbage-collecting the stream), since the
    caller has rewound or removed the file and its descriptor may be reused."""
    import gc

    from quiver_store.segment.writer import _Out, _write_ipc_file

    class Recording:
        def __init__(self) -> None:
            self.writes: list[int] = []

        def write(self, fd, data):
            self.writes.append(len(data))
            if len(self.writes) == 3:
                raise OSError(5, "injected EIO")

    fs = Recording()
    batch = logs_l1(60_000)  # several buffer-fulls of IPC bytes
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        with pytest.raises(OSError, match="injected EIO"):
            _write_ipc_file(_Out(fs, fd), batch.schema, [batch, batch], None)
        after_error = list(fs.writes)
        gc.collect()
        assert fs.writes == after_error == after_error[:3]
    finally:
        os.close(fd)


cols = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(cols, st.integers(0, 6), st.lists(st.text(max_size=3), min_size=1, max_size=5)), min_size=1, max_size=12),
    st.sampled_from([None, "lz4", "zstd"]),
)
def test_random_bundles_round_trip(tmp_path_factory, spec, compression):
    """Random column subsets (schema drift), row counts and dictionaries round-trip in order, with
    and without segment compression."""
    bundles = []
    for i, (names, rows, words) in enumerate(spec):
        data = {}
        for name in names:
            if name == "d":
                data[name] = dict_array([j % len(words) for j in range(rows)], words)
            else:
                data[name] = pa.array([j * i for j in range(rows)], pa.int64())
        bundles.append(RecordBundle({LOGS: pa.record_batch(data), 7: logs_l1(rows)}, ingestion_time_ns=i))
    tmp = tmp_path_factory.mktemp("seg")
    _, _, path = write_read(tmp, bundles, compression=SegmentConfig(compression=compression).codec())
    with SegmentReader.open(path) as reader:
        got = list(reader.bundles())
    assert len(got) == len(bundles)
    assert all(same_values(a, b) for a, b in zip(bundles, got))


def test_overlapping_dictionaries_do_not_rotate_early():
    """The per-append size is an upper bound; it is made exact before any rotation decision."""
    seg = OpenSegment(SegmentConfig(max_dictionary_size=4))
    orders = [["a", "b", "c"], ["c", "a", "b"], ["b", "c"], ["c", "b", "a"]] * 10
    for i, values in enumerate(orders):
        seg.append(RecordBundle({1: pa.record_batch({"k": dict_array([0], values)})}, ingestion_time_ns=i))
    assert seg.stream_count == 1
    seg.append(RecordBundle({1: pa.record_batch({"k": dict_array([0], ["d", "e"])})}, ingestion_time_ns=99))
    assert [len(s.chunks) for s in seg.streams] == [40, 1]  # a, b, c, d, e would be 5 > 4


def test_unification_failure_falls_back_to_decoded_dictionaries(tmp_path, monkeypatch):
    from quiver_store.segment import writer

    def broken(*args):
        raise pa.ArrowNotImplementedError("injected: cannot unify")

    monkeypatch.setattr(writer, "unify_chunks", broken)
    body = pa.StructArray.from_arrays(
        [pa.array([1, 2], pa.uint8()), dict_array([0, 1], ["x", "y"])],
        fields=[pa.field("type", pa.uint8(), False), pa.field("str", pa.dictionary(pa.uint8(), pa.string()))],
        mask=pa.array([False, True]),
    )
    bundles = [RecordBundle({LOGS: pa.record_batch({"body": body, "k": dict_array([1, 0], ["a", "b"])})}, ingestion_time_ns=i) for i in range(2)]
    _, _info, path = write_read(tmp_path, bundles)
    with SegmentReader.open(path) as reader:
        got = list(reader.bundles())
        assert got[0].slots[LOGS].schema.field("k").type == pa.string()
        assert all(same_values(a, b) for a, b in zip(bundles, got))
        reader.verify()


def test_ipc_failure_midway_rewinds_the_stream_before_the_fallback(tmp_path, monkeypatch):
    """A stream whose IPC writing fails after some bytes reached the file is cut back to its
    start before the decoded fallback is written: the segment reads back whole and verifies."""
    from quiver_store.segment import writer

    real, failed = writer._write_ipc_file, []

    def fails_once_midway(out, schema, batches, options):
        if not failed:
            failed.append(out.offset)
            out.write(b"garbage that must not survive" * 100)
            raise pa.ArrowInvalid("injected: failed after writing")
        return real(out, schema, batches, options)

    monkeypatch.setattr(writer, "_write_ipc_file", fails_once_midway)
    bundles = [RecordBundle({LOGS: logs_l1(50, i * 50), LOG_ATTRS: attrs(30, ["a", "b"])}, ingestion_time_ns=i) for i in range(3)]
    _, info, path = write_read(tmp_path, bundles)
    assert failed and info.streams[0].offset == failed[0]
    with SegmentReader.open(path) as reader:
        assert all(same_values(a, b) for a, b in zip(bundles, reader.bundles()))
        reader.verify()


def test_large_chunks_are_record_batches_of_their_own(tmp_path):
    """Big chunks are written as they came (no concatenation copy); small ones are coalesced."""
    from quiver_store.segment.accumulator import ALONE_BYTES

    big = [RecordBundle({LOGS: logs_l1(30_000, i * 10_000)}, ingestion_time_ns=i) for i in range(3)]
    assert pa.ipc.get_record_batch_size(big[0].slots[LOGS]) >= ALONE_BYTES
    small = [RecordBundle({LOGS: logs_l1(20, i * 20)}, ingestion_time_ns=10 + i) for i in range(5)]
    _, info, path = write_read(tmp_path, [*big, *small])
    assert [s.batches for s in info.streams] == [4]  # three alone, the five small ones together
    with SegmentReader.open(path) as reader:
        assert all(same_values(a, b) for a, b in zip([*big, *small], reader.bundles()))


def test_write_protocol_and_determinism(tmp_path):
    """tmp file written and fsynced before the rename, directory fsynced after; the OpenSegment is
    not changed, and a second write gives the same bytes up to the footer (created_at differs)."""
    from quiver_store.fs import FileSystem

    calls = []

    class Recording(FileSystem):
        def open(self, path, flags, mode=0o644):
            calls.append(("open", os.path.basename(path)))
            return super().open(path, flags, mode)

        def fsync(self, fd):
            calls.append(("fsync",))
            super().fsync(fd)

        def rename(self, src, dst):
            calls.append(("rename", os.path.basename(src), os.path.basename(dst)))
            super().rename(src, dst)

        def fsync_dir(self, path):
            calls.append(("fsync_dir", path))
            super().fsync_dir(path)

    seg = OpenSegment(SegmentConfig())
    for b in seed_bundles():
        seg.append(b)
    before = (seg.bundle_count, seg.stream_count, seg.serialized_size, [list(s.chunks) for s in seg.streams])
    a, b = str(tmp_path / "a.qseg"), str(tmp_path / "b.qseg")
    write_segment(seg, a, 5, fs=Recording(), metadata={"signal": "logs"})
    assert calls == [("open", "a.qseg.tmp"), ("fsync",), ("rename", "a.qseg.tmp", "a.qseg"), ("fsync_dir", str(tmp_path))]
    after = (seg.bundle_count, seg.stream_count, seg.serialized_size, [list(s.chunks) for s in seg.streams])
    assert before[:3] == after[:3]
    assert all(x is y for c1, c2 in zip(before[3], after[3]) for x, y in zip(c1, c2))
    write_segment(seg, b, 5, fs=DEFAULT_FS, metadata={"signal": "logs"})
    da, db = Path(a).read_bytes(), Path(b).read_bytes()
    assert len(da) == len(db)
    footer_at = len(da) - 24 - 112
    assert da[:footer_at] == db[:footer_at]


SHAPES = ("top", "struct", "list", "list_of_struct", "map_key", "map_item")


def nested(shape: str, dictionary: pa.DictionaryArray, rng) -> pa.Array:
    """`dictionary` (one value per row) placed at a nesting position of `shape`."""
    n = len(dictionary)
    if shape == "top":
        return dictionary
    if shape == "struct":
        return pa.StructArray.from_arrays([dictionary, pa.array(range(n), pa.int32())], names=["d", "i"])
    cuts = sorted(rng.sample(range(n + 1), rng.randint(0, min(n, 4))))
    offsets = pa.array([0, *cuts, n], pa.int32())  # lists of varying length, empty ones included
    if shape == "list":
        return pa.ListArray.from_arrays(offsets, dictionary)
    if shape == "list_of_struct":
        return pa.ListArray.from_arrays(offsets, pa.StructArray.from_arrays([dictionary], names=["d"]))
    numbers = pa.array(range(n), pa.int64())
    if shape == "map_key":
        return pa.MapArray.from_arrays(offsets, dictionary.fill_null(dictionary.dictionary[0]) if n else dictionary, numbers)
    return pa.MapArray.from_arrays(offsets, pa.array([f"k{i}" for i in range(n)]), dictionary)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.sampled_from(SHAPES),
    index_type=st.sampled_from([pa.int8(), pa.uint8(), pa.int16()]),
    chunks=st.lists(
        st.tuples(st.sampled_from(["extend", "overlap", "disjoint", "duplicate"]), st.integers(1, 200), st.integers(0, 40)),
        min_size=1, max_size=6,
    ),
    seed=st.integers(0, 2**16),
)
def test_nested_dictionaries_round_trip_through_unification(tmp_path_factory, shape, index_type, chunks, seed):
    """Dictionary columns at every nesting position a store can meet (top level, in a struct, a
    list, a list of structs, a map's keys or items), one stream of chunks whose dictionaries extend
    the last one, overlap it, are disjoint from it or hold a value twice, with nulls: a finalized
    segment gives back every chunk's values, and unions past the index type's range (127, 255)
    widen its indices."""
    import random

    rng = random.Random(seed)
    index_range = index_capacity(index_type)
    bundles, words = [], []
    for i, (mode, size, rows) in enumerate(chunks):
        size = min(size, index_range)
        if mode == "extend":
            words = words + [f"w{len(words) + j}" for j in range(max(0, size - len(words)))]
        elif mode == "overlap":
            words = words[len(words) // 2:] + [f"o{i}-{j}" for j in range(max(1, size - len(words) // 2))]
        elif mode == "disjoint":
            words = [f"d{i}-{j}" for j in range(size)]
        else:
            words = [f"w{j}" for j in range(max(1, size - 1))] + ["w0"]
        words = words[:index_range]
        indices = [None if rng.random() < 0.1 else rng.randrange(len(words)) for _ in range(rows)]
        column = nested(shape, dict_array(indices, words, index_type), rng)
        bundles.append(RecordBundle({LOGS: pa.record_batch({"c": column})}, ingestion_time_ns=i))
    _, _, path = write_read(tmp_path_factory.mktemp("seg"), bundles)
    with SegmentReader.open(path) as reader:
        got = list(reader.bundles())
        reader.verify()
    assert len(got) == len(bundles)
    assert all(same_values(a, b) for a, b in zip(bundles, got))
