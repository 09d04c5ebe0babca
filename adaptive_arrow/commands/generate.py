"""`adaptive-arrow generate`: write generated telemetry as OTLP protobuf files, one per batch.

A directory already holding files of an earlier run (``<signal>-<index>.pb`` of any signal) is
refused unless --overwrite, which replaces those files and nothing else: a later ``encode DIR/*.pb``
must not mix two runs. The files are staged as decode's are (quiver_store/staged_dir.py): written into a
hidden directory in --out and moved into it once every batch was written, so a generate that fails
or is interrupted leaves --out as it was (a directory it created is removed, an earlier run's files
are kept even under --overwrite).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from otap_model.generator import PROFILES, GeneratorError, generate_otlp
from quiver_store.staged_dir import StagedDir, stale_note

from . import outputs

if TYPE_CHECKING:
    from google.protobuf.message import Message

LAYOUT = """output layout:
  DIR/<signal>-<index:06d>.pb   one file per batch, index from 000000 in generation order;
                                each file is one serialized Export{Logs,Trace,Metrics}ServiceRequest
                                (OTLP protobuf, deterministic serialization) holding --batch-size
                                root records (log records, spans or metric data points), the last
                                file the remainder. Same arguments write byte-identical files.
  A DIR holding <signal>-<index>.pb files of an earlier run is refused (exit 2) unless
  --overwrite, which replaces those files (and no other) once this run succeeded: a run that
  fails or is interrupted leaves DIR as it was.
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
                        help="replace the <signal>-<index>.pb files of an earlier run in --out (deleted once this "
                             "run succeeded)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


NAME = "adaptive-arrow generate"
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
        print(f"{NAME}: {option_message(exc)}", file=sys.stderr)
        return 2
    out: Path = args.out
    refused = outputs.refusal(NAME, out, RUN_FILE, args.overwrite)
    if refused is not None:
        return refused
    stale = stale_note(NAME, out)
    if stale is not None:
        print(stale, file=sys.stderr)
    try:
        staging = StagedDir.create(out, outputs.earlier_run(out, RUN_FILE))
    except OSError as exc:
        print(f"{NAME}: cannot create --out {out}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        written = write_batches(args, requests, staging)
        if written is None:
            return 1
        failed = outputs.publish(NAME, staging)
        if failed is not None:
            return failed
    finally:
        staging.discard()  # unless published: a failed or interrupted generate leaves --out as it was
    if not args.quiet:
        print(f"wrote {math.ceil(args.count / args.batch_size)} file(s), {written:,} bytes, to {out}")
    return 0


def write_batches(args: argparse.Namespace, requests: Iterator[Message], staging: StagedDir) -> int | None:
    """Stage one file per request, with a progress bar: the bytes written, or None after one line
    on stderr when a file could not be written."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    written = 0
    with Progress(*columns, disable=args.quiet, transient=False) as progress:
        task = progress.add_task(f"{args.signal} ({args.profile})", total=args.count)
        for index, request in enumerate(requests):
            data = request.SerializeToString(deterministic=True)
            try:
                staging.write(f"{args.signal}-{index:06d}.pb", data)
            except OSError as exc:
                print(f"{NAME}: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
                return None
            written += len(data)
            progress.update(task, advance=min(args.batch_size, args.count - index * args.batch_size))
    return written
