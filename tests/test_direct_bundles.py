"""Large bundles that skip the WAL (`wal.direct_bundle_size`): each becomes a segment file of its
own, written in log order behind the open segment, and `ingest` returns once that file is durable.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import (
    ConfigError,
    QuiverError,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    WalConfig,
)
from quiver_store.cli import main as cli_main
from quiver_store.fs import DEFAULT_FS, FileSystem
from quiver_store.wal import sidecar
from quiver_store.wal.format import ENTRY_DIRECT, ENTRY_SYNCED, HEADER_LEN, Entry
from quiver_store.wal.reader import scan

THRESHOLD = 4096
DIRECT = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(direct_bundle_size=THRESHOLD))


def bundle(i: int, large: bool) -> RecordBundle:
    """Bundle `i`: 10 rows (logged) or 1,000 rows, 16,000 Arrow bytes (direct)."""
    rows = 1_000 if large else 10
    return RecordBundle(
        {
            0: pa.record_batch({"i": pa.array(np.full(rows, i, np.int64)), "row": pa.array(np.arange(rows, dtype=np.int64))}),
            3: pa.record_batch({"key": [f"k{i % 4}"] * 2}),
        },
        ingestion_time_ns=1_000 + i,
    )


def stored(store: QuiverStore) -> list[tuple[int, int]]:
    """(value, rows) of every stored bundle, in store order."""
    return [(b.slots[0]["i"][0].as_py(), b.slots[0].num_rows) for _, _, b in store.bundles()]


def expected(pattern: list[bool], upto: int | None = None) -> list[tuple[int, int]]:
    return [(i, 1_000 if large else 10) for i, large in enumerate(pattern[:upto])]


def test_large_bundles_skip_the_wal_and_come_back_in_order(tmp_path):
    pattern = [False, False, True, False, True, True, False]
    with QuiverStore.open(tmp_path, DIRECT) as store:
        receipts = [store.ingest(bundle(i, large)) for i, large in enumerate(pattern)]
        stats = store.stats()
        # a direct bundle is in a durable segment file when ingest returns, not in the WAL
        for r, large in zip(receipts, pattern):
            assert (r.segment_sequence is not None) == large and (r.wal_offset is None) == large
        assert [r.sequence for r in receipts] == list(range(len(pattern)))
        assert stats["direct_bundles"] == 3 and stats["entries"] == 4
        assert stats["finalize_trigger_direct_bundle"] == 2  # bundles 0-1 and 3 were sealed in front of one
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert stored(store) == expected(pattern)
        infos = store.segments()
        assert [i.metadata["quiver.finalize_reason"] for i in infos] == ["direct bundle", "direct", "direct bundle", "direct", "direct", "close"]
        assert [(i.metadata["quiver.wal.first_sequence"], i.metadata["quiver.wal.last_sequence"]) for i in infos] == [
            ("0", "1"), ("2", "2"), ("3", "3"), ("4", "4"), ("5", "5"), ("6", "6")
        ]
        assert receipts[2].segment_sequence == infos[1].seq


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(st.booleans(), min_size=1, max_size=12), crash=st.booleans(), flush_at=st.integers(0, 12))
def test_any_mix_survives_close_or_crash(tmp_path_factory, pattern, crash, flush_at):
    """Whatever the mix of logged and direct bundles, and a flush anywhere: after a close or a
    crash-style stop (the WAL replays what no segment holds), every bundle is back once, in order."""
    path = tmp_path_factory.mktemp("mix")
    store = QuiverStore.open(path, DIRECT)
    for i, large in enumerate(pattern):
        store.ingest(bundle(i, large))
        if i == flush_at:
            store.flush()
    if crash:
        store._abandon()
    else:
        store.close()
    with QuiverStore.open(path, DIRECT):  # replays the WAL into the open segment, finalized on close
        pass
    with QuiverStore.open(path, DIRECT) as store:
        assert stored(store) == expected(pattern) and store.stats()["replayed_entries"] == 0


def test_concurrent_producers_keep_their_order(tmp_path):
    per, producers = 12, 4
    with QuiverStore.open(tmp_path, DIRECT) as store:

        def run(k: int) -> None:
            for j in range(per):
                store.ingest(bundle(k * 100 + j, large=(j + k) % 3 == 0))

        threads = [threading.Thread(target=run, args=(k,)) for k in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.stats()["direct_bundles"] == sum((j + k) % 3 == 0 for k in range(producers) for j in range(per))
    with QuiverStore.open(tmp_path, DIRECT) as store:
        got = [v for v, _ in stored(store)]
    assert sorted(got) == sorted(k * 100 + j for k in range(producers) for j in range(per))
    for k in range(producers):
        assert [v for v in got if v // 100 == k] == [k * 100 + j for j in range(per)]


@pytest.mark.parametrize(
    "wal", [WalConfig(direct_bundle_size=0), WalConfig(direct_bundle_size=THRESHOLD, durability="os")], ids=["off", "durability-os"]
)
def test_every_bundle_is_logged_when_direct_writes_are_off(tmp_path, wal):
    config = StoreConfig(segment=DIRECT.segment, wal=wal)
    with QuiverStore.open(tmp_path, config) as store:
        receipts = [store.ingest(bundle(i, True)) for i in range(3)]
        assert all(r.segment_sequence is None and r.wal_offset is not None for r in receipts)
        assert store.stats()["direct_bundles"] == 0
    with QuiverStore.open(tmp_path, config) as store:
        assert stored(store) == expected([True] * 3)


@pytest.mark.parametrize(
    ("segment", "wal", "threshold"),
    [
        (SegmentConfig(), WalConfig(), 4 << 20),  # an eighth of the 32 MiB segment target
        (SegmentConfig(target_size=2 << 20), WalConfig(), 1 << 20),  # never below 1 MiB
        (SegmentConfig(target_size=1 << 30), WalConfig(), 128 << 20),
        (SegmentConfig(), WalConfig(direct_bundle_size=5000), 5000),
        (SegmentConfig(), WalConfig(direct_bundle_size=5000, durability="os"), 0),  # only under "fsync"
    ],
)
def test_direct_bundle_size_default_follows_the_segment_target(segment, wal, threshold):
    assert StoreConfig(segment=segment, wal=wal).direct_bundle_size == threshold


@pytest.mark.parametrize("size", [-1, 1.5, True, "1MiB"])
def test_direct_bundle_size_is_validated(size):
    with pytest.raises(ConfigError, match=r"wal\.direct_bundle_size must be None or a whole number of bytes >= 0"):
        WalConfig(direct_bundle_size=size)


class FailingSegmentWrites(FileSystem):
    """Segment file creations fail while `failing` is set (a full or broken segment volume)."""

    def __init__(self) -> None:
        self.failing = False

    def open(self, path, flags, mode=0o644):
        if self.failing and path.endswith(".qseg.tmp"):
            raise OSError(5, "injected: segment volume failed")
        return super().open(path, flags, mode)


def store_whose_third_bundle_failed(root) -> QuiverStore:
    """An open store holding bundle 0 (logged) and 1 (direct), whose direct bundle 2 failed to be
    written (its producer got the error); the segment volume works again."""
    fs = FailingSegmentWrites()
    store = QuiverStore.open(root, DIRECT, fs=fs)
    store.ingest(bundle(0, False))
    store.ingest(bundle(1, True))
    fs.failing = True
    with pytest.raises(QuiverError, match=r"bundle 2 was not stored: a segment write failed .*injected: segment volume failed"):
        store.ingest(bundle(2, True))
    fs.failing = False
    return store


@pytest.mark.parametrize("crash", [False, True], ids=["close", "crash"])
def test_a_direct_bundle_whose_segment_write_fails_is_reported_and_not_stored(tmp_path, capsys, crash):
    """Every direct bundle, stored or not, leaves a marker frame in the WAL in its place, so after a
    crash the logged bundles behind the failed one replay with no sequence gap reported."""
    store = store_whose_third_bundle_failed(tmp_path)
    store.ingest(bundle(3, False))  # the store goes on; nothing before the failure is lost
    store.ingest(bundle(4, True))
    store.ingest(bundle(5, False))  # only in the WAL until a flush
    assert store.stats()["finalize_errors"] == 1
    if not crash:
        store.close()
    else:
        store._abandon()
        frames = [e for e in scan(memoryview((tmp_path / "wal" / "quiver.wal").read_bytes()), HEADER_LEN, resync=False)
                  if isinstance(e, Entry) and e.entry_type != ENTRY_SYNCED]
        assert [(e.entry_type, e.sequence) for e in frames] == [(0, 0), (ENTRY_DIRECT, 1), (ENTRY_DIRECT, 2), (0, 3), (ENTRY_DIRECT, 4), (0, 5)]
        point, _ = sidecar.read(DEFAULT_FS, str(tmp_path / "wal"))
        assert point is not None
        assert cli_main(["replay", str(tmp_path)]) == 0  # the markers from the point on, in their own column
        row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│ quiver.wal "))
        markers = sum(e.entry_type == ENTRY_DIRECT for e in frames if e.offset >= point.offset)
        assert [cell.strip() for cell in row.split("│")[1:-1]][4] == str(markers) != "0"
        with QuiverStore.open(tmp_path, DIRECT) as store:
            assert store.stats()["corruption_reports"] == [] and store.stats()["replayed_entries"] == 1
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert stored(store) == [(0, 10), (1, 1_000), (3, 10), (4, 1_000), (5, 10)]


@pytest.mark.parametrize("crash", [False, True], ids=["later segment", "crash first"])
def test_a_failed_direct_bundle_is_recorded_so_verify_does_not_call_its_sequence_missing(tmp_path, capsys, crash):
    """The failed bundle's sequence is in no segment, and after a crash the segment numbers skip a
    reserved run: verify used to report a missing segment there. The store records the sequence as
    never acknowledged in the next segment's metadata, from memory (the failure) or, after a crash
    that lost that, from the marker frame above the segments' sequences (the next open)."""
    store = store_whose_third_bundle_failed(tmp_path)
    if crash:
        store._abandon()
    else:
        store.ingest(bundle(3, False))
        store.close()
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert store.stats()["corruption_reports"] == []
        store.ingest(bundle(4, False))
    assert cli_main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "error:" not in out
    row = next(line for line in out.splitlines() if line.startswith("│ WAL sequence(s) 2 "))
    assert "never acknowledged, in no segment" in row
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert stored(store) == [(0, 10), (1, 1_000), *([] if crash else [(3, 10)]), (4, 10)]


def test_a_group_of_markers_alone_is_not_synced(tmp_path):
    """A marker matters only once a later frame follows it, and that frame's fdatasync covers it:
    a direct bundle costs its segment's syncs, not one more of the WAL."""
    with QuiverStore.open(tmp_path, DIRECT) as store:
        store.ingest(bundle(0, False))
        before = store.stats()["fsyncs"]
        store.ingest(bundle(1, True))
        assert store.stats()["fsyncs"] == before
        store.ingest(bundle(2, False))
        assert store.stats()["fsyncs"] == before + 1


def test_a_direct_bundle_behind_a_failing_segment_fails_fast_and_the_logged_data_is_kept(tmp_path):
    """The open segment sealed in front of a direct bundle cannot be written: the direct bundle's
    producer hears so at once (nothing of it was logged), while the logged bundles stay in memory
    and WAL, are retried, and are stored once the volume recovers."""
    fs = FailingSegmentWrites()
    with QuiverStore.open(tmp_path, DIRECT, fs=fs) as store:
        store.ingest(bundle(0, False))
        store.ingest(bundle(1, False))
        fs.failing = True
        with pytest.raises(QuiverError, match="bundle 2 was not stored"):
            store.ingest(bundle(2, True))
        fs.failing = False
        store.ingest(bundle(3, False))
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert stored(store) == [(0, 10), (1, 10), (3, 10)]


def test_subscribers_get_direct_and_logged_bundles_in_order(tmp_path):
    pattern = [False, True, False, True, True]
    with QuiverStore.open(tmp_path, DIRECT) as store:
        subscription = store.subscribe("exporter")
        for i, large in enumerate(pattern):
            store.ingest(bundle(i, large))
        store.flush()
        got = []
        while (delivery := subscription.next(timeout=0.05)) is not None:
            got.append((delivery.bundle.slots[0]["i"][0].as_py(), delivery.bundle.slots[0].num_rows))
            assert delivery.ack()
    assert got == expected(pattern)


def test_a_crash_between_a_direct_bundle_and_later_logged_ones_replays_only_those(tmp_path):
    """Logged bundles after the last direct one live only in the WAL: the crash-style reopen
    replays exactly them, and the direct segment is not read twice."""
    store = QuiverStore.open(tmp_path, DIRECT)
    for i, large in enumerate([False, True, False, False]):
        store.ingest(bundle(i, large))
    store._abandon()
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert store.stats()["replayed_entries"] == 2
    with QuiverStore.open(tmp_path, DIRECT) as store:
        assert stored(store) == expected([False, True, False, False])
        assert len(os.listdir(tmp_path / "segments")) == 3 + 1  # three segments and next.seq


def test_direct_bundles_do_not_count_against_the_applier_backlog_once_placed(tmp_path):
    """Ingest stops (backpressure) while more than max(target_size / 2, 4 MiB) of bundles wait for
    the applier; a placed direct bundle leaves that count like a logged one, so 12 MiB of them
    in a row never trip the 4 MiB limit."""
    config = StoreConfig(
        segment=SegmentConfig(target_size=1 << 20, max_open_duration=3600.0),
        wal=WalConfig(direct_bundle_size=THRESHOLD),
        retention=RetentionConfig(backpressure_timeout=1.0),
    )
    rows = (1 << 20) // 16
    big = RecordBundle({0: pa.record_batch({"i": pa.array(np.zeros(rows, np.int64)), "row": pa.array(np.arange(rows, dtype=np.int64))})})
    with QuiverStore.open(tmp_path, config) as store:
        for _ in range(12):
            store.ingest(big)
        assert store.stats()["direct_bundles"] == 12 and store.open_segment_bytes() == 0
