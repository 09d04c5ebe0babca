"""``adaptive-arrow encode``: OTLP protobuf files -> one OTAP envelope file.

Each input file holds one serialized Export{Logs,Trace,Metrics}ServiceRequest and becomes one
BatchArrowRecords in the output (length-prefixed, docs/formats.md "OTAP envelope files"). All
messages go through one encoder, so the output is one OTAP stream (later messages carry
dictionary deltas) unless --unary asks for a fresh encoder per message.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, help="OTLP protobuf files, one Export*ServiceRequest each")
    parser.add_argument("--signal", required=True, choices=["logs", "traces", "metrics"], help="signal of the requests")
    parser.add_argument("--out", required=True, type=Path, help="output OTAP envelope file")
    parser.add_argument("--compression", choices=["none", "zstd"], default="zstd", help="Arrow IPC body compression")
    parser.add_argument("--no-sort", action="store_true", help="skip sorting and delta-encoded ids")
    parser.add_argument("--unary", action="store_true", help="a fresh encoder per message (no state across messages)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from otap_model import from_otlp
    from otap_model.errors import OtapModelError

    from ..config import EncoderConfig
    from ..encoder import Encoder
    from ..envelope_file import write_envelopes
    from ..errors import AdaptiveArrowError

    config = EncoderConfig(sort=not args.no_sort, ipc_compression=None if args.compression == "none" else "zstd")
    encoder = Encoder(args.signal, config)
    read = written = 0
    tmp = args.out.with_name(args.out.name + ".tmp")
    columns = (TextColumn("encode"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    current = None
    try:
        with tmp.open("wb") as out, Progress(*columns, disable=args.quiet, transient=True) as progress:
            task = progress.add_task("encode", total=len(args.files))
            for current in args.files:
                data = current.read_bytes()
                read += len(data)
                if args.unary:
                    encoder = Encoder(args.signal, config)
                written += write_envelopes(out, [encoder.encode(from_otlp(data, signal=args.signal))])
                progress.advance(task)
        tmp.replace(args.out)
    except OSError as exc:
        print(f"adaptive-arrow encode: {exc}", file=sys.stderr)
        tmp.unlink(missing_ok=True)
        return 1
    except (OtapModelError, AdaptiveArrowError) as exc:
        print(f"adaptive-arrow encode: {current}: {exc}", file=sys.stderr)
        tmp.unlink(missing_ok=True)
        return 2
    print(f"{len(args.files)} message(s), {read} OTLP bytes -> {written} OTAP bytes in {args.out}")
    return 0
