"""Ack log: framing, group commit, torn tails, corruption, checkpoints and rotation, clean close."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store.config import SubscriberConfig
from quiver_store.errors import CorruptionError, QuiverError, StoreClosedError
from quiver_store.fs import FileSystem
from quiver_store.subscriber import ack_log as log
from quiver_store.subscriber.registry import SegmentRef, SubscriberRegistry, read_offline, rebuild
from quiver_store.subscriber.state import Outcome

from .signal_windows import raise_before, run_on_a_thread


def no_reader(path):
    """These registries have no segment files: ack()'s read of an unread bundle fails, as for a
    dropped bundle, and the ack is still recorded."""
    raise QuiverError(f"no segment files in these tests ({path})")


def open_registry(directory, segments=(), **kw):
    config = kw.pop("config", SubscriberConfig())
    reg, _stale = SubscriberRegistry.open(
        str(directory),
        [SegmentRef(s, n, f"/nowhere/{s}") for s, n in segments],
        config=config,
        reader_factory=no_reader,
        **kw,
    )
    return reg


def write_records(directory, records: list[bytes]) -> str:
    ack, _ = log.AckLog.open(str(directory))
    for r in records:
        ack.append(r)
    ack.close()
    return os.path.join(str(directory), log.LOG_NAME)


SAMPLE = [
    log.encode_segment(7, 3),
    log.encode_subscribe(0, 6, 111, "parquet_exporter"),
    log.encode_outcome(0, 7, 0, Outcome.ACK, 222),
    log.encode_outcome(0, 7, 1, Outcome.NACK, 333),
    log.encode_outcome(0, 7, 2, Outcome.DROPPED, 444),
    log.encode_orphaned(0, 555),
    log.encode_unsubscribe(0, 666),
]


def test_records_round_trip_and_layout(tmp_path):
    path = write_records(tmp_path, SAMPLE)
    data = Path(path).read_bytes()
    assert data[:8] == b"QUIVACK\0" and int.from_bytes(data[8:10], "little") == 1
    assert int.from_bytes(data[12:20], "little") == 1  # generation of the first file
    recs = list(log.iter_records(data))
    assert recs == [
        (log.SEGMENT, 7, 3),
        (log.SUBSCRIBE, 0, 6, 111, "parquet_exporter"),
        (log.OUTCOME, 0, 7, 0, 0, 222),
        (log.OUTCOME, 0, 7, 1, 1, 333),
        (log.OUTCOME, 0, 7, 2, 2, 444),
        (log.ORPHANED, 0, 555),
        (log.UNSUBSCRIBE, 0, 666),
    ]
    # an outcome frame: u32 len | u8 type | u32 sub | u64 seq | u32 idx | u8 outcome | i64 ts | u32 crc
    frame = SAMPLE[2]
    assert (
        len(frame) == 4 + 1 + 25 + 4 and int.from_bytes(frame[:4], "little") == 26 and frame[4] == log.OUTCOME
    )


def test_unknown_record_types_are_skipped_by_length(tmp_path):
    unknown = log._frame(99, b"future")
    path = write_records(tmp_path, [SAMPLE[0], unknown, SAMPLE[1]])
    assert [r[0] for r in log.iter_records(Path(path).read_bytes())] == [log.SEGMENT, log.SUBSCRIBE]


def test_every_truncation_offset_recovers_an_exact_prefix(tmp_path):
    path = write_records(tmp_path / "src", SAMPLE)
    data = Path(path).read_bytes()
    bounds = [log.HEADER_SIZE]
    for r in SAMPLE:
        bounds.append(bounds[-1] + len(r))
    for cut in range(log.HEADER_SIZE, len(data) + 1):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / log.LOG_NAME).write_bytes(data[:cut])
        ack, replay = log.AckLog.open(str(d), recovery="strict")
        complete = sum(1 for b in bounds[1:] if b <= cut)
        assert len(replay.records) == complete, cut
        assert replay.torn_bytes == cut - bounds[complete]
        assert os.path.getsize(d / log.LOG_NAME) == bounds[complete]  # torn tail cut before appending
        ack.close()


def test_mid_log_corruption_is_reported_with_path_and_offset(tmp_path):
    path = write_records(tmp_path, SAMPLE)
    data = bytearray(Path(path).read_bytes())
    bad = log.HEADER_SIZE + len(SAMPLE[0]) + 6  # inside the SUBSCRIBE record
    data[bad] ^= 0x01
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="failed its CRC32C") as info:
        log.AckLog.open(str(tmp_path), recovery="strict")
    assert info.value.path == path and info.value.offset == log.HEADER_SIZE + len(SAMPLE[0])


def test_point_in_time_keeps_the_prefix_and_moves_the_rest_aside(tmp_path):
    path = write_records(tmp_path, SAMPLE)
    data = bytearray(Path(path).read_bytes())
    start = log.HEADER_SIZE + len(SAMPLE[0]) + len(SAMPLE[1])
    data[start + 8] ^= 0x10
    Path(path).write_bytes(bytes(data))
    ack, replay = log.AckLog.open(str(tmp_path))
    assert [r[0] for r in replay.records] == [log.SEGMENT, log.SUBSCRIBE]
    assert len(replay.corruption) == 1 and replay.corruption[0].offset == start
    aside = [n for n in os.listdir(tmp_path) if n.endswith(".corrupt")]
    assert aside == [f"ack.log.{start}.corrupt"]
    assert Path(tmp_path / aside[0]).read_bytes() == bytes(data[start:])
    ack.close()


def test_skip_corrupt_resynchronises_on_the_next_record(tmp_path):
    path = write_records(tmp_path, SAMPLE)
    data = bytearray(Path(path).read_bytes())
    data[log.HEADER_SIZE + len(SAMPLE[0]) + 8] ^= 0x10
    Path(path).write_bytes(bytes(data))
    ack, replay = log.AckLog.open(str(tmp_path), recovery="skip_corrupt")
    assert [r[0] for r in replay.records] == [log.SEGMENT] + [r[4] for r in SAMPLE[2:]]
    assert len(replay.corruption) == 1
    ack.close()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_single_bit_flip_is_detected(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("flip")
    path = write_records(d, SAMPLE)
    raw = bytearray(Path(path).read_bytes())
    bit = data.draw(st.integers(log.HEADER_SIZE * 8, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    Path(path).write_bytes(bytes(raw))
    try:
        ack, replay = log.AckLog.open(str(d), recovery="point_in_time")
    except CorruptionError:
        return
    good = [r for r in (list(log.iter_records(b"".join([log.encode_header(1), *SAMPLE]))))]
    assert replay.records == good[: len(replay.records)]  # never a damaged record
    assert len(replay.records) < len(good)
    ack.close()


def test_group_commit_shares_fdatasync_between_concurrent_acks(tmp_path):
    class SlowSync(FileSystem):
        syncs = 0

        def fdatasync(self, fd):
            SlowSync.syncs += 1
            threading.Event().wait(0.01)
            super().fdatasync(fd)

    ack, _ = log.AckLog.open(str(tmp_path), fs=SlowSync())
    n_threads, per = 8, 20

    def worker(k):
        for i in range(per):
            lsn = ack.append(log.encode_outcome(k, 1, i, Outcome.ACK, 0))
            ack.commit(lsn)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ack.close()
    assert SlowSync.syncs < n_threads * per  # shared
    _, replay = log.AckLog.open(str(tmp_path))
    assert len(replay.records) == n_threads * per


def test_failed_fdatasync_poisons_the_log(tmp_path):
    class BadSync(FileSystem):
        def fdatasync(self, fd):
            raise OSError(5, "Input/output error")

    ack, _ = log.AckLog.open(str(tmp_path), fs=BadSync())
    lsn = ack.append(SAMPLE[0])
    with pytest.raises(QuiverError, match="fdatasync failed"):
        ack.commit(lsn)
    with pytest.raises(QuiverError, match="failed earlier"):
        ack.append(SAMPLE[1])


@pytest.mark.parametrize(("method", "line_text"), [
    ("commit", "data = bytes(self._buf)"),  # leadership taken, before the write's try block
    ("commit", "self._flusher = 0"),  # written and synced, leadership not yet given back
    ("checkpoint", "data = bytes(self._buf)"),
])
def test_a_write_cut_short_outside_its_try_block_never_hangs_the_close(tmp_path, method, line_text):
    """A Ctrl-C between two statements of a commit or checkpoint, outside the block that poisons
    the log on any exception, used to leave the write marked as under way: the close()'s final
    checkpoint then waited for it forever (make test, test_interrupt.py, subscriber-in-main).
    Now the thread finds its own stale write, poisons the log (the records' durability is
    unknown) and the close ends."""
    ack, _ = log.AckLog.open(str(tmp_path))
    ack.commit(ack.append(SAMPLE[0]))  # durable before the interrupted call
    lsn = ack.append(SAMPLE[1])
    outcome: list[BaseException] = []

    def interrupted_call_then_close() -> None:  # on one thread, as the main thread does it
        sys.settrace(raise_before(getattr(log.AckLog, method), line_text))
        with pytest.raises(KeyboardInterrupt):
            ack.commit(lsn) if method == "commit" else ack.checkpoint(lambda gen, off: b"")
        sys.settrace(None)
        try:
            outcome.append(ack.checkpoint(lambda gen, off: b""))  # SubscriberRegistry.close checkpoints first
        finally:
            ack.close()

    run_on_a_thread(interrupted_call_then_close, timeout=10)
    assert outcome == [False] and ack.cut_short  # no checkpoint from a cut log: the reopen replays it
    with pytest.raises(QuiverError, match=r"failed earlier \(a write of this thread was cut short by an exception a signal handler raised\)"):
        ack.append(SAMPLE[2])  # poisoned: nothing more is claimed durable
    _, replay = log.AckLog.open(str(tmp_path))
    assert replay.records[0] == (log.SEGMENT, 7, 3)  # what was durable before the cut call still is


def test_acks_are_flushed_on_clean_close(tmp_path):
    """Regression (reference: shutdown() lost acknowledgement progress)."""
    reg = open_registry(tmp_path, [(0, 3)])
    reg.subscribe("exp")
    deliveries = [reg.next_delivery("exp", 0) for _ in range(3)]
    deliveries[0].ack()
    deliveries[2].ack()
    reg.close()
    state = read_offline(str(tmp_path))
    (sub,) = state.subscribers.values()
    assert sub.name == "exp" and sub.partial == {0: {0, 2}}
    reg = open_registry(tmp_path, [(0, 3)])
    reg.subscribe("exp")
    d = reg.next_delivery("exp", 0)
    assert (d.segment_seq, d.bundle_index) == (0, 1)
    reg.close()


@pytest.mark.parametrize("failure", [OSError(5, "Input/output error"), KeyboardInterrupt(), "claimed"],
                         ids=["disk", "cut", "cut before the write"])
def test_close_reports_a_disk_failure_of_the_log_again_but_not_a_write_a_signal_cut(tmp_path, failure):
    """A failed fdatasync may have met only a background checkpoint, so the close raises it again.
    A write cut by a signal handler's exception was reported by that exception, which left the
    call it cut: the close (a second SIGTERM handler's, say) ends quietly, writes no checkpoint
    and keeps the log files, and the reopen replays them. Cut after the commit claimed the write
    and before it began, the log learns of the cut only in the close's checkpoint (the sweep's
    twice form: 2 of 10,193 runs ended with "failed earlier" there)."""

    class FailingSync(FileSystem):
        armed = False

        def fdatasync(self, fd):
            if FailingSync.armed and isinstance(failure, BaseException):
                raise failure
            super().fdatasync(fd)

    reg = open_registry(tmp_path, [(0, 3)], fs=FailingSync())
    reg.subscribe("exp")
    reg.next_delivery("exp", 0).ack()
    FailingSync.armed = True
    delivery = reg.next_delivery("exp", 0)
    if failure == "claimed":
        sys.settrace(raise_before(log.AckLog.commit, "data = bytes(self._buf)"))
    try:
        with pytest.raises(QuiverError if isinstance(failure, OSError) else KeyboardInterrupt):
            delivery.ack()
    finally:
        sys.settrace(None)
    if isinstance(failure, OSError):
        with pytest.raises(QuiverError, match=r"failed earlier .*Input/output error"):
            reg.close()
    else:
        reg.close()
        assert not os.path.exists(tmp_path / log.CHECKPOINT_NAME)
    FailingSync.armed = False
    (sub,) = read_offline(str(tmp_path)).subscribers.values()
    assert sub.partial[0] in ({0}, {0, 1})  # the failed ack's record was written, its sync unknown


def test_a_commit_of_records_close_made_durable_returns(tmp_path):
    """Before, commit checked for a closed log first: an ack() whose record the store's close()
    had already flushed raised StoreClosedError, though reopening replays it (seen in the soak
    benchmark). Records appended after the close are refused."""
    ack, _ = log.AckLog.open(str(tmp_path))
    lsn = ack.append(SAMPLE[0])
    ack.close()
    ack.commit(lsn)  # durable: returns
    with pytest.raises(StoreClosedError, match="is closed"):
        ack.append(SAMPLE[1])
    _, replay = log.AckLog.open(str(tmp_path))
    assert replay.records[0] == (log.SEGMENT, 7, 3)


def test_checkpoint_rotates_and_bounds_replay(tmp_path):
    config = SubscriberConfig(ack_log_checkpoint_interval=50)
    reg = open_registry(tmp_path, [(s, 10) for s in range(30)], config=config)
    reg.subscribe("a")
    reg.subscribe("b")
    for _ in range(250):
        reg.next_delivery("a", 0).ack()
    for _ in range(7):
        reg.next_delivery("b", 0).ack()
    depth = reg._depth
    reg._log.commit()
    assert reg.counters["checkpoints_total"] >= 4
    files = sorted(n for n in os.listdir(tmp_path) if n.startswith("ack."))
    assert files == ["ack.checkpoint", "ack.log"]  # covered generations deleted
    # crash without close: replay = checkpoint + at most one interval of records
    ack, replay = log.AckLog.open(str(tmp_path))
    assert len(replay.records) == depth <= 50
    state = rebuild(replay.checkpoint, replay.records, "cp")
    ack.close()
    subs = {s.name: s for s in state.subscribers.values()}
    assert subs["a"].mark == 24 and subs["b"].mark == -1 and subs["b"].partial == {0: set(range(7))}


def test_corrupt_checkpoint_is_reported(tmp_path):
    reg = open_registry(tmp_path, [(0, 1)])
    reg.subscribe("a")
    reg.close()
    cp = tmp_path / log.CHECKPOINT_NAME
    raw = bytearray(cp.read_bytes())
    raw[40] ^= 0xFF
    cp.write_bytes(bytes(raw))
    with pytest.raises(CorruptionError, match="ack checkpoint failed its CRC32C"):
        open_registry(tmp_path, [(0, 1)])


def test_a_missing_checkpoint_the_log_proves_existed_is_corruption(tmp_path):
    """Was: with ack.checkpoint deleted, the store opened without a word and every subscriber and
    acknowledgement it held was gone (quiver verify said ok too). A log that starts past
    generation 1 was rotated, and a rotation deletes the files it covers only after writing the
    checkpoint, so the checkpoint must exist."""
    config = SubscriberConfig(ack_log_checkpoint_interval=50)
    reg = open_registry(tmp_path, [(s, 10) for s in range(10)], config=config)
    reg.subscribe("a")
    for _ in range(60):
        reg.next_delivery("a", 0).ack()
    reg.close()
    (tmp_path / log.CHECKPOINT_NAME).unlink()
    expected = rf"^{tmp_path / log.CHECKPOINT_NAME}: missing, but the oldest ack log file \(ack.log\) is generation \d+: "
    with pytest.raises(CorruptionError, match=expected):
        open_registry(tmp_path, [(s, 10) for s in range(10)], config=config)
    with pytest.raises(CorruptionError, match=expected):
        log.read_untouched(str(tmp_path))  # what quiver verify reads


def test_crash_between_rotation_and_checkpoint_replays_both_files(tmp_path):
    reg = open_registry(tmp_path, [(0, 4)])
    reg.subscribe("a")
    for _ in range(2):
        reg.next_delivery("a", 0).ack()
    reg._log.commit()
    # simulate the crash window: active file renamed, no new file, no checkpoint yet
    os.rename(tmp_path / "ack.log", tmp_path / "ack.log.1")
    reg2 = open_registry(tmp_path, [(0, 4)])
    assert reg2.describe()[0]["gap_set_size"] == 2
    assert reg2._log.generation == 2
    reg2.close()


@pytest.mark.parametrize("header", [bytes(24), b"garbage!" + bytes(16), log.encode_header(2)[:14] + bytes(10)])
def test_new_active_file_whose_header_never_became_durable_is_empty(tmp_path, header):
    """Power cut after rotation created the new ack.log but before its header was fsynced: the
    rotated file's records are replayed and the half-created file is discarded, not fatal."""
    reg = open_registry(tmp_path, [(0, 4)])
    reg.subscribe("a")
    for _ in range(2):
        reg.next_delivery("a", 0).ack()
    reg._log.commit()
    reg._log.abandon()
    os.rename(tmp_path / "ack.log", tmp_path / "ack.log.1")
    (tmp_path / "ack.log").write_bytes(header)
    reg2 = open_registry(tmp_path, [(0, 4)])
    assert reg2.describe()[0]["gap_set_size"] == 2
    assert reg2._log.generation == 2
    reg2.close()


def test_damaged_active_header_with_records_after_it_is_corruption(tmp_path):
    path = write_records(tmp_path, SAMPLE)
    data = bytearray(Path(path).read_bytes())
    data[3] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="ack log header is damaged") as err:
        log.AckLog.open(str(tmp_path))
    assert err.value.path == path and err.value.offset == 0
