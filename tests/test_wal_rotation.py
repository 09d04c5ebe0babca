"""WAL rotation, the size/chunk cap, truncation safety, prefix reclaim and group commit."""

from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store import (
    QuiverError,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    StoreFullError,
    WalConfig,
)
from quiver_store.fs import FileSystem
from quiver_store.wal import sidecar
from quiver_store.wal.format import HEADER_LEN
from quiver_store.wal.reader import Damage, scan

KiB = 1024


def bundle(i: int, rows: int = 50) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array(np.full(rows, i, dtype=np.int64))})})


def values(store: QuiverStore) -> list[int]:
    return [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]


def config(**wal) -> StoreConfig:
    return StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(**wal),
        retention=RetentionConfig(backpressure_timeout=5.0),
    )


class FailingSegments(FileSystem):
    """Fails every write to a segment temp file with ENOSPC while `failing` is set."""

    def __init__(self) -> None:
        self.failing = False
        self.paths: dict[int, str] = {}
        self.failures = 0

    def open(self, path, flags, mode=0o644):
        fd = super().open(path, flags, mode)
        self.paths[fd] = str(path)
        return fd

    def _check(self, fd):
        if self.failing and self.paths.get(fd, "").endswith(".qseg.tmp"):
            self.failures += 1
            raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def write(self, fd, data):
        self._check(fd)
        return super().write(fd, data)

    def pwrite(self, fd, data, offset):
        self._check(fd)
        return super().pwrite(fd, data, offset)


class NoHoles(FileSystem):
    def punch_hole(self, fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported (injected)")


def test_rotation_creates_chunks_and_flush_deletes_covered_ones(tmp_path):
    cfg = config(rotation_size=8 * KiB, max_size=1 << 20, max_chunks=100)
    with QuiverStore.open(tmp_path, cfg) as store:
        for i in range(40):
            store.ingest(bundle(i))
        stats = store.stats()
        assert stats["rotations"] >= 3
        assert len([n for n in os.listdir(tmp_path / "wal") if n.startswith("quiver.wal.")]) == stats["rotations"]
        store.flush()
        assert not [n for n in os.listdir(tmp_path / "wal") if n.startswith("quiver.wal.")]
        assert store.stats()["chunks_deleted"] == stats["rotations"]
    with QuiverStore.open(tmp_path, cfg) as store:
        assert values(store) == list(range(40))


def test_replay_spans_rotated_chunks_after_a_crash(tmp_path):
    cfg = config(rotation_size=8 * KiB, max_size=1 << 20, max_chunks=100)
    store = QuiverStore.open(tmp_path, cfg)
    for i in range(5):
        store.ingest(bundle(i))
    store.flush()
    for i in range(5, 40):
        store.ingest(bundle(i))
    assert store.stats()["rotations"] >= 2
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as store:
        assert store.stats()["replayed_entries"] == 35
    with QuiverStore.open(tmp_path, cfg) as store:
        assert values(store) == list(range(40))


def test_chunk_cap_finalizes_the_open_segment_to_free_wal(tmp_path):
    cfg = config(rotation_size=4 * KiB, max_size=1 << 20, max_chunks=3)
    with QuiverStore.open(tmp_path, cfg) as store:
        for i in range(60):
            store.ingest(bundle(i))
            assert store.stats()["wal_files"] <= 3
        stats = store.stats()
        assert stats["wal_full_waits"] > 0 and stats["finalize_trigger_WAL_cap"] > 0
    with QuiverStore.open(tmp_path, cfg) as store:
        assert values(store) == list(range(60))


def test_size_cap_is_respected(tmp_path):
    cfg = config(rotation_size=4 * KiB, max_size=12 * KiB, max_chunks=10)
    with QuiverStore.open(tmp_path, cfg) as store:
        for i in range(60):
            store.ingest(bundle(i))
            assert store.stats()["wal_bytes"] <= 12 * KiB
    with QuiverStore.open(tmp_path, cfg) as store:
        assert values(store) == list(range(60))


def test_at_the_cap_with_finalize_failing_ingest_backpressures_then_raises(tmp_path):
    fs = FailingSegments()
    cfg = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(rotation_size=4 * KiB, max_size=1 << 20, max_chunks=2),
        retention=RetentionConfig(backpressure_timeout=0.3),
    )
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    fs.failing = True
    with pytest.raises(StoreFullError, match=r"wal.max_chunks=2") as info:
        for i in range(100):
            store.ingest(bundle(i))
    assert "backpressure_timeout" in str(info.value)
    acked = i  # bundles 0..i-1 were acknowledged
    assert fs.failures > 0 and store.stats()["finalize_errors"] > 0
    fs.failing = False
    store.close()
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == list(range(acked))


def test_a_bundle_larger_than_the_wal_cap_is_refused(tmp_path):
    store = QuiverStore.open(tmp_path, config(rotation_size=4 * KiB, max_size=8 * KiB))
    with store, pytest.raises(StoreFullError, match=r"can never fit under wal\.max_size=8192"):
        store.ingest(bundle(0, rows=5000))


def test_truncation_never_passes_the_open_segment(tmp_path):
    cfg = config(rotation_size=1 << 20, max_size=8 << 20)
    store = QuiverStore.open(tmp_path, cfg)
    for i in range(5):
        store.ingest(bundle(i))
    store.flush()
    first_open = store.ingest(bundle(5))
    for i in range(6, 10):
        store.ingest(bundle(i))
    point, _ = sidecar.read(store.fs, str(tmp_path / "wal"))
    assert (point.generation, point.offset) <= (first_open.wal_generation, first_open.wal_offset)
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as again:
        assert again.stats()["replayed_entries"] == 5
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == list(range(10))


def test_failed_finalize_keeps_the_wal_range_and_retries(tmp_path):
    fs = FailingSegments()
    cfg = config(rotation_size=1 << 20, max_size=8 << 20)
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    for i in range(4):
        store.ingest(bundle(i))
    fs.failing = True
    segments = str(tmp_path / "segments")
    with pytest.raises(StoreFullError, match=rf"^disk full: {segments}: writing a segment file failed \(\[Errno 28\] .*\); the data stays in memory and in the WAL and is retried$") as caught:
        store.flush()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == segments  # type: ignore[attr-defined]
    assert isinstance(caught.value.__cause__, OSError)
    point, _ = sidecar.read(fs, str(tmp_path / "wal"))
    assert point is None or point.offset == HEADER_LEN  # nothing truncated
    assert store.stats()["finalize_failing"] and store.stats()["open_segment_bytes"] > 0
    fs.failing = False
    store.flush()  # the retry (or this flush's barrier behind it) completes
    assert [s.bundle_count for s in store.segments()] == [4]
    store.close()
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == [0, 1, 2, 3]


def test_crash_while_finalize_fails_loses_nothing(tmp_path):
    fs = FailingSegments()
    cfg = config(rotation_size=1 << 20, max_size=8 << 20)
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    for i in range(4):
        store.ingest(bundle(i))
    fs.failing = True
    with pytest.raises(StoreFullError, match="writing a segment file failed"):
        store.flush()
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as again:
        assert again.stats()["replayed_entries"] == 4
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == [0, 1, 2, 3]


@pytest.mark.parametrize("fs", [FileSystem(), NoHoles()], ids=["punch_hole", "rewrite"])
def test_active_prefix_is_reclaimed(tmp_path, fs):
    cfg = config(rotation_size=64 << 20, max_size=256 << 20)
    big = 20_000  # ~160 KiB per bundle
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    for i in range(10):
        store.ingest(bundle(i, rows=big))
    store.flush()
    for i in range(10, 12):
        store.ingest(bundle(i, rows=big))  # the rewrite happens before this append
    stats = store.stats()
    if isinstance(fs, NoHoles):
        assert not stats["wal_hole_punching"] and stats["rewrites"] == 1
        size = os.path.getsize(tmp_path / "wal" / "quiver.wal")
        assert size < 3 * 170_000 + store.config.wal.preallocate  # the entries left, and the zero tail
        assert stats["wal_bytes"] < 3 * 170_000
    else:
        assert stats["wal_hole_punching"] and stats["holes_punched"] == 1
        assert stats["wal_bytes"] < 3 * 170_000
    store._abandon()
    with QuiverStore.open(tmp_path, cfg, fs=fs) as again:
        assert again.stats()["replayed_entries"] == 2
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == list(range(12))


def test_concurrent_ingests_share_fdatasyncs(tmp_path):
    cfg = config(flush_interval=0.005)
    with QuiverStore.open(tmp_path, cfg) as store:
        def produce(k: int) -> None:
            for i in range(25):
                store.ingest(bundle(k * 100 + i))

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = store.stats()
        assert stats["entries"] == 200 and stats["fsyncs"] < 200 and stats["max_group"] > 1
        assert sum(n * c for n, c in stats["group_commit_sizes"].items()) == 200
    with QuiverStore.open(tmp_path, cfg) as store:
        got = values(store)
        assert sorted(got) == sorted(k * 100 + i for k in range(8) for i in range(25))
        for k in range(8):  # each producer's bundles stay in its order
            mine = [v for v in got if v // 100 == k]
            assert mine == sorted(mine)


@pytest.mark.parametrize("durability", ["os", "none"])
def test_weaker_durability_modes(tmp_path, durability):
    cfg = config(durability=durability)
    with QuiverStore.open(tmp_path, cfg) as store:
        receipts = [store.ingest(bundle(i)) for i in range(10)]
        if durability == "none":
            assert receipts[0].wal_offset is None
        else:
            assert receipts[0].wal_offset == HEADER_LEN
        assert store.stats()["fsyncs"] == 0
    with QuiverStore.open(tmp_path, cfg) as store:
        assert values(store) == list(range(10))


class FailingSync(FileSystem):
    """fdatasync of the WAL fails once with EIO (then works again, as the kernel would claim)."""

    def __init__(self) -> None:
        self.armed = False
        self.paths: dict[int, str] = {}

    def open(self, path, flags, mode=0o644):
        fd = super().open(path, flags, mode)
        self.paths[fd] = str(path)
        return fd

    def fdatasync(self, fd):
        if self.armed and self.paths.get(fd, "").endswith("quiver.wal"):
            self.armed = False
            raise OSError(errno.EIO, "Input/output error (injected)")
        return super().fdatasync(fd)


def test_failed_fdatasync_is_never_retried_and_trusted(tmp_path):
    fs = FailingSync()
    store = QuiverStore.open(tmp_path, config(), fs=fs)
    acked = [store.ingest(bundle(i)).sequence for i in range(3)]
    fs.armed = True
    with pytest.raises(Exception, match="fdatasync of the WAL failed"):
        store.ingest(bundle(3))
    with pytest.raises(Exception, match="stopped accepting writes after an I/O failure"):
        store.ingest(bundle(4))
    store._abandon()
    with QuiverStore.open(tmp_path, config()) as again:
        again.flush()
        got = values(again)
    assert got[: len(acked)] == [0, 1, 2] and set(got) <= {0, 1, 2, 3}


# -- pre-extended active file -------------------------------------------------------------------------
def test_rotation_cuts_the_zero_tail_of_a_pre_extended_file(tmp_path):
    from quiver_store.cli import main

    cfg = config(rotation_size=8 * KiB, max_size=1 << 20, max_chunks=100, preallocate=4 * KiB)
    store = QuiverStore.open(tmp_path, cfg)
    for i in range(40):
        store.ingest(bundle(i))
        store._wal.extend_tail()  # a zero tail at every rotation, whatever the background thread did
    assert store.stats()["rotations"] >= 3 and store.stats()["preallocated_bytes"] > 0
    chunks = sorted(p for p in (tmp_path / "wal").iterdir() if p.name.startswith("quiver.wal."))
    for chunk in chunks:  # a rotated chunk ends with its last entry
        data = memoryview(chunk.read_bytes())
        assert [d.kind for d in scan(data, HEADER_LEN, resync=False) if isinstance(d, Damage)] == []
    store._abandon()
    assert main(["verify", str(tmp_path)]) == 0
    with QuiverStore.open(tmp_path, cfg) as again:
        assert again.stats()["replayed_entries"] == 40 and again.stats()["corrupt_entries"] == 0
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == list(range(40))


@pytest.mark.parametrize("fs", [FileSystem(), NoHoles()], ids=["punch_hole", "rewrite"])
def test_prefix_reclaim_of_a_pre_extended_file_keeps_the_log_readable(tmp_path, fs):
    cfg = config(rotation_size=64 << 20, max_size=256 << 20, preallocate=4 << 20)
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    for i in range(10):
        store.ingest(bundle(i, rows=20_000))
    store._wal.extend_tail()
    store.flush()  # the WAL prefix is punched out, or rewritten by the next append
    store.ingest(bundle(10, rows=20_000))
    store._wal.extend_tail()
    stats = store.stats()
    assert stats["holes_punched"] + stats["rewrites"] == 1
    store._abandon()
    with QuiverStore.open(tmp_path, cfg, fs=fs) as again:
        s = again.stats()
        assert s["replayed_entries"] == 1 and s["corrupt_entries"] == 0 and s["torn_tail_bytes"] == 0
    with QuiverStore.open(tmp_path, cfg) as again:
        assert values(again) == list(range(11))


class FailingZeroFill(FileSystem):
    """Fails the preallocator's zero-fill (writes or fdatasync on the descriptor it opens) when armed."""

    def __init__(self, error: int, on: str) -> None:
        self.error, self.on = error, on
        self.armed = False
        self.fill_fds: set[int] = set()

    def open(self, path, flags, mode=0o644):
        fd = super().open(path, flags, mode)
        if str(path).endswith("quiver.wal") and flags == os.O_WRONLY:  # the writer opens with O_CREAT
            self.fill_fds.add(fd)
        return fd

    def close(self, fd):
        self.fill_fds.discard(fd)
        return super().close(fd)

    def pwrite(self, fd, data, offset):
        if self.armed and self.on == "pwrite" and fd in self.fill_fds:
            raise OSError(self.error, os.strerror(self.error) + " (injected)")
        return super().pwrite(fd, data, offset)

    def fdatasync(self, fd):
        if self.armed and self.on == "fdatasync" and fd in self.fill_fds:
            self.armed = False
            raise OSError(self.error, os.strerror(self.error) + " (injected)")
        return super().fdatasync(fd)


def _until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_zero_fill_without_space_only_costs_speed(tmp_path):
    fs = FailingZeroFill(errno.ENOSPC, "pwrite")
    fs.armed = True
    cfg = config(preallocate=64 * KiB)
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    _until(lambda: store.stats()["preallocate_errors"] > 0)
    acked = [store.ingest(bundle(i)).sequence for i in range(20)]  # appends past the end still work
    assert len(acked) == 20 and store.stats()["preallocated_bytes"] == 0
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as again:
        again.flush()
        assert values(again) == list(range(20))


def test_failed_fdatasync_of_the_zero_fill_stops_the_wal(tmp_path):
    fs = FailingZeroFill(errno.EIO, "fdatasync")
    cfg = config(preallocate=64 * KiB)
    store = QuiverStore.open(tmp_path, cfg, fs=fs)
    _until(lambda: store.stats()["preallocated_bytes"] > 0)
    fs.armed = True
    acked = []
    with pytest.raises(QuiverError, match="fdatasync of the WAL failed"):
        for i in range(200):  # consumes the tail until the preallocator tops it up, and fails
            acked.append(store.ingest(bundle(i, rows=500)).sequence)
    assert not fs.armed and store._wal.failure is not None
    with pytest.raises(QuiverError, match=r"stopped accepting writes|fdatasync of the WAL failed"):
        store.ingest(bundle(999))
    store._abandon()
    with QuiverStore.open(tmp_path, cfg) as again:
        again.flush()
        got = values(again)
    assert got[: len(acked)] == list(range(len(acked)))


@settings(max_examples=6, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=20, max_size=80))
def test_background_zero_fill_racing_rotation_keeps_every_entry(tmp_path_factory, rows):
    """No manual extend_tail: the preallocator runs on its own while small files rotate under it."""
    path = tmp_path_factory.mktemp("store")
    cfg = config(rotation_size=8 * KiB, max_size=4 << 20, max_chunks=1000, preallocate=6 * KiB)
    store = QuiverStore.open(path, cfg)
    for i, n in enumerate(rows):
        store.ingest(bundle(i, rows=n))
    store._abandon()
    for chunk in (path / "wal").iterdir():
        if chunk.name.startswith("quiver.wal."):  # rotated chunks end with their last entry
            data = memoryview(chunk.read_bytes())
            assert not [d for d in scan(data, HEADER_LEN, resync=False) if isinstance(d, Damage)], chunk.name
    with QuiverStore.open(path, cfg) as again:
        stats = again.stats()
        assert stats["replayed_entries"] == len(rows) and stats["corrupt_entries"] == 0 and stats["torn_tail_bytes"] == 0
    with QuiverStore.open(path, cfg) as again:
        assert values(again) == list(range(len(rows)))
