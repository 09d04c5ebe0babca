"""A delivery's bundle stays readable after ack(), even when the ack let steady-state cleanup delete
its segment at once (the at-most-once pattern `d.ack(); use(d.bundle)`). Before, reading it then
raised "segment N is gone before bundle I was read", depending on whether the ack was the one that
completed the segment."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from quiver_store import QuiverStore, RecordBundle


def bundle(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array(range(i * 100, i * 100 + 100), pa.int64())})})


def test_bundle_read_after_the_ack_that_deleted_its_segment(tmp_path: Path) -> None:
    with QuiverStore.open(tmp_path / "s") as store:
        sub = store.subscribe("a")
        for i in range(3):
            store.ingest(bundle(i))
        store.finalize_now("test")
        deliveries = [sub.next(timeout=2.0) for _ in range(3)]
        assert all(d is not None and d.ack() for d in deliveries)
        assert os.listdir(tmp_path / "s" / "segments") == ["next.seq"]  # the last ack deleted the segment
        got = [d.bundle.slots[0]["i"].to_pylist() for d in deliveries]  # type: ignore[union-attr]
    assert got == [list(range(i * 100, i * 100 + 100)) for i in range(3)]


def test_a_bundle_read_before_the_ack_is_not_read_again(tmp_path: Path) -> None:
    with QuiverStore.open(tmp_path / "s") as store:
        sub = store.subscribe("a")
        store.ingest(bundle(7))
        store.finalize_now("test")
        delivery = sub.next(timeout=2.0)
        assert delivery is not None
        first = delivery.bundle
        assert delivery.ack()
        assert delivery.bundle is first
