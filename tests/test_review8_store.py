"""Store defects found by fresh-user review 3: small caps wedging the store, builtin exceptions a
user can trigger (disk full, a bad segment path, a non-store queue), misleading messages and
`quiver dump` output that was not JSON. Each test failed before its fix."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from quiver_store import IngestQueue, QuiverStore, RecordBundle, cli, offline
from quiver_store.config import RetentionConfig, SegmentConfig, StoreConfig, WalConfig
from quiver_store.errors import ConfigError, QuiverError, StoreFullError
from quiver_store.fs import FileSystem
from quiver_store.segment.reader import SegmentReader


def bundle(i: int, rows: int = 2000) -> RecordBundle:
    """About 30 KB of Arrow, 28 KB as a WAL frame."""
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * rows, pa.int64()), "s": pa.array([f"v{i}"] * rows)})})


class NoPunchFileSystem(FileSystem):
    """Hole punching unsupported: the WAL reclaims its prefix by rewriting the active file."""

    def punch_hole(self, fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "hole punching not supported")


FILE_SYSTEMS = pytest.mark.parametrize("fs", [FileSystem(), NoPunchFileSystem()], ids=["punch", "rewrite"])


# -- A: caps well under the old 1 MiB reclaim step ------------------------------------------------
@FILE_SYSTEMS
def test_small_size_cap_with_a_caught_up_subscriber_never_fills(tmp_path: Path, fs: FileSystem) -> None:
    """Was: StoreFullError after 17 ingests at 500 kB, every bundle acked (WAL bytes in segments
    were counted as usage until 1 MiB of them could be reclaimed at once)."""
    config = StoreConfig(
        segment=SegmentConfig(max_open_duration=0.05),
        retention=RetentionConfig(size_cap=500_000, backpressure_timeout=1.0, maintenance_interval=0.1),
    )
    with QuiverStore.open(tmp_path / "s", config, fs=fs) as store:
        sub = store.subscribe("fast")
        for i in range(40):
            store.ingest(bundle(i))
            delivery = sub.next(timeout=5.0)
            assert delivery is not None and delivery.bundle.slots[0]["i"][0].as_py() == i
            assert delivery.ack()
        assert store.disk_usage() <= 500_000


@FILE_SYSTEMS
def test_small_size_cap_drop_oldest_keeps_ingesting(tmp_path: Path, fs: FileSystem) -> None:
    """Was: 7 ingested, then "nothing finalized is left to drop" forever (every segment dropped)."""
    config = StoreConfig(
        segment=SegmentConfig(max_open_duration=60.0),
        retention=RetentionConfig(size_cap=200_000, size_cap_policy="drop_oldest", maintenance_interval=0.1),
    )
    with QuiverStore.open(tmp_path / "s", config, fs=fs) as store:
        store.subscribe("slow")
        receipts = [store.ingest(bundle(i)) for i in range(40)]
        assert [r.sequence for r in receipts] == list(range(40))
        assert store.disk_usage() <= 200_000


@FILE_SYSTEMS
def test_small_wal_max_size_keeps_ingesting(tmp_path: Path, fs: FileSystem) -> None:
    """Was: blocked until StoreFullError "WAL full: wal.max_size=200000 bytes reached" although the
    seal it asked for had put every entry in a segment."""
    config = StoreConfig(
        wal=WalConfig(max_size=200_000, rotation_size=200_000),
        segment=SegmentConfig(max_open_duration=60.0),
        retention=RetentionConfig(backpressure_timeout=2.0),
    )
    with QuiverStore.open(tmp_path / "s", config, fs=fs) as store:
        for i in range(40):
            store.ingest(bundle(i))
        assert store.stats()["wal_bytes"] <= 200_000
        store.flush()
        sub = store.subscribe("late", start="earliest")
        seen = []
        while (delivery := sub.next(timeout=0.5)) is not None:
            seen.append(delivery.bundle.slots[0]["i"][0].as_py())
            delivery.ack()
    assert seen == list(range(40))


def test_a_bundle_larger_than_the_cap_is_refused_at_once(tmp_path: Path) -> None:
    config = StoreConfig(retention=RetentionConfig(size_cap=8_000, backpressure_timeout=30.0))
    refused = r"a bundle of \d+ bytes can never fit under the per-core cap of 8000 bytes; raise retention.size_cap$"
    with QuiverStore.open(tmp_path / "s", config) as store, pytest.raises(StoreFullError, match=refused):
        store.ingest(bundle(0))


# -- B: a full disk and bad arguments raise the package's exceptions --------------------------------
class FullDisk(FileSystem):
    """Writes fail with ENOSPC while `full` is set, as on a file system with no free blocks."""

    full = False

    def _check(self) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, fd: int, data) -> None:  # type: ignore[no-untyped-def]
        self._check()
        super().write(fd, data)

    def pwrite(self, fd: int, data, offset: int) -> None:  # type: ignore[no-untyped-def]
        self._check()
        super().pwrite(fd, data, offset)

    def pwritev(self, fd: int, buffers, offset: int, total: int) -> None:  # type: ignore[no-untyped-def]
        self._check()
        super().pwritev(fd, buffers, offset, total)


def test_disk_full_on_ingest_and_ack_is_store_full_and_loses_nothing(tmp_path: Path) -> None:
    """Was: a bare OSError [Errno 28] from ingest (and from ack once a deletion hit it)."""
    fs = FullDisk()
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(preallocate=0))
    store = QuiverStore.open(tmp_path / "s", config, fs=fs)
    sub = store.subscribe("a")
    for i in range(3):
        store.ingest(bundle(i, 10))
    store.flush()
    deliveries = [sub.next(timeout=1.0) for _ in range(3)]
    fs.full = True
    with pytest.raises(StoreFullError, match=r"^disk full: .*/wal: WAL write failed \(\[Errno 28\] .*\); the entry was not logged; retry once there is room$") as ingest_error:
        store.ingest(bundle(3, 10))
    assert ingest_error.value.errno == errno.ENOSPC and ingest_error.value.filename == str(tmp_path / "s" / "wal")
    assert isinstance(ingest_error.value.__cause__, OSError)
    with pytest.raises(StoreFullError, match=r"^disk full: .*/ack\.log: ack log write/fdatasync failed \(\[Errno 28\] .*\); the acknowledgements it held are not durable; reopen the store$") as ack_error:
        deliveries[0].ack()  # type: ignore[union-attr]
    assert ack_error.value.errno == errno.ENOSPC and isinstance(ack_error.value.__cause__, OSError)
    fs.full = False
    with pytest.raises(QuiverError):
        store.close()  # the ack log stays failed until a reopen
    store._abandon()
    with QuiverStore.open(tmp_path / "s", config) as store:
        store.ingest(bundle(3, 10))
        store.flush()
        sub = store.subscribe("a")
        got = []
        while (delivery := sub.next(timeout=0.5)) is not None:
            got.append(delivery.bundle.slots[0]["i"][0].as_py())
            delivery.ack()
    assert got == [0, 1, 2, 3]  # the failed ack was not durable: bundle 0 comes again; the refused ingest never came


def test_ingest_after_a_full_disk_cleared_works_without_reopen(tmp_path: Path) -> None:
    fs = FullDisk()
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(preallocate=0))
    with QuiverStore.open(tmp_path / "s", config, fs=fs) as store:
        store.ingest(bundle(0, 10))
        fs.full = True
        with pytest.raises(StoreFullError, match="disk full"):
            store.ingest(bundle(1, 10))
        fs.full = False
        assert store.ingest(bundle(2, 10)).sequence == 2
        store.flush()
        sub = store.subscribe("late")
        got = [sub.next(timeout=1.0).bundle.slots[0]["i"][0].as_py() for _ in range(2)]  # type: ignore[union-attr]
    assert got == [0, 2]


def test_segment_reader_open_of_a_missing_file_or_a_directory(tmp_path: Path) -> None:
    """Was: FileNotFoundError, and OSError [Errno 22] Invalid argument without a path."""
    missing = tmp_path / "0000000000000007.qseg"
    with pytest.raises(QuiverError, match=rf"^{missing}: opening the segment file failed \(\[Errno 2\] No such file or directory.*\); nothing was read$") as info:
        SegmentReader.open(str(missing))
    assert info.value.errno == errno.ENOENT and info.value.filename == str(missing)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(QuiverError, match=rf"^{tmp_path} is a directory, not a segment file \(segments/<n>\.qseg\)$"):
        SegmentReader.open(str(tmp_path))


@pytest.mark.parametrize("store", [None, "store-path", 3])
def test_ingest_queue_refuses_a_non_store(store: object) -> None:
    """Was: accepted; the first submit failed with "'NoneType' object has no attribute 'ingest'"."""
    with pytest.raises(ConfigError, match=rf"^IngestQueue needs an open QuiverStore \(QuiverStore.open\(path\)\), got {type(store).__name__}$"):
        IngestQueue(store)  # type: ignore[arg-type]


# -- C: messages that name the real cause and advice that works --------------------------------------
def test_reading_a_bundle_whose_segment_cleanup_deleted_names_cleanup(tmp_path: Path) -> None:
    """Was: "segment 0 was deleted by retention (drop_oldest / max_age)" after a plain ack. (An
    acked delivery's bundle now stays readable: the deferred delivery, never read, shows it.)"""
    with QuiverStore.open(tmp_path / "s") as store:
        sub = store.subscribe("c")
        store.ingest(bundle(1, 10))
        store.flush()
        delivery = sub.next(timeout=2.0)
        assert delivery is not None and delivery.defer()
        again = sub.next(timeout=2.0)
        assert again is not None and again.ack()
        with pytest.raises(QuiverError, match=r"^segment 0 is gone before bundle 0 was read: every subscriber had settled it, so steady-state cleanup deleted it$"):
            delivery.bundle  # noqa: B018


def test_drop_oldest_deletion_is_named_as_such(tmp_path: Path) -> None:
    config = StoreConfig(
        segment=SegmentConfig(max_open_duration=3600.0),
        retention=RetentionConfig(size_cap=200_000, size_cap_policy="drop_oldest"),
    )
    with QuiverStore.open(tmp_path / "s", config) as store:
        sub = store.subscribe("slow")
        store.ingest(bundle(0))
        store.flush()
        first = sub.next(timeout=2.0)
        assert first is not None
        for i in range(1, 12):
            store.ingest(bundle(i))
        with pytest.raises(QuiverError, match=r"^segment 0 is gone before bundle 0 was read: retention.size_cap_policy 'drop_oldest' deleted it at the size cap$"):
            first.bundle  # noqa: B018


def test_layout_refusal_advice_works(tmp_path: Path) -> None:
    """Was: "flush() to drain the WAL" — after which the other layout was still refused (WAL bytes
    under the reclaim step stay). The advice now: flush or close, then move wal/ aside."""
    from adaptive_arrow.store_layout import OTAP_LAYOUT

    path = tmp_path / "s"
    with QuiverStore.open(path) as store:
        store.ingest(bundle(0, 10))
    with pytest.raises(QuiverError, match=r"open the store with the layout that wrote it and flush\(\) or close\(\) it \(every WAL entry is then in a segment file\), then move the wal/ directory aside to start a fresh log"):
        QuiverStore.open(path, layout=OTAP_LAYOUT)
    (path / "wal").rename(tmp_path / "wal.aside")
    with QuiverStore.open(path, layout=OTAP_LAYOUT) as store:
        assert [s.seq for s in store.segments()] == [0]


def dump_store(tmp_path: Path, batch: pa.RecordBatch) -> Path:
    path = tmp_path / "s"
    with QuiverStore.open(path) as store:
        store.ingest(RecordBundle({0: batch}))
    return path


def test_dump_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """Was: "quiver dump: [Errno 32] Broken pipe" on stderr and exit 2 (`quiver dump ... | head`)."""
    path = dump_store(tmp_path, pa.record_batch({"i": pa.array(range(1000), pa.int64())}))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write (as head is after its bytes)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "quiver_store.cli", "dump", str(path)], stdout=write_end, stderr=subprocess.PIPE, check=False
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")


# -- D: dump writes RFC 8259 JSON ----------------------------------------------------------------------
def test_dump_writes_non_finite_doubles_as_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: bare NaN / Infinity tokens, which strict JSON parsers refuse."""
    values = [1.5, float("nan"), float("inf"), float("-inf"), None]
    batch = pa.record_batch({"d": pa.array(values, pa.float64()), "l": pa.array([values] * 5, pa.list_(pa.float64()))})
    path = dump_store(tmp_path, batch)
    assert cli.main(["dump", str(path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()

    def refuse(token: str) -> None:
        raise ValueError(f"non-RFC 8259 token {token}")

    row = json.loads(line, parse_constant=refuse)
    expected = [1.5, "NaN", "Infinity", "-Infinity", None]
    assert [r["d"] for r in row["slots"]["0"]] == expected
    assert all(r["l"] == expected for r in row["slots"]["0"])


def test_dump_skips_a_segment_retention_deleted_after_the_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: on a live store, `quiver dump` failed 8 of 12 times with "[Errno 2] ... .qseg", having
    listed a segment that retention deleted before the dump reached it."""
    path = tmp_path / "s"
    with QuiverStore.open(path) as store:
        for i in range(3):
            store.ingest(bundle(i, 10))
            store.finalize_now("test")
    listed = offline.list_segment_seqs

    def list_then_delete(fs: FileSystem, seg_dir: str) -> list[int]:
        seqs = listed(fs, seg_dir)
        os.remove(os.path.join(seg_dir, f"{seqs[1]:016d}.qseg"))  # retention, between listing and reading
        return seqs

    monkeypatch.setattr(offline, "list_segment_seqs", list_then_delete)
    assert cli.main(["dump", str(path)]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["slots"]["0"][0]["i"] for r in rows] == [0, 2]
    assert "segment 1 was deleted by the store's retention while dumping; skipped" in captured.err
