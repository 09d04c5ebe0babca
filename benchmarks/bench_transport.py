"""Cost of transport optimisation (sort + dense ids + delta / quasi-delta encoding) per table and in
total, against a plain ``pyarrow.ipc`` stream write of the same plain tables.

    .venv/bin/python -m benchmarks.bench_transport [--batch-size 5000] [--batches 10] [--repeat 7]

Each table's cost is its step of the top-down pass (parent id rewrite, sort, renumbering and the
encoding of its id columns), timed around the function ``optimize`` calls per table; "total" times
``optimize`` itself (which also restores any encoded input first). The IPC baseline writes each
plain table to an in-memory Arrow IPC stream (schema + one record batch, no compression). Times
are the median over ``--repeat`` runs of the sum over ``--batches`` generated batches; the ratio
is what matters (both sides are measured in the same run).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa

from adaptive_arrow.transport import optimize
from adaptive_arrow.transport.optimizer import optimize_table, top_down
from adaptive_arrow.transport.sort import DEFAULT_SORT_ORDERS
from otap_model import OtapBundle, PayloadType, Signal, from_otlp, generate_otlp


def ipc_write(table: pa.RecordBatch) -> int:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_batch(table)
    return sink.getvalue().size


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_table(bundles: list[OtapBundle]) -> dict[PayloadType, tuple[int, float, float]]:
    """Rows, transport seconds and IPC seconds per payload type, summed over the bundles."""
    out: dict[PayloadType, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for bundle in bundles:
        renumberings: dict = {}
        for pt, parent in top_down(bundle.signal):
            table = bundle.tables.get(pt)
            if table is None:
                continue
            start = time.perf_counter()
            optimize_table(pt, table, parent, DEFAULT_SORT_ORDERS[pt], renumberings)
            spent = time.perf_counter() - start
            row = out[pt]
            row[0] += table.num_rows
            row[1] += spent
            row[2] += _timed(lambda table=table: ipc_write(table))
    return {pt: (int(r[0]), r[1], r[2]) for pt, r in out.items()}


def measure(signal: Signal, batch_size: int, batches: int, repeat: int, seed: int = 1) -> dict[str, object]:
    requests = generate_otlp(signal, batch_size * batches, batch_size=batch_size, seed=seed)
    bundles = [from_otlp(r) for r in requests]
    optimize(bundles[0])  # compile / load the numba kernels outside the timings
    totals, writes, tables = [], [], []
    for _ in range(repeat):
        totals.append(sum(_timed(lambda b=b: optimize(b)) for b in bundles))
        writes.append(sum(_timed(lambda b=b: [ipc_write(t) for t in b.tables.values()]) for b in bundles))
        tables.append(per_table(bundles))
    per = {}
    for pt in tables[0]:
        rows = tables[0][pt][0]
        per[pt.name] = (rows, statistics.median(t[pt][1] for t in tables), statistics.median(t[pt][2] for t in tables))
    return {"signal": signal.value, "total": statistics.median(totals), "ipc": statistics.median(writes), "tables": per}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--signals", default="logs,traces,metrics")
    args = parser.parse_args(argv)
    print(f"batch size {args.batch_size}, {args.batches} batches, median of {args.repeat} runs; times in ms per batch")
    print(f"{'signal':8} {'table':32} {'rows':>7} {'sort+delta':>11} {'ipc write':>10} {'ratio':>6}")
    for name in args.signals.split(","):
        result = measure(Signal(name), args.batch_size, args.batches, args.repeat)
        for table, (rows, spent, ipc) in result["tables"].items():  # type: ignore[union-attr]
            print(f"{name:8} {table:32} {rows // args.batches:7d} {1e3 * spent / args.batches:11.2f} "
                  f"{1e3 * ipc / args.batches:10.2f} {spent / ipc:6.2f}")
        total, ipc = result["total"], result["ipc"]
        print(f"{name:8} {'TOTAL (optimize)':32} {'':7} {1e3 * total / args.batches:11.2f} "  # type: ignore[operator]
              f"{1e3 * ipc / args.batches:10.2f} {total / ipc:6.2f}")  # type: ignore[operator]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
