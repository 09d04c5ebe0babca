"""Retention on the real store: steady state, headroom, size cap (backpressure / drop_oldest),
max_age, and regressions for the reference's bugs (#4024 seq reuse, #4137 resurrected deletions)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass

import pyarrow as pa
import pytest

from quiver_store.bundle import RecordBundle
from quiver_store.config import RetentionConfig, SegmentConfig, StoreConfig, SubscriberConfig, WalConfig
from quiver_store.engine import QuiverStore
from quiver_store.errors import StoreFullError
from quiver_store.fs import FileSystem
from quiver_store.retention import expired_segments, steady_state_victims
from quiver_store.subscriber.registry import read_offline


def bundle(value: int, rows: int = 200, ts: int | None = None) -> RecordBundle:
    return RecordBundle(
        {0: pa.record_batch({"v": pa.array(range(value, value + rows), pa.int64())})}, ingestion_time_ns=ts
    )


def value(d) -> int:
    return d.bundle.slots[0].column(0)[0].as_py()


def config(**retention) -> StoreConfig:
    return StoreConfig(
        segment=SegmentConfig(max_open_duration=3600.0),
        wal=WalConfig(durability="os"),  # "none" buffers WAL bytes that disk_usage does not count yet
        retention=RetentionConfig(**{"maintenance_interval": 3600.0, **retention}),
        subscribers=SubscriberConfig(nack_backoff_initial=0.0),
    )


def segment_of(store: QuiverStore, values: list[int]) -> int:
    for v in values:
        store.ingest(bundle(v))
    info = store.finalize_now("test")
    return info.seq


def drain(sub, ack=True) -> list[int]:
    out = []
    while (d := sub.next(timeout=0)) is not None:
        out.append(value(d))
        if ack:
            d.ack()
    return out


def metric(store, name: str):
    return store.stats()[name]


# -- pure decisions ---------------------------------------------------------------------------
@dataclass
class Seg:
    seq: int
    size_bytes: int
    ingestion_time_max_ns: int = 0


def test_steady_state_victims_keep_the_newest_processed_within_headroom():
    segs = [Seg(0, 100), Seg(1, 100), Seg(2, 100), Seg(3, 100)]
    processed = {0, 1, 3}.__contains__
    assert [s.seq for s in steady_state_victims(segs, processed, 0)] == [0, 1, 3]
    assert [s.seq for s in steady_state_victims(segs, processed, 250)] == [0]  # keeps 3 and 1
    assert steady_state_victims(segs, processed, 10_000) == []


def test_expired_segments_use_the_newest_ingestion_time():
    segs = [Seg(0, 1, 1_000), Seg(1, 1, 5_000_000_000)]
    assert [s.seq for s in expired_segments(segs, 6_000_000_000, 2.0)] == [0]
    assert expired_segments(segs, 6_000_000_000, None) == []


# -- steady state -----------------------------------------------------------------------------
def test_without_subscribers_data_is_kept(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        segment_of(store, [1, 2])
        store.maintain()
        assert len(store.segments()) == 1


def test_headroom_keeps_a_local_spool(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        size = None
        sub = store.subscribe("a")
        for k in range(3):
            seq = segment_of(store, [k])
            size = store.segments()[-1].size_bytes if size is None else size
        assert seq == 2
    with QuiverStore.open(tmp_path, config(steady_state_headroom=size + 10)) as store:
        sub = store.subscribe("a")
        assert drain(sub) == [0, 1, 2]
        assert [s.seq for s in store.segments()] == [2]
        assert metric(store, 'quiver.gc.evictions_total{reason="processed"}') == 2


def test_bundles_skips_a_segment_retention_deletes_while_it_iterates(tmp_path):
    """A reader of bundles() beside a subscriber whose acks let retention delete segments: the
    iteration goes on past the deleted segment instead of failing to open it."""
    with QuiverStore.open(tmp_path, config()) as store:
        sub = store.subscribe("a")
        for k in range(3):
            segment_of(store, [k])
        listing = store.bundles()
        assert [(seq, v.slots[0].column(0)[0].as_py()) for seq, _, v in [next(listing)]] == [(0, 0)]
        assert drain(sub) == [0, 1, 2]
        store.maintain()  # every segment processed, no headroom: retention deletes them all
        assert store.segments() == []
        assert list(listing) == []
    with QuiverStore.open(tmp_path, config()) as store:
        segment_of(store, [3])
        segment_of(store, [4])
        listing = store.bundles()
        first = next(listing)
        store.delete_segment(first[0] + 1, "test")
        assert list(listing) == []  # the second segment went while the first was being read
        assert [seq for seq, _, _ in store.bundles()] == [first[0]]


# -- size cap ---------------------------------------------------------------------------------
def test_backpressure_blocks_then_raises_naming_cap_and_usage_and_never_deletes(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        store.subscribe("slow")
        segment_of(store, [0, 1, 2])
        usage = store.disk_usage()
    cap = usage + 1000
    with QuiverStore.open(tmp_path, config(size_cap=cap, backpressure_timeout=0.2)) as store:
        store.subscribe("slow")
        before = [s.seq for s in store.segments()]
        with pytest.raises(
            StoreFullError, match=rf"usage \d+ bytes \+ \d+ incoming > cap {cap} bytes"
        ) as info:
            for k in range(100):
                store.ingest(bundle(100 + k))
        assert "policy backpressure" in str(info.value)
        assert before[0] in [s.seq for s in store.segments()]  # unacknowledged data never deleted
        assert metric(store, "quiver.ingest.throttle_total") >= 1
        assert metric(store, 'quiver.gc.evictions_total{reason="drop_oldest"}') == 0


def test_backpressure_releases_when_the_subscriber_catches_up(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        store.subscribe("s")
        for k in range(3):
            store.ingest(bundle(k, rows=4000))  # large pinned bundles: acking them frees the room
        store.finalize_now("test")
        cap = store.disk_usage() + 1500
    with QuiverStore.open(tmp_path, config(size_cap=cap, backpressure_timeout=60.0)) as store:
        sub = store.subscribe("s")
        done = threading.Event()

        def producer():
            for k in range(20):
                store.ingest(bundle(1000 + k, rows=10))
            done.set()

        t = threading.Thread(target=producer)
        t.start()
        deadline = time.time() + 60
        while metric(store, "quiver.ingest.throttle_total") == 0 and time.time() < deadline:
            time.sleep(0.01)  # wait until the producer is blocked at the cap
        assert not done.is_set()
        while not done.is_set() and time.time() < deadline:
            d = sub.next(timeout=0.05)
            if d is not None:
                d.ack()
        t.join(30)
        assert done.is_set()
        assert metric(store, "quiver.ingest.throttle_total") >= 1
        assert metric(store, 'quiver.gc.evictions_total{reason="drop_oldest"}') == 0


def test_drop_oldest_records_dropped_outcomes_before_deleting_and_leaves_no_gap(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        a = store.subscribe("a")
        store.subscribe("b")
        first = segment_of(store, [0, 1, 2])
        segment_of(store, [3, 4])
        a.next(0).ack()  # a resolved (first, 0); b nothing
        counts = {s.seq: s.bundle_count for s in store.segments()}
        cap = store.disk_usage() + 500
    with QuiverStore.open(tmp_path, config(size_cap=cap, size_cap_policy="drop_oldest")) as store:
        store.add_finalize_listener(lambda info: counts.__setitem__(info.seq, info.bundle_count))
        for k in range(5):
            store.ingest(bundle(10 + k))
        gone = sorted(set(counts) - {s.seq for s in store.segments()})
        assert gone and gone[0] == first
        stats = store.stats()
        subs = {s["name"]: s for s in stats["subscribers"]}
        # exactly the outstanding bundles of the dropped segments, per subscriber
        assert subs["b"]["dropped_bundles"] == sum(counts[s] for s in gone)
        assert subs["a"]["dropped_bundles"] == sum(counts[s] for s in gone) - 1
        assert stats["quiver.subscriber.dropped_bundles_total"] == 2 * sum(counts[s] for s in gone) - 1
        assert stats["quiver.segment.dropped_total"] == len(gone)
        assert stats['quiver.gc.evictions_total{reason="drop_oldest"}'] == len(gone)
        for s in subs.values():
            assert s["mark"] >= gone[-1] and s["gap_set_size"] == 0  # no unfillable gap
    # durable: the ack log says dropped, and the data never comes back
    state = read_offline(str(tmp_path))
    assert all(sub.mark >= gone[-1] for sub in state.subscribers.values())
    with QuiverStore.open(tmp_path, config()) as store:
        got = drain(store.subscribe("b"))
        assert not {0, 1, 2} & set(got)  # the dropped segment's bundles are never delivered again


def test_max_age_deletes_by_ingestion_time_recording_drops(tmp_path):
    old = time.time_ns() - 3600 * 10**9
    with QuiverStore.open(tmp_path, config(max_age=60.0)) as store:
        sub = store.subscribe("a")
        store.ingest(bundle(0, ts=old))
        store.finalize_now("test")
        segment_of(store, [5])
        store.maintain()
        assert [value(d) for d in [sub.next(0)]] == [5]
        st = store.stats()
        assert st['quiver.gc.evictions_total{reason="age"}'] == 1
        assert st['quiver.subscriber.dropped_bundles_total{subscriber="a"}'] == 1


def test_pressure_finalizes_a_large_open_segment_early(tmp_path):
    with QuiverStore.open(tmp_path, config()) as store:
        sub = store.subscribe("a")
        for k in range(3):
            store.ingest(bundle(k))
        store.flush()
        drain(sub)
        base = store.disk_usage()
    cap = base + 6000
    with QuiverStore.open(tmp_path, config(size_cap=cap, backpressure_timeout=0.0)) as store:
        store.subscribe("a")
        accepted = 0
        with pytest.raises(StoreFullError):
            for k in range(10):
                store.ingest(bundle(100 + k))
                accepted += 1
        assert store.stats().get("finalize_trigger_size_cap", 0) == 1
        # the open segment was finalized early (deliverable, so subscribers can free it) and kept
        assert [s.bundle_count for s in store.segments()] == [accepted]


# -- regressions for the reference's open bugs --------------------------------------------------
def test_deleting_every_segment_then_restarting_never_reuses_a_sequence(tmp_path):
    """#4024: after cleanup deleted everything, a restart reused seq 0 and new data was skipped."""
    with QuiverStore.open(tmp_path, config()) as store:
        sub = store.subscribe("exp")
        last = segment_of(store, [0, 1])
        last = segment_of(store, [2])
        assert drain(sub) == [0, 1, 2]
        assert store.segments() == []
    with QuiverStore.open(tmp_path, config()) as store:
        sub = store.subscribe("exp")
        new = segment_of(store, [7, 8])
        assert new > last
        assert drain(sub) == [7, 8]


def test_dropped_data_does_not_reappear_after_restart(tmp_path):
    """#4137: an un-fsynced unlink could bring a dropped segment back; a resurrected file is
    recognised from the ack log and deleted again instead of being redelivered."""
    with QuiverStore.open(tmp_path, config()) as store:
        a = store.subscribe("a")
        seq = segment_of(store, [0, 1])
        path = store.segments()[0].path
        shutil.copy(path, tmp_path / "saved")
        assert drain(a) == [0, 1]
        assert not os.path.exists(path)
    shutil.copy(tmp_path / "saved", path)  # the deletion "did not survive" the crash
    with QuiverStore.open(tmp_path, config()) as store:
        a = store.subscribe("a")
        b = store.subscribe("b")
        assert seq not in [s.seq for s in store.segments()]
        assert drain(a) == [] and drain(b) == []
        assert metric(store, 'quiver.gc.evictions_total{reason="stale"}') == 1


def test_acks_survive_a_clean_close_of_the_store(tmp_path):
    """Reference: shutdown() did not flush subscriber progress; acks were redelivered."""
    with QuiverStore.open(tmp_path, config()) as store:
        store.subscribe("x")
        store.subscribe("pin")
        segment_of(store, [0, 1, 2])
        sub = store.subscribe("x")
        d = [sub.next(0) for _ in range(3)]
        d[1].ack()
        d[0].ack()
    with QuiverStore.open(tmp_path, config()) as store:
        assert drain(store.subscribe("x")) == [2]


def test_drop_oldest_syncs_the_dropped_outcomes_before_unlinking_and_fsyncs_the_directory(tmp_path):
    from quiver_store.fs import FileSystem

    class Recording(FileSystem):
        def __init__(self):
            self.paths: dict[int, str] = {}
            self.ops: list[tuple[str, str]] = []

        def open(self, path, flags, mode=0o644):
            fd = super().open(path, flags, mode)
            self.paths[fd] = path
            return fd

        def fdatasync(self, fd):
            super().fdatasync(fd)
            self.ops.append(("fdatasync", os.path.basename(self.paths.get(fd, "?"))))

        def unlink(self, path):
            super().unlink(path)
            self.ops.append(("unlink", os.path.basename(path)))

        def fsync_dir(self, path):
            super().fsync_dir(path)
            self.ops.append(("fsync_dir", os.path.basename(path)))

    cfg = StoreConfig(
        segment=SegmentConfig(max_open_duration=3600.0),
        wal=WalConfig(durability="fsync"),
        retention=RetentionConfig(maintenance_interval=3600.0),
    )
    with QuiverStore.open(tmp_path, cfg) as store:
        store.subscribe("slow")
        seq = segment_of(store, [0, 1])
        cap = store.disk_usage() + 500
    fs = Recording()
    capped = StoreConfig(
        segment=cfg.segment,
        wal=cfg.wal,
        retention=RetentionConfig(size_cap=cap, size_cap_policy="drop_oldest", maintenance_interval=3600.0),
    )
    with QuiverStore.open(tmp_path, capped, fs=fs) as store:
        store.ingest(bundle(10))  # over the cap: the unacknowledged segment is dropped
        name = f"{seq:016d}.qseg"
        assert ("unlink", name) in fs.ops
        at = fs.ops.index(("unlink", name))
        assert ("fdatasync", "ack.log") in fs.ops[:at]  # dropped outcomes durable first
        assert fs.ops[at + 1] == ("fsync_dir", "segments")  # the deletion itself is durable
        assert store.stats()['quiver.subscriber.dropped_bundles_total{subscriber="slow"}'] == 2


def test_size_cap_counts_an_ack_file_renamed_while_listed_as_gone(tmp_path):
    """disk_usage lists the store root and then sizes each ack.* file; the ack log's checkpoint renames
    ack.checkpoint.tmp (and rotation removes old logs) on other threads in between. A soak run saw
    ingest and stats() fail with a bare FileNotFoundError for ack.checkpoint.tmp."""
    class RenamedAfterListing(FileSystem):
        def listdir(self, path):
            names = super().listdir(path)
            return [*names, "ack.checkpoint.tmp"] if os.path.isfile(os.path.join(path, "LOCK")) else names

    with QuiverStore.open(tmp_path, config(size_cap=1 << 20), fs=RenamedAfterListing()) as store:
        store.subscribe("s")
        store.ingest(bundle(0))
        assert store.disk_usage() > 0
        assert metric(store, "quiver.ingest.throttle_total") == 0
