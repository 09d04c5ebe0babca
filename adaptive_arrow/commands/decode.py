"""``adaptive-arrow decode``: an OTAP envelope file -> OTLP protobuf files (one per message).

The signal comes from the messages themselves. An envelope without payloads (what `encode` makes
of an empty request) decodes to the empty request, whose protobuf bytes are the same for every
signal, so a file of empty requests, or one that starts with them, needs no signal either.
A directory holding ``<index>.pb`` files of an earlier decode is refused unless --overwrite, which
deletes those files first and nothing else (commands/outputs.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from . import outputs

NAME = "adaptive-arrow decode"
RUN_FILE = re.compile(r"\d{6}\.pb")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, help="OTAP envelope file written by `adaptive-arrow encode`")
    parser.add_argument("--out", required=True, type=Path, help="directory for the OTLP .pb files (created if missing)")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the <index>.pb files of an earlier decode in --out first")


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
    refused = outputs.prepare(NAME, args.out, RUN_FILE, args.overwrite)
    if refused is not None:
        return refused
    decoder = Decoder()
    number = 0  # 1-based number of the message being decoded
    try:
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
