"""Standard output of the command lines (`quiver`, and `adaptive-arrow`, which imports this): a
failed write is reported in one line naming standard output, and a reader that went away ends a
command quietly, as it ends `cat`."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

SIGPIPE_EXIT = 128 + 13  # what a shell reports for a command SIGPIPE ended (`set -o pipefail` sees it)


def discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit meets no closed pipe (or full
    disk) either and prints no "Exception ignored" warning."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a real file (tests capture it)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class StdoutError(Exception):
    """Writing standard output failed; the OSError is the cause. Not an OSError itself, so no
    command's handler for its own files' errors takes it for one of them."""


class GuardedStdout:
    """sys.stdout while a command runs: a failed write or flush (a full disk, a closed pipe) raises
    StdoutError, which the command line reports with stdout_failure."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            raise StdoutError from exc

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            raise StdoutError from exc

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding ... of the stream
        return getattr(self.stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """sys.stdout as a GuardedStdout for the block, flushed as it ends (a failure then shows as
    StdoutError there, not as a warning at interpreter exit), then restored."""
    stdout = sys.stdout
    if stdout is None:  # Python started with stdout closed, and print() writes nothing
        yield
        return
    sys.stdout = GuardedStdout(stdout)  # type: ignore[assignment]
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        finally:
            sys.stdout = stdout


def stdout_failure(command: str, exc: StdoutError) -> int:
    """The exit status for a failed write of standard output: a reader that went away (`... | head`)
    ends the command quietly with 141, as it ends cat; anything else (a full disk) is one line
    naming standard output, and 1. What is still buffered is discarded, so exit does not fail again."""
    discard_stdout()
    cause = exc.__cause__
    if isinstance(cause, BrokenPipeError):
        return SIGPIPE_EXIT
    reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
    print(f"{command}: cannot write standard output: {reason}", file=sys.stderr)
    return 1
