"""Quiver store benchmark: every figure from one run, fsync on, printed as one table.

    .venv/bin/python -m benchmarks.bench_store [--dir DIR] [--quick] [--single]

Measures, on the file system of DIR (default: a temporary directory), side by side:
the fdatasync latency of small writes (appending, DESIGN.md's bound, and overwriting synced zeros,
the bound of the pre-extended WAL), `dd ... conv=fdatasync` bandwidth, ingest of 4-slot 100-row
bundles from one producer and from 8 producer threads (bundles/s, p50/p99 latency), large-bundle
ingest bandwidth, replay of a 128 MiB WAL, and opening a store of 1,000 segments.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from quiver_store import QuiverStore, RecordBundle, RetentionConfig, SegmentConfig, StoreConfig, WalConfig

MiB = 1 << 20


def small_bundles(n: int, seed: int = 1, rows: int = 100) -> list[RecordBundle]:
    """4 slots x `rows` rows, shaped like OTAP logs (root, attributes, scope, resource; slot ids 30,
    31, 2, 1, valid under OTAP_LAYOUT)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"word{i}" for i in range(500)])
    out = []
    for _ in range(n):
        ids = pa.array(np.arange(rows, dtype=np.uint16))
        logs = pa.record_batch({
            "id": ids,
            "time_unix_nano": pa.array(rng.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9, rows), pa.timestamp("ns")),
            "severity_number": pa.array(rng.integers(1, 24, rows, dtype=np.int32)),
            "body": pa.array(words[rng.integers(0, 500, rows)]),
        })
        attrs = pa.record_batch({
            "parent_id": ids,
            "key": pa.array(words[rng.integers(0, 20, rows)]),
            "str": pa.array(words[rng.integers(0, 500, rows)]),
        })
        scope = pa.record_batch({"id": ids, "name": pa.array(words[rng.integers(0, 5, rows)])})
        resource = pa.record_batch({"id": ids, "service": pa.array(words[rng.integers(0, 5, rows)]), "pid": pa.array(rng.integers(0, 1 << 30, rows))})
        out.append(RecordBundle({30: logs, 31: attrs, 2: scope, 1: resource}))
    return out


def large_bundles(n: int, size: int) -> list[RecordBundle]:
    rows = size // 16
    rng = np.random.default_rng(2)
    return [
        RecordBundle({0: pa.record_batch({"a": pa.array(rng.integers(0, 1 << 62, rows)), "b": pa.array(rng.random(rows))})})
        for _ in range(n)
    ]


def fdatasync_latency(directory: str, n: int) -> float:
    path = os.path.join(directory, "fsync.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"x" * 4096
        for _ in range(20):
            os.write(fd, block)
            os.fdatasync(fd)
        t = time.perf_counter()
        for _ in range(n):
            os.write(fd, block)
            os.fdatasync(fd)
        return (time.perf_counter() - t) / n
    finally:
        os.close(fd)
        os.unlink(path)


def overwrite_latency(directory: str, n: int) -> float:
    """The same 4 KiB write + fdatasync, overwriting blocks written and synced beforehand (zeros):
    no size change or block allocation for the journal to commit, the bound of a pre-extended WAL."""
    path = os.path.join(directory, "fsync.overwrite.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"x" * 4096
        os.write(fd, bytes((n + 20) * len(block)))
        os.fdatasync(fd)
        for i in range(20):
            os.pwrite(fd, block, i * len(block))
            os.fdatasync(fd)
        t = time.perf_counter()
        for i in range(20, n + 20):
            os.pwrite(fd, block, i * len(block))
            os.fdatasync(fd)
        return (time.perf_counter() - t) / n
    finally:
        os.close(fd)
        os.unlink(path)


def dd_bandwidth(directory: str, count: int) -> tuple[float, str]:
    path = os.path.join(directory, "dd.out")
    cmd = ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={count}", "conv=fdatasync"]
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t
    os.unlink(path)
    m = re.search(r"copied, ([\d.]+) s", res.stderr)
    secs = float(m.group(1)) if m else elapsed
    return count * MiB / secs / 1e6, " ".join(cmd)


def store_config(**wal: object) -> StoreConfig:
    return StoreConfig(
        segment=SegmentConfig(target_size=32 * MiB, max_open_duration=3600.0),
        wal=WalConfig(max_size=4 << 30, max_chunks=64, **wal),  # type: ignore[arg-type]
        retention=RetentionConfig(backpressure_timeout=120.0),
    )


def single_producer(
    directory: str, bundles: list[RecordBundle], rounds: int, probes: int
) -> tuple[list[float], list[float], list[float], list[float], dict]:
    """Rounds of (append probe, overwrite probe, single-producer ingest), interleaved so all three
    see the same disk load.

    Returns per-round append and overwrite fdatasync latencies, per-round bundles/s, every ingest
    latency, and stats.
    """
    lat: list[float] = []
    sync_lat, over_lat, rates = [], [], []
    per = len(bundles) // rounds
    with QuiverStore.open(os.path.join(directory, "single"), store_config()) as store:
        for b in bundles[:50]:
            store.ingest(b)
        for r in range(rounds):
            sync_lat.append(fdatasync_latency(directory, probes))
            over_lat.append(overwrite_latency(directory, probes))
            t0 = time.perf_counter()
            for b in bundles[r * per : (r + 1) * per]:
                t = time.perf_counter()
                store.ingest(b)
                lat.append(time.perf_counter() - t)
            rates.append(per / (time.perf_counter() - t0))
        stats = store.stats()
    return sync_lat, over_lat, rates, lat, stats


def many_producers(directory: str, bundles: list[RecordBundle], threads: int) -> tuple[float, list[float], dict]:
    lat: list[list[float]] = [[] for _ in range(threads)]
    with QuiverStore.open(os.path.join(directory, "multi"), store_config()) as store:
        per = len(bundles) // threads
        barrier = threading.Barrier(threads + 1)

        def run(k: int) -> None:
            mine = bundles[k * per : (k + 1) * per]
            barrier.wait()
            for b in mine:
                t = time.perf_counter()
                store.ingest(b)
                lat[k].append(time.perf_counter() - t)

        workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        barrier.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - t0
        stats = store.stats()
    return per * threads / elapsed, [x for xs in lat for x in xs], stats


def large_ingest(directory: str, bundles: list[RecordBundle], threads: int, direct: bool = True) -> tuple[float, dict]:
    """Arrow bytes/s of large bundles from `threads` producers, timed until `flush()` returned
    (every byte in a durable segment file).

    `direct` (the default config, whose `direct_bundle_size` is an eighth of the 32 MiB segment
    target, 4 MiB: these bundles are 4 MiB of Arrow data): each bundle is a segment file of its
    own, acknowledged once that file is durable, so the flush has nothing left to do. Otherwise (`wal.direct_bundle_size=0`)
    each is acknowledged after the WAL fdatasync and written again into 32 MiB segments, partly
    while later bundles are logged and the rest by the flush.
    """
    cfg = StoreConfig(
        segment=SegmentConfig(target_size=32 * MiB, max_open_duration=3600.0),
        wal=WalConfig(max_size=4 << 30, max_chunks=64, direct_bundle_size=None if direct else 0),
        retention=RetentionConfig(backpressure_timeout=120.0),
    )
    store = QuiverStore.open(os.path.join(directory, f"large{threads}{'d' if direct else 'w'}"), cfg)
    per = len(bundles) // threads

    def run(k: int) -> None:
        for b in bundles[k * per : (k + 1) * per]:
            store.ingest(b)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.flush()
    elapsed = time.perf_counter() - t0
    stats = store.stats()
    store._abandon()
    shutil.rmtree(os.path.join(directory, f"large{threads}{'d' if direct else 'w'}"), ignore_errors=True)
    payload = sum(pa.ipc.get_record_batch_size(b) for bundle in bundles[: per * threads] for b in bundle.slots.values())
    return payload / elapsed / 1e6, stats


def replay_time(directory: str, bundles: list[RecordBundle], wal_bytes: int) -> tuple[float, int, int]:
    path = os.path.join(directory, "replay")
    cfg = StoreConfig(
        segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0),
        wal=WalConfig(max_size=4 << 30, max_chunks=64, durability="os"),
    )
    store = QuiverStore.open(path, cfg)
    i = 0
    while store.stats()["bytes_written"] < wal_bytes:
        store.ingest(bundles[i % len(bundles)])
        i += 1
    written = store.stats()["bytes_written"]
    store._abandon()
    t = time.perf_counter()
    store = QuiverStore.open(path, cfg)
    elapsed = time.perf_counter() - t
    replayed = store.stats()["replayed_entries"]
    store._abandon()
    return elapsed, written, replayed


def open_many_segments(directory: str, count: int, bundles: list[RecordBundle]) -> tuple[float, float]:
    path = os.path.join(directory, "many")
    cfg = store_config()
    with QuiverStore.open(path, cfg) as store:
        for i in range(count):
            store.ingest(bundles[i % len(bundles)])
            store.flush()
        assert len(store.segments()) == count
    times = []
    for _ in range(3):
        t = time.perf_counter()
        store = QuiverStore.open(path, cfg)
        times.append(time.perf_counter() - t)
        store.close()
    t = time.perf_counter()
    with QuiverStore.open(path, cfg) as store:
        store.segments()
    with_meta = time.perf_counter() - t
    return min(times), with_meta


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="directory on the file system to measure (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller workloads (smoke run, figures not for the docs)")
    ap.add_argument("--single", action="store_true", help="only the single-producer rows (probes and ingest), for before/after runs")
    ap.add_argument("--large", action="store_true", help="only dd and the large-bundle rows (direct and through the WAL)")
    ap.add_argument("--small", action="store_true", help="only the small-bundle rows: 1 producer (with the probes) and 8 producers")
    args = ap.parse_args()
    console = Console()
    base = tempfile.mkdtemp(prefix="quiver-bench-", dir=args.dir)
    q = args.quick
    do_single = not args.large
    do_multi = not (args.single or args.large)
    do_large = not (args.single or args.small)
    do_rest = not (args.single or args.large or args.small)
    table = Table(title="Quiver store (one run)")
    for col in ("measurement", "result", "target", "met"):
        table.add_column(col)

    def row(name: str, result: str, target: str, ok: bool | None) -> None:
        table.add_row(name, result, target, "-" if ok is None else ("yes" if ok else "[red]NO"))

    def us(values: list[float]) -> str:
        return ", ".join(f"{x * 1e6:.0f}" for x in values)

    try:
        n_small = 1000 if q else 5000
        small = small_bundles(n_small)
        console.print(f"[bold]Quiver store benchmark[/bold] in {base} (fsync on, group commit)")
        rounds = 3 if q else 5
        if do_single:
            sync_lat, over_lat, single_rates, single_lat, single_stats = single_producer(base, small, rounds, 100 if q else 300)
            lat_fsync, lat_over = statistics.median(sync_lat), statistics.median(over_lat)
            single_bps = statistics.median(single_rates)
            single_ratio = statistics.median([r * lat for r, lat in zip(single_rates, sync_lat)])
            over_ratio = statistics.median([r * lat for r, lat in zip(single_rates, over_lat)])
            row(f"fdatasync latency (4 KiB append + fdatasync), median of {rounds}", f"{lat_fsync * 1e6:.0f} us -> bound {1 / lat_fsync:.0f}/s ({us(sync_lat)})", "-", None)
            row(f"  overwrite probe (4 KiB over synced zeros + fdatasync), median of {rounds}", f"{lat_over * 1e6:.0f} us -> bound {1 / lat_over:.0f}/s ({us(over_lat)})", "-", None)
            row("1 producer, 4-slot 100-row bundles", f"{single_bps:.0f} bundles/s ({single_ratio:.0%} of the append bound, {over_ratio:.0%} of the overwrite bound; medians per round)", "80% of 1/fdatasync", single_ratio >= 0.8)
            row("  ingest latency p50 / p99", f"{pct(single_lat, 50) * 1e3:.3f} / {pct(single_lat, 99) * 1e3:.3f} ms", "-", None)
        if do_multi:
            multi_bps, multi_lat, multi_stats = many_producers(base, small, 8)
            per_group = multi_stats["entries"] / max(multi_stats["fsyncs"], 1)
            row("8 producer threads, same bundles", f"{multi_bps:.0f} bundles/s ({per_group:.1f} bundles per fdatasync)", ">= 5000/s", multi_bps >= 5000)
            row("  ingest latency p50 / p99", f"{pct(multi_lat, 50) * 1e3:.3f} / {pct(multi_lat, 99) * 1e3:.3f} ms", "-", None)
        if do_large:
            big = large_bundles(16 if q else 64, 4 * MiB)
            dd_runs: list[float] = []
            runs: dict[tuple[int, bool], list[float]] = {(t, d): [] for d in (True, False) for t in (1, 4)}
            for _ in range(2 if q else 3):  # interleaved: dd, then the store, under the same disk load
                dd_mbs_r, dd_cmd = dd_bandwidth(base, 64 if q else 256)
                dd_runs.append(dd_mbs_r)
                for (threads, direct), results in runs.items():
                    mbs, stats = large_ingest(base, big, threads, direct)
                    results.append(mbs)
                    if (threads, direct) == (4, True):
                        large_stats = stats
            dd_mbs = statistics.median(dd_runs)
            row(f"dd bs=1M count=256 conv=fdatasync, median of {len(dd_runs)}", f"{dd_mbs:.0f} MB/s ({', '.join(f'{x:.0f}' for x in dd_runs)})", "-", None)
            for (threads, direct), results in runs.items():
                mbs = statistics.median(results)
                name = f"large bundles (4 MiB), {threads} producer{'s' if threads > 1 else ''}" + (
                    f", default config (direct_bundle_size {store_config().direct_bundle_size >> 20} MiB)" if direct else ", WAL then segment (direct off)"
                )
                ok = mbs >= 0.6 * dd_mbs if direct else None
                row(name, f"{mbs:.0f} MB/s ({mbs / dd_mbs:.0%} of dd; {', '.join(f'{x:.0f}' for x in results)})", ">= 60% of dd" if direct else "-", ok)
        if do_rest:
            replay_s, replay_bytes, replayed = replay_time(base, small[:500], (16 if q else 128) * MiB)
            open_s, open_meta_s = open_many_segments(base, 100 if q else 1000, small)
            row(f"WAL replay, {replay_bytes / MiB:.0f} MiB ({replayed} entries)", f"{replay_s:.2f} s", "<= 3 s (128 MiB)", replay_s <= 3.0)
            row(f"open a store of {100 if q else 1000} segments", f"{open_s:.3f} s (+ metadata of all: {open_meta_s:.3f} s)", "<= 1 s", open_s <= 1.0)
        console.print(table)
        if do_single:
            console.print(
                f"single producer per round: {', '.join(f'{x:.0f}' for x in single_rates)} bundles/s; "
                f"{single_stats['fsyncs']} fdatasyncs for {single_stats['entries']} entries; "
                f"{single_stats.get('preallocated_bytes', 0) / MiB:.1f} MiB of WAL zero-filled ahead"
            )
        if do_multi:
            console.print(
                f"8 threads: {multi_stats['fsyncs']} fdatasyncs for {multi_stats['entries']} entries; group sizes "
                f"{dict(list(multi_stats['group_commit_sizes'].items())[:12])}"
            )
        if do_large:
            console.print(f"dd command: {dd_cmd}")
            console.print(
                f"large, 4 producers, direct: {large_stats['direct_bundles']} direct bundles, {large_stats['segments_written']} segments, "
                f"{large_stats['segment_bytes_written'] / MiB:.0f} MiB of segment files, {large_stats['bytes_written'] / MiB:.0f} MiB of WAL"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
