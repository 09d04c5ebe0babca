"""`adaptive-arrow pipeline`: generate, encode and persist telemetry into a Quiver store, then read
it back through a subscriber and verify it.

Arguments are checked before the store is opened: the generator validates every (signal, profile)
pair and the counts as `generate` does, and --store must not exist yet or be an empty directory or
a Quiver store, by the rule the `quiver` commands apply (quiver_store/store_dir.py; opening any
other directory would write a store among its files).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from otap_model import Signal
from otap_model.generator import PROFILES, GeneratorError, generate_otlp

from .generate import option_message
from .outputs import nonempty_path

NAME = "adaptive-arrow pipeline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, type=nonempty_path,
                        help="store directory: an existing store, an empty directory, or a new one (created)")
    parser.add_argument("--signal", action="append", choices=[s.value for s in Signal],
                        help="signal to run (repeatable, a repeated one runs once; default: all three)")
    parser.add_argument("--count", type=int, default=20_000, help="root records per signal")
    parser.add_argument("--batch-size", type=int, default=5_000, help="root records per request")
    parser.add_argument("--seed", type=int, default=42, help="generator seed")
    parser.add_argument("--profile", default="default", choices=tuple(PROFILES),
                        help="generator data shape (multivariate: metrics only)")
    parser.add_argument("--no-sort", action="store_true", help="encode without sorting and delta ids")
    parser.add_argument("--spark", nargs="?", const="local[2]", metavar="MASTER",
                        help="encode in Spark tasks (master local[2] when none is given; needs the 'spark' extra)")
    parser.add_argument("--segment-compression", choices=("none", "lz4", "zstd"), default="none",
                        help="compress the store's segment files (Arrow IPC body compression; default none: "
                             "read zero-copy from the page cache)")


def _check(args: argparse.Namespace, signals: list[Signal]) -> str | None:
    """The first bad argument, as the message to print, or None; OSError if --store cannot be listed."""
    from quiver_store.store_dir import store_problem  # (imported here: the store is loaded for pipeline only)

    from ..errors import SparkJobError
    from ..spark import check_master

    for signal in signals:
        try:
            generate_otlp(signal, args.count, batch_size=args.batch_size, seed=args.seed, profile=args.profile)
        except GeneratorError as exc:
            return option_message(exc)
    if args.spark:
        try:
            check_master(args.spark)  # before Spark starts (seconds) and before the store is opened
        except SparkJobError as exc:
            return f"--spark: {exc}"
    if args.store.exists() and not args.store.is_dir():
        return f"--store {args.store}: not a directory (an existing file); name a store directory"
    if args.store.is_dir() and any(args.store.iterdir()):
        problem = store_problem(args.store)
        if problem is not None:
            return f"--store {args.store}: holds files and {problem}; name an empty or new directory or an existing store"
    return None


def run(args: argparse.Namespace) -> int:
    from quiver_store.errors import QuiverError

    from ..config import EncoderConfig
    from ..errors import AdaptiveArrowError, SparkJobError
    from ..pipeline import job_store_config, run_pipeline
    from ..report import render

    signals = [Signal(s) for s in args.signal] if args.signal else list(Signal)
    spark = None
    try:
        problem = _check(args, signals)
        if problem is not None:
            print(f"{NAME}: {problem}", file=sys.stderr)
            return 2
        if args.spark:
            from ..spark import spark_session

            try:
                spark = spark_session(args.spark, "adaptive-arrow-pipeline")
            except SparkJobError as exc:
                print(f"{NAME}: --spark: {exc}", file=sys.stderr)
                return 2
            spark.sparkContext.setLogLevel("ERROR")
        result = run_pipeline(
            args.store,
            signals=signals,
            count=args.count,
            batch_size=args.batch_size,
            seed=args.seed,
            profile=args.profile,
            encoder_config=EncoderConfig(sort=not args.no_sort),
            store_config=job_store_config(None if args.segment_compression == "none" else args.segment_compression),
            spark=spark,
        )
    except OSError as exc:
        print(f"{NAME}: {exc.filename or args.store}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except QuiverError as exc:
        named = str(exc).startswith(str(args.store))  # most store errors start with the path already
        print(f"{NAME}: {'' if named else f'--store {args.store}: '}{exc}", file=sys.stderr)
        return 1 if getattr(exc, "errno", None) is not None else 2  # the disk failed (I/O), or the store was refused
    except AdaptiveArrowError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return 2
    finally:
        if spark is not None:
            spark.stop()
    render(result, Console(width=170))
    return 0 if result.ok else 1
