"""A signal's exception inside `threading.Condition.notify()` (pure Python) can land between its
release of a waiter and the waiter's removal from the list: the list then starts with a stale,
already consumed waiter. A later `notify()` releases that one and not the thread actually waiting,
so the wake-up is lost. The interrupt torture hung this way in `close()` (the WAL preallocator's
`stop()` joined a thread that never woke). The store's threads are woken with `notify_all()`,
which releases every waiter; these tests put a stale waiter in place and check each wake-up still
arrives."""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
from quiver_store.wal.preallocator import Preallocator


def stale_waiter(condition: threading.Condition) -> None:
    """What an interrupted notify() leaves: a consumed (locked) waiter first in the list."""
    lock = threading.Lock()
    lock.acquire()
    condition._waiters.appendleft(lock)  # type: ignore[attr-defined]


def waiting(condition: threading.Condition, count: int = 1, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(condition._waiters) < count:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the thread never started waiting"
        time.sleep(0.001)


class NoWriter:
    stats: dict[str, int] = {}

    def extend_tail(self) -> None:
        pass


def test_the_preallocator_stops_past_a_stale_waiter():
    pre = Preallocator(NoWriter(), "test-prealloc")  # type: ignore[arg-type]
    waiting(pre._wake)
    stale_waiter(pre._wake)
    stopper = threading.Thread(target=pre.stop)
    stopper.start()
    stopper.join(5.0)
    assert not stopper.is_alive(), "stop() hung: the thread was never woken"


def test_a_flush_reaches_the_finalizer_past_a_stale_waiter(tmp_path):
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(RecordBundle({0: pa.record_batch({"n": [1, 2, 3]})}))
        waiting(store._finalize_cv)
        with store._lock:
            stale_waiter(store._finalize_cv)
        flusher = threading.Thread(target=store.flush)
        flusher.start()
        flusher.join(10.0)
        assert not flusher.is_alive(), "flush() hung: the finalizer was never woken"
        assert [b.slots[0]["n"].to_pylist() for _, _, b in store.bundles()] == [[1, 2, 3]]
