"""Output directories of the commands that write one file per message or batch (`generate`,
`decode`): a directory holding files of an earlier run is refused unless --overwrite, which
replaces those files and nothing else, so a later `DIR/*.pb` never mixes two runs.

Both commands stage their files (quiver_store.staged_dir.StagedDir): they write them into a new
hidden directory inside --out and move them into --out only once the run succeeded (then
--overwrite deletes the earlier run's files), so a run that fails or is interrupted leaves --out as
it found it: the directories it created are removed, the files it found (the user's, an earlier
run's even under --overwrite) are kept. That holds for a move into --out that fails too (publish
rolls back); only when putting --out back fails as well does the message list what is where.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quiver_store.staged_dir import StagedDir


def nonempty(text: str) -> str:
    """argparse type of the path options: refuses the empty path, which Path() would take for the
    current directory without a word."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return text


def nonempty_path(text: str) -> Path:
    return Path(nonempty(text))


def earlier_run(out: Path, pattern: re.Pattern[str]) -> list[Path]:
    """The files in `out` whose names the command writes, sorted."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if pattern.fullmatch(p.name) and p.is_file())


def refusal(command: str, out: Path, pattern: re.Pattern[str], overwrite: bool) -> int | None:
    """None when the command may write into `out`, else the exit status (2) after one line on
    stderr: `out` is no directory, or holds an earlier run's files and `overwrite` is not set."""
    if out.exists() and not out.is_dir():
        print(f"{command}: --out {out}: exists and is not a directory", file=sys.stderr)
        return 2
    old = earlier_run(out, pattern)
    if old and not overwrite:
        print(f"{command}: --out {out} already holds {len(old)} file(s) of an earlier run "
              f"({old[0].name} ...); pass --overwrite to replace them, or choose another directory",
              file=sys.stderr)
        return 2
    return None


def publish(command: str, staging: StagedDir) -> int | None:
    """Move the staged files into --out (StagedDir.publish): None, or the exit status (1) after one
    line on stderr saying what --out holds (as it was, unless even putting it back failed)."""
    from quiver_store.staged_dir import PublishError

    try:
        staging.publish()
    except PublishError as exc:
        if exc.published:
            print(f"{command}: the files are in --out {staging.out}, but cleaning up failed ({exc.failure}); "
                  f"{exc.state('--out')}", file=sys.stderr)
        else:
            print(f"{command}: cannot move the files written into --out {staging.out} ({exc.failure}); "
                  f"{exc.state('--out')}", file=sys.stderr)
        return 1
    return None
