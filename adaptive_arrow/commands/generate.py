"""`adaptive-arrow generate`: write generated telemetry as OTLP protobuf files, one per batch.

A directory already holding files of an earlier run (``<signal>-<index>.pb`` of any signal) is
refused unless --overwrite, which deletes those files first and nothing else: a later
``encode DIR/*.pb`` must not mix two runs.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from otap_model.generator import PROFILES, GeneratorError, generate_otlp

from . import outputs

LAYOUT = """output layout:
  DIR/<signal>-<index:06d>.pb   one file per batch, index from 000000 in generation order;
                                each file is one serialized Export{Logs,Trace,Metrics}ServiceRequest
                                (OTLP protobuf, deterministic serialization) holding --batch-size
                                root records (log records, spans or metric data points), the last
                                file the remainder. Same arguments write byte-identical files.
  A DIR holding <signal>-<index>.pb files of an earlier run is refused (exit 2) unless
  --overwrite, which deletes those files (and no other) first.
example:
  adaptive-arrow generate --signal logs --count 100000 --batch-size 5000 --seed 1 --out data/logs
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = LAYOUT
    parser.add_argument("--signal", required=True, choices=("logs", "traces", "metrics"))
    parser.add_argument("--count", required=True, type=int, help="root records in all")
    parser.add_argument("--batch-size", type=int, default=5000, help="root records per file")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--profile", default="default", choices=tuple(PROFILES),
                        help="data shape (multivariate: metrics only)")
    parser.add_argument("--out", required=True, type=outputs.nonempty_path, help="output directory (created if missing)")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the <signal>-<index>.pb files of an earlier run in --out first")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


RUN_FILE = re.compile(r"(logs|traces|metrics)-\d{6}\.pb")
OPTIONS = {"signal": "--signal", "profile": "--profile", "count": "--count", "batch_size": "--batch-size", "seed": "--seed"}


def option_message(exc: GeneratorError) -> str:
    """The generator's message naming the option the user typed instead of the Python parameter it
    starts with (``batch_size: ...`` -> ``--batch-size: ...``), for `generate` and `pipeline`."""
    name, colon, rest = str(exc).partition(": ")
    return f"{OPTIONS[name]}: {rest}" if colon and name in OPTIONS else str(exc)


def run(args: argparse.Namespace) -> int:
    try:
        requests = generate_otlp(args.signal, args.count, batch_size=args.batch_size, seed=args.seed,
                                 profile=args.profile)
    except GeneratorError as exc:
        print(f"adaptive-arrow generate: {option_message(exc)}", file=sys.stderr)
        return 2
    out: Path = args.out
    refused = outputs.prepare("adaptive-arrow generate", out, RUN_FILE, args.overwrite)
    if refused is not None:
        return refused
    batches = math.ceil(args.count / args.batch_size)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    written = 0
    with Progress(*columns, disable=args.quiet, transient=False) as progress:
        task = progress.add_task(f"{args.signal} ({args.profile})", total=args.count)
        for index, request in enumerate(requests):
            path = out / f"{args.signal}-{index:06d}.pb"
            data = request.SerializeToString(deterministic=True)
            try:
                path.write_bytes(data)
            except OSError as exc:
                print(f"adaptive-arrow generate: cannot write {path}: {exc.strerror}", file=sys.stderr)
                return 1
            written += len(data)
            progress.update(task, advance=min(args.batch_size, args.count - index * args.batch_size))
    if not args.quiet:
        print(f"wrote {batches} file(s), {written:,} bytes, to {out}")
    return 0
