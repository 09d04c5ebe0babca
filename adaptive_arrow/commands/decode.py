"""``adaptive-arrow decode``: an OTAP envelope file -> OTLP protobuf files (one per message).

The signal comes from the messages themselves. An envelope without payloads (what `encode` makes
of an empty request) decodes to the empty request, whose protobuf bytes are the same for every
signal, so a file of empty requests, or one that starts with them, needs no signal either.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "adaptive-arrow decode"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, help="OTAP envelope file written by `adaptive-arrow encode`")
    parser.add_argument("--out", required=True, type=Path, help="directory for the OTLP .pb files (created if missing)")


def run(args: argparse.Namespace) -> int:
    from otap_model import to_otlp
    from otap_model.errors import OtapModelError

    from ..decoder import Decoder
    from ..envelope import BatchArrowRecords
    from ..envelope_file import read_envelopes
    from ..errors import AdaptiveArrowError, EnvelopeError

    if not args.input.is_file():
        what = "no such file" if not args.input.exists() else "not a regular file"
        print(f"{NAME}: {args.input}: {what}", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"{NAME}: --out {args.out}: exists and is not a directory", file=sys.stderr)
        return 2
    decoder = Decoder()
    number = 0  # 1-based number of the message being decoded
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with args.input.open("rb") as source:
            messages = read_envelopes(source, str(args.input))
            while True:
                try:
                    message = next(messages)
                except EnvelopeError as exc:  # framing: names the file and message itself
                    print(f"{NAME}: {exc}", file=sys.stderr)
                    return 2
                except StopIteration:
                    break
                number += 1
                bar = BatchArrowRecords.from_bytes(message)
                data = to_otlp(decoder.decode(bar)).SerializeToString() if bar.payloads else b""
                (args.out / f"{number - 1:06d}.pb").write_bytes(data)
    except OSError as exc:
        print(f"{NAME}: {exc.filename or args.input}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except (AdaptiveArrowError, OtapModelError) as exc:
        print(f"{NAME}: {args.input}: message {number}: {exc}", file=sys.stderr)
        return 2
    print(f"{number} message(s) decoded into {args.out}")
    return 0
