"""Output directories of the commands that write one file per message or batch (`generate`,
`decode`): a directory holding files of an earlier run is refused unless --overwrite, which
replaces those files and nothing else, so a later `DIR/*.pb` never mixes two runs.

Both commands stage their files (`Staging`): they write them into a new hidden directory inside
--out and move them into --out only once the run succeeded (then --overwrite deletes the earlier
run's files), so a run that fails or is interrupted leaves --out as it found it: the directories
it created are removed, the files it found (the user's, an earlier run's even under --overwrite)
are kept.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import sys
from pathlib import Path

STAGING_DIR = re.compile(r"\.staging-[0-9a-f]{16}")


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
              f"({old[0].name} ...); pass --overwrite to delete them first, or choose another directory",
              file=sys.stderr)
        return 2
    return None


def _delete(command: str, paths: list[Path]) -> int | None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            print(f"{command}: cannot delete {path} (--overwrite): {exc.strerror}", file=sys.stderr)
            return 1
    return None


def stale_note(command: str, out: Path) -> str | None:
    """A note naming the staging directories in `out` that a killed run left (or one still running
    is writing), or None; they are never deleted here."""
    try:
        with os.scandir(out) as entries:
            stale = sorted(str(out / e.name) for e in entries if STAGING_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False))
    except OSError:  # no such directory yet, or unlistable: creating the staging directory reports it
        return None
    if not stale:
        return None
    what = f"{stale[0]} was" if len(stale) == 1 else f"{len(stale)} directories were"
    listed = "" if len(stale) == 1 else f" ({', '.join(stale)})"
    return (f"{command}: note: {what} left by an interrupted run{listed}; delete "
            f"{'it' if len(stale) == 1 else 'them'} if no other {command} is writing into {out}")


class Staging:
    """The files of one run into `out`, written into a new ``.staging-<16 hex digits>`` directory
    inside it (the same file system, so moving them in is a rename) and published into `out` only
    by `publish`, which then deletes the files it `replaces` (an earlier run's, under --overwrite);
    `discard` removes the staged files and the directories `create` made. Writing into `out`
    directly would delete an earlier run's files (--overwrite) before the new ones exist, and leave
    a half-written `out` behind a run that fails or is killed."""

    def __init__(self, out: Path, replaces: list[Path], created: list[Path], path: Path) -> None:
        self.out, self.replaces, self.created, self.path = out, replaces, created, path
        self.done = False

    @classmethod
    def create(cls, out: Path, replaces: list[Path]) -> Staging:
        """`out` (with its missing parents) and a staging directory in it; OSError when the file
        system refuses, after removing the directories it made."""
        created: list[Path] = []
        try:
            for directory in reversed([p for p in (out, *out.parents) if not p.exists()]):
                try:
                    directory.mkdir()
                except FileExistsError:  # made by someone else meanwhile: not ours to remove
                    continue
                created.append(directory)
            path = out / f".staging-{secrets.token_hex(8)}"
            path.mkdir()
        except BaseException:
            _remove_empty(created)
            raise
        return cls(out, replaces, created, path)

    def write(self, name: str, data: bytes) -> None:
        """Stage file `name`; an OSError names the file in `out` it stands for."""
        try:
            (self.path / name).write_bytes(data)
        except OSError as exc:
            exc.filename = str(self.out / name)
            raise

    def publish(self, command: str) -> int | None:
        """Move the staged files into `out` (each a rename over any file of that name), then delete
        the files it `replaces` that no staged file took the place of: None, or the exit status (1)
        after one line on stderr."""
        try:
            names = sorted(os.listdir(self.path))
            for name in names:
                os.replace(self.path / name, self.out / name)
            self.path.rmdir()
        except OSError as exc:
            print(f"{command}: cannot move the files written into --out {self.out}: {exc.strerror}", file=sys.stderr)
            return 1
        self.done = True
        taken = set(names)
        return _delete(command, [p for p in self.replaces if p.name not in taken])

    def discard(self) -> None:
        """Remove what the run staged and the directories it created (those still empty), unless
        it was published. Never raises: a staging directory left behind is named by the next run."""
        if self.done:
            return
        self.done = True
        shutil.rmtree(self.path, ignore_errors=True)
        _remove_empty(self.created)


def _remove_empty(directories: list[Path]) -> None:
    """Remove `directories`, innermost (last) first, stopping at one that is not empty."""
    for directory in reversed(directories):
        try:
            directory.rmdir()
        except OSError:  # someone else's files arrived meanwhile
            return
