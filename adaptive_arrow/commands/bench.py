"""`adaptive-arrow bench`: the compression benchmark (OTAP vs OTLP, each with and without zstd).

The harness is benchmarks/compression.py; this module parses arguments, shows progress, prints the
table and writes results.csv, results.json and one PNG plot per input into ``--out``. Every argument,
input file and the --out directory is checked before anything is measured, so a long run never ends
in a usage error: a bad value or unreadable input stops the command at once (exit 2, or 1 for I/O),
naming it. results.json names the plots of its run, so the next run into the same directory deletes
those it does not write again and no other file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

from .inputs import add_format_argument
from .outputs import nonempty_path

DEFAULT_OUT = Path("bench-out")
PLOT = re.compile(r"compression-[^/]+\.png")
MIN_ZSTD_LEVEL = -(1 << 17)
"""zstd's fastest level (ZSTD_minCLevel()); zstandard.ZstdCompressor takes lower ones and uses this
one, and raises ValueError above zstandard.MAX_COMPRESSION_LEVEL, which bench met only when measuring."""


NAME = "adaptive-arrow bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", type=nonempty_path,
                        help="extra inputs of export requests, read as encode reads them (a file of several, such as "
                             "OTLP/JSON Lines or Collector file-exporter output, is measured as one request holding "
                             "them all): OTLP protobuf, OTLP/JSON or Zipkin JSON. Each "
                             "is named file/NAME in the table, results and plot file name; NAME is the file name, or "
                             "where inputs share one, the end of the path that tells them apart (a/x.json and "
                             "b/x.json: file/a/x.json and file/b/x.json); a file given twice is measured once")
    add_format_argument(parser)
    parser.add_argument("--signals", default="logs,traces,metrics", help="generator signals (comma separated; a repeat counts once)")
    parser.add_argument("--profiles", default=None, help="generator profiles (comma separated, a repeat counts once; default: all)")
    parser.add_argument("--batch-sizes", default="10,100,500,1000,2000,4000,5000", help="root records per batch (comma separated; a repeat counts once)")
    parser.add_argument("--max-records", type=int, default=50_000, help="generated records per run")
    parser.add_argument("--min-batches", type=int, default=10, help="at least this many batches per generated run")
    parser.add_argument("--max-batches", type=int, default=200, help="at most this many batches per generated run")
    parser.add_argument("--seed", type=int, default=1, help="generator seed")
    parser.add_argument("--zstd-level", type=int, default=None,
                        help="zstd level for both sides, -131072 (fastest) to 22 (default 3)")
    parser.add_argument("--no-generator", action="store_true", help="skip the generator profiles")
    parser.add_argument("--no-samples", action="store_true", help="skip the Zipkin and OTLP samples in shared/data")
    parser.add_argument("--sort-orders", choices=("default", "reference"), default="default",
                        help="sort orders of the sorted runs: the transport's own or the Rust reference orders")
    parser.add_argument("--out", type=nonempty_path, default=DEFAULT_OUT,
                        help="output directory, created if missing; results.csv, results.json and the plots are "
                             "rewritten, and the plots an earlier run's results.json names that this run does not "
                             "write are deleted (no other file)")


class ArgumentError(Exception):
    """A bad argument; the message names it and what would be valid."""


def _list(text: str | None) -> list[str] | None:
    """The comma-separated names, each once (a repeat would be measured again), in order of first appearance."""
    return None if text is None else list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))


def generator_choice(signals_text: str, profiles_text: str | None) -> tuple[list[str], list[str] | None]:
    """--signals and --profiles checked against the generator's real choices: every name must exist,
    every profile given must apply to one of the signals and every signal get one of the profiles."""
    from otap_model import Signal
    from otap_model.generator import PROFILES

    valid = [s.value for s in Signal]
    signals = _list(signals_text) or []
    if not signals:
        raise ArgumentError(f"--signals: give at least one of {', '.join(valid)}")
    for name in signals:
        if name not in valid:
            raise ArgumentError(f"--signals: unknown signal {name!r}; expected one of {', '.join(valid)}")
    profiles = _list(profiles_text)
    if profiles is None:
        return signals, None
    if not profiles:
        raise ArgumentError(f"--profiles: give at least one of {', '.join(PROFILES)}")
    applies = {}
    for name in profiles:
        if name not in PROFILES:
            raise ArgumentError(f"--profiles: unknown profile {name!r}; expected one of {', '.join(PROFILES)}")
        applies[name] = {s.value for s in PROFILES[name].signals}
    for name, own in applies.items():
        if not own & set(signals):
            raise ArgumentError(f"--profiles: {name!r} applies to {', '.join(sorted(own))} only, "
                                f"not to --signals {','.join(signals)}")
    for signal in signals:
        if not any(signal in own for own in applies.values()):
            raise ArgumentError(f"--signals: none of --profiles {','.join(profiles)} applies to {signal}")
    return signals, profiles


def file_datasets(paths: list[Path], input_format: str) -> list[Any]:
    """Each input file as a benchmark dataset; ArgumentError naming a file that is missing, not a
    file, not telemetry, or without records (checked before anything is measured)."""
    from benchmarks import compression as c
    from otap_model import to_otlp
    from otap_model.otlp.decode import REQUEST_TYPES

    from .inputs import InputError, UnknownSignal, check_files, read_input, to_bundles

    try:
        check_files(paths)
        out = []
        for path, name in input_names(paths):
            data = read_input(path)
            if not data.strip():
                raise InputError(f"{path}: the file is empty: no records to measure")
            # protobuf requests are measured as they are; JSON ones as the protobuf request they convert
            # to. A file of several requests (JSON Lines, Collector file-exporter frames) is measured
            # as one request holding all their resources, cut into batches like any input.
            request, *more = [REQUEST_TYPES[bundle.signal].FromString(read.data) if read.fmt == "otlp-proto" else to_otlp(bundle)
                              for read, bundle in to_bundles(path, data, input_format, None)]
            for other in more:
                request.MergeFrom(other)
            dataset = c.file_dataset(name, request)
            if not dataset.whole:
                raise InputError(f"{path}: the request holds no records: nothing to measure")
            out.append(dataset)
    except InputError as exc:
        raise ArgumentError(f"{exc}; nothing to measure" if isinstance(exc, UnknownSignal) else str(exc)) from None
    return out


def input_names(paths: list[Path]) -> list[tuple[Path, str]]:
    """Each input file once (a file given again, under any path, is dropped) with its dataset name:
    ``file/`` and its file name, or for files whose names or plot file names (c.plot_name) would be the
    same, as many trailing parts of their absolute paths as tell them apart (a/x.json and b/x.json:
    file/a/x.json and file/b/x.json). ArgumentError naming both files when even their whole paths
    would share a plot file (x and x.json: the plot name drops .json). The files must exist."""
    from benchmarks import compression as c

    unique: dict[tuple[int, int], Path] = {}
    for path in paths:
        st = path.stat()
        unique.setdefault((st.st_dev, st.st_ino), path)
    files = list(unique.values())
    parts = [Path(os.path.abspath(path)).parts[1:] for path in files]  # absolute, ".." resolved, no root
    used = [1] * len(files)  # trailing parts in each name

    def name(i: int, k: int) -> str:
        return "file/" + "/".join(parts[i][-k:])

    def refuse(i: int, j: int) -> ArgumentError:
        """Distinct files whose whole paths still share a plot: named as short as their plots clash."""
        longest = max(len(parts[i]), len(parts[j]))  # (a slice past the start is the whole path)
        k = next((k for k in range(1, longest) if c.plot_name(name(i, k)) == c.plot_name(name(j, k))), longest)
        return ArgumentError(f"{files[i]} and {files[j]} would share the plot {c.plot_name(name(i, k))} "
                             f"(as inputs {name(i, k)} and {name(j, k)}); rename or copy one of them")

    while True:
        current = [name(i, k) for i, k in enumerate(used)]
        groups: dict[str, list[int]] = {}
        for i, dataset in enumerate(current):
            groups.setdefault("name " + dataset, []).append(i)
            groups.setdefault("plot " + c.plot_name(dataset), []).append(i)
        clashes = [group for group in groups.values() if len(group) > 1]
        if not clashes:
            return list(zip(files, current, strict=True))
        growing: set[int] = set()  # a name and its plot may clash with the same files: grow each once
        for group in clashes:
            if all(used[i] == len(parts[i]) for i in group):  # whole paths: distinct files, so only the plot clashes
                raise refuse(*group[:2])
            growing.update(i for i in group if used[i] < len(parts[i]))
        for i in growing:
            used[i] += 1


def prepare_out(out: Path) -> tuple[str, int] | None:
    """Create --out before any measuring; why it cannot be written to and the exit status, or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out}: exists and is not a directory", 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create --out {out}: {exc.strerror}", 1
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {out}: directory not writable", 1
    return None


def earlier_plots(out: Path) -> set[str]:
    """The plot names of the run whose results.json is in `out`: its meta "plots", or for one written
    before bench listed them, the plots of its datasets; none when there is no such results.json."""
    from benchmarks import compression as c

    try:
        data = json.loads((out / "results.json").read_text())
        meta = data["meta"]
        names = meta["plots"] if "plots" in meta else [c.plot_name(r["dataset"]) for r in data["results"]]
    except (OSError, ValueError, LookupError, TypeError, AttributeError):  # absent, or not bench's
        return set()
    return {n for n in names if isinstance(n, str) and PLOT.fullmatch(n)}


def _fail(message: str, status: int) -> int:
    print(f"{NAME}: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    import zstandard
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from benchmarks import compression as c
    from otap_model.errors import OtapModelError

    from ..errors import AdaptiveArrowError

    console = Console(width=max(Console().width, 150))
    level = c.ZSTD_LEVEL if args.zstd_level is None else args.zstd_level
    if not MIN_ZSTD_LEVEL <= level <= zstandard.MAX_COMPRESSION_LEVEL:
        return _fail(f"--zstd-level: expected an integer from {MIN_ZSTD_LEVEL} to {zstandard.MAX_COMPRESSION_LEVEL} "
                     f"(negative: zstd's fast levels), got {level}", 2)
    try:
        batch_sizes = list(dict.fromkeys(int(b) for b in _list(args.batch_sizes) or []))
    except ValueError:
        return _fail(f"--batch-sizes: expected integers, got {args.batch_sizes!r}", 2)
    if not batch_sizes or min(batch_sizes) < 1:
        return _fail("--batch-sizes: give at least one size >= 1", 2)
    for option, value in (("--max-records", args.max_records), ("--min-batches", args.min_batches),
                          ("--max-batches", args.max_batches)):
        if value < 1:
            return _fail(f"{option}: expected an integer >= 1, got {value}", 2)
    if args.seed < 0:  # the generator's minimum; measuring would stop at the first generated input
        return _fail(f"--seed: expected an integer >= 0, got {args.seed}", 2)
    if args.min_batches > args.max_batches:
        return _fail(f"--min-batches {args.min_batches} is above --max-batches {args.max_batches}; "
                     "give --min-batches <= --max-batches", 2)

    orders = None
    if args.sort_orders == "reference":
        from adaptive_arrow.transport import REFERENCE_SORT_ORDERS

        orders = {int(pt): keys for pt, keys in REFERENCE_SORT_ORDERS.items()}

    def batches_per_run(bs: int) -> int:
        return max(args.min_batches, min(args.max_batches, args.max_records // bs))

    try:
        signals, profiles = generator_choice(args.signals, args.profiles)
        datasets: list[Any] = file_datasets(args.files, args.input_format)
    except ArgumentError as exc:
        return _fail(str(exc), 2)
    except OSError as exc:
        return _fail(f"{exc.filename}: cannot read: {exc.strerror}", 1)
    if args.no_generator and args.no_samples and not datasets:
        return _fail("nothing to measure: --no-generator and --no-samples, and no input files", 2)
    problem = prepare_out(args.out)
    if problem is not None:
        return _fail(*problem)

    dataset, bs = None, 0
    try:
        before: list[Any] = []
        if not args.no_generator:
            before += c.generator_datasets(signals, profiles, batches_per_run, args.seed)
        if not args.no_samples:
            before += c.zipkin_datasets() + c.otlp_example_datasets()
        datasets = before + datasets
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
        return _fail(str(exc), 2)
    except (AdaptiveArrowError, OtapModelError) as exc:
        where = f"{dataset.name} @ batch size {bs}" if dataset is not None else "samples"
        return _fail(f"{where}: {exc}", 2)

    meta = {
        "zstd_level": level,
        "batch_sizes": batch_sizes,
        "seed": args.seed,
        "sort_orders": args.sort_orders,
        "command": " ".join(["adaptive-arrow", *sys.argv[1:]]) if sys.argv else "adaptive-arrow bench",
        "python": platform.python_version(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    console.print(summary_table(results, level))
    stale = earlier_plots(args.out)
    try:
        c.write_csv(results, args.out / "results.csv")
        plots = c.plot(results, args.out)
    except OSError as exc:
        return _fail(f"{exc.filename or args.out}: cannot write: {exc.strerror or exc}", 1)
    meta["plots"] = [p.name for p in plots]
    deleted = 0
    for path in sorted(args.out / name for name in stale - set(meta["plots"])):  # before results.json stops naming them
        if path.is_file() and not path.is_symlink():
            try:
                path.unlink()
            except OSError as exc:
                return _fail(f"{path}: cannot delete this plot of an earlier run: {exc.strerror}", 1)
            deleted += 1
    try:
        c.write_json(results, args.out / "results.json", meta)
    except OSError as exc:
        return _fail(f"{exc.filename or args.out}: cannot write: {exc.strerror or exc}", 1)
    console.print(f"wrote {args.out / 'results.csv'}, {args.out / 'results.json'} and {len(plots)} plots to {args.out}"
                  + (f"; deleted {deleted} plot(s) of an earlier run" if deleted else ""))
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
