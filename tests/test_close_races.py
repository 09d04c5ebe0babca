"""close() on one thread while others ingest: the store refuses new bundles, waits for the ones
under way, and only then finalizes and closes its WAL (an append on a closed descriptor failed with
EBADF, or could have landed in whatever file reused the descriptor number)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreClosedError, StoreConfig


def item(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i], pa.int64())})})


def stored(path: Path) -> list[int]:
    with QuiverStore.open(path) as store:
        return [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]


def test_close_waits_for_an_ingest_under_way_and_refuses_new_ones(tmp_path: Path) -> None:
    store = QuiverStore.open(tmp_path, StoreConfig(segment=SegmentConfig(max_open_duration=3600.0)))
    store.ingest(item(0))
    inside, release = threading.Event(), threading.Event()
    encode = store._encoder.encode

    def slow_encode(*args):  # type: ignore[no-untyped-def]
        inside.set()
        release.wait(10)
        return encode(*args)

    store._encoder.encode = slow_encode  # type: ignore[method-assign]
    results: dict[str, object] = {}
    ingesting = threading.Thread(target=lambda: results.setdefault("ingest", store.ingest(item(1))))
    ingesting.start()
    assert inside.wait(10)
    closing = threading.Thread(target=store.close)
    closing.start()
    time.sleep(0.3)
    assert closing.is_alive(), "close() returned while an ingest was still writing"
    with pytest.raises(StoreClosedError, match=r"is closing \(close\(\) called on another thread\); this bundle was not stored$"):
        store.ingest(item(2))
    release.set()
    ingesting.join(10)
    closing.join(10)
    assert not closing.is_alive() and results["ingest"].sequence == 1  # type: ignore[attr-defined]
    with pytest.raises(StoreClosedError, match=r"is closed$"):
        store.ingest(item(3))
    assert stored(tmp_path) == [0, 1]


def test_producers_racing_close_get_store_closed_error_and_lose_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Four producers and a subscriber at full speed when close() comes (a short max_open_duration
    keeps the finalizer busy): every producer ends with StoreClosedError, every acknowledged
    bundle is stored or was consumed (retention deletes consumed segments), and nothing is logged
    as an error."""
    store = QuiverStore.open(tmp_path, StoreConfig(segment=SegmentConfig(max_open_duration=0.01)))
    subscription = store.subscribe("reader")
    acknowledged: list[tuple[int, int]] = []
    consumed: list[tuple[int, int]] = []  # acked by the subscriber: retention may delete them
    endings: list[BaseException] = []

    def produce(t: int) -> None:
        for i in range(1_000_000):
            try:
                store.ingest(RecordBundle({0: pa.record_batch({"t": [t], "i": [i]})}))
            except Exception as exc:
                endings.append(exc)
                return
            acknowledged.append((t, i))

    def consume() -> None:
        try:
            while delivery := subscription.next(timeout=0.1):
                delivery.ack()
                consumed.append((delivery.bundle.slots[0]["t"][0].as_py(), delivery.bundle.slots[0]["i"][0].as_py()))
        except StoreClosedError:
            pass

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)] + [threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    store.close()
    for thread in threads:
        thread.join(10)
    assert [type(e) for e in endings] == [StoreClosedError] * 4, endings
    with QuiverStore.open(tmp_path) as reopened:
        held = {(b.slots[0]["t"][0].as_py(), b.slots[0]["i"][0].as_py()) for _, _, b in reopened.bundles()}
    assert set(acknowledged) <= held | set(consumed) and len(acknowledged) > 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
