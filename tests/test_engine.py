"""QuiverStore: round trips through segments, finalize triggers, sequence floor, lock, hooks."""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quiver_store
from quiver_store import (
    PROGRESS_SLOT,
    ConfigError,
    Layout,
    QuiverError,
    QuiverStore,
    RecordBundle,
    SegmentConfig,
    StoreClosedError,
    StoreConfig,
    open_cores,
)
from quiver_store.engine import FLOOR_RESERVE
from quiver_store.fs import FileSystem

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
LOGS, LOG_ATTRS, SCOPE_ATTRS, RESOURCE_ATTRS = 30, 31, 2, 1


def seed_example() -> list[RecordBundle]:
    """The seed's three bundles: absent slots, a full bundle, then schema drift on two slots."""

    def logs(n: int, extra: bool) -> pa.RecordBatch:
        cols = {"id": pa.array(np.arange(n, dtype=np.uint16)), "body": pa.array([f"log {i}" for i in range(n)])}
        if extra:
            cols["severity"] = pa.array(np.full(n, 9, dtype=np.int32))
        return pa.record_batch(cols)

    def attrs(n: int, dict_keys: bool) -> pa.RecordBatch:
        keys = pa.array([f"k{i % 3}" for i in range(n)])
        return pa.record_batch({"parent_id": pa.array(np.arange(n, dtype=np.uint16)), "key": keys.dictionary_encode() if dict_keys else keys})

    scope = pa.record_batch({"id": pa.array([0, 1], pa.uint16()), "name": ["a", "b"]})
    resource = pa.record_batch({"id": pa.array([0], pa.uint16()), "service": ["svc"]})
    return [
        RecordBundle({LOGS: logs(37, False), LOG_ATTRS: attrs(37, False)}),
        RecordBundle({LOGS: logs(54, False), LOG_ATTRS: attrs(54, False), SCOPE_ATTRS: scope, RESOURCE_ATTRS: resource}),
        RecordBundle({LOGS: logs(49, True), LOG_ATTRS: attrs(49, True), RESOURCE_ATTRS: resource}),
    ]


def assert_same(got: list[tuple[int, int, RecordBundle]], want: list[RecordBundle]) -> None:
    assert len(got) == len(want)
    for (_, _, g), w in zip(got, want):
        assert set(g.slots) == set(w.slots)
        for slot in w.slots:
            gb, wb = g.slots[slot], w.slots[slot]
            assert gb.schema.names == wb.schema.names
            for name in wb.schema.names:  # dictionary columns may come back re-encoded; values are equal
                gc, wc = gb.column(name), wb.column(name)
                if pa.types.is_dictionary(gc.type):
                    gc = gc.dictionary_decode()
                if pa.types.is_dictionary(wc.type):
                    wc = wc.dictionary_decode()
                assert gc.equals(wc), (slot, name)
            assert g.fingerprint(slot) == w.fingerprint(slot)
        assert g.ingestion_time_ns == w.ingestion_time_ns


def simple(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * 10, pa.int64())})})


def values(store: QuiverStore) -> list[int]:
    return [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]


# -- round trips ----------------------------------------------------------------------------------
def test_seed_example_round_trips_after_close(tmp_path):
    bundles = seed_example()
    with QuiverStore.open(tmp_path, QUIET) as store:
        for b in bundles:
            store.ingest(b)
    with QuiverStore.open(tmp_path, QUIET) as store:
        got = list(store.bundles())
        assert [(s, i) for s, i, _ in got] == [(0, 0), (0, 1), (0, 2)]
        assert_same(got, bundles)
        [info] = store.segments()
        assert info.bundle_count == 3 and info.stream_count == 6


def test_seed_example_round_trips_after_a_crash(tmp_path):
    bundles = seed_example()
    store = QuiverStore.open(tmp_path, QUIET)
    store.ingest(bundles[0])
    store.flush()
    for b in bundles[1:]:
        store.ingest(b)
    store._abandon()  # no close: the last two bundles live only in the WAL
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.stats()["replayed_entries"] == 2
    with QuiverStore.open(tmp_path, QUIET) as store:
        got = list(store.bundles())
        # the crash skipped the rest of the segment numbers reserved before segment 0 was written
        assert [(s, i) for s, i, _ in got] == [(0, 0), (FLOOR_RESERVE, 0), (FLOOR_RESERVE, 1)]
        assert_same(got, bundles)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.dictionaries(st.integers(0, PROGRESS_SLOT - 1), st.tuples(st.integers(0, 30), st.booleans()), min_size=1, max_size=4),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 12),
)
def test_random_bundles_round_trip_in_order(tmp_path_factory, shapes, crash_after):
    path = tmp_path_factory.mktemp("store")
    bundles = []
    for k, shape in enumerate(shapes):
        slots = {}
        for slot, (rows, drift) in shape.items():
            cols = {"k": pa.array(np.full(rows, k, dtype=np.int64))}
            if drift:
                cols["extra"] = pa.array([f"x{j}" for j in range(rows)])
            slots[slot] = pa.record_batch(cols)
        bundles.append(RecordBundle(slots))
    cfg = StoreConfig(segment=SegmentConfig(target_size=2048, max_open_duration=3600.0))
    store = QuiverStore.open(path, cfg)
    for b in bundles:
        store.ingest(b)
    if crash_after % 2:
        store._abandon()
        QuiverStore.open(path, cfg).close()  # recovery replays the WAL, close finalizes it
    else:
        store.close()
    with QuiverStore.open(path, cfg) as store:
        got = list(store.bundles())
    assert_same(got, bundles)
    seqs = [(s, i) for s, i, _ in got]
    assert seqs == sorted(seqs)


# -- finalize triggers ------------------------------------------------------------------------------
def reasons(store: QuiverStore) -> list[str]:
    return [s.metadata["quiver.finalize_reason"] for s in store.segments()]


def test_finalize_on_target_size(tmp_path):
    cfg = StoreConfig(segment=SegmentConfig(target_size=1024, max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, cfg) as store:
        for i in range(40):
            store.ingest(simple(i))
        store._wait_applied()
        store.finalize_now("test")  # also waits for every sealed segment ahead of it
        assert reasons(store).count("target_size") >= 3
        assert values(store) == list(range(40))


def test_finalize_on_stream_count(tmp_path):
    cfg = StoreConfig(segment=SegmentConfig(max_stream_count=2, max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, cfg) as store:
        for slot in range(6):
            store.ingest(RecordBundle({slot: pa.record_batch({"v": [slot]})}))
        store.flush()
        assert [s.stream_count for s in store.segments()] == [2, 2, 2]
        assert reasons(store) == ["max_stream_count"] * 3


def test_finalize_by_timer_without_new_data(tmp_path):
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=0.2))
    with QuiverStore.open(tmp_path, cfg) as store:
        store.ingest(simple(1))
        deadline = time.monotonic() + 20
        while not store.stats()["segments"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reasons(store) == ["max_open_duration"]
        assert values(store) == [1]


def test_finalize_on_close_flush_and_request(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.finalize_now("pressure") is None  # nothing open
        store.ingest(simple(1))
        info = store.finalize_now("disk pressure")
        assert info is not None and info.bundle_count == 1 and info.metadata["quiver.finalize_reason"] == "disk pressure"
        store.ingest(simple(2))
        store.flush()
        store.ingest(simple(3))
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert reasons(store) == ["disk pressure", "flush", "close"]
        assert values(store) == [1, 2, 3]


# -- sequence numbers ----------------------------------------------------------------------------------
def test_segment_sequence_never_reused_after_deleting_everything(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        for i in range(3):
            store.ingest(simple(i))
            store.flush()
        assert [s.seq for s in store.segments()] == [0, 1, 2]
        freed = sum(store.delete_segment(s, "test") for s in (0, 1, 2))
        assert freed > 0 and store.segments() == []
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(simple(9))
        store.flush()
        assert [s.seq for s in store.segments()] == [3]


def test_sequence_floor_file_beats_missing_segment_files(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(simple(0))
        store.flush()
    os.unlink(tmp_path / "segments" / f"{0:016d}.qseg")
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(simple(1))
        store.flush()
        assert [s.seq for s in store.segments()] == [1]


# -- single writer, cores, validation --------------------------------------------------------------------
def test_single_writer_lock(tmp_path):
    with QuiverStore.open(tmp_path, QUIET), pytest.raises(QuiverError, match="already open by another writer"):
        QuiverStore.open(tmp_path, QUIET)
    with QuiverStore.open(tmp_path, QUIET):
        pass


def test_deleting_the_lock_file_does_not_let_a_second_writer_in(tmp_path):
    """An operator 'cleaning a stale lock' under a running store: a second process must still be
    refused (two writers on one WAL lost the second one's acknowledged bundles)."""
    import subprocess
    import sys

    second = "from quiver_store import QuiverStore; QuiverStore.open(__import__('sys').argv[1])"
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(simple(0))
        os.remove(tmp_path / "LOCK")
        run = subprocess.run([sys.executable, "-c", second, str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 1
        assert run.stderr.strip().splitlines()[-1] == (
            f"quiver_store.errors.QuiverError: store {tmp_path} is already open by another writer (lock file "
            f"{tmp_path}/LOCK); a store has a single writer: close the other QuiverStore or process first"
        )
        with pytest.raises(QuiverError, match="already open by another writer"):  # and in this process
            QuiverStore.open(tmp_path, QUIET)
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert len(list(store.bundles())) == 1


def test_a_lock_held_for_a_moment_does_not_pass_for_a_second_writer(tmp_path):
    """`quiver` commands probe the locks with a shared flock for microseconds; an open in that
    instant waits it out (up to engine.LOCK_PATIENCE) instead of reporting another writer."""
    import fcntl
    import threading

    with QuiverStore.open(tmp_path, QUIET):
        pass
    for path in (tmp_path, tmp_path / "LOCK"):
        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # the probe
        timer = threading.Timer(0.05, lambda fd=fd: os.close(fd))
        timer.start()
        with QuiverStore.open(tmp_path, QUIET) as store:
            store.ingest(simple(0))
        timer.join()


def test_open_cores_gives_independent_stores(tmp_path):
    stores = open_cores(str(tmp_path), 3, QUIET)
    try:
        for n, store in enumerate(stores):
            store.ingest(simple(n))
        assert stores[0].config.cores == 3
    finally:
        for s in stores:
            s.close()
    assert sorted(os.listdir(tmp_path)) == ["core_0", "core_1", "core_2"]
    for n in range(3):
        with QuiverStore.open(tmp_path / f"core_{n}", QUIET) as store:
            assert values(store) == [n]


def test_contradicting_schema_is_refused_before_the_wal(tmp_path):
    fp = b"\1" * 32
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(RecordBundle({0: pa.record_batch({"a": [1]})}, fingerprints={0: fp}))
        before = store.stats()["entries"]
        with pytest.raises(QuiverError, match="different schema needs a different fingerprint"):
            store.ingest(RecordBundle({0: pa.record_batch({"b": ["x"]})}, fingerprints={0: fp}))
        assert store.stats()["entries"] == before


def test_bad_input_is_refused_with_clear_errors(tmp_path):
    layout = Layout("two", slots={0: "a", 1: "b"})
    with QuiverStore.open(tmp_path, QUIET, layout=layout) as store:
        with pytest.raises(ConfigError, match="slot 5 is not defined by layout 'two'"):
            store.ingest(RecordBundle({5: pa.record_batch({"a": [1]})}))
        with pytest.raises(QuiverError, match=r"expects a quiver_store\.RecordBundle"):
            store.ingest({0: pa.record_batch({"a": [1]})})  # type: ignore[arg-type]
        with pytest.raises(QuiverError, match="without any slot"):
            store.ingest(RecordBundle({}))
    with pytest.raises(StoreClosedError):
        store.ingest(simple(1))
    with pytest.raises(ConfigError, match="out of range"):
        Layout("bad", slots={64: "x"})


def test_layout_hash_covers_the_contract_only():
    a = Layout("otap", slots={30: "logs"}, event_time_columns={30: ("time_unix_nano",)}, root_slots={30: "logs"})
    same = Layout("otap", slots=((30, "logs"),), event_time_columns={30: ["time_unix_nano"]}, root_slots={30: "logs"})
    assert a.cfg_hash == same.cfg_hash and len(a.cfg_hash) == 16
    assert Layout("otap", slots={30: "logs"}).cfg_hash != a.cfg_hash
    assert quiver_store.DEFAULT_LAYOUT.is_generic and quiver_store.DEFAULT_LAYOUT.payload_type_id(7) == 7


# -- hooks -----------------------------------------------------------------------------------------------
def test_hooks_for_retention_and_subscribers(tmp_path):
    seen = []
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.add_finalize_listener(lambda info: seen.append((info.seq, os.path.exists(info.path))))
        store.ingest(simple(1))
        store._wait_applied()
        assert store.open_segment_bytes() > 0
        usage = store.disk_usage()
        info = store.finalize_now("test")
        assert seen == [(0, True)]
        assert store.open_segment_bytes() == 0
        assert store.disk_usage() >= info.size_bytes
        assert usage > 0
        assert store.delete_segment(0, "acked by everyone") == info.size_bytes
        with pytest.raises(QuiverError, match="no segment 0"):
            store.delete_segment(0, "twice")


class CountingFS(FileSystem):
    def __init__(self) -> None:
        self.segment_opens = 0

    def open(self, path, flags, mode=0o644):
        if str(path).endswith(".qseg"):
            self.segment_opens += 1
        return super().open(path, flags, mode)


def test_segment_metadata_is_read_at_most_once_per_open(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        for i in range(5):
            store.ingest(simple(i))
            store.flush()
    fs = CountingFS()
    with QuiverStore.open(tmp_path, QUIET, fs=fs) as store:
        opened = fs.segment_opens
        assert opened <= 5  # WAL floor: newest only; the subscriber hub reads the rest once
        assert len(store.segments()) == 5 and len(store.segments()) == 5
        assert fs.segment_opens == max(opened, 5)


def test_crash_during_concurrent_ingest_keeps_every_acknowledged_bundle(tmp_path):
    import threading

    cfg = StoreConfig(segment=SegmentConfig(target_size=8192, max_open_duration=3600.0))
    store = QuiverStore.open(tmp_path, cfg)
    acked: list[int] = []
    lock = threading.Lock()

    def produce(k: int) -> None:
        for i in range(30):
            try:
                store.ingest(simple(k * 1000 + i))
            except QuiverError:
                return  # the store was abandoned under us
            with lock:
                acked.append(k * 1000 + i)

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    while len(acked) < 60:
        time.sleep(0.001)
    store._abandon()
    for t in threads:
        t.join()
    QuiverStore.open(tmp_path, cfg).close()
    with QuiverStore.open(tmp_path, cfg) as again:
        got = values(again)
    assert set(acked) <= set(got) and len(got) == len(set(got))


def test_a_bundle_the_open_segment_rejects_stops_the_store_and_loses_nothing(tmp_path, monkeypatch):
    """Fail-stop: an acknowledged bundle the accumulator cannot take is never truncated away."""
    from quiver_store.segment.accumulator import OpenSegment

    real_append = OpenSegment.append

    def flaky(self, bundle, *hints):
        if bundle.slots[0].column(0)[0].as_py() == 3:
            raise RuntimeError("injected accumulator failure")
        return real_append(self, bundle, *hints)

    monkeypatch.setattr(OpenSegment, "append", flaky)
    store = QuiverStore.open(tmp_path, QUIET)
    for i in range(4):
        store.ingest(simple(i))  # bundle 3 is acknowledged: it is in the WAL
    deadline = time.monotonic() + 5
    while store.stats()["halted"] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "injected accumulator failure" in store.stats()["halted"]
    with pytest.raises(QuiverError, match=r"stopped accepting bundles.*kept in the WAL"):
        store.ingest(simple(4))
    store.flush()  # segments before the failure finalize; the WAL keeps bundle 3
    store.close()
    monkeypatch.setattr(OpenSegment, "append", real_append)
    with QuiverStore.open(tmp_path, QUIET) as again:
        assert again.stats()["halted"] is None
        again.flush()
        assert values(again) == [0, 1, 2, 3]


class SegmentDiskDead(FileSystem):
    """The WAL keeps working; every write under segments/ fails (a full or broken segment volume)."""

    def open(self, path, flags, mode=0o644):
        if "segments" in path and flags & os.O_CREAT and "next.seq" not in path:
            raise OSError(5, "injected: segment volume failed")
        return super().open(path, flags, mode)


def test_close_reports_a_finalizer_that_keeps_failing_instead_of_hanging(tmp_path):
    """With finalize failing on every retry, sealed segments pile up until the applier waits for
    room; close() must still return (raising), and every bundle comes back after a reopen."""
    config = StoreConfig(segment=SegmentConfig(target_size=1, max_open_duration=3600.0))
    store = QuiverStore.open(tmp_path, config, fs=SegmentDiskDead())
    for i in range(6):
        store.ingest(simple(i))
    started = time.monotonic()
    with pytest.raises(QuiverError, match=r"closed without finalizing.*: writing a segment file failed \(\[Errno 5\] injected: segment volume failed\)"):
        store.close()
    assert time.monotonic() - started < 10
    with QuiverStore.open(tmp_path, config) as store:
        pass
    with QuiverStore.open(tmp_path, config) as store:
        assert values(store) == list(range(6))


# -- store paths that are not a store directory; malformed bundles ---------------------------------
def tree(root) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


def test_open_refuses_a_regular_file_and_paths_inside_a_store(tmp_path):
    from quiver_store.errors import NotAStoreError

    (tmp_path / "logs.pb").write_bytes(b"\x0a\x00")
    with QuiverStore.open(tmp_path / "store", QUIET) as store:
        store.ingest(simple(1))
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "segments").write_text("x")
    before = tree(tmp_path)
    cases = [
        (tmp_path / "logs.pb", f"store path {tmp_path / 'logs.pb'} is a file, not a store directory"),
        (tmp_path / "logs.pb" / "s", f"store path {tmp_path / 'logs.pb' / 's'} lies below a file"),
        (tmp_path / "odd", f"{tmp_path / 'odd' / 'segments'} is a file where a store keeps its segments/ directory"),
        (tmp_path / "store" / "segments", f"is the segments/ directory of the store {tmp_path / 'store'}, not a store"),
        (tmp_path / "store" / "wal", f"is the wal/ directory of the store {tmp_path / 'store'}, not a store"),
    ]
    for path, message in cases:
        with pytest.raises(NotAStoreError, match=message.replace(".", r"\.")) as info:
            QuiverStore.open(path, QUIET)
        assert isinstance(info.value, ConfigError) and isinstance(info.value, QuiverError)
    assert tree(tmp_path) == before  # nothing created, nothing changed
    with QuiverStore.open(tmp_path / "store", QUIET) as store:
        assert values(store) == [1]


def test_open_creates_a_store_only_in_a_new_or_empty_directory(tmp_path):
    from quiver_store.errors import NotAStoreError

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    for name in ("README.md", "setup.cfg", "notes.txt"):
        (project / name).write_text(name)
    before = tree(tmp_path)
    with pytest.raises(NotAStoreError) as info:
        QuiverStore.open(project, QUIET)
    assert str(info.value) == (
        f"{project} is not a Quiver store: it has no wal/ or segments/ directory, and it holds other entries "
        f"(README.md, notes.txt, setup.cfg and 1 more): QuiverStore.open creates a store only in a new or "
        f"empty directory; pass one, such as {project / 'quiver'}"
    )
    assert tree(tmp_path) == before  # nothing created in the foreign directory

    (tmp_path / "empty").mkdir()
    (tmp_path / "volume" / "lost+found").mkdir(parents=True)  # the root of a disk mounted for the store
    for path in (tmp_path / "missing", tmp_path / "empty", tmp_path / "volume"):
        with QuiverStore.open(path, QUIET) as store:
            store.ingest(simple(3))
        (path / "operator-notes.txt").write_text("a file put into a store later")  # a store stays a store
        with QuiverStore.open(path, QUIET) as store:
            assert values(store) == [3]


def test_malformed_record_bundles_raise_bundle_error(tmp_path):
    from quiver_store.errors import BundleError

    b = pa.record_batch({"i": pa.array([1], pa.int64())})
    cases = [
        (lambda: RecordBundle({64: b}), r"slot id 64 is out of range: slot ids are integers in \[0, 64\)"),
        (lambda: RecordBundle({-1: b}), r"slot id -1 is out of range"),
        (lambda: RecordBundle({True: b}), r"slot id True is out of range"),
        (lambda: RecordBundle({"logs": b}), r"slot id 'logs' is out of range"),
        (lambda: RecordBundle({0: b.to_pydict()}), r"slot 0: expected a pyarrow\.RecordBatch, got dict"),
        (lambda: RecordBundle({0: pa.Table.from_batches([b])}), r"slot 0: expected a pyarrow\.RecordBatch, got Table"),
        (lambda: RecordBundle([b]), r"slots must be a mapping of slot id -> pyarrow\.RecordBatch, got list"),
        (lambda: RecordBundle({0: b}, {1: bytes(32)}), r"fingerprint given for slot 1, which has no batch"),
        (lambda: RecordBundle({0: b}, {0: b"short"}), r"slot 0: schema fingerprint must be 32 bytes, got 5 bytes"),
        (lambda: RecordBundle({0: b}, {0: 7}), r"slot 0: schema fingerprint must be 32 bytes, got int"),
        (lambda: RecordBundle({0: b}, ingestion_time_ns=1.5), r"ingestion_time_ns must be an int64.*got 1\.5"),
        (lambda: RecordBundle({0: b}, ingestion_time_ns=1 << 63), r"ingestion_time_ns must be an int64"),
    ]
    for make, message in cases:
        with pytest.raises(BundleError, match=message) as info:
            make()
        assert isinstance(info.value, QuiverError) and isinstance(info.value, ValueError)  # callers catching ValueError
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(simple(0))
        grown = simple(1)
        grown.slots[64] = b  # type: ignore[index]  # changed after it was built
        with pytest.raises(BundleError, match=r"slot 64 has no fingerprint: slots were added after the bundle was built"):
            store.ingest(grown)
        store.ingest(simple(2))
        store.flush()
        assert values(store) == [0, 2]


def test_core_numbers_lists_per_core_store_directories_in_numeric_order(tmp_path):
    from quiver_store import core_numbers

    for name in ("core_10", "core_2", "core_x", "other"):
        (tmp_path / name).mkdir()
    (tmp_path / "core_3").write_text("a file, not a store")
    assert core_numbers(tmp_path) == [2, 10]
    assert core_numbers(tmp_path / "missing") == []
