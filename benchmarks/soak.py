"""Soak: one Quiver store driven for a long time in the steady state users run, sampled for growth.

    .venv/bin/python -m benchmarks.soak --minutes 10 [--dir DIR] [--out PREFIX] [--data mixed]
        [--producers 4] [--rate 300] [--interval 5] [--churn-every 5] [--reopen-every 120]
        [--tracemalloc]

Why: an embedded store runs for days inside a collector or a Spark driver, and nothing else
measures whether anything grows without bound over such a run: a dict keeping an entry per
deleted segment, a cache of segment readers, a file descriptor or a thread left behind by every
reopen, a log never checkpointed. Those are invisible in the short benchmarks and tests.

What runs, for `--minutes`: `--producers` threads ingest small 4-slot bundles (`--data generic`:
RecordBundles of `--rows` rows shaped like OTAP logs; `otap`: real records of
`adaptive_arrow.Encoder(signal).encode_records`, one encoder per producer, signals rotating
logs / traces / metrics; `mixed`, the default: half of each) at `--rate` bundles/s in all, fsync
on. Small segments (`--segment-size`, `max_open_duration` 0.5 s) are finalized and deleted all the
time; a `--size-cap` puts ingest through the cap path. Subscriber "fast" (two threads) acks every
bundle; "slow" (two threads) waits 0.2 ms per bundle and nacks (`--nack`) or defers (`--defer`)
some of them, so gap sets, backoff and redelivery stay in use. Every `--churn-every` s a
short-lived subscriber subscribes (start="latest"), acks a few bundles and unsubscribes; every
`--reopen-every` s the store is closed and reopened; a thread calls `stats()` every second. Each
bundle carries a unique `ingestion_time_ns`, so every acknowledged ingest, every delivery and every
confirmed ack is counted (bitmaps in this process: 5 bits per bundle, listed as `harness_bytes`,
part of the RSS measured). An exception the user guide does not announce for the call (e.g. a bare
OSError from `ingest`) is counted, its first traceback printed, and the run goes on; it fails the
run at the end.

Sampled every `--interval` s: RSS (VmRSS, and its RssAnon and RssFile parts), bytes in Arrow's
memory pool, the Python heap (tracemalloc, only with `--tracemalloc`: it slows everything, and its
own tables and snapshots add to the RSS, shown as `tracemalloc_kib`), open fds, live threads,
segment files and allocated bytes of wal/, segments/ and ack.log*, bundles acknowledged, the
gauges of `stats()` and the length of every dict, list, set and deque reachable from the store's
own objects ("census", e.g. `store._hub.registry._deleted_why`).

Growth, after a warm-up (`--warmup`, a fraction of the run): least-squares slope of each metric
against bundles ingested, per million bundles, over the whole post-warm-up part and over its second
half. A metric is "growing" when the second half still climbs linearly (slope > 0, R^2 >= 0.8,
its maximum above the first half's, and a climb over the second half larger than 2% of its mean
and than 1); "bounded" when it moves without that trend (a saw-tooth such as the ack log between
checkpoints); "flat" when it does not move. At the end producers stop, the store is flushed, both
subscribers drain, and the script checks that every acknowledged ingest was delivered to both (at
least once; an ack cut short by a reopen leaves its outcome unknown, so confirmed acks are reported
beside it), reopens the store and runs `quiver verify` on it. With `--tracemalloc` it compares heap
snapshots taken at a third of the run and at its end (top 15 lines by size growth, and the
tracebacks of the top 3).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import io
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

import otap_model
from adaptive_arrow import Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from quiver_store import (
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreClosedError,
    StoreConfig,
    StoreFullError,
    SubscriberConfig,
    WalConfig,
)
from quiver_store.cli import main as quiver_cli

from .bench_store import small_bundles

MiB = 1 << 20
SUBSCRIBERS = ("fast", "slow")
CONTAINERS = (dict, list, set, frozenset, collections.deque, bytearray)
# stats() gauges sampled (the rest are counters that rise by definition, or per-subscriber keys below)
STATS_GAUGES = (
    "segments", "segment_bytes", "wal_bytes", "wal_files", "open_segment_bundles", "pending_finalize",
    "quiver.ack_log.depth", "quiver.ack_log.bytes", "quiver.subscriber.count",
)
SUBSCRIBER_GAUGES = ("gap_set_size", "lag_bundles", "in_flight")
TABLE_COLUMNS = (
    "rss_kib", "rss_anon_kib", "rss_file_kib", "arrow_pool_kib", "heap_kib", "fds", "threads", "segment_files", "disk_wal", "disk_segments", "disk_ack",
    "stats.quiver.ack_log.depth", "stats.keys", "stats.slow.gap_set_size",
)


class Bits:
    """A growable bitmap of bundle ids (thread-safe); `set` says whether the bit was set already."""

    def __init__(self) -> None:
        self._bytes = bytearray()
        self._lock = threading.Lock()

    def set(self, i: int) -> bool:
        byte, bit = divmod(i, 8)
        with self._lock:
            if byte >= len(self._bytes):
                self._bytes.extend(bytes(max(byte + 1 - len(self._bytes), 1 << 16)))
            seen = bool(self._bytes[byte] >> bit & 1)
            self._bytes[byte] |= 1 << bit
            return seen

    def array(self, n_bytes: int) -> np.ndarray:
        with self._lock:
            out = np.frombuffer(bytes(self._bytes[:n_bytes]), dtype=np.uint8)
        return np.pad(out, (0, n_bytes - len(out)))

    @property
    def nbytes(self) -> int:
        return len(self._bytes)


def bundle_source(kind: str, producer: int, rows: int) -> Iterator[RecordBundle]:
    """Endless bundles for one producer: a cycled pool of bench_store.small_bundles, or live-encoded OTAP records."""
    if kind == "generic":
        pool = small_bundles(64, seed=producer, rows=rows)
        fps = [{s: b.fingerprint(s) for s in b.slots} for b in pool]
        for b, fp in itertools.cycle(zip(pool, fps, strict=True)):
            yield RecordBundle(b.slots, fp)
    signal = ("logs", "traces", "metrics")[producer // 2 % 3]
    source = list(otap_model.generate(signal, 64 * rows, batch_size=rows, seed=producer))
    encoder = Encoder(signal)
    for plain in itertools.cycle(source):
        yield encoder.encode_records(plain)


def census(root: object, name: str = "store") -> dict[str, int]:
    """Length of every container reachable from the store's own objects, by attribute path.

    Containers holding our objects (subscriber states, readers) are descended into; the
    containers of their first 256 elements are summed under `path[*].attr`.
    """
    out: dict[str, int] = collections.defaultdict(int)
    seen: set[int] = set()

    def ours(value: object) -> bool:
        module = type(value).__module__
        return module.startswith("quiver_store") and not isinstance(value, type)

    def attrs(obj: object) -> list[tuple[str, Any]]:
        names = list(getattr(obj, "__dict__", {}))
        names += [s for cls in type(obj).__mro__ for s in getattr(cls, "__slots__", ())]
        return [(n, getattr(obj, n, None)) for n in names]

    def walk(obj: object, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        for attr, value in attrs(obj):
            where = f"{path}.{attr}"
            if isinstance(value, CONTAINERS):
                out[where] += len(value)
                try:
                    items = list(value.values()) if isinstance(value, dict) else list(value)
                except RuntimeError:  # mutated by a store thread while copied: counted next time
                    continue
                for item in items[:256]:
                    if ours(item):
                        walk(item, f"{where}[*]", depth + 1)
            elif ours(value):
                walk(value, where, depth + 1)

    walk(root, name, 0)
    return dict(out)


def memory_kib() -> dict[str, int]:
    """VmRSS and its parts: RssAnon (heaps, Arrow's pool) and RssFile (mapped files: segments, libraries)."""
    wanted = {"VmRSS:": "rss_kib", "RssAnon:": "rss_anon_kib", "RssFile:": "rss_file_kib"}
    with open("/proc/self/status") as f:
        return {wanted[line.split()[0]]: int(line.split()[1]) for line in f if line.split()[0] in wanted}


def allocated(path: str) -> int:
    """Bytes the file system allocated under `path` (punched WAL holes and sparse tails excluded);
    a file renamed or deleted by the store while this runs counts 0."""
    try:
        if not os.path.isdir(path):
            return os.stat(path).st_blocks * 512
        return sum(allocated(entry.path) for entry in os.scandir(path))
    except FileNotFoundError:
        return 0


class Soak:
    """One store, its producers, subscribers, churn, stats caller and reopen cycle."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.config = StoreConfig(
            segment=SegmentConfig(target_size=args.segment_size, max_open_duration=0.5),
            wal=WalConfig(rotation_size=args.wal_rotation),
            retention=RetentionConfig(size_cap=args.size_cap),
            subscribers=SubscriberConfig(nack_backoff_initial=0.05, nack_backoff_max=1.0),
        )
        self.store = QuiverStore.open(args.dir, self.config, layout=OTAP_LAYOUT)
        self.base_ns = time.time_ns()  # bundle k carries ingestion_time_ns = base_ns + k
        self._ids = itertools.count()
        self._gate = threading.Condition()
        self._reopening = False
        self.stop = threading.Event()
        self.stop_subscribers = threading.Event()
        self.stored = Bits()  # ingest returned: acknowledged
        self.seen = {name: Bits() for name in SUBSCRIBERS}  # handed to the subscriber by next()
        self.acked = {name: Bits() for name in SUBSCRIBERS}  # ack() returned True
        self.counts: collections.Counter[str] = collections.Counter()
        self._counts_lock = threading.Lock()
        self._reported: set[str] = set()
        self.threads: list[threading.Thread] = []

    def count(self, key: str, n: int = 1) -> None:
        with self._counts_lock:
            self.counts[key] += n

    def unexpected(self, where: str, exc: Exception) -> None:
        """An exception the store's documentation does not announce: counted, first one of a kind printed."""
        key = f"unexpected {where}: {type(exc).__name__}"
        self.count(key)
        with self._counts_lock:
            first = key not in self._reported
            self._reported.add(key)
        if first:
            traceback.print_exception(exc)

    def current(self) -> QuiverStore:
        """The open store; waits while it is being reopened."""
        with self._gate:
            while self._reopening and not self.stop.is_set():
                self._gate.wait(0.1)
            return self.store

    def reopen(self) -> None:
        with self._gate:
            self._reopening = True
        try:
            self.store.close()
            self.store = QuiverStore.open(self.args.dir, self.config, layout=OTAP_LAYOUT)
        finally:
            with self._gate:
                self._reopening = False
                self._gate.notify_all()
        self.count("reopens")

    # -- workers ------------------------------------------------------------------------------
    def produce(self, producer: int, kind: str) -> None:
        period = self.args.producers / self.args.rate if self.args.rate > 0 else 0.0
        due = time.monotonic()
        for made in bundle_source(kind, producer, self.args.rows):
            if self.stop.is_set():
                return
            due += period
            lag = due - time.monotonic()
            if lag > 0:
                time.sleep(lag)
            elif lag < -1.0:  # fell behind (a reopen, backpressure): do not burst to catch up
                due = time.monotonic()
            store = self.current()
            k = next(self._ids)
            try:
                store.ingest(RecordBundle(made.slots, made.fingerprints, ingestion_time_ns=self.base_ns + k))
            except StoreClosedError:
                self.count("ingest_closed")
                continue
            except StoreFullError:
                self.count("ingest_full")
                continue
            except Exception as exc:
                self.unexpected("ingest", exc)
                continue
            self.stored.set(k)
            self.count("ingested")

    def consume(self, name: str, slow: bool, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop_subscribers.is_set():
            store = self.current()
            try:
                sub = store.subscribe(name)
                while not self.stop_subscribers.is_set():
                    d = sub.next(timeout=0.5)
                    if d is None:
                        continue
                    stamp = d.bundle.ingestion_time_ns  # reads the bundle, as an exporter would
                    assert stamp is not None  # stored bundles always carry it
                    k = stamp - self.base_ns
                    self.count(f"{name}_redelivered" if self.seen[name].set(k) else f"{name}_seen")
                    if slow:
                        roll = rng.random()
                        if roll < self.args.nack:
                            d.nack()
                            self.count(f"{name}_nacks")
                            continue
                        if roll < self.args.nack + self.args.defer:
                            d.defer()
                            self.count(f"{name}_defers")
                            continue
                        time.sleep(0.0002)
                    try:
                        if not d.ack():
                            self.count(f"{name}_ack_false")
                        elif not self.acked[name].set(k):
                            self.count(f"{name}_acked")
                    except StoreClosedError:  # a reopen: the outcome is unknown (user guide, "Subscribers")
                        self.count(f"{name}_ack_cut_by_close")
                        raise
            except StoreClosedError:
                continue
            except Exception as exc:
                self.unexpected(f"subscriber {name}", exc)

    def churn(self) -> None:
        for n in itertools.count():
            if self.stop.wait(self.args.churn_every):
                return
            name = f"churn{n}"
            try:
                store = self.current()
                sub = store.subscribe(name, start="latest")
                for _ in range(20):
                    d = sub.next(timeout=0.2)
                    if d is None:
                        break
                    d.ack()
                store.unsubscribe(name)
                self.count("churned")
                continue
            except StoreClosedError:
                self.count("churn_cut_by_close")
            except Exception as exc:
                self.unexpected("churn", exc)
                continue
            while True:  # cut by a reopen: left registered, it would pin every segment for orphan_timeout
                store = self.current()
                try:
                    if any(s["name"] == name for s in store.stats()["subscribers"]):
                        store.unsubscribe(name)
                    break
                except StoreClosedError:
                    continue

    def poll_stats(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.current().stats()
                self.count("stats_calls")
            except StoreClosedError:
                pass
            except Exception as exc:
                self.unexpected("stats", exc)

    def start(self) -> None:
        kinds = {"generic": ["generic"], "otap": ["otap"], "mixed": ["generic", "otap"]}[self.args.data]
        targets: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            (f"producer{p}", self.produce, (p, kinds[p % len(kinds)])) for p in range(self.args.producers)
        ]
        targets += [("fast0", self.consume, ("fast", False, 0)), ("fast1", self.consume, ("fast", False, 1))]
        targets += [("slow0", self.consume, ("slow", True, 2)), ("slow1", self.consume, ("slow", True, 3))]
        targets.append(("stats", self.poll_stats, ()))
        if self.args.churn_every > 0:
            targets.append(("churn", self.churn, ()))
        for name, fn, fn_args in targets:
            t = threading.Thread(target=fn, args=fn_args, name=f"soak-{name}", daemon=True)
            t.start()
            self.threads.append(t)

    def join(self, prefix: str) -> None:
        for t in self.threads:
            if t.name.startswith(prefix):
                t.join()

    # -- sampling -----------------------------------------------------------------------------
    def sample(self, t0: float) -> dict[str, float]:
        store = self.current()
        stats = store.stats()
        with self._counts_lock:
            counts = dict(self.counts)
        row: dict[str, float] = {
            "t_s": round(time.monotonic() - t0, 1),
            "ingested": counts.get("ingested", 0),
            "fast_seen": counts.get("fast_seen", 0),
            "slow_seen": counts.get("slow_seen", 0),
            **memory_kib(),
            "arrow_pool_kib": pa.total_allocated_bytes() // 1024,
            "heap_kib": tracemalloc.get_traced_memory()[0] // 1024 if tracemalloc.is_tracing() else 0,
            "tracemalloc_kib": tracemalloc.get_tracemalloc_memory() // 1024,
            "fds": len(os.listdir("/proc/self/fd")),
            "threads": threading.active_count(),
            "segment_files": sum(1 for f in os.listdir(os.path.join(self.args.dir, "segments")) if f.endswith(".qseg")),
            "disk_wal": allocated(os.path.join(self.args.dir, "wal")),
            "disk_segments": allocated(os.path.join(self.args.dir, "segments")),
            "disk_ack": sum(allocated(e.path) for e in os.scandir(self.args.dir) if e.name.startswith("ack.")),
            "harness_bytes": self.stored.nbytes + sum(b.nbytes for b in (*self.seen.values(), *self.acked.values())),
            "stats.keys": len(stats),
            "stats.group_commit_sizes": len(stats["group_commit_sizes"]),
            "stats.corruption_reports": len(stats["corruption_reports"]),
        }
        row.update({f"stats.{k}": stats[k] for k in STATS_GAUGES})
        for name in SUBSCRIBERS:
            row.update({f"stats.{name}.{g}": stats[f'quiver.subscriber.{g}{{subscriber="{name}"}}'] for g in SUBSCRIBER_GAUGES})
        row.update({f"census.{k}": v for k, v in census(store).items()})
        return row


def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x, and R^2 (0 when y does not vary)."""
    if len(x) < 3 or np.ptp(x) == 0:
        return 0.0, 0.0
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (slope * x + intercept)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    return float(slope), (1.0 - residual / total) if total > 0 else 0.0


def growth(samples: list[dict[str, float]], warmup_s: float) -> dict[str, dict[str, Any]]:
    """Per metric: values at start / warm-up / end, slopes per million bundles, verdict."""
    post = [s for s in samples if s["t_s"] >= warmup_s]
    half = post[len(post) // 2:]
    first = post[: len(post) // 2]
    keys = sorted({k for s in samples for k in s} - {"t_s", "ingested", "fast_seen", "slow_seen"})
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        ys = np.array([s.get(key, 0) for s in post], dtype=float)
        xs = np.array([s["ingested"] for s in post], dtype=float)
        y2 = np.array([s.get(key, 0) for s in half], dtype=float)
        x2 = np.array([s["ingested"] for s in half], dtype=float)
        slope, _ = fit(xs, ys)
        slope2, r2 = fit(x2, y2)
        climb = slope2 * float(np.ptp(x2)) if len(x2) else 0.0
        if np.ptp(ys) == 0:
            verdict = "flat"
        elif (
            slope2 > 0 and r2 >= 0.8 and climb > max(1.0, 0.02 * abs(float(ys.mean())))
            and float(y2.max()) > max((s.get(key, 0) for s in first), default=0)
        ):
            verdict = "growing"
        else:
            verdict = "bounded"
        out[key] = {
            "start": samples[0].get(key, 0), "warm": post[0].get(key, 0), "end": samples[-1].get(key, 0),
            "min": float(ys.min()), "max": float(ys.max()),
            "per_M": slope * 1e6, "per_M_2nd_half": slope2 * 1e6, "r2_2nd_half": r2, "verdict": verdict,
        }
    return out


def heap_diff(older: tracemalloc.Snapshot, newer: tracemalloc.Snapshot) -> dict[str, Any]:
    keep = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    older, newer = older.filter_traces(keep), newer.filter_traces(keep)
    lines = newer.compare_to(older, "lineno")[:15]
    traces = newer.compare_to(older, "traceback")[:3]
    return {
        "top_lines": [
            {"where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}", "size_diff": s.size_diff,
             "count_diff": s.count_diff, "size": s.size}
            for s in lines
        ],
        "top_tracebacks": [
            {"size_diff": s.size_diff, "count_diff": s.count_diff, "traceback": s.traceback.format()}
            for s in traces
        ],
    }


def drain(soak: Soak, timeout: float) -> None:
    """Producers are stopped: finalize what is open and wait until both subscribers resolved everything."""
    store = soak.current()
    store.flush()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        subs = {s["name"]: s for s in store.stats()["subscribers"]}
        if all(subs[n]["lag_bundles"] == 0 and subs[n]["in_flight"] == 0 for n in SUBSCRIBERS):
            return
        time.sleep(0.2)


def verify(soak: Soak) -> dict[str, Any]:
    """Every acknowledged ingest delivered to both subscribers (at least once), how many of them had
    their ack confirmed; the reopened store passes `quiver verify`."""
    n_bytes = max(b.nbytes for b in (soak.stored, *soak.seen.values(), *soak.acked.values()))
    stored = soak.stored.array(n_bytes)
    out: dict[str, Any] = {"acknowledged_ingests": int(np.unpackbits(stored).sum())}
    for name in SUBSCRIBERS:
        seen, acked = soak.seen[name].array(n_bytes), soak.acked[name].array(n_bytes)
        out[f"{name}_missing"] = int(np.unpackbits(stored & ~seen).sum())
        out[f"{name}_ack_unconfirmed"] = int(np.unpackbits(stored & ~acked).sum())
        out[f"{name}_seen_not_acknowledged"] = int(np.unpackbits(seen & ~stored).sum())
    QuiverStore.open(soak.args.dir, soak.config, layout=OTAP_LAYOUT).close()
    report = io.StringIO()
    with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
        out["quiver_verify_exit"] = quiver_cli(["verify", soak.args.dir])
    out["quiver_verify_tail"] = report.getvalue().strip().splitlines()[-3:]
    return out


def print_report(console: Console, samples: list[dict[str, float]], result: dict[str, dict[str, Any]]) -> None:
    step = max(1, len(samples) // 12)
    table = Table(title=f"samples (every {step})")
    cols = ("t_s", "ingested", *TABLE_COLUMNS)
    for c in cols:
        table.add_column(c.removeprefix("stats."), justify="right")
    for s in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        table.add_row(*(f"{s.get(c, 0):,.0f}" for c in cols))
    console.print(table)
    shown = [k for k in result if not k.startswith("census.") or result[k]["verdict"] == "growing"]
    table = Table(title="growth after warm-up (per million bundles ingested)")
    for c in ("metric", "start", "warm-up", "end", "min..max", "per M", "per M, 2nd half", "R^2 2nd", "verdict"):
        table.add_column(c, justify="left" if c == "metric" else "right")
    for key in shown:
        g = result[key]
        table.add_row(
            key, f"{g['start']:,.0f}", f"{g['warm']:,.0f}", f"{g['end']:,.0f}", f"{g['min']:,.0f}..{g['max']:,.0f}",
            f"{g['per_M']:,.1f}", f"{g['per_M_2nd_half']:,.1f}", f"{g['r2_2nd_half']:.2f}",
            f"[bold red]{g['verdict']}[/]" if g["verdict"] == "growing" else g["verdict"],
        )
    console.print(table)
    left_out = len(result) - len(shown)
    console.print(f"({left_out} census containers that are not growing are left out of the table; all are in the CSV)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--dir", help="store directory (must not exist or be empty; default: a temporary one, removed)")
    parser.add_argument("--out", default="soak", help="writes PREFIX.csv (every sample) and PREFIX.json (all results)")
    parser.add_argument("--data", choices=("mixed", "generic", "otap"), default="mixed")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=300.0, help="bundles/s over all producers (0: as fast as they go)")
    parser.add_argument("--rows", type=int, default=20, help="rows per slot (generic) or records per batch (otap)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=0.25, help="fraction of the run left out of the growth fits")
    parser.add_argument("--segment-size", type=int, default=256 << 10, help="segment.target_size")
    parser.add_argument("--wal-rotation", type=int, default=1 * MiB, help="wal.rotation_size")
    parser.add_argument("--size-cap", type=int, default=32 * MiB, help="retention.size_cap (backpressure)")
    parser.add_argument("--nack", type=float, default=0.02, help="fraction of deliveries the slow subscriber nacks")
    parser.add_argument("--defer", type=float, default=0.02, help="fraction it defers")
    parser.add_argument("--churn-every", type=float, default=5.0, help="seconds between short-lived subscribers (0: none)")
    parser.add_argument("--reopen-every", type=float, default=120.0, help="seconds between close/reopen (0: never)")
    parser.add_argument("--tracemalloc", action="store_true", help="trace the Python heap (slow) and diff snapshots")
    parser.add_argument("--frames", type=int, default=4, help="traceback depth kept by tracemalloc")
    args = parser.parse_args()
    if not 0 <= args.warmup < 1:
        parser.error(f"--warmup is a fraction of the run in [0, 1), got {args.warmup}")
    console = Console(width=200)
    temporary = args.dir is None
    if temporary:
        args.dir = tempfile.mkdtemp(prefix="quiver-soak-")
    if args.tracemalloc:
        tracemalloc.start(args.frames)
    duration = args.minutes * 60
    soak = Soak(args)
    samples: list[dict[str, float]] = []
    snapshot_early: tracemalloc.Snapshot | None = None
    t0 = time.monotonic()
    next_reopen = t0 + args.reopen_every
    soak.start()
    while (now := time.monotonic()) < t0 + duration:
        time.sleep(min(args.interval, t0 + duration - now))
        if args.reopen_every > 0 and time.monotonic() >= next_reopen:
            soak.reopen()
            next_reopen += args.reopen_every
        samples.append(soak.sample(t0))
        s = samples[-1]
        console.print(
            f"{s['t_s']:7.1f}s ingested {s['ingested']:>10,.0f}  rss {s['rss_kib'] / 1024:7.1f} MiB  "
            f"fds {s['fds']:>4.0f}  threads {s['threads']:>3.0f}  segments {s['segment_files']:>4.0f}  "
            f"ack.log* {s['disk_ack'] / 1024:6.0f} KiB  slow lag {s['stats.slow.lag_bundles']:>6.0f} gaps {s['stats.slow.gap_set_size']:>4.0f}"
        )
        if args.tracemalloc and snapshot_early is None and time.monotonic() - t0 >= duration / 3:
            snapshot_early = tracemalloc.take_snapshot()
    snapshot_end = tracemalloc.take_snapshot() if snapshot_early is not None else None
    soak.stop.set()
    soak.join("soak-producer")
    soak.join("soak-churn")
    soak.join("soak-stats")
    drain(soak, timeout=120.0)
    soak.stop_subscribers.set()
    soak.join("soak-")
    soak.store.close()
    result = growth(samples, args.warmup * duration)
    checks = verify(soak)
    if temporary:  # left in place when anything above failed, for `quiver inspect`
        shutil.rmtree(args.dir)
    print_report(console, samples, result)
    with soak._counts_lock:
        counts = dict(soak.counts)
    console.print(f"counts: {counts}")
    console.print(f"end checks: {checks}")
    heap = heap_diff(snapshot_early, snapshot_end) if snapshot_early is not None and snapshot_end is not None else None
    if heap is not None:
        table = Table(title="tracemalloc: end vs 1/3 of the run, top 15 lines by size_diff")
        for c in ("line", "size_diff", "count_diff", "size"):
            table.add_column(c, justify="left" if c == "line" else "right")
        for h in heap["top_lines"]:
            table.add_row(h["where"], f"{h['size_diff']:,}", f"{h['count_diff']:,}", f"{h['size']:,}")
        console.print(table)
        for h in heap["top_tracebacks"]:
            console.print(f"+{h['size_diff']:,} B in {h['count_diff']:,} blocks:\n" + "\n".join(h["traceback"]))
    keys = sorted({k for s in samples for k in s}, key=lambda k: (k.startswith("census."), k))
    with open(f"{args.out}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, restval=0)
        writer.writeheader()
        writer.writerows(samples)
    with open(f"{args.out}.json", "w") as f:
        json.dump({"args": vars(args), "load_average": os.getloadavg(), "samples": samples, "growth": result,
                   "counts": counts, "checks": checks, "tracemalloc": heap}, f, indent=1, default=str)
    growing = [k for k, g in result.items() if g["verdict"] == "growing"]
    unexpected = {k: v for k, v in counts.items() if k.startswith("unexpected")}
    ok = checks["quiver_verify_exit"] == 0 and all(checks[f"{n}_missing"] == 0 for n in SUBSCRIBERS) and not unexpected
    console.print(f"growing: {growing or 'none'}; delivery and verify: {'ok' if ok else 'FAILED'}; "
                  f"wrote {args.out}.csv, {args.out}.json")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
