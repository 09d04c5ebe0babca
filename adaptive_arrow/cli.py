"""Command line of the adaptive_arrow package; each subcommand lives in adaptive_arrow/commands/<name>.py
and exposes ``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import PackageNotFoundError, version

from quiver_store.stdout import StdoutError, guarded_stdout, stdout_failure

DESCRIPTION = """Encode OpenTelemetry data as OTAP (OpenTelemetry Arrow) and back, generate realistic
telemetry, benchmark OTAP against OTLP, and run the generate -> encode -> Quiver store pipeline.

exit status: 0 success, 2 bad arguments or input (the message names the file, message or
argument), 1 an I/O error (reading or writing a file, or standard output), 130 Ctrl-C, 141 the
reader of a pipe went away."""

SUBCOMMANDS = {
    "generate": "generate realistic telemetry and write OTLP protobuf files",
    "encode": "encode OTLP files (protobuf, OTLP/JSON or Zipkin JSON) into an OTAP envelope file",
    "decode": "decode an OTAP envelope file, or a Quiver store of OTAP records, back into OTLP files (protobuf or OTLP/JSON)",
    "bench": "run the compression benchmark (OTAP vs OTLP + zstd)",
    "pipeline": "generate, encode and persist telemetry into a Quiver store",
}
PACKAGE = "otap-toolkit"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions and epilogs as written and appends each option's default, unless the
    default is empty (None, False) or the help text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "%(default)" in text
            or "default" in text
            or action.default is None
            or action.default is False
            or action.default == argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return text + " (default: %(default)s)"


def _version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown (package metadata not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptive-arrow", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()} ({PACKAGE})")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in SUBCOMMANDS.items():
        module = importlib.import_module(f"adaptive_arrow.commands.{name}")
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter))
    return parser


INTERRUPTED_EXIT = 128 + 2  # what a shell reports for a command Ctrl-C (SIGINT) ended


def main(argv: list[str] | None = None) -> int:
    name = "adaptive-arrow"
    try:
        with guarded_stdout():
            args = build_parser().parse_args(argv)  # --help and --version write stdout here
            name = f"adaptive-arrow {args.command}"
            return int(importlib.import_module(f"adaptive_arrow.commands.{args.command}").run(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback; the commands clean up on the way out
        print(f"{name}: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT
    except StdoutError as exc:
        return stdout_failure(name, exc)


if __name__ == "__main__":
    sys.exit(main())
