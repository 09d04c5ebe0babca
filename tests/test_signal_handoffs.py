"""A signal's exception at any bytecode of a thread handing a result to another must not leave
the other blocked. The finalizer used to complete `concurrent.futures.Future`s, whose Condition
lock a waiter interrupted right after taking it (bpo-29988) kept for good: the torture run of
session 23 hung there (docs/reliability.md). `quiver_store.handoff.Handoff` replaced them; these
tests raise KeyboardInterrupt at every point of the interrupted side where CPython runs a signal
handler, in turn (tests/signal_windows.py)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle, handoff
from quiver_store.handoff import Handoff
from quiver_store.subscriber import hub
from quiver_store.wal import preallocator

from .signal_windows import raise_at_check, run_on_a_thread

THREADING = threading.__file__
HANDOFF = handoff.__file__


def interrupt_at_each_check(
    call: Callable[[], Any], files: tuple[str, ...], after: Callable[[], None], setup: Callable[[], None] = lambda: None,
) -> list[str]:
    """Run `setup()` and then `call()` on a thread, with KeyboardInterrupt raised at the 0th,
    1st, 2nd ... point where a signal handler could run in `files` (`raise_at_check`), then `after()` on another thread, until a run ends
    without the interrupt; returns the functions it was raised in, run by run."""
    fired_in: list[str] = []
    while True:
        trace = raise_at_check(len(fired_in), files)

        def body(trace: Any = trace) -> None:
            setup()
            sys.settrace(trace)
            with contextlib.suppress(KeyboardInterrupt, TimeoutError):
                call()

        run_on_a_thread(body, timeout=10.0)
        run_on_a_thread(after, timeout=10.0)
        if trace.fired_in() is None:
            return fired_in
        fired_in.append(trace.fired_in())


def test_a_handoff_completes_whatever_its_waiter_was_interrupted_at():
    box: list[Handoff[int]] = []

    def wait() -> None:
        box[0].result(timeout=0.01)

    def complete() -> None:
        run_on_a_thread(lambda: box[0].set_result(7), timeout=2.0)  # the finalizer's side: never blocks
        assert box[0].result(timeout=2.0) == 7

    fired_in = interrupt_at_each_check(wait, (HANDOFF, THREADING), complete, setup=lambda: box.__setitem__(slice(None), [Handoff()]))
    assert fired_in.count("Handoff.wait") >= 3  # entering it, after the gate's acquire, after the clock


def test_a_handoff_interrupted_while_being_set_still_reaches_its_waiter():
    box: list[Handoff[int]] = []
    outcome: list[int] = []

    def observe() -> None:
        box[0].set_result(2)  # a second setter (close() failing what is left): ignored if the first stored
        outcome.append(box[0].result(timeout=2.0))
        assert outcome[-1] in (1, 2)
        assert box[0].set_exception(RuntimeError("late")) is False

    fired_in = interrupt_at_each_check(
        lambda: box[0].set_result(1), (HANDOFF,), observe, setup=lambda: box.__setitem__(slice(None), [Handoff()]),
    )
    assert "Handoff._settle" in fired_in
    assert 1 in outcome and 2 in outcome  # interrupted both before and after its outcome was stored


def test_the_first_outcome_counts():
    h: Handoff[int] = Handoff()
    assert h.set_exception(ValueError("disk gone")) is True
    assert h.set_result(5) is False
    with pytest.raises(ValueError, match="disk gone"):
        h.result()
    with pytest.raises(ValueError, match="disk gone"):
        h.result(timeout=0)  # stored: no waiting, raised again


def test_a_handoff_without_an_outcome_times_out():
    h: Handoff[None] = Handoff()
    assert h.wait(0.01) is False and h.done() is False
    with pytest.raises(TimeoutError, match=r"no outcome within 0\.01 s"):
        h.result(timeout=0.01)


def test_the_maintenance_thread_stops_whatever_its_stopper_was_interrupted_at(tmp_path):
    store = QuiverStore.open(tmp_path)
    maintenance = store._hub
    maintenance.stop_thread()

    def restart() -> None:
        maintenance._stop = Handoff()
        maintenance.start()

    def stop_and_check() -> None:
        maintenance.stop_thread(timeout=5.0)  # a second stop, as close() makes after a cut-short one
        assert maintenance._thread is not None and not maintenance._thread.is_alive()

    fired_in = interrupt_at_each_check(
        lambda: maintenance.stop_thread(timeout=5.0), (HANDOFF, hub.__file__, THREADING), stop_and_check, restart,
    )
    run_on_a_thread(store.close, timeout=10.0)
    assert "Handoff._settle" in fired_in


def test_the_preallocator_stops_whatever_a_request_was_interrupted_at():
    class Extends:
        stats: dict[str, int] = {}

        def extend_tail(self) -> None:
            pass

    made: list[preallocator.Preallocator] = []

    def start() -> None:
        made[:] = [preallocator.Preallocator(Extends(), "test-prealloc")]  # type: ignore[arg-type]

    fired_in = interrupt_at_each_check(lambda: made[0].request(), (preallocator.__file__, THREADING), lambda: made[0].stop(), start)
    assert "Condition.notify" in fired_in


def test_a_flush_interrupted_anywhere_in_its_wait_leaves_the_store_working(tmp_path):
    """Each run ingests a bundle and flushes with the interrupt placed in the flush's waiting (the
    handoff and the threading code it calls); a flush after it must end, and every bundle must be
    stored once."""
    store = QuiverStore.open(tmp_path)
    ingested: list[int] = []

    def ingest() -> None:
        ingested.append(len(ingested))
        store.ingest(RecordBundle({0: pa.record_batch({"n": [ingested[-1]]})}))

    fired_in = interrupt_at_each_check(store.flush, (HANDOFF, THREADING), store.flush, setup=ingest)
    store.close()
    with QuiverStore.open(tmp_path) as reopened:
        stored = [b.slots[0]["n"][0].as_py() for _, _, b in reopened.bundles()]
    assert stored == ingested
    assert "Handoff.wait" in fired_in and "Condition.notify" in fired_in
