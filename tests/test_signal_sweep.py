"""A SIGTERM handler that closes the store and exits, run at every point where CPython could run it.

The torture run of test_interrupt.py failed once in about 3,000 signals, "acked bundles delivered
again", in the exporter arrangement (the main thread consumes a subscription and acks each
delivery, a second thread ingests and flushes every 25 bundles) with SIGTERM sent twice to a
handler `store.close(); sys.exit(0)`. A random moment rarely lands in a window one bytecode
wide, so this module replays that writer in-process and runs the handler at the 0th, 1st, 2nd
... point where CPython 3.11 checks for pending signals in the writer's frames and the store's
(`SignalsAt` in tests/signal_windows.py), then a second time at the k-th point after the first
("twice": inside the close the first one deferred, the `with` block's close, the exit guard).
After each run the process's end is replayed (threading's shutdown joins the producer, atexit
runs the exit guard, then nothing more runs), the store is reopened and held to the promise:
nothing acked delivered again, nothing whose ingest returned lost, one ordered run of values.

The quick form runs a sample of points in `make test`; `make torture` runs every 10th point once
and a stride of pairs, about 3.5 min (QUIVER_SWEEP_STRIDE, QUIVER_SWEEP_TWICE_STRIDE,
QUIVER_SWEEP_SECOND: 1, 150, 2 sweep far more densely, for hours); the counts are in
docs/reliability.md.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest

import quiver_store
from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig, exit_guard
from quiver_store.config import RetentionConfig, SubscriberConfig, WalConfig
from quiver_store.errors import QuiverError, StoreClosedError
from quiver_store.subscriber.ack_log import AckLog
from quiver_store.subscriber.state import SubscriberState
from quiver_store.wal.writer import WalWriter

from .signal_windows import SignalsAt, point_at, run_before, run_on_a_thread

PER_SEGMENT = 5  # bundles per flush (the torture's writer flushes every 25)
SEGMENTS = 3  # finalized before the exporter starts; its acks make retention delete each in turn
OPEN = 2  # left in the open segment: the close finalizes them
# test_interrupt's configuration, with an ack-log checkpoint (and rotation) every 4 records, so
# several fall inside the swept acks, and no maintenance thread ticking at a random moment
CFG = StoreConfig(
    segment=SegmentConfig(target_size=64 << 10, max_open_duration=3600.0),
    subscribers=SubscriberConfig(ack_log_checkpoint_interval=4),
    retention=RetentionConfig(maintenance_interval=3600.0),
)
HANG_SECONDS = 20.0
STORE_FILES = os.path.dirname(quiver_store.__file__) + os.sep


def bundle(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"n": pa.array([i] * 40, pa.int64())}), 3: pa.record_batch({"s": [f"v{i}"]})})


def value(b: RecordBundle) -> int:
    return int(b.slots[0]["n"][0].as_py())


Point = int | Callable[[Any, str], bool]
"""Where SignalsAt runs the handler: the k-th point after the last, or the first one a predicate picks."""


@dataclass
class Run:
    """What one run of the exporter did and left."""

    fired: list[tuple[str, str, int, str]]  # where the handler ran
    points: int  # points passed in all
    ended: str  # how the writer's main code ended: "exit" (with the handler's exception), "end", or an error
    stored: set[int]  # values whose ingest returned
    acked: set[int]  # values whose ack() returned
    acking: set[int]  # values whose ack() was called
    left_open: bool  # no close finished: the process ended with the store open (the exit guard stopped it)
    problems: list[str] = field(default_factory=list)
    exit_problem: str = ""  # how the writer's end differs from the handler's exit (exit status 1, a traceback)


def exporter(path: Path, at: list[Point], producing: bool = False, how: str = "sigterm") -> Run:
    """Run the torture's writer in its "subscriber-in-main" arrangement on a thread of this process
    (the trace and profile functions are per thread) with the SIGTERM handler run at the points
    `at` (SignalsAt; with `how="ctrl-c"`, Ctrl-C's, which raises KeyboardInterrupt), then what the
    interpreter runs on its way out, then end the store as the process's end would. Without `producing`, every bundle is ingested (and all but the last OPEN
    finalized) before the exporter starts, so the points are the same from run to run; with it, a
    thread ingests and flushes every PER_SEGMENT bundles meanwhile, as in the torture."""
    store = QuiverStore.open(path, CFG)
    sub = store.subscribe("a")
    stored: list[int] = []
    acked: list[int] = []
    acking: list[int] = []
    producer_errors: list[str] = []
    if not producing:
        for i in range(SEGMENTS * PER_SEGMENT + OPEN):
            store.ingest(bundle(i))
            stored.append(i)
            if (i + 1) % PER_SEGMENT == 0 and i < SEGMENTS * PER_SEGMENT:
                store.flush()

    def produce() -> None:  # the torture writer's ingesting thread
        try:
            for i in range(8 * PER_SEGMENT):
                store.ingest(bundle(i))
                stored.append(i)
                if (i + 1) % PER_SEGMENT == 0:
                    store.flush()
        except StoreClosedError:
            pass
        except QuiverError as exc:  # as the writer: a log write the main thread's signal cut is no failure
            if "interrupted by" not in str(exc) and "signal handler raised" not in str(exc):
                producer_errors.append(f"producer: {exc!r}")

    producer = threading.Thread(target=produce, name="producer") if producing else None

    def on_term() -> None:  # the writer's SIGTERM handler
        store.close()
        sys.exit(0)

    def on_int() -> None:  # Python's default SIGINT handler
        raise KeyboardInterrupt

    def consume() -> None:
        if producing:  # the torture's loop, stopped after three segments' worth
            for delivery in sub:
                value = delivery.bundle.slots[0]["n"][0].as_py()
                acking.append(value)
                delivery.ack()
                acked.append(value)
                if len(acked) == SEGMENTS * PER_SEGMENT:
                    return
        else:  # every finalized bundle, then the `with` block closes the store
            while (next_one := sub.next(timeout=0)) is not None:
                value = next_one.bundle.slots[0]["n"][0].as_py()
                acking.append(value)
                next_one.ack()
                acked.append(value)

    def writer() -> None:  # the script: its `with QuiverStore.open(...)` block
        with store:
            if producer is not None:
                producer.start()
            consume()

    def threading_shutdown() -> None:  # the interpreter's first step on the way out: join non-daemon threads
        if producer is not None and producer.ident is not None:
            producer.join(HANG_SECONDS)

    def at_exit() -> None:  # then the atexit callbacks: the exit guard stops a store still open
        exit_guard._stop_open_stores()

    handler = on_term if how == "sigterm" else on_int
    ours = {f.__code__ for f in (handler, consume, writer, threading_shutdown, at_exit)}
    signals = SignalsAt(handler, at, lambda code: code in ours or code.co_filename.startswith(STORE_FILES))
    ended: list[str] = []

    def main() -> None:
        signals.install()
        try:
            writer()
            ended.append("end" if not signals.fired else "end, although the handler ran")
        except (SystemExit, KeyboardInterrupt) as exc:
            ended.append("exit" if isinstance(exc, SystemExit) == (how == "sigterm") else f"{exc!r} instead")
        except BaseException as exc:  # a traceback and exit status 1 in the real process
            ended.append("".join(traceback.format_exception(exc))[-3000:])
        only_ours = weakref.WeakSet([s for s in exit_guard._OPEN if s is store])
        for phase in (threading_shutdown, at_exit):
            try:
                with mock.patch.object(exit_guard, "_OPEN", only_ours):
                    phase()
            except BaseException:  # CPython prints "Exception ignored in ..." and goes on
                pass
        signals.uninstall()

    gc.collect()
    gc.disable()  # (a collection inside a traced call would add points and shift the numbering)
    try:
        run_on_a_thread(main, timeout=HANG_SECONDS + 10)
    finally:
        gc.enable()
    left_open = not store._closed
    if left_open:
        end_the_process(store, producer)
    close_what_the_process_left(path)
    run = Run(signals.fired, signals.total, ended[0], set(stored), set(acked), set(acking), left_open, producer_errors)
    if producer is not None and producer.is_alive():
        run.problems.append("hung: the producer thread never ended (interpreter shutdown waits for it)")
    if run.ended not in ("end", "exit"):
        run.exit_problem = f"the writer did not leave with the handler's exception: {run.ended}"
    return run


def end_the_process(store: QuiverStore, producer: threading.Thread | None) -> None:
    """After atexit the process is gone: what the exit guard did not stop is stopped as a crash
    would, buffered ack records are lost, descriptors and the lock let go (so this process can
    open the store again)."""
    store._stop_as_a_crash()
    store._hub.stop_thread(5.0)
    for thread in (store._applier, store._finalizer, producer):
        if thread is not None and thread.ident is not None:
            thread.join(5.0)
    for close in (store._hub.registry._log.abandon, store._wal.close, store._release_lock):
        with contextlib.suppress(Exception):  # a descriptor a cut-short close already closed
            close()


def close_what_the_process_left(path: Path) -> None:
    """The end of a process closes every descriptor it has: also one a cut-short close took out of
    the store and never closed (the lock's, which would refuse this process the next open)."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target == str(path) or target.startswith(f"{path}{os.sep}"):
                os.close(int(fd))


def reopen(path: Path) -> tuple[list[int], list[int]]:
    """Every stored value in order, and what subscriber "a" is delivered now (acking each)."""
    with QuiverStore.open(path, CFG) as store:
        store.flush()
        values = [value(b) for _, _, b in store.bundles()]
        sub = store.subscribe("a")
        delivered = []
        while (d := sub.next(timeout=0)) is not None:
            delivered.append(value(d.bundle))
            d.ack()
    return values, delivered


def check(path: Path, run: Run) -> list[str]:
    """The promise after the run (test_interrupt.check_round's checks): what is wrong, if anything."""
    problems = list(run.problems)
    values, delivered = reopen(path)
    if run.acked & set(delivered):
        problems.append(f"acked bundles delivered again: {sorted(run.acked & set(delivered))}")
    lost = run.stored - set(values) - run.acked - run.acking - set(delivered)
    if lost:
        problems.append(f"acknowledged bundles lost: {sorted(lost)}")
    if values != sorted(values) or len(values) != len(set(values)):
        problems.append(f"stored values are not one ordered run: {values}")
    if reopen(path)[1]:
        problems.append("bundles delivered again after every one was acked (at-least-once, once)")
    return problems


def sweep_root(tmp_path: Path) -> Path:
    """Where the runs' stores go: QUIVER_SWEEP_DIR if set, else /dev/shm where there is one (each run
    makes dozens of fsyncs; no run depends on what reaches a disk), else pytest's tmp_path."""
    chosen = os.environ.get("QUIVER_SWEEP_DIR")
    if chosen:
        return Path(chosen)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path


@contextlib.contextmanager
def store_dirs(tmp_path: Path) -> Iterator[Callable[[], Path]]:
    """A fresh store directory per run (sweep_root), all removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="quiver-sweep-", dir=sweep_root(tmp_path)))
    count = 0

    def fresh() -> Path:
        nonlocal count
        shutil.rmtree(root / str(count), ignore_errors=True)
        count += 1
        return root / str(count)

    try:
        yield fresh
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Sweep:
    runs: int = 0
    left_open: int = 0
    where: collections.Counter[str] = field(default_factory=collections.Counter)  # handler runs per function
    failures: list[str] = field(default_factory=list)  # the promise broken: data, or a hang
    exit_failures: list[str] = field(default_factory=list)  # the writer ended with another error than the handler's

    def run(self, path: Path, at: list[Point], producing: bool = False, how: str = "sigterm") -> Run:
        run = exporter(path, at, producing, how)
        self.runs += 1
        self.left_open += run.left_open
        for function, file, _, _ in run.fired:
            self.where[f"{file}:{function}"] += 1
        problems = check(path, run)
        if problems:
            self.failures.append(f"{how} handler at {at} ran at {run.fired}: {'; '.join(problems)}")
        if run.exit_problem:
            self.exit_failures.append(f"{how} handler at {at} ran at {run.fired}: {run.exit_problem}")
        return run

    def report(self) -> str:
        return (
            f"{self.runs} runs, {len(self.failures)} breaking the promise, {len(self.exit_failures)} ending with another "
            f"error, {self.left_open} leaving the store open:\n" + "\n".join((self.failures + self.exit_failures)[:10])
        )


def points_without_a_signal(tmp_path: Path) -> int:
    with store_dirs(tmp_path) as fresh:
        run = exporter(fresh(), [])
    assert run.ended == "end" and not run.fired
    return run.points


def sweep_once(tmp_path: Path, points: range, how: str = "sigterm") -> Sweep:
    """The handler once, at each of `points`."""
    sweep = Sweep()
    with store_dirs(tmp_path) as fresh:
        for k in points:
            run = sweep.run(fresh(), [k], how=how)
            assert run.fired, f"no point {k} (the run has {run.points})"
    return sweep


def sweep_twice(tmp_path: Path, firsts: range, seconds: Callable[[], Iterator[int]], how: str = "sigterm") -> Sweep:
    """The handler at each of `firsts`, then again at each of `seconds()` points after it, until
    the run ends before the second point."""
    sweep = Sweep()
    with store_dirs(tmp_path) as fresh:
        for k in firsts:
            for j in seconds():
                run = sweep.run(fresh(), [k, j], how=how)
                if len(run.fired) < 2:
                    break
    return sweep


def test_the_sweep_reaches_every_part_of_the_exporter(tmp_path: Path) -> None:
    """The point count of a run without a signal, and the handler at a spread of them and at the
    first point in each part of the exporter (the reads and acks, the subscriber state and its
    log, the segment reader, the store's close): a spread alone reaches a module or not as the
    count of points before it changes."""
    total = points_without_a_signal(tmp_path)
    assert total > 3000, total
    sweep = sweep_once(tmp_path, range(0, total, total // 60))
    parts = ("subscription.py", "registry.py", "ack_log.py", "reader.py", "engine.py")
    with store_dirs(tmp_path) as fresh:
        for part in parts:
            run = sweep.run(fresh(), [in_file(part)])
            assert [file for _, file, _, _ in run.fired] == [part], run.fired
    assert not sweep.failures and not sweep.exit_failures, sweep.report()


def in_file(name: str) -> Callable[[Any, str], bool]:
    """For SignalsAt's `at`: the first point in a frame of the store's file `name`."""
    return lambda frame, kind: frame.f_code.co_filename.endswith(f"/{name}")


SECONDS = (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610)  # the quick form's second signals


HOW = pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])


@HOW
def test_the_handler_once_at_a_sample_of_points(tmp_path: Path, how: str) -> None:
    """About 100 points, evenly spread over the run: a quick check of every part of it."""
    total = points_without_a_signal(tmp_path)
    sweep = sweep_once(tmp_path, range(3 + len(how), total, total // 100), how)
    assert not sweep.failures and not sweep.exit_failures, sweep.report()


@HOW
def test_the_handler_twice_at_a_sample_of_points(tmp_path: Path, how: str) -> None:
    """The first signal at six points, the second at a Fibonacci spread of points after it:
    in the rest of the interrupted call, the close it deferred or made, the `with` block's
    close, the exit guard. Nothing acked comes again, nothing acknowledged is lost, nothing
    hangs. (How the writer ends is left to the torture form: a second SIGTERM can still end it
    with status 1, docs/reliability.md, "Ctrl-C and exiting with the store open".)"""
    total = points_without_a_signal(tmp_path)
    sweep = sweep_twice(tmp_path, range(1 + len(how), total, total // 6), lambda: iter(SECONDS), how)
    assert not sweep.failures, sweep.report()
    assert sweep.runs > 50


STRIDE = int(os.environ.get("QUIVER_SWEEP_STRIDE", "10"))
TWICE_STRIDE = int(os.environ.get("QUIVER_SWEEP_TWICE_STRIDE", "600"))
SECOND_STRIDE = int(os.environ.get("QUIVER_SWEEP_SECOND", "10"))


@pytest.mark.torture
@HOW
def test_the_handler_once_at_every_point(tmp_path: Path, how: str) -> None:
    """Every QUIVER_SWEEP_STRIDE-th point (default 10; 1 runs every one, about ten times as long)."""
    total = points_without_a_signal(tmp_path)
    sweep = sweep_once(tmp_path, range(0, total, STRIDE), how)
    print(f"once: {sweep.runs} runs of {total} points; handler ran in {dict(sweep.where.most_common())}")
    assert not sweep.failures and not sweep.exit_failures, sweep.report()


@pytest.mark.torture
@HOW
def test_the_handler_twice_at_many_points(tmp_path: Path, how: str) -> None:
    """The first signal at every QUIVER_SWEEP_TWICE_STRIDE-th point (default 600), the second at every
    QUIVER_SWEEP_SECOND-th point after it (default 10) until the run ends first."""
    total = points_without_a_signal(tmp_path)
    sweep = sweep_twice(tmp_path, range(0, total, TWICE_STRIDE), lambda: iter(range(0, 10**6, SECOND_STRIDE)), how)
    print(f"twice: {sweep.runs} runs; second handler ran in {dict(sweep.where.most_common(40))}")
    assert not sweep.failures and not sweep.exit_failures, sweep.report()


@pytest.mark.torture
@HOW
def test_the_handler_once_while_a_thread_ingests_and_flushes(tmp_path: Path, how: str) -> None:
    """The torture's own arrangement, a producer thread ingesting and flushing meanwhile: the
    points then differ from run to run (the subscriber waits for segments, the close for the
    producer's flush), so this samples every 5th of them x QUIVER_SWEEP_STRIDE."""
    with store_dirs(tmp_path) as fresh:
        total = exporter(fresh(), [], producing=True).points
    sweep = Sweep()
    with store_dirs(tmp_path) as fresh:
        for k in range(0, total, 5 * STRIDE):
            sweep.run(fresh(), [k], producing=True, how=how)
    print(f"producing: {sweep.runs} runs of about {total} points; handler ran in {dict(sweep.where.most_common(40))}")
    assert not sweep.failures and not sweep.exit_failures, sweep.report()


# -- the windows the sweep found, pinned down ---------------------------------------------------------


def exit_handler(store: QuiverStore) -> Callable[[], None]:
    def on_term() -> None:
        store.close()
        sys.exit(0)

    return on_term


def delivered_after_reopen(path: Path) -> list[int]:
    with QuiverStore.open(path) as store:
        sub = store.subscribe("a")
        got = []
        while (d := sub.next(timeout=0)) is not None:
            got.append(value(d.bundle))
            d.ack()
    return got


def test_a_signal_inside_the_state_change_of_a_segments_last_ack_undoes_none_of_its_acks(tmp_path: Path) -> None:
    """The torture's "acked bundles delivered again: [7675, ..., 7684]" (a whole segment's acks
    from its first bundle on). The last ack of a segment moves the subscriber's mark over it
    (SubscriberState.advance): `self.done.discard(seq)`, then `self.mark = seq`. A handler's
    exit landing after the first left the segment neither done nor below the mark, as if none
    of its bundles had been acked; the close the handler made then wrote that state as the ack
    log's checkpoint and deleted the log files holding the acks, so the reopened store delivered
    every bundle of the segment again, those whose ack() had returned included."""
    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    for i in range(3):
        store.ingest(bundle(i))
    store.flush()
    acked: list[int] = []

    def exporter() -> None:
        for _ in range(2):
            delivery = sub.next(timeout=5)
            assert delivery is not None
            delivery.ack()
            acked.append(value(delivery.bundle))
        last = sub.next(timeout=5)
        assert last is not None
        sys.settrace(run_before(SubscriberState.advance, "self.mark = seq", exit_handler(store)))
        with pytest.raises(SystemExit):
            last.ack()

    run_on_a_thread(exporter)
    assert store._closed and acked == [0, 1]
    assert delivered_after_reopen(tmp_path / "s") == [2]  # 2's ack() never returned: at least once


def ack_next(sub: Any) -> None:
    delivery = sub.next(timeout=5)
    assert delivery is not None
    delivery.ack()


def under_signals(store: QuiverStore, points: list[Callable[[Any, str], bool]], call: Callable[[], object],
                  raised: list[BaseException]) -> list[Any]:
    """`call()` on this thread with the SIGTERM handler run at each of `points` in the store's code;
    what it raised goes into `raised`; returns where the handler ran."""
    signals = SignalsAt(exit_handler(store), points, lambda code: code.co_filename.startswith(STORE_FILES))
    signals.install()
    try:
        call()
    except BaseException as exc:
        raised.append(exc)
    finally:
        signals.uninstall()
    return list(signals.fired)


def close_with_the_handler_at(store: QuiverStore, point: Callable[[Any, str], bool]) -> list[BaseException]:
    """close() on a thread (as the `with` block's exit does), the SIGTERM handler run at `point`;
    returns what close() raised."""
    raised: list[BaseException] = []

    def close() -> None:
        assert under_signals(store, [point], store.close, raised), "the point was never reached"

    run_on_a_thread(close)
    return raised


def test_a_signal_between_the_checkpoints_claim_of_the_ack_log_and_its_write_leaves_as_itself(tmp_path: Path) -> None:
    """AckLog.checkpoint claims the log's write in a `with self._lock` block and writes in the
    `try` after it; a handler's exit landing between the two (after the lock's `__exit__`) leaves
    the claim behind, and the ack log's close, in SubscriberRegistry.close's `finally`, found its
    own stale write, poisoned the log and raised "ack log failed earlier" in place of the
    SystemExit: a SIGTERM then ended the process with status 1 and a traceback (a Ctrl-C, with
    an error instead of the KeyboardInterrupt). The exit now leaves as itself; the close's error
    is a note on it. The record the cut write held (the segment the close finalized) was never
    durable: the next open registers the segment, and its bundle is delivered."""
    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    store.ingest(bundle(0))
    store.flush()
    store.ingest(bundle(1))  # open: the close finalizes it, registering a segment it does not commit
    run_on_a_thread(lambda: ack_next(sub))
    raised = close_with_the_handler_at(store, point_at(AckLog.checkpoint, "with self._lock:", "after a C call"))
    assert [type(e) for e in raised] == [SystemExit] and store._closed
    assert delivered_after_reopen(tmp_path / "s") == [1]


def test_a_signal_right_after_the_checkpoint_closed_the_ack_log_file_does_not_close_it_again(tmp_path: Path) -> None:
    """The checkpoint closed the active ack log's descriptor, then set it to -1: a handler's exit
    between the two left the closed number behind, and the close that followed closed it again,
    raising EBADF in place of the SystemExit (or closing whatever file had been given that number
    meanwhile). The descriptor is now taken out of the log before it is closed."""
    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    store.ingest(bundle(0))
    store.flush()
    run_on_a_thread(lambda: ack_next(sub))
    raised = close_with_the_handler_at(store, point_at(AckLog.checkpoint, "self.fs.close(", "after a call"))
    assert [type(e) for e in raised] == [SystemExit] and store._closed
    assert not getattr(raised[0], "__notes__", None) or "Bad file descriptor" not in str(raised[0].__notes__)
    assert delivered_after_reopen(tmp_path / "s") == []


@pytest.mark.parametrize(("function", "line"), [
    (QuiverStore._release_lock, "self.fs.close("), (QuiverStore._release_lock, "self.fs.unlock_directory("),
    (WalWriter.close, "self.fs.close("),
])
def test_a_signal_right_after_the_close_closed_a_descriptor_leaves_the_store_closed(
    tmp_path: Path, function: Callable[..., Any], line: str
) -> None:
    """Same for the store's lock files and the WAL: a handler's exit right after one was closed
    left its number behind, the deferred close closed it again (EBADF), and the store was never
    marked closed. Now the close that follows finishes, and the store opens again in this process."""
    store = QuiverStore.open(tmp_path / "s")
    store.ingest(bundle(0))
    raised = close_with_the_handler_at(store, point_at(function, line, "after a call"))
    assert [type(e) for e in raised] == [SystemExit]
    assert "Bad file descriptor" not in str(getattr(raised[0], "__notes__", ""))
    assert store._closed
    with QuiverStore.open(tmp_path / "s") as again:
        assert [value(b) for _, _, b in again.bundles()] == [0]


def test_a_signal_right_after_the_subscriber_hub_claimed_its_close_still_wakes_a_blocked_subscriber(tmp_path: Path) -> None:
    """SubscriberHub.close claimed the close (`_closed = True` in a `with` block), then returned
    True to the work; a handler's exit between the two skipped the registry's close, and every
    close after it found the hub closed already. A subscriber blocked in next() on another thread
    (the torture's "ingest+subscriber" writer) then never woke: a hang at the interpreter's exit,
    which waits for that thread. (The sweep's exporter has no such thread; found by reading.)"""
    from quiver_store.subscriber.hub import SubscriberHub

    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    ended = threading.Event()

    def consume() -> None:
        with contextlib.suppress(StoreClosedError):
            for delivery in sub:  # ends when the store closes
                delivery.ack()
        ended.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    store.ingest(bundle(0))
    raised: list[BaseException] = []

    def with_block() -> None:
        with store:
            store.close()  # the handler's close, cut; then the `with` block's

    def close_in_a_with_block() -> None:
        assert under_signals(store, [point_at(SubscriberHub._mark_closed, "with self._close_lock:", "after a C call")],
                             with_block, raised)

    run_on_a_thread(close_in_a_with_block)
    assert [type(e) for e in raised] == [SystemExit] and store._closed
    assert ended.wait(5.0), "the subscriber blocked in next() never woke"


def test_a_signal_right_after_a_wal_rotation_closed_the_old_file_leaves_the_store_closed(tmp_path: Path) -> None:
    """The rotation closed the active WAL file, then set its descriptor to -1: cut between the two
    (an ingest on the main thread rotates), the close closed the number again."""
    config = StoreConfig(wal=WalConfig(rotation_size=4096, preallocate=0))
    store = QuiverStore.open(tmp_path / "s", config)
    raised: list[BaseException] = []

    def ingest() -> None:
        for i in range(100):
            store.ingest(bundle(i))

    def ingest_until_it_rotates() -> None:
        assert under_signals(store, [point_at(WalWriter._rotate, "self.fs.close(", "after a call")], ingest, raised), "no rotation"

    run_on_a_thread(ingest_until_it_rotates)
    assert [type(e) for e in raised] == [SystemExit]
    assert "Bad file descriptor" not in str(getattr(raised[0], "__notes__", "")) and store._closed
    with QuiverStore.open(tmp_path / "s", config) as again:
        again.flush()
        stored = [value(b) for _, _, b in again.bundles()]
    assert stored == list(range(len(stored))) and stored  # the cut ingest's bundle may be there or not


@pytest.mark.parametrize("first", ["in the write", "after the claim"])
def test_a_second_sigterm_between_a_cut_ack_and_its_deferred_close_still_exits(tmp_path: Path, first: str) -> None:
    """The first SIGTERM cuts an ack's write to the ack log (those records' fate is then unknown:
    the log is poisoned) and its close is deferred to the end of the ack; the second lands as the
    ack's call has ended and the deferred close has not begun (CallDepth._run_deferred's entry).
    Its close() is then no longer inside a call and runs at once, and raised "ack log failed
    earlier" from the handler in place of its sys.exit(0): status 1 and a traceback (the sweep's
    twice form: 12 of 19,710 runs cut in the write; then, with that fixed, 2 of 10,193 cut after
    the commit claimed the write and before it began, where the log learns of the cut only in
    the close's checkpoint). A cut write was reported by the exception that cut it, so the
    registry's close no longer checkpoints (nor raises) after one."""
    from quiver_store.fs import FileSystem
    from quiver_store.reentry import CallDepth

    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    store.ingest(bundle(0))
    store.flush()
    raised: list[BaseException] = []

    def cut_write(frame: Any, kind: str) -> bool:
        return frame.f_code is FileSystem.write.__code__ and kind == "after a C call" and frame.f_back.f_code is AckLog._write.__code__

    cut = cut_write if first == "in the write" else point_at(AckLog.commit, "with self._lock:", "after a C call")

    def ack_twice_interrupted() -> None:
        delivery = sub.next(timeout=5)
        assert delivery is not None
        fired = under_signals(store, [cut, point_at(CallDepth._run_deferred, "def _run_deferred", "entry")],
                              delivery.ack, raised)
        assert len(fired) == 2, fired

    run_on_a_thread(ack_twice_interrupted)
    assert store._closed and delivered_after_reopen(tmp_path / "s") in ([], [0])
    assert [type(e) for e in raised] == [SystemExit], raised
