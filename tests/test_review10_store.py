"""Store defects found by fresh-user review 5 (the guide's store lifecycle run by hand). Each test
failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle
from quiver_store.config import RetentionConfig, StoreConfig
from quiver_store.fs import FileSystem
from quiver_store.wal import sidecar
from quiver_store.wal.sidecar import TruncatePoint
from quiver_store.wal.writer import RECLAIM_THRESHOLD

from .test_review8_store import NoPunchFileSystem


def bundle(i: int, rows: int = 5000) -> RecordBundle:
    """About 40 KB of Arrow."""
    return RecordBundle({0: pa.record_batch({"v": np.arange(rows, dtype=np.int64) + i})})


FILE_SYSTEMS = pytest.mark.parametrize("fs", [FileSystem(), NoPunchFileSystem()], ids=["punch", "rewrite"])


@FILE_SYSTEMS
def test_the_reclaimed_wal_prefix_does_not_count_again_after_a_reopen(tmp_path: Path, fs: FileSystem) -> None:
    """Reopening counted the WAL prefix already in segments (a punched hole, or one the rewrite
    would drop) as usage again: 1.6 MB here, 7 MB in the review, where a drop_oldest cap then
    deleted 2 segments (684 bundles) nobody had read."""
    with QuiverStore.open(tmp_path, fs=fs) as store:
        store.subscribe("never-acks")  # keeps every segment
        for i in range(40):
            store.ingest(bundle(i))
        store.flush()
        assert store.stats()["wal_bytes"] < RECLAIM_THRESHOLD
        segments = len(store.segments())
        cap = store.disk_usage() + (200 << 10)
    config = StoreConfig(retention=RetentionConfig(size_cap=cap, size_cap_policy="drop_oldest"))
    with QuiverStore.open(tmp_path, config, fs=fs) as store:
        assert store.stats()["wal_bytes"] < RECLAIM_THRESHOLD
        store.ingest(bundle(99, rows=100))
        assert len(store.segments()) == segments  # nothing dropped
        assert store.stats()["quiver.segment.dropped_total"] == 0


def test_concurrent_close_calls_run_the_close_once(tmp_path: Path) -> None:
    """Two threads closing one store both ran the close: 3 of 5 tries raised a bare OSError
    (EBADF, the lock file's descriptor closed twice, a number that may belong to another file by
    then), 1 a QuiverError from finalizing a closed store. Now the second waits for the first."""
    import threading

    for attempt in range(10):
        path = tmp_path / str(attempt)
        store = QuiverStore.open(path)
        for i in range(5):
            store.ingest(bundle(i, rows=100))
        errors: list[BaseException] = []
        start = threading.Barrier(3)

        def close(store: QuiverStore = store, start: threading.Barrier = start, errors: list[BaseException] = errors) -> None:
            start.wait()
            try:
                store.close()
            except BaseException as exc:  # the test reports every kind
                errors.append(exc)

        threads = [threading.Thread(target=close) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == [] and store._closed
        with QuiverStore.open(path) as again:  # the lock was released once, the data is whole
            assert sorted(b.slots[0]["v"][0].as_py() for _, _, b in again.bundles()) == [0, 1, 2, 3, 4]


def _damaged_after_reclaimed_prefix(path: Path) -> tuple[TruncatePoint, Path]:
    """A crashed store: a WAL whose prefix is punched out (in segments), then three entries, the
    first one damaged. Returns the sidecar's point (where the entries start) and the WAL path."""
    with QuiverStore.open(path) as store:
        for i in range(40):
            store.ingest(bundle(i))
    store = QuiverStore.open(path)
    for i in range(3):
        store.ingest(bundle(100 + i, rows=500))
    store._abandon()  # a crash: three entries after the reclaimed prefix, not in segments
    point, _ = sidecar.read(FileSystem(), str(path / "wal"))
    assert point is not None and point.offset > RECLAIM_THRESHOLD
    wal = path / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    assert data.count(0, 30, point.offset) == point.offset - 30  # the prefix is a hole
    data[point.offset + 100] ^= 0xFF  # inside the first entry after it
    wal.write_bytes(bytes(data))
    return point, wal


def test_verify_names_the_damaged_entry_after_a_reclaimed_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Damage right after the punched (zeroed) WAL prefix merged with it into one run: verify sent
    the operator to offset 30, a legitimate hole, instead of the damaged entry, with the wrong reason."""
    from quiver_store import cli

    path = tmp_path / "s"
    point, _ = _damaged_after_reclaimed_prefix(path)
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out.replace("\n", " ")
    assert f"wal/quiver.wal at offset {point.offset}: corrupt entry: CRC32C mismatch" in out
    assert "at offset 30:" not in out


def test_inspect_does_not_call_a_segment_retention_deleted_during_the_listing_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: on a live store `quiver inspect` exited 1 with "opening the segment file failed ([Errno 2]"
    for a segment retention deleted between listing and reading (1 of 31 tries), where dump skips it."""
    import os

    from quiver_store import cli

    path = tmp_path / "s"
    with QuiverStore.open(path) as store:
        for i in range(3):
            store.ingest(bundle(i, rows=10))
            store.finalize_now("test")
    listed = cli.list_segment_seqs

    def list_then_delete(fs: FileSystem, seg_dir: str) -> list[int]:
        seqs = listed(fs, seg_dir)
        if len(seqs) == 3:
            os.remove(os.path.join(seg_dir, f"{seqs[1]:016d}.qseg"))  # retention, between listing and reading
        return seqs

    monkeypatch.setattr(cli, "list_segment_seqs", list_then_delete)
    assert cli.main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "deleted by retention while listing" in out and "Errno" not in out


def _store_with_a_cut_segment(path: Path) -> None:
    """Three segments of 10 bundles, subscriber `a` acked 5; segment 1 cut in half."""
    with QuiverStore.open(path) as store:
        sub = store.subscribe("a")
        for i in range(30):
            store.ingest(bundle(i))
            if i % 10 == 9:
                store.finalize_now("test")
        for _ in range(5):
            sub.next(1).ack()  # type: ignore[union-attr]
    cut = path / "segments" / "0000000000000001.qseg"
    with open(cut, "r+b") as f:
        f.truncate(cut.stat().st_size // 2)


def test_a_damaged_segment_is_set_aside_and_the_store_opens_without_it(tmp_path: Path) -> None:
    """Was: one segment cut short made QuiverStore.open raise CorruptionError, so the 23 intact
    segments of the review's store, its subscribers and ingest were all unavailable."""
    path = tmp_path / "s"
    _store_with_a_cut_segment(path)
    with QuiverStore.open(path) as store:
        assert [s.seq for s in store.segments()] == [0, 2]
        reports = store.stats()["corruption_reports"]
        assert reports[0]["source"] == "segments" and reports[0]["path"].endswith("0000000000000001.qseg")
        assert reports[0]["action"].startswith("moved to segments/quarantine/; opened without it")
        assert len(reports) == 1, reports  # not also "segment 1 is missing" (it was reported twice)
        sub, got = store.subscribe("a"), []
        while (d := sub.next(0.5)) is not None:
            got.append(d.bundle.slots[0]["v"][0].as_py())
            d.ack()
        assert got == [5, 6, 7, 8, 9, *range(20, 30)]  # segment 1's bundles were already out of the WAL
        assert [s["dropped_bundles"] for s in store.stats()["subscribers"]] == [10]
        store.ingest(bundle(99, rows=10))  # and the store takes data again
    assert (path / "segments" / "quarantine" / "0000000000000001.qseg").exists()  # kept, not destroyed


def test_strict_recovery_refuses_a_store_with_a_damaged_segment(tmp_path: Path) -> None:
    from quiver_store.config import WalConfig
    from quiver_store.errors import CorruptionError

    path = tmp_path / "s"
    _store_with_a_cut_segment(path)
    with pytest.raises(CorruptionError, match=r"0000000000000001.qseg at offset \d+: not a Quiver segment: .*wal.recovery='strict' refuses"):
        QuiverStore.open(path, StoreConfig(wal=WalConfig(recovery="strict")))
    assert (path / "segments" / "0000000000000001.qseg").exists()


def _acked_store(path: Path, *, crash: bool) -> None:
    """20 bundles in a segment, subscriber `exp` acked 15; then a crash (ack log only) or a close
    (checkpoint + a fresh ack log)."""
    store = QuiverStore.open(path)
    sub = store.subscribe("exp")
    for i in range(20):
        store.ingest(bundle(i, rows=100))
    store.flush()
    for _ in range(15):
        sub.next(1).ack()  # type: ignore[union-attr]
    if crash:
        store._abandon()
    else:
        store.close()


@pytest.mark.parametrize(("crash", "why"), [
    (True, "there is no ack log although segments were written and registered in it: every subscriber and acknowledgement is lost"),
    (False, r"ack.checkpoint points into ack log generation \d+, which is gone: the outcomes recorded after the checkpoint are lost"),
], ids=["after a crash", "after a close"])
def test_a_deleted_ack_log_is_reported_by_verify_and_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], crash: bool, why: str
) -> None:
    """Was: `rm ack.log` passed verify (exit 0) and open (no report), and the subscriber silently
    lost its 15 acknowledgements (or, from "latest", the 5 bundles it was owed)."""
    import re

    from quiver_store import cli

    path = tmp_path / "s"
    _acked_store(path, crash=crash)
    (path / "ack.log").unlink()
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out.replace("\n", " ")
    assert re.search(r"ack.log is missing: " + why, re.sub(r"\s+", " ", out))
    with QuiverStore.open(path) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["source"] == "ack log" and re.search(why, report["error"])


def test_verify_checks_every_ack_log_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a flipped bit in an ack log record passed verify (exit 0, no ack.log row) while opening
    the store reported it and set the rest of the log aside, losing 9 of 15 acknowledgements."""
    from quiver_store import cli

    path = tmp_path / "s"
    _acked_store(path, crash=True)
    assert cli.main(["verify", str(path)]) == 0
    assert "ack.log" in capsys.readouterr().out
    log = path / "ack.log"
    data = bytearray(log.read_bytes())
    data[len(data) // 3] ^= 0x01
    log.write_bytes(bytes(data))
    assert cli.main(["verify", str(path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "ack.log at offset" in out and "ack log record failed its CRC32C/length check" in out


def test_quiver_output_keeps_bracketed_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: rich took `[ns, tz=UTC]` and `[ak]` for markup and dropped them: `--schemas` printed
    `time_unix_nano: timestamp`, and verify named `b/segments/...` for a store under `b[ak]/`."""
    from quiver_store import cli

    path = tmp_path / "b[ak]" / "s"
    with QuiverStore.open(path) as store:
        store.ingest(RecordBundle({0: pa.record_batch({
            "t": pa.array([1], pa.timestamp("ns", tz="UTC")), "d": pa.array([1], pa.duration("ns"))})}))
    assert cli.main(["inspect", str(path), "--schemas"]) == 0
    out = capsys.readouterr().out
    assert "t: timestamp[ns, tz=UTC]" in out and "d: duration[ns]" in out and "b[ak]" in out
    (path / "segments" / "0000000000000000.qseg").write_bytes(b"garbage")
    assert cli.main(["verify", str(path)]) == 1
    assert f"error: {path}/segments/0000000000000000.qseg" in " ".join(capsys.readouterr().out.split())


def test_verify_calls_a_torn_last_wal_entry_the_end_of_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a WAL cut inside its last entry (a crash mid-append) made verify exit 1 ("invalid tail
    (torn write or corruption)"), where replay and recovery call it the normal end of the log."""
    import os

    from quiver_store import cli

    path = tmp_path / "s"
    store = QuiverStore.open(path)
    for i in range(3):
        store.ingest(bundle(i, rows=500))
    store._abandon()
    wal = path / "wal" / "quiver.wal"
    data = wal.read_bytes().rstrip(b"\0")  # the entries, without the preallocated zero tail
    os.truncate(wal, len(data) - 100)  # the last entry cut short
    assert cli.main(["verify", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "2 entries, torn tail at" in out and "(end of log)" in out


def test_dump_includes_the_acknowledged_bundles_only_in_the_wal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: on a crashed store dump printed the segments' bundles and exit 0, silent about the
    acknowledged bundles only the WAL held (0 of 10 files for the review's store); then it only
    counted them. Now it dumps them after the segments', in both formats."""
    from quiver_store import cli

    path = tmp_path / "s"
    store = QuiverStore.open(path)
    for i in range(3):
        store.ingest(bundle(i, rows=1))
    store.flush()
    for i in range(3, 5):
        store.ingest(bundle(i, rows=1))
    store._abandon()
    assert cli.main(["dump", str(path)]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [(r["segment"], r["bundle"], r.get("wal_sequence")) for r in rows] == [
        (0, 0, None), (0, 1, None), (0, 2, None), (None, None, 3), (None, None, 4)
    ]
    assert [r["slots"]["0"][0]["v"] for r in rows] == [0, 1, 2, 3, 4]
    assert "the last 2 bundle(s) are only in the WAL (acknowledged, not in a segment yet)" in " ".join(captured.err.split())
    out = tmp_path / "arrow"
    assert cli.main(["dump", str(path), "--format", "arrow", "--output", str(out)]) == 0
    files = sorted(os.listdir(out))
    assert files[3:] == [f"wal{seq:020d}_slot00.arrow" for seq in (3, 4)]
    assert [pa.ipc.open_file(str(out / f)).read_all().column("v")[0].as_py() for f in files] == [0, 1, 2, 3, 4]
    assert cli.main(["dump", str(path), "--format", "arrow", "--output", str(out)]) == 2  # an earlier dump's files
    assert cli.main(["replay", str(path)]) == 0  # replay, which shares the plan, still works
    assert "entries to replay into the open segment: 2" in capsys.readouterr().out


def test_replay_counts_whole_wal_files_it_would_move_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: WAL files after a corrupt rotated chunk showed as `quarantine_file ... length 0` and were
    left out of `bytes that would be quarantined` (716,760 bytes holding 7 acked bundles in the review)."""
    import os

    from quiver_store import cli
    from quiver_store.config import WalConfig

    path = tmp_path / "s"
    store = QuiverStore.open(path, StoreConfig(wal=WalConfig(rotation_size=256 << 10)))
    for i in range(20):
        store.ingest(bundle(i))
    store._abandon()
    wal = path / "wal"
    chunks = sorted(p for p in os.listdir(wal) if p.startswith("quiver.wal."))
    assert len(chunks) >= 2
    first = wal / chunks[0]
    data = bytearray(first.read_bytes())
    data[5000] ^= 0xFF
    first.write_bytes(bytes(data))
    assert cli.main(["replay", str(path)]) == 1  # corruption found
    out = " ".join(capsys.readouterr().out.split())
    moved = [wal / c for c in chunks[1:]] + [wal / "quiver.wal"]
    for p in moved:
        assert f"would quarantine_file: {p} offset 0 length {p.stat().st_size}" in out
    quarantined = int(out.split("bytes that would be quarantined: ")[1].split()[0])
    assert quarantined > sum(p.stat().st_size for p in moved)


def test_recovery_without_the_sidecar_starts_the_damage_after_the_punched_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: with wal/truncate.offset gone, the punched prefix and a damaged entry after it were one
    corrupt run from offset 30, so recovery quarantined and cut from 30 and replay said so."""
    from quiver_store import cli

    path = tmp_path / "s"
    point, wal = _damaged_after_reclaimed_prefix(path)
    (path / "wal" / sidecar.NAME).unlink()
    assert cli.main(["replay", str(path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"quiver.wal at offset {point.offset}: corrupt WAL entry (CRC32C mismatch)" in out
    assert f"would truncate: {wal} offset {point.offset} " in out


def test_a_segment_file_renamed_to_another_number_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: segment 1 renamed to ...07.qseg passed verify (only "segment 1 MISSING"), and the open
    store listed it as segment 1 in segments() but yielded it as 7 from bundles()."""
    from quiver_store import cli

    path = tmp_path / "s"
    with QuiverStore.open(path) as store:
        for i in range(3):
            store.ingest(bundle(i, rows=1))
            store.finalize_now("test")
    seg = path / "segments"
    (seg / "0000000000000001.qseg").rename(seg / "0000000000000007.qseg")
    assert cli.main(["verify", str(path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "0000000000000007.qseg at offset 16: the file is named for segment 7 but holds segment 1" in out
    with QuiverStore.open(path) as store:  # set aside, as any segment whose metadata is wrong
        assert [s.seq for s in store.segments()] == [0, 2]
        assert [seq for seq, _, _ in store.bundles()] == [0, 2]
    assert (seg / "quarantine" / "0000000000000007.qseg").exists()
