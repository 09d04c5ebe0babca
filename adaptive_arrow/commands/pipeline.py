"""`adaptive-arrow pipeline`: generate, encode and persist telemetry into a Quiver store, then read
it back through a subscriber and verify it."""

from __future__ import annotations

import argparse

from rich.console import Console

from otap_model import Signal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, help="store directory (created if missing)")
    parser.add_argument("--signal", action="append", choices=[s.value for s in Signal],
                        help="signal to run (repeatable; default: all three)")
    parser.add_argument("--count", type=int, default=20_000, help="root records per signal")
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--no-sort", action="store_true", help="encode without sorting and delta ids")
    parser.add_argument("--spark", nargs="?", const="local[2]", metavar="MASTER",
                        help="encode in Spark tasks (default master local[2]; needs the 'spark' extra)")


def run(args: argparse.Namespace) -> int:
    from ..config import EncoderConfig
    from ..pipeline import run_pipeline
    from ..report import render

    signals = [Signal(s) for s in args.signal] if args.signal else list(Signal)
    spark = None
    if args.spark:
        from ..spark import spark_session

        spark = spark_session(args.spark, "adaptive-arrow-pipeline")
        spark.sparkContext.setLogLevel("ERROR")
    try:
        result = run_pipeline(
            args.store,
            signals=signals,
            count=args.count,
            batch_size=args.batch_size,
            seed=args.seed,
            profile=args.profile,
            encoder_config=EncoderConfig(sort=not args.no_sort),
            spark=spark,
        )
    finally:
        if spark is not None:
            spark.stop()
    render(result, Console(width=170))
    return 0 if result.ok else 1
