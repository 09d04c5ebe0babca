"""`quiver verify` notices missing files, not only damaged ones, and stays quiet on healthy stores.

Every store is built through the public API; files are then removed the way an operator or a bad
copy would. Healthy cases include stores whose segments retention deleted (steady state, out of
order after a nack, max_age, drop_oldest), a crash that skipped reserved segment numbers, and a
fresh store.
"""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import QuiverStore, RecordBundle, RetentionConfig, SegmentConfig, StoreConfig, WalConfig
from quiver_store.cli import main

from .powerloss import PowerLossFS
from .test_power_loss import CONFIG as PL_CONFIG
from .test_power_loss import DIRECT as PL_DIRECT
from .test_power_loss import run_subscribed_workload

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
NO_TICK = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), retention=RetentionConfig(maintenance_interval=3600.0))


def bundle(i: int, rows: int = 5, ts: int | None = None) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * rows, pa.int64())})}, ingestion_time_ns=ts)


def seg(root: Path, seq: int) -> Path:
    return root / "segments" / f"{seq:016d}.qseg"


def segment_seqs(root: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (root / "segments").glob("*.qseg"))


def store_with_segments(root: Path, n: int = 4, *, subscriber: bool = False, close: bool = True) -> Path:
    """n segments of two bundles each; optionally a subscriber that acknowledged nothing."""
    store = QuiverStore.open(root, NO_TICK)
    if subscriber:
        store.subscribe("exporter")
    for s in range(n):
        store.ingest(bundle(2 * s))
        store.ingest(bundle(2 * s + 1))
        store.flush()
    if close:
        store.close()
    else:
        store._abandon()  # a crash: the ack log keeps its records, no final checkpoint
    return root


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def verify(root: Path, capsys) -> tuple[int, list[str]]:
    """Exit status and the error lines (whitespace collapsed); verify must not change a byte."""
    before = digest(root)
    code = main(["verify", str(root)])
    out, err = capsys.readouterr()
    assert err == "" and digest(root) == before
    return code, [" ".join(line.split()) for line in out.splitlines() if line.startswith("error:")]


def assert_clean(root: Path, capsys) -> None:
    code, errors = verify(root, capsys)
    assert (code, errors) == (0, [])


# -- segments -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("close", [True, False], ids=["closed", "crashed"])
def test_missing_segments_directory(tmp_path, capsys, close):
    root = store_with_segments(tmp_path, 3, close=close)
    shutil.rmtree(root / "segments")
    code, errors = verify(root, capsys)
    assert code == 1
    assert len(errors) == 1
    msg = errors[0]
    assert msg.startswith(f"error: {root / 'segments'}/: segments/ is missing although ")
    assert "wal/truncate.offset exists (it is first written once a segment file is durable)" in msg
    # SEGMENT records ride along with the next ack log commit: a crash before one loses them
    assert ("the ack log registered segments up to 2" in msg) == close


@pytest.mark.parametrize("subscriber", [False, True], ids=["no-subscriber", "subscriber"])
@pytest.mark.parametrize("close", [True, False], ids=["closed", "crashed"])
def test_missing_segment_between_present_ones(tmp_path, capsys, subscriber, close):
    root = store_with_segments(tmp_path, 4, subscriber=subscriber, close=close)
    seg(root, 2).unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert len(errors) == 1
    msg = errors[0]
    assert msg.startswith(f"error: {root / 'segments' / '0000000000000002.qseg'}: segment(s) 2 between segments 1 and 3 missing: ")
    assert ("the ack log registered segment(s) 2" in msg) == close  # the crash came before its commit
    assert "WAL sequence(s) 4..5 are in no segment file, and segments/next.seq (wal_covered 0) shows no deletion reached them" in msg
    if subscriber and close:
        assert "segment 2: subscriber 'exporter' has not acknowledged 2 of its 2 bundles" in msg


def test_missing_oldest_and_newest_segments(tmp_path, capsys):
    root = store_with_segments(tmp_path, 4)
    seg(root, 0).unlink()
    seg(root, 3).unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    joined = "\n".join(errors)
    assert "segment(s) 0 below segment 1 missing: the ack log registered segment(s) 0; WAL sequence(s) 0..1 are in no segment file" in joined
    assert "segment(s) 3 above segment 2 missing: the ack log registered segment(s) 3; segments/next.seq wal_covered 0 is not past their WAL sequences (all above 5)" in joined
    # the newest segment's entries are still in the WAL, before the truncate point: it is ahead of the segments
    assert "wal/truncate.offset: the truncate point (generation 0, offset" in joined
    assert "is past WAL entries 6..7 that no segment file holds (the segments hold WAL sequences up to 5)" in joined


def test_segment_owed_to_a_subscriber_is_flagged_even_when_the_floor_moved(tmp_path, capsys):
    """Retention deleted segment 0 (so next.seq's wal_covered passed every segment written), then
    segment 2, which the subscriber never acknowledged, vanished: only the ack log proves it."""
    root = tmp_path
    with QuiverStore.open(root, NO_TICK) as store:
        sub = store.subscribe("exporter")
        for s in range(3):
            store.ingest(bundle(s))
            store.flush()
        d = sub.next(timeout=5)
        assert d is not None and d.segment_seq == 0
        d.ack()  # segment 0 processed: retention deletes it and raises the floor
    assert segment_seqs(root) == [1, 2]
    assert_clean(root, capsys)
    seg(root, 2).unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert errors == [
        f"error: {seg(root, 2)}: segment(s) 2 above segment 1 missing: the ack log registered segment(s) 2; "
        "segment 2: subscriber 'exporter' has not acknowledged 1 of its 1 bundles (retention records a drop for "
        "every waiting subscriber before it deletes a segment)"
    ]


def test_missing_next_seq(tmp_path, capsys):
    root = store_with_segments(tmp_path, 2)
    (root / "segments" / "next.seq").unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert errors == [
        f"error: {root / 'segments' / 'next.seq'}: segments/next.seq is missing: it is written before the first "
        "segment number is used, and this store has written segments; without it a reopen hands out segment "
        "numbers again and ignores its record of deletions"
    ]


def test_truncate_point_ahead_of_the_segments_after_the_wal_was_reclaimed(tmp_path, capsys):
    """Large bundles: the WAL prefix is punched out (or rewritten) once segments hold it, so after the
    segments vanish only the first surviving entry's sequence shows what is gone."""
    root = tmp_path
    big = [RecordBundle({0: pa.record_batch({"v": pa.array(range(i, i + 40_000))})}) for i in range(40)]
    store = QuiverStore.open(root, QUIET)
    for b in big:
        store.ingest(b)
    store.flush()
    assert store.stats()["holes_punched"] + store.stats()["rewrites"] >= 1
    store.ingest(bundle(99))
    store._abandon()
    assert_clean(root, capsys)
    shutil.rmtree(root / "segments")
    code, errors = verify(root, capsys)
    assert code == 1 and len(errors) == 1
    assert "segments/ is missing although wal/truncate.offset exists" in errors[0]
    assert ("WAL sequence(s) 0..39 are in no segment file and no longer in the WAL (the oldest entry recovery reads has "
            "sequence 40; the segments hold sequences up to -1)") in errors[0]


# -- WAL ---------------------------------------------------------------------------------------------
def rotated_store(root: Path) -> Path:
    """A crashed store whose WAL rotated into several chunks, no segment written."""
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(rotation_size=64 * 1024, preallocate=0))
    store = QuiverStore.open(root, cfg)
    for i in range(12):
        store.ingest(bundle(i, rows=4000))
    store._abandon()
    return root


def test_missing_rotated_wal_generation(tmp_path, capsys):
    root = rotated_store(tmp_path)
    chunks = sorted(p.name for p in (root / "wal").glob("quiver.wal.*"))
    assert len(chunks) >= 3
    assert_clean(root, capsys)
    (root / "wal" / "quiver.wal.1").unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert errors == [
        f"error: {root / 'wal' / 'quiver.wal.1'}: rotated WAL generation(s) 1 missing: there is no "
        "wal/truncate.offset, and no WAL file is reclaimed before one is written"
    ]


def test_missing_wal_generation_the_sidecar_names(tmp_path, capsys):
    root = tmp_path
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(rotation_size=64 * 1024, preallocate=0))
    store = QuiverStore.open(root, cfg)
    store.ingest(bundle(0))
    store.flush()  # the sidecar now points into the active generation 0
    for i in range(1, 12):
        store.ingest(bundle(i, rows=4000))
    store._abandon()
    assert (root / "wal" / "quiver.wal.0").exists()
    assert_clean(root, capsys)
    (root / "wal" / "quiver.wal.0").unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert any(
        e.startswith(f"error: {root / 'wal' / 'quiver.wal.0'}: WAL generation 0 is missing: wal/truncate.offset says "
                     "recovery starts in it at offset")
        for e in errors
    ), errors


@pytest.mark.parametrize("what", ["LOCK", "ack.log"])
def test_missing_wal_directory(tmp_path, capsys, what):
    root = store_with_segments(tmp_path, 1)
    shutil.rmtree(root / "wal")
    assert (root / what).exists()
    code, errors = verify(root, capsys)
    assert code == 1
    assert len(errors) == 1
    assert errors[0].startswith(f"error: {root / 'wal'}/: wal/ is missing: {root} holds ")
    assert "so QuiverStore.open ran on it, and it creates wal/ first" in errors[0]


def test_segments_copied_out_of_a_store_verify_clean(tmp_path, capsys):
    """A segments/ directory copied on its own (no LOCK, no ack log, no wal/) is a supported input."""
    store_with_segments(tmp_path / "store", 2)
    shutil.copytree(tmp_path / "store" / "segments", tmp_path / "copy" / "segments")
    assert_clean(tmp_path / "copy", capsys)


# -- healthy stores stay clean -----------------------------------------------------------------------
def test_fresh_store_and_crashed_store_without_segments(tmp_path, capsys):
    with QuiverStore.open(tmp_path / "fresh", QUIET):
        pass
    assert_clean(tmp_path / "fresh", capsys)
    store = QuiverStore.open(tmp_path / "crashed", QUIET)
    for i in range(3):
        store.ingest(bundle(i))
    store._abandon()
    assert_clean(tmp_path / "crashed", capsys)
    (tmp_path / "crashed" / "segments").rmdir()  # nothing was ever in it: nothing is lost
    assert_clean(tmp_path / "crashed", capsys)


@pytest.mark.parametrize("close", [True, False], ids=["closed", "crashed"])
def test_steady_state_retention_deleting_everything(tmp_path, capsys, close):
    store = QuiverStore.open(tmp_path, NO_TICK)
    sub = store.subscribe("exporter")
    for s in range(3):
        store.ingest(bundle(s))
        store.flush()
    while (d := sub.next(timeout=0.2)) is not None:
        d.ack()
    store.ingest(bundle(9))  # in the WAL only
    assert segment_seqs(tmp_path) == []
    store.close() if close else store._abandon()
    assert_clean(tmp_path, capsys)


@pytest.mark.parametrize("close", [True, False], ids=["closed", "crashed"])
def test_retention_deleting_out_of_order_and_a_late_subscriber(tmp_path, capsys, close):
    """Segment 1's bundle is nacked, 0 and 2 are acknowledged: retention deletes 0 and 2 and keeps 1.
    A subscriber that arrives afterwards starts at segment 1 and never saw 2: not a loss."""
    store = QuiverStore.open(tmp_path, NO_TICK)
    sub = store.subscribe("exporter")
    for s in range(3):
        store.ingest(bundle(s))
        store.flush()
    for _ in range(3):
        d = sub.next(timeout=5)
        assert d is not None
        d.nack() if d.segment_seq == 1 else d.ack()
    assert segment_seqs(tmp_path) == [1]
    store.subscribe("late")
    store.close() if close else store._abandon()
    assert_clean(tmp_path, capsys)


def test_max_age_and_drop_oldest_deletions(tmp_path, capsys):
    old = 1_000_000_000  # 1970: expired under any max_age
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0),
                      retention=RetentionConfig(max_age=60.0, maintenance_interval=3600.0))
    with QuiverStore.open(tmp_path / "age", cfg) as store:
        store.subscribe("exporter")
        for s in range(4):
            store.ingest(bundle(s, ts=old if s in (1, 2) else None))  # 1 and 2 expire: a hole in the middle
            store.flush()
        store.maintain()
    assert segment_seqs(tmp_path / "age") == [0, 3]
    assert_clean(tmp_path / "age", capsys)

    root = tmp_path / "drop"
    with QuiverStore.open(root, NO_TICK) as store:
        store.subscribe("exporter")
        for s in range(4):
            store.ingest(bundle(s, rows=2000))
            store.flush()
        usage = store.disk_usage()
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0),
                      retention=RetentionConfig(size_cap=usage + 2000, size_cap_policy="drop_oldest", maintenance_interval=3600.0))
    with QuiverStore.open(root, cfg) as store:
        store.ingest(bundle(9, rows=2000))
    assert segment_seqs(root)[0] > 0
    assert_clean(root, capsys)


def test_crash_skipping_reserved_segment_numbers(tmp_path, capsys):
    store_with_segments(tmp_path, 2, close=False)  # numbers 2..15 of the reserved run are skipped
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(bundle(50))
    assert segment_seqs(tmp_path) == [0, 1, 16]
    assert_clean(tmp_path, capsys)


@pytest.mark.parametrize("close", [True, False], ids=["closed", "crashed"])
def test_direct_bundles_and_their_deletion(tmp_path, capsys, close):
    """A large bundle skips the WAL for a segment of its own (a WAL sequence without a WAL entry);
    retention deleting such segments is no loss either."""
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(direct_bundle_size=64 * 1024),
                      retention=RetentionConfig(maintenance_interval=3600.0))
    store = QuiverStore.open(tmp_path, cfg)
    sub = store.subscribe("exporter")
    for i in range(6):
        receipt = store.ingest(bundle(i, rows=20_000 if i % 2 else 5))
        assert (receipt.segment_sequence is not None) == bool(i % 2)
    store.flush()
    store.ingest(bundle(7))  # only in the WAL
    d = sub.next(timeout=5)
    assert d is not None and d.segment_seq == 0
    d.ack()  # segment 0 (bundle 0, sealed in front of the first direct bundle) is deleted
    assert segment_seqs(tmp_path)[0] == 1
    store.close() if close else store._abandon()
    assert_clean(tmp_path, capsys)


def test_damaged_ack_checkpoint_is_reported(tmp_path, capsys):
    """verify reads the ack log for evidence; a checkpoint QuiverStore.open would refuse is damage."""
    root = store_with_segments(tmp_path, 2, subscriber=True)
    cp = root / "ack.checkpoint"
    data = bytearray(cp.read_bytes())
    data[-1] ^= 1
    cp.write_bytes(bytes(data))
    code, errors = verify(root, capsys)
    assert code == 1
    assert len(errors) == 1 and errors[0].startswith(f"error: {cp} at offset {len(data) - 4}: ack checkpoint failed its CRC32C check")


# -- random histories ---------------------------------------------------------------------------------
STEPS = st.lists(
    st.sampled_from(["ingest", "ingest", "flush", "ack", "ack_all", "nack", "maintain", "late", "reopen", "crash"]),
    min_size=3,
    max_size=14,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS, crash_at_end=st.booleans(), pick=st.integers(0, 63))
def test_random_histories_verify_clean_and_an_owed_segment_is_missed(tmp_path_factory, capsys, steps, crash_at_end, pick):
    """Ingest, flush, ack, nack, retention, late subscribers, reopen and crash in any order: verify is
    clean. Then removing a segment the first subscriber still waits for (store closed) is flagged."""
    root = tmp_path_factory.mktemp("history")
    store = QuiverStore.open(root, NO_TICK)
    sub = store.subscribe("exporter")
    n = 0
    for step in steps:
        if step == "ingest":
            store.ingest(bundle(n))
            n += 1
        elif step == "flush":
            store.flush()
        elif step in ("ack", "ack_all", "nack"):
            while (d := sub.next(timeout=0)) is not None:
                d.nack() if step == "nack" else d.ack()
                if step != "ack_all":
                    break
        elif step == "maintain":
            store.maintain()
        elif step == "late":
            store.subscribe(f"late{n}")
        else:
            store.close() if step == "reopen" else store._abandon()
            store = QuiverStore.open(root, NO_TICK)
            sub = store.subscribe("exporter")
    store.flush()
    store._abandon() if crash_at_end else store.close()
    assert_clean(root, capsys)

    with QuiverStore.open(root, NO_TICK) as store:  # a clean close records every segment in the checkpoint
        registry = store._hub.registry
        exporter = registry._by_name("exporter")
        owed = [s.seq for s in store.segments() if exporter.unresolved(s.seq, registry.catalog)]
    if not owed:
        return
    victim = owed[pick % len(owed)]
    seg(root, victim).unlink()
    code, errors = verify(root, capsys)
    assert code == 1
    assert any(f"segment(s) {victim} " in e and "missing" in e for e in errors), errors


def test_missing_segment_next_to_skipped_numbers_is_named_as_a_range(tmp_path, capsys):
    """A crash skipped numbers 2..15; after the reopen segments 16 and 17 were written and the store
    crashed before the ack log committed their records. With 16 gone, its number is unknown: it is
    one of 2..16, and the WAL sequences between segments 1 and 17 prove something is lost."""
    store_with_segments(tmp_path, 2, close=False)
    store = QuiverStore.open(tmp_path, QUIET)
    for i in range(2):
        store.ingest(bundle(50 + i))
        store.flush()
    store._abandon()
    assert segment_seqs(tmp_path) == [0, 1, 16, 17]
    assert_clean(tmp_path, capsys)
    seg(tmp_path, 16).unlink()
    code, errors = verify(tmp_path, capsys)
    assert code == 1
    assert errors == [
        f"error: {seg(tmp_path, 2)}: segment(s) among 2..16 between segments 1 and 17 missing: WAL sequence(s) 4 are "
        "in no segment file, and segments/next.seq (wal_covered 4) shows no deletion reached them: the store raises "
        "it past a segment's WAL sequences before it deletes the segment"
    ]


# -- crash images -------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [PL_CONFIG, PL_DIRECT], ids=["logged", "direct"])
def test_no_crash_image_is_reported_missing(tmp_path, capsys, config):
    """What a reboot finds after power loss at every 4th operation of the power-loss workload (a
    subscriber acks as it goes, so retention deletes segments; WAL rotation and reclaim; direct
    bundles): whatever verify says about torn bytes, it never calls a file missing."""
    logging.disable(logging.CRITICAL)
    try:
        counting = PowerLossFS(str(tmp_path / "count"))
        run_subscribed_workload(str(tmp_path / "count"), counting, config)
        checked = 0
        for crash_at in range(1, counting.ops + 1, 4):
            live, image = tmp_path / f"live-{crash_at}", tmp_path / f"image-{crash_at}"
            fs = PowerLossFS(str(live), crash_at=crash_at)
            run_subscribed_workload(str(live), fs, config)
            fs.durable_image(str(image), random.Random(crash_at))
            if (image / "wal").exists() or (image / "segments").exists():
                main(["verify", str(image)])
                out = capsys.readouterr().out
                assert "MISSING" not in out, f"crash at op {crash_at}:\n{out}"
                checked += 1
            shutil.rmtree(live)
            shutil.rmtree(image, ignore_errors=True)
    finally:
        logging.disable(logging.NOTSET)
    assert checked > 40


# -- a segment that vanishes while verify runs ---------------------------------------------------------
def test_a_segment_retention_deletes_while_verify_runs_is_skipped_as_inspect_and_dump_skip_it(tmp_path, capsys, monkeypatch):
    """Was: `quiver verify: .../0000000000000000.qseg: opening the segment file failed ([Errno 2] No such
    file or directory: ...); nothing was read`, exit 2, for a segment a live store's retention deleted
    between verify's listing and its read, which inspect lists as "deleted by retention while listing"
    and dump skips with a note, both exit 0. The store deletes it here, through its own retention."""
    from quiver_store import cli

    store = QuiverStore.open(tmp_path, NO_TICK)
    sub = store.subscribe("exporter")
    for s in range(3):
        store.ingest(bundle(s))
        store.flush()
    listed = cli.list_segment_seqs

    def list_then_retain(fs, seg_dir):  # type: ignore[no-untyped-def]
        seqs = listed(fs, seg_dir)
        if seqs == [0, 1, 2]:  # verify's listing; then the subscriber acks segment 0 and retention deletes it
            d = sub.next(timeout=5)
            assert d is not None and d.segment_seq == 0
            d.ack()
            assert segment_seqs(tmp_path) == [1, 2]
        return seqs

    monkeypatch.setattr(cli, "list_segment_seqs", list_then_retain)
    try:
        code = main(["verify", str(tmp_path)])
        out, err = capsys.readouterr()
        assert code == 0, out
        assert err == "note: another process has this store open (its LOCK is held); the files may change while they are read\n"
        rows = [" ".join(line.replace("│", " ").split()) for line in out.splitlines()]
        assert "segments/0000000000000000.qseg - deleted by the store's retention while verifying; skipped" in rows
        assert "error:" not in out and "Errno" not in out
    finally:
        store.close()
    assert_clean(tmp_path, capsys)


@pytest.mark.parametrize("subscriber", [False, True], ids=["no-subscriber", "subscriber"])
def test_a_segment_removed_by_hand_while_verify_runs_is_missing_as_if_absent_from_the_start(tmp_path, capsys, monkeypatch, subscriber):
    """A segment the store's evidence still expects (next.seq, the ack log) that vanishes between the
    listing and the read is damage, reported as for a segment absent when verify started (exit 1),
    not skipped as a retention deletion. (Was: exit 2 on its ENOENT.)"""
    from quiver_store import cli

    root = store_with_segments(tmp_path, 4, subscriber=subscriber)
    listed = cli.list_segment_seqs

    def list_then_remove(fs, seg_dir):  # type: ignore[no-untyped-def]
        seqs = listed(fs, seg_dir)
        if seg(root, 2).exists():
            seg(root, 2).unlink()  # by hand, not by the store
        return seqs

    with monkeypatch.context() as patched:
        patched.setattr(cli, "list_segment_seqs", list_then_remove)
        code = main(["verify", str(root)])
    out, err = capsys.readouterr()
    errors = [" ".join(line.split()) for line in out.splitlines() if line.startswith("error:")]
    assert code == 1 and err == "" and "while verifying" not in out
    assert len(errors) == 1 and errors[0].startswith(
        f"error: {seg(root, 2)}: segment(s) 2 between segments 1 and 3 missing: the ack log registered segment(s) 2")
    assert (code, errors) == verify(root, capsys)  # what verify says of it once it is absent from the start


def test_a_listed_segment_that_cannot_be_opened_for_enoent_is_still_unreadable(tmp_path, capsys):
    """ENOENT for a name segments/ still lists (a dangling symlink) is a file that cannot be read:
    exit 2, as before; only a segment gone from the listing counts as deleted while verifying."""
    root = store_with_segments(tmp_path, 3)
    seg(root, 1).unlink()
    seg(root, 1).symlink_to(tmp_path / "nowhere.qseg")
    assert main(["verify", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"quiver verify: {seg(root, 1)}: opening the segment file failed ([Errno 2]")
