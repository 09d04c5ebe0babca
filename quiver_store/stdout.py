"""Standard output of the command lines (`quiver`, and `adaptive-arrow`, which imports this): a
reader that went away ends a command quietly, as it ends `cat`."""

from __future__ import annotations

import os
import sys

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
