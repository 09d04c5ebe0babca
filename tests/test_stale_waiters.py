"""A signal's exception inside `threading.Condition.notify()` (pure Python) can land between its
release of a waiter and the waiter's removal from the list: the list then starts with a stale,
already consumed waiter, and a later `notify()` releases that one instead of the thread actually
waiting, so that wake-up is lost. The interrupt torture hung this way in `close()` (the WAL
preallocator's `stop()` joined a thread that never woke). The store wakes its threads with
`notify_all()`, which releases every waiter. These tests raise KeyboardInterrupt at exactly that
statement of `notify()`, then check the next wake-up still arrives."""

from __future__ import annotations

import sys
import threading
import time

import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
from quiver_store.engine import APPLY_LINGER
from quiver_store.wal.preallocator import Preallocator

from .signal_windows import raise_before, run_on_a_thread


def cut_notify(condition: threading.Condition):  # type: ignore[no-untyped-def]
    """A trace function raising KeyboardInterrupt in `condition`'s notify(), after it released a
    waiter and before it removed it from the list (other conditions' notify() calls run as usual)."""
    return raise_before(threading.Condition.notify, "waiters.remove(waiter)",
                        when=lambda frame: frame.f_locals.get("self") is condition)


def waiters(condition: threading.Condition, count: int, timeout: float = 5.0) -> None:
    """Wait until `count` waiters are in the condition's list (the stale one counts)."""
    deadline = time.monotonic() + timeout
    while len(condition._waiters) < count:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the thread never went back to waiting"
        time.sleep(0.001)


def interrupted(call, condition: threading.Condition) -> None:  # type: ignore[no-untyped-def]
    """`call()` on a thread where the signal lands inside `condition`'s notify(), after the
    waiter's release."""

    def body() -> None:
        sys.settrace(cut_notify(condition))
        with pytest.raises(KeyboardInterrupt):
            call()

    run_on_a_thread(body)


class Extends:
    def __init__(self) -> None:
        self.calls = 0
        self.stats: dict[str, int] = {}

    def extend_tail(self) -> None:
        self.calls += 1


def test_the_preallocator_still_stops_after_an_interrupted_wake_up():
    writer = Extends()
    pre = Preallocator(writer, "test-prealloc")  # type: ignore[arg-type]
    waiters(pre._wake, 1)
    interrupted(pre.request, pre._wake)  # the thread is woken, extends, and waits again behind the stale waiter
    waiters(pre._wake, 2)
    assert writer.calls == 1
    run_on_a_thread(pre.stop, timeout=5.0)  # hung: stop() released the stale waiter only


def test_a_flush_after_an_interrupted_one_still_reaches_the_applier(tmp_path):
    """flush() hands the applier a barrier and waits for it; the applier sleeps untimed (for the
    open segment's hour-long deadline here) until it is notified."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(RecordBundle({0: pa.record_batch({"n": [1, 2, 3]})}))
        time.sleep(20 * APPLY_LINGER)  # past the applier's short linger (a timed-out wait removes its own waiter)
        waiters(store._apply_cv, 1)
        interrupted(store.flush, store._apply_cv)  # the applier takes the barrier and waits again
        time.sleep(20 * APPLY_LINGER)  # past its short linger, into the long wait
        waiters(store._apply_cv, 2)
        run_on_a_thread(store.flush, timeout=10.0)  # the first wake-up since: hung, the applier never woke
        assert [b.slots[0]["n"].to_pylist() for _, _, b in store.bundles()] == [[1, 2, 3]]
