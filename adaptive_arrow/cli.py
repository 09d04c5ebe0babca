"""`adaptive-arrow` command line: each subcommand lives in adaptive_arrow/commands/<name>.py and
exposes ``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "generate": "generate realistic telemetry and write OTLP protobuf files",
    "encode": "encode OTLP protobuf files into an OTAP envelope file",
    "decode": "decode an OTAP envelope file back into OTLP protobuf",
    "bench": "run the compression benchmark (OTAP vs OTLP + zstd)",
    "pipeline": "generate, encode and persist telemetry into a Quiver store",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptive-arrow", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(f"adaptive_arrow.commands.{name}")
        except ModuleNotFoundError:
            continue  # a subcommand whose module is not built yet is simply not offered
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = importlib.import_module(f"adaptive_arrow.commands.{args.command}")
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
