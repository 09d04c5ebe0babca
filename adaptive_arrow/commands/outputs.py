"""Output directories of the commands that write one file per message or batch (`generate`,
`decode`): a directory holding files of an earlier run is refused unless --overwrite, which
deletes those files first and nothing else, so a later `DIR/*.pb` never mixes two runs."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


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


def prepare(command: str, out: Path, pattern: re.Pattern[str], overwrite: bool) -> int | None:
    """Make `out` ready to write into: None when it is, else the exit status after one line on
    stderr (2: refused, 1: the file system failed)."""
    if out.exists() and not out.is_dir():
        print(f"{command}: --out {out}: exists and is not a directory", file=sys.stderr)
        return 2
    old = earlier_run(out, pattern)
    if old and not overwrite:
        print(f"{command}: --out {out} already holds {len(old)} file(s) of an earlier run "
              f"({old[0].name} ...); pass --overwrite to delete them first, or choose another directory",
              file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"{command}: cannot create --out {out}: {exc.strerror}", file=sys.stderr)
        return 1
    for path in old:
        try:
            path.unlink()
        except OSError as exc:
            print(f"{command}: cannot delete {path} (--overwrite): {exc.strerror}", file=sys.stderr)
            return 1
    return None
