"""IngestQueue: bundles ingested on a writer thread come back in order, each acknowledged only once
durable, and a failed ingest stops everything after it and reaches the producer."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import IngestQueue, QuiverError, QuiverStore, RecordBundle, SegmentConfig, StoreConfig

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))


def bundle(i: int, rows: int = 10) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * rows, pa.int64())})})


def stored(path) -> list[int]:
    with QuiverStore.open(path, QUIET) as store:
        return [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(0, 40), depth=st.integers(1, 4))
def test_every_bundle_is_stored_in_submission_order(tmp_path_factory, count, depth):
    path = tmp_path_factory.mktemp("store")
    with QuiverStore.open(path, QUIET) as store, IngestQueue(store, depth=depth) as queue:
        for i in range(count):
            queue.submit(bundle(i))
    assert [r.sequence for r in queue.receipts] == list(range(count))
    assert stored(path) == list(range(count))


def test_receipts_are_durable_without_a_clean_close(tmp_path):
    store = QuiverStore.open(tmp_path, QUIET)
    queue = IngestQueue(store)
    for i in range(5):
        queue.submit(bundle(i))
    receipts = queue.close()
    assert [r.wal_offset is not None for r in receipts] == [True] * 5
    store._abandon()  # crash: the bundles live only in the WAL, acknowledged after its fdatasync
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.stats()["replayed_entries"] == 5
    assert stored(tmp_path) == [0, 1, 2, 3, 4]


def test_a_failed_ingest_stops_later_bundles_and_reaches_the_producer(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        queue = IngestQueue(store, depth=4)
        queue.submit(bundle(0))
        queue.submit("not a bundle")  # type: ignore[arg-type]
        with pytest.raises(QuiverError, match=r"an earlier ingest failed after 1 stored bundles.*RecordBundle"):
            for i in range(1, 10_000):  # the writer reports the failure asynchronously: submit until it does
                queue.submit(bundle(i))
                time.sleep(0.001)
        with pytest.raises(QuiverError, match=r"an earlier ingest failed after 1 stored bundles.*RecordBundle"):
            queue.close()
        assert [r.sequence for r in queue.receipts] == [0]
    assert stored(tmp_path) == [0]


def test_submit_after_close_is_refused(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        queue = IngestQueue(store)
        queue.close()
        with pytest.raises(QuiverError, match="IngestQueue is closed"):
            queue.submit(bundle(0))


def test_depth_must_be_positive(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store, pytest.raises(QuiverError, match="depth must be at least 1, got 0"):
        IngestQueue(store, depth=0)


def test_a_producer_error_still_waits_for_queued_bundles(tmp_path):
    with QuiverStore.open(tmp_path, QUIET) as store:
        with pytest.raises(RuntimeError, match="producer failed"), IngestQueue(store, depth=2) as queue:
            queue.submit(bundle(0))
            queue.submit(bundle(1))
            raise RuntimeError("producer failed")
        assert [r.sequence for r in queue.receipts] == [0, 1]
    assert stored(tmp_path) == [0, 1]
