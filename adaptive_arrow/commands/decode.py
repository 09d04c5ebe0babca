"""``adaptive-arrow decode``: an OTAP envelope file -> OTLP protobuf files (one per message)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, help="OTAP envelope file written by `adaptive-arrow encode`")
    parser.add_argument("--out", required=True, type=Path, help="directory for the OTLP .pb files")


def run(args: argparse.Namespace) -> int:
    from otap_model import to_otlp
    from otap_model.errors import OtapModelError

    from ..decoder import Decoder
    from ..envelope_file import read_envelopes
    from ..errors import AdaptiveArrowError

    decoder = Decoder()
    count = 0
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with args.input.open("rb") as source:
            for count, message in enumerate(read_envelopes(source, str(args.input)), start=1):
                bundle = decoder.decode(message)
                (args.out / f"{count - 1:06d}.pb").write_bytes(to_otlp(bundle).SerializeToString())
    except OSError as exc:
        print(f"adaptive-arrow decode: {exc}", file=sys.stderr)
        return 1
    except (AdaptiveArrowError, OtapModelError) as exc:
        print(f"adaptive-arrow decode: {args.input}: message {count}: {exc}", file=sys.stderr)
        return 2
    print(f"{count} message(s) decoded into {args.out}")
    return 0
