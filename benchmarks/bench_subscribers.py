"""Quiver subscribers: delivery throughput, ack latency (fdatasync on) and ack log replay time.

    .venv/bin/python -m benchmarks.bench_subscribers [--bundles 4000] [--outcomes 1000000]

1. Delivery: a store holds `--bundles` finalized bundles (4 slots x 100 rows); one subscriber,
   then four subscribers on their own threads, read every bundle (`d.bundle`, zero-copy) and
   ack it. Acks are durable (group-committed fdatasync) before `ack()` returns.
2. Ack latency: p50 / p99 of `ack()` in both runs.
3. Replay: an ack log holding `--outcomes` ack outcomes for one subscriber (1,000 bundles per
   segment), opened (a) as written by the registry with checkpoints every 10,000 outcomes and
   (b) as one log without any checkpoint.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

from quiver_store.bundle import RecordBundle
from quiver_store.config import RetentionConfig, SegmentConfig, StoreConfig, SubscriberConfig, WalConfig
from quiver_store.engine import QuiverStore
from quiver_store.fs import FileSystem
from quiver_store.subscriber import ack_log as log
from quiver_store.subscriber.registry import SegmentRef, SubscriberRegistry
from quiver_store.subscriber.state import Outcome


def make_bundles(n: int) -> list[RecordBundle]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        slots = {
            s: pa.record_batch({"id": pa.array(np.arange(100) + i * 100), "x": pa.array(rng.random(100))})
            for s in (1, 2, 30, 31)
        }
        out.append(RecordBundle(slots))
    return out


def store_config(durability: str) -> StoreConfig:
    return StoreConfig(
        segment=SegmentConfig(target_size=4 << 20, max_open_duration=3600.0),
        wal=WalConfig(durability=durability),  # type: ignore[arg-type]
        retention=RetentionConfig(maintenance_interval=3600.0),
    )


class TimedSyncFS(FileSystem):
    """Records how long each fdatasync takes (during consumption only the ack log syncs)."""

    def __init__(self) -> None:
        self.sync_times: list[float] = []

    def fdatasync(self, fd: int) -> None:
        t = time.perf_counter()
        super().fdatasync(fd)
        self.sync_times.append(time.perf_counter() - t)


def delivery(n_bundles: int, n_subs: int) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="bench-subs-")
    try:
        names = [f"exporter{k}" for k in range(n_subs)]
        with QuiverStore.open(root, store_config("os")) as store:
            for name in names:
                store.subscribe(name)
            for b in make_bundles(n_bundles):
                store.ingest(b)
            store.flush()
        fs = TimedSyncFS()
        with QuiverStore.open(root, store_config("fsync"), fs=fs) as store:
            subs = [store.subscribe(name) for name in names]
            fs.sync_times.clear()
            latencies: list[list[float]] = [[] for _ in names]
            rows = [0] * n_subs

            def consume(k: int) -> None:
                sub, lat = subs[k], latencies[k]
                for _ in range(n_bundles):
                    d = sub.next(timeout=30)
                    assert d is not None
                    rows[k] += d.bundle.slots[30].num_rows
                    t = time.perf_counter()
                    d.ack()
                    lat.append(time.perf_counter() - t)

            t0 = time.perf_counter()
            threads = [threading.Thread(target=consume, args=(k,)) for k in range(n_subs)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - t0
            stats = store.stats()
            assert sum(rows) == 100 * n_bundles * n_subs and stats["segments"] == 0
            all_lat = sorted(x for lat in latencies for x in lat)
            return {
                "deliveries_per_s": n_bundles * n_subs / elapsed,
                "ack_p50_ms": 1e3 * statistics.median(all_lat),
                "ack_p99_ms": 1e3 * all_lat[int(0.99 * (len(all_lat) - 1))],
                "fdatasyncs": stats["quiver.ack_log.commits_total"],
                "fdatasync_p50_ms": 1e3 * statistics.median(fs.sync_times),
                "acks": len(all_lat),
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _refs(n_segments: int, per: int) -> list[SegmentRef]:
    return [SegmentRef(s, per, f"/unused/{s}") for s in range(n_segments)]


def _no_reader(path: str):  # type: ignore[no-untyped-def]
    raise AssertionError(path)


def replay(outcomes: int, per_segment: int = 1000) -> dict[str, float]:
    n_segments = (outcomes + per_segment - 1) // per_segment
    refs = _refs(n_segments, per_segment)
    out: dict[str, float] = {}
    root = tempfile.mkdtemp(prefix="bench-acklog-")
    try:
        # (a) written by the registry: checkpoint + rotation every 10,000 outcomes
        cp_dir = os.path.join(root, "checkpointed")
        cfg = SubscriberConfig(ack_log_checkpoint_interval=10_000)
        reg, _ = SubscriberRegistry.open(cp_dir, refs, config=cfg, reader_factory=_no_reader, sync=False)
        reg.subscribe("exp")
        t = time.perf_counter()
        for _ in range(outcomes):
            reg.next_delivery("exp", 0).ack()  # type: ignore[union-attr]
        out["write_s"] = time.perf_counter() - t
        reg._log.commit()
        reg.abandon()  # a crash: no final checkpoint, so replay reads the log tail too
        out["checkpointed_files_bytes"] = sum(os.path.getsize(os.path.join(cp_dir, f)) for f in os.listdir(cp_dir))
        t = time.perf_counter()
        reg, _ = SubscriberRegistry.open(cp_dir, refs, config=cfg, reader_factory=_no_reader, sync=False)
        out["replay_checkpointed_s"] = time.perf_counter() - t
        out["replayed_records"] = reg._depth
        assert reg.describe()[0]["mark"] == (outcomes // per_segment) - 1
        reg.close()
        # (b) the same history in one log, never checkpointed
        raw_dir = os.path.join(root, "raw")
        ack, _ = log.AckLog.open(raw_dir, sync=False)
        ack.append(b"".join(log.encode_segment(r.seq, r.bundle_count) for r in refs))
        ack.append(log.encode_subscribe(0, -1, 0, "exp"))
        chunk = 100_000
        for start in range(0, outcomes, chunk):
            ack.append(
                b"".join(
                    log.encode_outcome(0, i // per_segment, i % per_segment, Outcome.ACK, 0)
                    for i in range(start, min(start + chunk, outcomes))
                )
            )
        ack.close()
        out["raw_log_bytes"] = os.path.getsize(os.path.join(raw_dir, log.LOG_NAME))
        cfg_raw = SubscriberConfig(ack_log_checkpoint_interval=10**9)
        t = time.perf_counter()
        reg, _ = SubscriberRegistry.open(raw_dir, refs, config=cfg_raw, reader_factory=_no_reader, sync=False)
        out["replay_raw_s"] = time.perf_counter() - t
        assert reg.describe()[0]["mark"] == (outcomes // per_segment) - 1
        reg.abandon()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def fdatasync_latency_ms(samples: int = 200) -> float:
    root = tempfile.mkdtemp(prefix="bench-sync-")
    try:
        fd = os.open(os.path.join(root, "f"), os.O_WRONLY | os.O_CREAT)
        times = []
        for _ in range(samples):
            os.write(fd, b"x" * 34)
            t = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
        os.close(fd)
        return 1e3 * statistics.median(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundles", type=int, default=4000)
    parser.add_argument("--outcomes", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"fdatasync median on this disk: {fdatasync_latency_ms():.3f} ms")
    for n_subs in (1, 4):
        r = delivery(args.bundles, n_subs)
        print(
            f"delivery {n_subs} subscriber(s) x {args.bundles} bundles: {r['deliveries_per_s']:,.0f} deliveries/s, "
            f"ack p50 {r['ack_p50_ms']:.3f} ms, p99 {r['ack_p99_ms']:.3f} ms "
            f"(the ack log's own fdatasync p50 in this run: {r['fdatasync_p50_ms']:.3f} ms), "
            f"{r['fdatasyncs']:,} fdatasyncs for {r['acks']:,} acks"
        )
    r = replay(args.outcomes)
    print(
        f"ack log, {args.outcomes:,} outcomes written through the registry in {r['write_s']:.1f} s; "
        f"replay with checkpoints: {r['replay_checkpointed_s'] * 1e3:.1f} ms "
        f"({r['replayed_records']:,} records after the checkpoint, {r['checkpointed_files_bytes']:,} bytes on disk); "
        f"replay of one uncheckpointed log ({r['raw_log_bytes']:,} bytes): {r['replay_raw_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
