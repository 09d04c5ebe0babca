"""Where the adaptive encoder's time goes: per signal and per payload type, as multiples of a plain
``pyarrow.ipc`` stream write of the same tables.

Each phase is timed by wrapping the function that implements it with ``time.perf_counter``
(no profiler, so the split adds only a few microseconds per call). Phases:

* validate: ``check_bundle`` (schemas, parent ids);
* sort: ``transport.optimizer.optimize_tables`` (only with ``--sort``: sort keys, sort, gather, ids),
  without the hashing it calls for the encoder (``TableEncoder.hash_first``), counted under hash;
* hash (pyarrow): ``pc.dictionary_encode`` of dictionary columns (before sorting, or in the memo);
* memo lookups: the numba stream-dictionary kernels (lookups, first-seen numbering, recoding);
* feed/correct, rest: the remainder of ``TableEncoder.plan`` (inspection, events, schema);
* build: ``TableEncoder.build`` (emitting the adaptive record);
* IPC write: ``StreamWriter.write``; envelope: ``BatchArrowRecords.to_bytes``;
* other: what is left of the whole encode (commit, routing, bookkeeping).

Phases are exclusive (a timed call nested in another counts only for the inner phase).
Every phase is the median over ``--repeat`` runs (the first run, which loads numba's cache, is
dropped); the plain write is the minimum over the same runs. Pinned to core 0, Arrow single-threaded.

Run:  .venv/bin/python -m benchmarks.encoder_phases [--rows 20000] [--batch-size 5000] [--repeat 9] [--sort] [--unary]
      .venv/bin/python -m benchmarks.encoder_phases --fused-ab   (the fused sort on / off, see ``fused_ab``)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import adaptive_arrow.encoder as encoder_module
import adaptive_arrow.transform.dictionary as dictionary_module
import adaptive_arrow.transform.memo as memo_module
import otap_model
from adaptive_arrow import BatchArrowRecords, Encoder, EncoderConfig
from adaptive_arrow.stream import StreamWriter
from adaptive_arrow.table_encoder import TableEncoder
from otap_model import OtapBundle, Signal

PHASES = ("validate", "sort", "hash (pyarrow)", "memo lookups", "feed/correct, rest", "build", "IPC write", "envelope")


class Clock:
    """Accumulates wall time per (phase, payload type) while wrapped functions run. Phases are
    exclusive: time spent in a wrapped call nested inside another is counted only for the inner one."""

    def __init__(self) -> None:
        self.total: collections.defaultdict[tuple[str, str], float] = collections.defaultdict(float)
        self.payload = "-"
        self._nested: list[float] = []  # time spent in wrapped callees, per open call

    def wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._nested.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                self.total[(phase, self.payload)] += spent - self._nested.pop()
                if self._nested:
                    self._nested[-1] += spent

        return timed


class TimedHashing:
    """``pyarrow.compute`` as the encoder modules see it, with ``dictionary_encode`` timed."""

    def __init__(self, clock: Clock) -> None:
        self.dictionary_encode = clock.wrap(pc.dictionary_encode, "hash (pyarrow)")

    def __getattr__(self, name: str) -> Any:
        return getattr(pc, name)


def install(clock: Clock) -> None:
    """Wrap the phase functions (module attributes, so the encoder's own calls are timed)."""
    encoder_module.check_bundle = clock.wrap(encoder_module.check_bundle, "validate")
    encoder_module.optimize_tables = clock.wrap(encoder_module.optimize_tables, "sort")
    memo_module.pc = dictionary_module.pc = TimedHashing(clock)  # type: ignore[assignment]
    for kernel in ("_insert", "_first_seen", "_recode"):
        setattr(memo_module, kernel, clock.wrap(getattr(memo_module, kernel), "memo lookups"))
    dictionary_module._spread = clock.wrap(dictionary_module._spread, "hash (pyarrow)")
    plan, build, hash_first = TableEncoder.plan, TableEncoder.build, TableEncoder.hash_first

    def timed_hash_first(self: TableEncoder, *args: Any) -> Any:
        clock.payload = self.payload_type.name
        return hash_first(self, *args)

    def timed_plan(self: TableEncoder, *args: Any) -> Any:
        clock.payload = self.payload_type.name
        return clock.wrap(plan, "feed/correct, rest")(self, *args)

    def timed_build(self: TableEncoder, p: Any) -> Any:
        clock.payload = self.payload_type.name
        return clock.wrap(build, "build")(self, p)

    TableEncoder.hash_first = timed_hash_first  # type: ignore[method-assign]
    TableEncoder.plan = timed_plan  # type: ignore[method-assign]
    TableEncoder.build = timed_build  # type: ignore[method-assign,assignment]
    StreamWriter.write = clock.wrap(StreamWriter.write, "IPC write")  # type: ignore[method-assign]
    BatchArrowRecords.to_bytes = clock.wrap(BatchArrowRecords.to_bytes, "envelope")  # type: ignore[method-assign]


def plain_write(bundles: list[OtapBundle]) -> float:
    t0 = time.perf_counter()
    sinks: dict[int, tuple[io.BytesIO, pa.ipc.RecordBatchStreamWriter]] = {}
    for b in bundles:
        for pt, batch in b.tables.items():
            if pt not in sinks:
                sink = io.BytesIO()
                sinks[pt] = (sink, pa.ipc.new_stream(sink, batch.schema))
            sink, writer = sinks[pt]
            writer.write_batch(batch)
            sink.seek(0)
            sink.truncate()
    return time.perf_counter() - t0


def measure(signal: Signal, bundles: list[OtapBundle], config: EncoderConfig, repeat: int, clock: Clock, unary: bool):  # type: ignore[no-untyped-def]
    runs: list[tuple[float, dict[tuple[str, str], float]]] = []
    plain = float("inf")
    for _ in range(repeat + 1):
        clock.total.clear()
        clock.payload = "-"
        t0 = time.perf_counter()
        enc = Encoder(signal, config)
        for b in bundles:
            if unary:
                enc = Encoder(signal, config)
            enc.encode(b).to_bytes()
        runs.append((time.perf_counter() - t0, dict(clock.total)))
        plain = min(plain, plain_write(bundles))
    return runs[1:], plain


def split(counter: dict[tuple[str, str], float]) -> dict[str, float]:
    """Phase totals over payload types."""
    by_phase: collections.defaultdict[str, float] = collections.defaultdict(float)
    for (phase, _), t in counter.items():
        by_phase[phase] += t
    return dict(by_phase)


def fused_ab(rows: int, batch_size: int, seed: int, repeat: int) -> None:
    """The fused sort's own gain: the sorted encode with ``TableEncoder.hash_first`` on and as a
    no-op (the sort then hashes its string keys itself and gathers plain strings, the
    transforms hash the sorted columns again), alternately in one process; CPU time of this
    thread (``time.thread_time``, so other jobs preempting it do not count), minimum per mode."""
    hash_first = TableEncoder.hash_first

    def unfused(self: TableEncoder, batch: pa.RecordBatch, sort_keys: Any) -> pa.RecordBatch:
        return batch

    print(f"### Fused sort on / off (sorted encode, {rows} root records in batches of {batch_size}; "
          f"min of {repeat} alternating runs, thread CPU ms)\n")
    print("| signal | fused | unfused | fused / unfused |")
    print("|---|---|---|---|")
    for signal in Signal:
        bundles = list(otap_model.generate(signal, rows, batch_size=batch_size, seed=seed))
        best = {"fused": float("inf"), "unfused": float("inf")}
        for _ in range(repeat + 1):
            for mode in best:
                TableEncoder.hash_first = hash_first if mode == "fused" else unfused  # type: ignore[method-assign]
                t0 = time.thread_time()
                enc = Encoder(signal, EncoderConfig(sort=True))
                for b in bundles:
                    enc.encode(b).to_bytes()
                best[mode] = min(best[mode], time.thread_time() - t0)
        TableEncoder.hash_first = hash_first  # type: ignore[method-assign]
        print(f"| {signal.value} | {best['fused'] * 1e3:.2f} | {best['unfused'] * 1e3:.2f} | {best['fused'] / best['unfused']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sort", action="store_true")
    parser.add_argument("--unary", action="store_true", help="a fresh encoder per batch (unary mode)")
    parser.add_argument("--fused-ab", action="store_true", help="only time the sorted encode with the fused sort on and off")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {0})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    if args.fused_ab:
        fused_ab(args.rows, args.batch_size, args.seed, 2 * args.repeat)
        return 0
    clock = Clock()
    install(clock)
    config = EncoderConfig(sort=args.sort)
    print(f"### Encoder time split (sort={args.sort}, unary={args.unary}; {args.rows} root records in batches of {args.batch_size}; "
          f"median of {args.repeat} runs, in multiples of the plain IPC write)\n")
    print("| signal | plain write ms | encode | " + " | ".join(PHASES) + " | other |")
    print("|---|---|---|" + "---|" * (len(PHASES) + 1))
    per_payload: dict[str, list[tuple[str, float]]] = {}
    for signal in Signal:
        bundles = list(otap_model.generate(signal, args.rows, batch_size=args.batch_size, seed=args.seed))
        runs, plain = measure(signal, bundles, config, args.repeat, clock, args.unary)
        total = statistics.median(t for t, _ in runs)
        phases = {p: statistics.median(split(c).get(p, 0.0) for _, c in runs) for p in PHASES}
        other = total - sum(phases.values())
        cells = " | ".join(f"{phases[p] / plain:.2f}x" for p in PHASES)
        print(f"| {signal.value} | {plain * 1000:.2f} | {total / plain:.1f}x | {cells} | {other / plain:.2f}x |")
        payloads = {pt for _, c in runs for (_, pt) in c if pt != "-"}
        per_payload[signal.value] = sorted(
            ((pt, statistics.median(sum(t for (ph, p), t in c.items() if p == pt and ph not in ("validate", "sort", "IPC write", "envelope")) for _, c in runs)) for pt in payloads),
            key=lambda item: -item[1],
        )
        per_payload[signal.value] = [(pt, t / plain) for pt, t in per_payload[signal.value]]
    print("\n### Feed/correct (hashing included) + build per payload type (top 4 per signal, multiples of the plain write)\n")
    print("| signal | payload types |")
    print("|---|---|")
    for signal_name, items in per_payload.items():
        print(f"| {signal_name} | " + ", ".join(f"{pt} {x:.2f}x" for pt, x in items[:4]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
