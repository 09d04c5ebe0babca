"""QuiverStore.open on a store whose files vanished: the loss is reported (stats()["corruption_reports"]
and an ERROR log line), segment numbers never go back below what the ack log registered, and a
store that lost nothing (retention deleted its segments through the ack log) reports nothing."""

from __future__ import annotations

import logging
import os
import shutil

import pyarrow as pa

from quiver_store import QuiverStore, RecordBundle, RetentionConfig, SegmentConfig, StoreConfig
from quiver_store.subscriber import ack_log

CONFIG = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))


def bundle(value: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"v": pa.array([value] * 5, pa.int64())})})


def delivered(sub) -> list[tuple[int, int]]:
    """(segment_seq, value) of every delivery, acked."""
    out = []
    while (d := sub.next(timeout=0.5)) is not None:
        out.append((d.segment_seq, d.bundle.slots[0].column(0)[0].as_py()))
        d.ack()
    return out


def three_segments(root) -> None:
    with QuiverStore.open(root, CONFIG) as store:
        store.subscribe("exporter")
        for value in range(3):
            store.ingest(bundle(value))
            store.flush()


def test_a_segment_removed_by_hand_is_reported_and_the_rest_delivered(tmp_path, caplog):
    three_segments(tmp_path)
    os.unlink(tmp_path / "segments" / f"{1:016d}.qseg")
    with caplog.at_level(logging.ERROR, logger="quiver_store"), QuiverStore.open(tmp_path, CONFIG) as store:
        (report,) = store.stats()["corruption_reports"]
        store.ingest(bundle(99))
        store.flush()
        assert delivered(store.subscribe("exporter")) == [(0, 0), (2, 2), (3, 99)]
    assert report["source"] == "segments"
    assert report["error"] == (
        "segment 1 is missing: the ack log registered it, and retention never deleted it, as subscribers "
        "still waited for it: exporter (1 bundle)"
    )
    assert report["action"] == "its unresolved bundles are recorded as dropped for those subscribers"
    assert any("segments corruption: segment 1 is missing" in r.getMessage() for r in caplog.records)


def test_a_removed_segments_directory_never_reuses_a_segment_number(tmp_path):
    three_segments(tmp_path)
    shutil.rmtree(tmp_path / "segments")
    with QuiverStore.open(tmp_path, CONFIG) as store:
        reports = store.stats()["corruption_reports"]
        store.ingest(bundle(99))
        store.flush()
        assert [info.seq for info in store.segments()] == [3]  # 0, 1 and 2 were registered before
        assert delivered(store.subscribe("exporter")) == [(3, 99)]
    assert [r["source"] for r in reports] == ["segments"] * 4
    assert reports[0]["path"] == str(tmp_path / "segments")
    assert reports[0]["error"].endswith(
        "no next.seq although the ack log registered segments up to 2: the directory was removed or "
        "replaced, and the segments it held are lost"
    )
    assert reports[0]["action"] == "segment numbers continue after 2"
    assert [r["error"].split(":")[0] for r in reports[1:]] == [f"segment {s} is missing" for s in range(3)]


def test_segments_deleted_by_retention_are_not_reported(tmp_path):
    """Steady-state deletion (everything acked) and drop_oldest at the size cap (dropped outcomes
    committed before the unlink) leave the ack log's evidence that the store deleted them."""
    with QuiverStore.open(tmp_path, CONFIG) as store:
        fast, slow = store.subscribe("fast"), store.subscribe("slow")
        for value in range(3):
            store.ingest(bundle(value))
            store.flush()
        delivered(fast)
        delivered(slow)
        store.maintain()  # steady state: every segment was acked by everyone
        assert store.segments() == []
        for value in range(3, 6):
            store.ingest(bundle(value))
            store.flush()
        delivered(fast)  # slow acks nothing of 3..5
        cap = store.disk_usage() + 500
    capped = StoreConfig(
        segment=SegmentConfig(max_open_duration=3600.0),
        retention=RetentionConfig(size_cap=cap, size_cap_policy="drop_oldest", maintenance_interval=3600.0),
    )
    with QuiverStore.open(tmp_path, capped) as store:
        assert store.stats()["corruption_reports"] == []
        for value in range(6, 11):
            store.ingest(bundle(value))
        slow_state = next(s for s in store.stats()["subscribers"] if s["name"] == "slow")
        assert slow_state["dropped_bundles"] > 0  # drop_oldest deleted segments slow waited for
        store._abandon()  # a crash: the ack log keeps its records
    with QuiverStore.open(tmp_path, CONFIG) as store:
        assert store.stats()["corruption_reports"] == []
        left = delivered(store.subscribe("slow"))
    assert left and all(value >= 3 for _, value in left)


def test_ack_log_damage_at_open_is_reported(tmp_path):
    store = QuiverStore.open(tmp_path, CONFIG)
    sub = store.subscribe("exporter")  # record 1: subscribe
    for value in range(3):
        store.ingest(bundle(value))
        store.flush()  # records 2-4: segments
    delivered(sub)  # records 5-7: acks
    store._abandon()  # a crash: the records stay in ack.log, no closing checkpoint
    log_path = tmp_path / ack_log.LOG_NAME
    data = bytearray(log_path.read_bytes())
    assert len(data) > ack_log.HEADER_SIZE + 8
    data[ack_log.HEADER_SIZE + 12] ^= 0x40  # inside the first record's payload; valid records follow
    log_path.write_bytes(bytes(data))
    with QuiverStore.open(tmp_path, CONFIG) as store:
        reports = store.stats()["corruption_reports"]
    assert reports and reports[0]["source"] == "ack log"
    assert reports[0]["path"] == str(log_path) and reports[0]["offset"] == ack_log.HEADER_SIZE
    assert "failed its CRC32C" in reports[0]["error"]
    assert "outcomes recorded in them are lost" in reports[0]["action"]
