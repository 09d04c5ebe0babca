"""The seed's "Dual Exporters with Completion Tracking" example, on the real store.

seg-120 holds 3 bundles; parquet_exporter and otlp_exporter each ack bundles 0..2, interleaved
exactly as the seed's ack.log excerpt; the store restarts after the fifth ack. Marks, gap sets,
the log records and the deletion must follow the seed step by step.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from quiver_store.bundle import RecordBundle
from quiver_store.config import RetentionConfig, SegmentConfig, StoreConfig, WalConfig
from quiver_store.engine import QuiverStore
from quiver_store.subscriber import ack_log as log

CONFIG = StoreConfig(
    segment=SegmentConfig(max_open_duration=3600.0),
    wal=WalConfig(durability="fsync"),
    retention=RetentionConfig(maintenance_interval=3600.0),
)
NAMES = {0: "parquet_exporter", 1: "otlp_exporter"}


def bundle(i: int) -> RecordBundle:
    return RecordBundle({30: pa.record_batch({"body": pa.array([f"log {i}.{k}" for k in range(4)])})})


def subscribers(store) -> dict[str, dict]:
    return {s["name"]: s for s in store.stats()["subscribers"]}


def outcomes_in_active_log(root: Path) -> list[tuple[int, int, str, str]]:
    """(segment, bundle, subscriber, outcome) of the OUTCOME records in ack.log, in order."""
    names: dict[int, str] = {}
    out = []
    for rec in log.iter_records((root / log.LOG_NAME).read_bytes()):
        if rec[0] == log.SUBSCRIBE:
            names[rec[1]] = rec[4]
        elif rec[0] == log.OUTCOME:
            out.append((rec[2], rec[3], names.get(rec[1], f"#{rec[1]}"), ["ack", "nack", "dropped"][rec[4]]))
    return out


def test_dual_exporters_with_completion_tracking(tmp_path):
    with QuiverStore.open(tmp_path, CONFIG) as store:
        # 120 earlier segments come and go, so the example's segment really is seg-120
        warm = store.subscribe("warmup")
        for i in range(120):
            store.ingest(bundle(i))
            store.finalize_now("warmup")
            d = warm.next(0)
            d.ack()
        store.unsubscribe("warmup")
        assert store.segments() == []

        parquet = store.subscribe("parquet_exporter")
        otlp = store.subscribe("otlp_exporter")
        # 1. batches accumulate in the open segment until finalize; the segment is seg-120
        for i in range(3):
            store.ingest(bundle(1000 + i))
        info = store.finalize_now("example")
        assert (info.seq, info.bundle_count) == (120, 3)
        assert os.path.basename(info.path) == "0000000000000120.qseg"

        # 2-4. each exporter drains the bundles in order, acking each; the log interleaves them
        p = [parquet.next(0) for _ in range(3)]
        o = [otlp.next(0) for _ in range(3)]
        assert [(d.segment_seq, d.bundle_index) for d in p] == [(120, 0), (120, 1), (120, 2)]
        assert [(d.segment_seq, d.bundle_index) for d in o] == [(120, 0), (120, 1), (120, 2)]
        assert o[1].bundle.slots[30].column(0)[0].as_py() == "log 1001.0"
        p[0].ack()
        o[0].ack()
        p[1].ack()
        o[1].ack()
        p[2].ack()
        subs = subscribers(store)
        # parquet: every bundle of seg-120 acked -> its high-water mark is seg-120
        assert subs["parquet_exporter"]["mark"] == 120 and subs["parquet_exporter"]["gap_set_size"] == 0
        # otlp: bundles 0 and 1 acked ahead of the mark (gap set); mark stays before seg-120
        assert subs["otlp_exporter"]["mark"] == 119
        assert subs["otlp_exporter"]["gaps"] == [(120, 0), (120, 1)]
        assert [s.seq for s in store.segments()] == [120]  # one outstanding bundle pins it
        assert outcomes_in_active_log(tmp_path)[-5:] == [
            (120, 0, "parquet_exporter", "ack"),
            (120, 0, "otlp_exporter", "ack"),
            (120, 1, "parquet_exporter", "ack"),
            (120, 1, "otlp_exporter", "ack"),
            (120, 2, "parquet_exporter", "ack"),
        ]
        o[2].defer()  # the exporter is interrupted before acking bundle 2

    # 6. restart: the ack log restores each subscriber's mark and gap set
    with QuiverStore.open(tmp_path, CONFIG) as store:
        subs = subscribers(store)
        assert subs["parquet_exporter"]["mark"] == 120
        assert subs["otlp_exporter"]["mark"] == 119 and subs["otlp_exporter"]["gaps"] == [(120, 0), (120, 1)]
        parquet = store.subscribe("parquet_exporter")
        otlp = store.subscribe("otlp_exporter")
        assert parquet.next(timeout=0) is None  # nothing acknowledged is ever redelivered
        d = otlp.next(timeout=0)
        assert (d.segment_seq, d.bundle_index) == (120, 2)  # only the unacknowledged bundle
        assert otlp.next(timeout=0) is None
        d.ack()
        assert outcomes_in_active_log(tmp_path)[-1] == (120, 2, "otlp_exporter", "ack")
        # 5. outstanding count reached zero: seg-120 is deleted (steady-state cleanup)
        subs = subscribers(store)
        assert subs["otlp_exporter"]["mark"] == 120 and subs["otlp_exporter"]["gap_set_size"] == 0
        assert store.segments() == []
        assert not (tmp_path / "segments" / "0000000000000120.qseg").exists()
        stats = store.stats()
        assert stats['quiver.gc.evictions_total{reason="processed"}'] == 1
        assert stats["quiver.subscriber.dropped_bundles_total"] == 0
