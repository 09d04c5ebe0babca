"""``adaptive-arrow encode``: OTLP files -> one OTAP envelope file.

Each export request in the input files (OTLP protobuf or OTLP/JSON, one per file, per line of a
JSON Lines file or per frame of a Collector file-exporter file; or a Zipkin v2 JSON span list; see
inputs.py) becomes one BatchArrowRecords in the output (length-prefixed, docs/formats.md "OTAP
envelope files"). All
messages go through one encoder, so the output is one OTAP stream (later messages carry
dictionary deltas) unless --unary asks for a fresh encoder per message; the signal is --signal or,
without it, the one the first file's content shows, and every later file must hold that signal.
The output is written to a new ``OUT.<16 hex digits>.tmp`` and renamed; such files a killed run
left next to OUT are named on stderr by the next encode to OUT, not deleted (another encode may be
writing one).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path

from .inputs import (
    InputError,
    OtherSignal,
    UnknownSignal,
    UnrecognisedRequest,
    add_format_argument,
    check_files,
)
from .outputs import nonempty, nonempty_path

NAME = "adaptive-arrow encode"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=nonempty_path,
                        help="input files of export requests: one per file, per line (OTLP/JSON Lines) or per "
                             "frame (Collector file-exporter output)")
    parser.add_argument("--signal", choices=["logs", "traces", "metrics"],
                        help="signal of the requests (default: that of the first file; every file must hold it)")
    parser.add_argument("--out", required=True, type=nonempty, help="output OTAP envelope file (must not be an input)")
    add_format_argument(parser)
    parser.add_argument("--compression", choices=["none", "zstd"], default="zstd", help="Arrow IPC body compression")
    parser.add_argument("--no-sort", action="store_true", help="skip sorting and delta-encoded ids")
    parser.add_argument("--unary", action="store_true", help="a fresh encoder per message (no state across messages)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def check_out(text: str, inputs: list[Path]) -> Path:
    """--out as typed, which must name a regular file or a free name, and none of the inputs (the
    rename at the end would replace a link, FIFO or device with a regular file). Checked on the text:
    Path() drops a trailing slash, which would have the output written as a file where the user
    named a directory."""
    out = Path(text)
    if out.is_dir():
        raise InputError(f"--out {text}: is a directory; name the output file")
    if text.endswith(("/", os.sep)):
        raise InputError(f"--out {text}: ends with a slash, which names a directory; name the output file")
    if out.is_symlink() or (out.exists() and not out.is_file()):
        kind = "a symbolic link" if out.is_symlink() else "not a regular file (a device, FIFO or socket)"
        raise InputError(f"--out {text}: is {kind}, which the output would replace; name a regular file")
    for path in inputs:
        if out.exists() and os.path.samefile(out, path):
            same = "one of the inputs" if path == out else f"the same file as input {path}"  # a link, or another spelling
            raise InputError(f"--out {text} is {same}; choose another output file")
    return out


def create_temporary(out: Path) -> tuple[int, Path]:
    """A new file next to `out` (so the final rename is atomic) under a random name: created
    exclusively, so no file of the user's is written, renamed or deleted in its place, and with the
    permissions a plain open gives (mkstemp's would be 0600)."""
    path = out.with_name(f"{out.name}.{secrets.token_hex(8)}.tmp")
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path


def stale_temporaries(out: Path) -> list[Path]:
    """Files next to `out` named as create_temporary names them (``OUT.<16 hex digits>.tmp``): left
    by an encode that was killed, or being written by one still running; sorted."""
    pattern = re.compile(rf"{re.escape(out.name)}\.[0-9a-f]{{16}}\.tmp")
    try:
        with os.scandir(out.parent) as entries:
            return sorted(out.with_name(e.name) for e in entries if pattern.fullmatch(e.name) and e.is_file(follow_symlinks=False))
    except OSError:  # an unlistable directory: creating the temporary file there reports it
        return []


def stale_note(paths: list[Path]) -> str:
    if len(paths) == 1:
        return f"{NAME}: note: {paths[0]} was left by an interrupted run; delete it if no other encode is running"
    return (f"{NAME}: note: {len(paths)} files were left by interrupted runs: {', '.join(map(str, paths))}; "
            "delete them if no other encode is running")


def _no_signal_advice(exc: InputError) -> str:
    """What to do about a request whose signal cannot be told (inputs.UnknownSignal,
    UnrecognisedRequest), in the command's terms, not the converters' ``signal=``."""
    if isinstance(exc, UnknownSignal):
        return "; pass --signal"
    if isinstance(exc, UnrecognisedRequest):
        return "; check the file, or pass --signal to read it as that signal's request"
    return ""


def _other_signal_advice(exc: InputError, typed: str | None, inferred: bool) -> str:
    """What to do about a request of another signal than --signal (`typed`) or, when `inferred`,
    than the first file's (a file that mixes signals says so itself, inputs.to_bundles)."""
    if not isinstance(exc, OtherSignal):
        return ""
    separately = "encode each signal's requests separately (an OTAP envelope file holds one signal)"
    if typed is not None:
        return f" (--signal {typed}); pass --signal {exc.held} if every request holds {exc.held}, else {separately}"
    return f"; {separately}" if inferred else ""


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from otap_model.errors import OtapModelError

    from ..config import EncoderConfig
    from ..encoder import Encoder
    from ..envelope_file import write_envelopes
    from ..errors import AdaptiveArrowError
    from .inputs import read_input, to_bundles

    try:
        check_files(args.files)
        out_path = check_out(args.out, args.files)
    except InputError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return 2
    stale = stale_temporaries(out_path)  # listed, never deleted: another encode may be writing one
    if stale:
        print(stale_note(stale), file=sys.stderr)
    config = EncoderConfig(sort=not args.no_sort, ipc_compression=None if args.compression == "none" else "zstd")
    signal = args.signal  # None until the first file names it
    encoder = None
    read = written = messages = 0
    console = Console(stderr=True)
    columns = (TextColumn("encode"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    current = None
    tmp = None  # the temporary file this run created, until it is renamed to --out
    try:
        fd, tmp = create_temporary(out_path)
        with os.fdopen(fd, "wb") as out, Progress(*columns, console=console, transient=True,
                                                  disable=args.quiet or not console.is_terminal) as progress:
            task = progress.add_task("encode", total=len(args.files))
            for current in args.files:
                data = read_input(current)
                read += len(data)
                for _, bundle in to_bundles(current, data, args.input_format, signal):
                    signal = bundle.signal.value
                    if encoder is None or args.unary:
                        encoder = Encoder(signal, config)
                    written += write_envelopes(out, [encoder.encode(bundle)])
                    messages += 1
                progress.advance(task)
        tmp.replace(out_path)
        tmp = None
    except OSError as exc:
        where = str(current) if current is not None and exc.filename == str(current) else f"--out {out_path}: cannot write"
        print(f"{NAME}: {where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except InputError as exc:
        inferred = args.signal is None and current != args.files[0] and isinstance(exc, OtherSignal)
        origin = f" (every file must hold {signal}, the signal of the first one, {args.files[0]})" if inferred else ""
        print(f"{NAME}: {exc}{_no_signal_advice(exc)}{origin}{_other_signal_advice(exc, args.signal, inferred)}",
              file=sys.stderr)
        return 2
    except (OtapModelError, AdaptiveArrowError) as exc:
        print(f"{NAME}: {current}: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    print(f"{messages:,} message(s), {read:,} input bytes -> {written:,} OTAP bytes in {out_path}")
    return 0
