"""`adaptive-arrow bench`: the compression benchmark (OTAP vs OTLP, each with and without zstd).

The harness is benchmarks/compression.py; this module parses arguments, shows progress, prints the
table and writes results.csv, results.json and one PNG plot per input into ``--out``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("bench-out")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", type=Path, help="extra inputs: OTLP protobuf files (one Export*ServiceRequest each)")
    parser.add_argument("--signals", default="logs,traces,metrics", help="generator signals (comma separated)")
    parser.add_argument("--profiles", default=None, help="generator profiles (comma separated; default: all)")
    parser.add_argument("--batch-sizes", default="10,100,500,1000,2000,4000,5000", help="root records per batch")
    parser.add_argument("--max-records", type=int, default=50_000, help="generated records per run (default 50000)")
    parser.add_argument("--min-batches", type=int, default=10, help="at least this many batches per generated run")
    parser.add_argument("--max-batches", type=int, default=200, help="at most this many batches per generated run")
    parser.add_argument("--seed", type=int, default=1, help="generator seed")
    parser.add_argument("--zstd-level", type=int, default=None, help="zstd level for both sides (default 3)")
    parser.add_argument("--no-generator", action="store_true", help="skip the generator profiles")
    parser.add_argument("--no-samples", action="store_true", help="skip the Zipkin and OTLP samples in shared/data")
    parser.add_argument("--sort-orders", choices=("default", "reference"), default="default",
                        help="sort orders of the sorted runs: the transport defaults or the Rust reference orders")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default ./bench-out)")


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from benchmarks import compression as c

    console = Console(width=max(Console().width, 150))
    level = c.ZSTD_LEVEL if args.zstd_level is None else args.zstd_level
    try:
        batch_sizes = [int(b) for b in _list(args.batch_sizes) or []]
    except ValueError:
        console.print(f"[red]--batch-sizes: expected integers, got {args.batch_sizes!r}[/red]")
        return 2
    if not batch_sizes or min(batch_sizes) < 1:
        console.print("[red]--batch-sizes: give at least one size >= 1[/red]")
        return 2

    orders = None
    if args.sort_orders == "reference":
        from adaptive_arrow.transport import REFERENCE_SORT_ORDERS

        orders = {int(pt): keys for pt, keys in REFERENCE_SORT_ORDERS.items()}

    def batches_per_run(bs: int) -> int:
        return max(args.min_batches, min(args.max_batches, args.max_records // bs))

    try:
        datasets: list[Any] = []
        if not args.no_generator:
            datasets += c.generator_datasets(_list(args.signals) or [], _list(args.profiles), batches_per_run, args.seed)
        if not args.no_samples:
            datasets += c.zipkin_datasets() + c.otlp_example_datasets()
        datasets += [c.protobuf_file_dataset(p) for p in args.files]
        if not datasets:
            console.print("[red]nothing to measure: every input was switched off[/red]")
            return 2
        steps = sum(len(c.batch_sizes_for(d, batch_sizes)) for d in datasets)
        results = []
        started = time.perf_counter()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as progress:
            task = progress.add_task("compression", total=steps)
            for dataset in datasets:
                for bs in c.batch_sizes_for(dataset, batch_sizes):
                    progress.update(task, description=f"{dataset.name} @ {bs}")
                    results.extend(c.measure(dataset, bs, level, orders))
                    progress.advance(task)
    except c.MissingComponent as exc:
        console.print(f"[red]{exc}[/red]")
        return 2
    except FileNotFoundError as exc:
        console.print(f"[red]input not found: {exc.filename}[/red]")
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "zstd_level": level,
        "batch_sizes": batch_sizes,
        "seed": args.seed,
        "sort_orders": args.sort_orders,
        "command": " ".join(["adaptive-arrow", *sys.argv[1:]]) if sys.argv else "adaptive-arrow bench",
        "python": platform.python_version(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    c.write_csv(results, args.out / "results.csv")
    c.write_json(results, args.out / "results.json", meta)
    plots = c.plot(results, args.out)
    console.print(summary_table(results, level))
    console.print(f"wrote {args.out / 'results.csv'}, {args.out / 'results.json'} and {len(plots)} plots to {args.out}")
    return 0


def summary_table(results: list[Any], level: int) -> Any:
    """Mean bytes per message; ratios are OTLP+zstd / OTAP+zstd (higher: OTAP smaller)."""
    from rich.table import Table

    table = Table(title=f"mean message size, bytes (zstd level {level}); ratio = OTLP+zstd / OTAP+zstd")
    for name in ("input", "batch", "n", "OTLP", "OTLP+zstd", "OTAP stream", "OTAP stream+zstd",
                 "stream sorted", "stream unsorted", "unary sorted", "unary unsorted"):
        table.add_column(name, justify="left" if name == "input" else "right")
    keyed = {(r.dataset, r.batch_size, r.mode, r.sorted): r for r in results}
    for dataset, bs in dict.fromkeys((r.dataset, r.batch_size) for r in results):
        best = keyed[(dataset, bs, "stream", True)]
        ratios = [keyed[(dataset, bs, m, s)].ratio_zstd for m in ("stream", "unary") for s in (True, False)]
        table.add_row(dataset, str(bs), str(best.batches), f"{best.otlp:,.0f}", f"{best.otlp_zstd:,.0f}",
                      f"{best.otap:,.0f}", f"{best.otap_zstd:,.0f}", *(f"{x:.2f}" for x in ratios))
    return table
