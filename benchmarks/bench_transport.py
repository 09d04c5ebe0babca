"""Cost of transport optimisation (sort + dense ids + delta / quasi-delta encoding) per table and in
total, against a plain ``pyarrow.ipc`` stream write of the same plain tables.

    .venv/bin/python -m benchmarks.bench_transport [--batch-size 5000] [--batches 10] [--repeat 7] [--steps]
    .venv/bin/python -m benchmarks.bench_transport --keys-against TREE [--rounds 15]

Each table's cost is its step of the top-down pass (parent id rewrite, sort, renumbering and the
encoding of its id columns), timed around the function ``optimize`` calls per table; "total" times
``optimize`` itself (which also restores any encoded input first). The IPC baseline writes each
plain table to an in-memory Arrow IPC stream (schema + one record batch, no compression). Times
are the median over ``--repeat`` runs of the sum over ``--batches`` generated batches; the ratio
is what matters (both sides are measured in the same run). ``--steps`` adds the split of each
signal's time over the steps of ``optimize_table`` (the same calls, timed one by one: parent id
rewrite, sort keys, sort, take, renumbering + delta, parent id encoding, output batch).
``--keys-against TREE`` is an in-process A/B of the sort-key step alone, which a whole-encode A/B
cannot resolve: the ``sort_keys`` calls of one sorted encode of 4 batches are captured, then
replayed by this tree's ``sort_keys`` and TREE's alternately (thread CPU, min of 10 runs per
round); it prints the median ratio this / other over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa

from adaptive_arrow import Encoder, EncoderConfig
from adaptive_arrow.transport import delta, optimize
from adaptive_arrow.transport import optimizer as optimizer_module
from adaptive_arrow.transport.columns import get_column, replace_columns
from adaptive_arrow.transport.ids import renumber_delta
from adaptive_arrow.transport.optimizer import id_columns, optimize_table, parent_id_encoding, top_down
from adaptive_arrow.transport.sort import DEFAULT_SORT_ORDERS, sort, sort_keys
from otap_model import OtapBundle, PayloadType, Signal, from_otlp, generate, generate_otlp


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


STEPS = ("parent id rewrite", "sort keys", "sort", "take", "renumber + delta", "parent id encoding", "output batch")


def steps(bundles: list[OtapBundle]) -> list[float]:
    """Seconds per step of ``optimize_table`` (in ``STEPS`` order), summed over tables and bundles."""
    spent = [0.0] * len(STEPS)
    for bundle in bundles:
        renumberings: dict = {}
        for pt, parent in top_down(bundle.signal):
            table = bundle.tables.get(pt)
            if table is None:
                continue
            marks = [time.perf_counter()]
            lap = marks.append  # one mark after each step
            parent_ids = None
            if parent is not None:
                parent_ids = renumberings[parent].apply(get_column(table, "parent_id"), pt.name, parent[1])
            lap(time.perf_counter())
            overrides = None if parent_ids is None else {"parent_id": parent_ids}
            keys = sort_keys(table, DEFAULT_SORT_ORDERS[pt], pt.name, overrides) if table.num_rows > 1 else {}
            lap(time.perf_counter())
            ordering = sort(keys, table.num_rows)
            lap(time.perf_counter())
            sorted_table = table if ordering.perm is None else table.take(ordering.perm)
            lap(time.perf_counter())
            replaced = {}
            for path in id_columns(pt):
                ids = get_column(sorted_table, path)
                if ids is not None:
                    encoded, renumberings[(pt, path)] = renumber_delta(ids, path)
                    replaced[path] = (encoded, "delta")
            lap(time.perf_counter())
            encoding = parent_id_encoding(pt)
            if parent_ids is not None and encoding is not None:
                replaced["parent_id"] = (delta.encode_parent_ids(pt, table, parent_ids, ordering, keys), encoding)
            lap(time.perf_counter())
            replace_columns(sorted_table, replaced)
            lap(time.perf_counter())
            for step in range(len(STEPS)):
                spent[step] += marks[step + 1] - marks[step]
    return spent


def measure(signal: Signal, batch_size: int, batches: int, repeat: int, seed: int = 1) -> dict[str, object]:
    requests = generate_otlp(signal, batch_size * batches, batch_size=batch_size, seed=seed)
    bundles = [from_otlp(r) for r in requests]
    optimize(bundles[0])  # compile / load the numba kernels outside the timings
    totals, writes, tables = [], [], []
    for _ in range(repeat):
        totals.append(sum(_timed(lambda b=b: optimize(b)) for b in bundles))
        writes.append(sum(_timed(lambda b=b: [ipc_write(t) for t in b.tables.values()]) for b in bundles))
        tables.append(per_table(bundles))
    split = [statistics.median(s) for s in zip(*(steps(bundles) for _ in range(repeat)), strict=True)]
    per = {}
    for pt in tables[0]:
        rows = tables[0][pt][0]
        per[pt.name] = (rows, statistics.median(t[pt][1] for t in tables), statistics.median(t[pt][2] for t in tables))
    return {"signal": signal.value, "total": statistics.median(totals), "ipc": statistics.median(writes), "tables": per,
            "steps": split}


def keys_against(tree: str, signals: list[Signal], rounds: int) -> None:
    """In-process A/B of ``sort_keys`` alone, this tree against ``tree`` (see the module docstring)."""
    import importlib
    from pathlib import Path

    from benchmarks.bench_encoder import _load_tree

    _load_tree(Path(tree))
    other = importlib.import_module("adaptive_arrow_other.transport.sort").sort_keys
    print(f"sort_keys alone, this tree vs {tree}; thread CPU, min of 10 runs per round, {rounds} rounds, "
          f"load {os.getloadavg()[0]:.2f}")
    for signal in signals:
        bundles = list(generate(signal, 20_000, batch_size=5_000, seed=1))
        calls: list[tuple[object, ...]] = []
        captured = optimizer_module.sort_keys

        def capture(*args: object, _original: Callable[..., object] = captured, _calls: list = calls) -> object:
            _calls.append(args)
            return _original(*args)

        optimizer_module.sort_keys = capture  # type: ignore[assignment]
        try:
            encoder = Encoder(signal, EncoderConfig(sort=True))
            for bundle in bundles:
                encoder.encode(bundle)
        finally:
            optimizer_module.sort_keys = captured
        sides: dict[str, Callable[..., object]] = {"this": sort_keys, "other": other}
        per: dict[str, list[float]] = {side: [] for side in sides}
        ratios = []
        for _ in range(rounds):
            best = dict.fromkeys(sides, float("inf"))
            for _ in range(10):
                for side, fn in sides.items():
                    t0 = time.thread_time()
                    for args in calls:
                        fn(*args)
                    best[side] = min(best[side], time.thread_time() - t0)
            for side in sides:
                per[side].append(best[side])
            ratios.append(best["this"] / best["other"])
        n = len(bundles)
        print(f"{signal.value:8} {len(calls)} calls; per batch this {statistics.median(per['this']) / n * 1e6:.0f} us, "
              f"other {statistics.median(per['other']) / n * 1e6:.0f} us; this / other {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--signals", default="logs,traces,metrics")
    parser.add_argument("--steps", action="store_true", help="also split each signal's time over the steps")
    parser.add_argument("--keys-against", metavar="TREE", help="in-process A/B of sort_keys alone against another tree")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of --keys-against")
    args = parser.parse_args(argv)
    if args.keys_against:
        keys_against(args.keys_against, [Signal(s) for s in args.signals.split(",")], args.rounds)
        return 0
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
        if args.steps:
            split: list[float] = result["steps"]  # type: ignore[assignment]
            for step, seconds in zip(STEPS, split, strict=True):
                print(f"{name:8}   step: {step:24} {1e3 * seconds / args.batches:11.2f} ms {100 * seconds / sum(split):5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
