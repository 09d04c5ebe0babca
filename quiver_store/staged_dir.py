"""A command's output directory filled all at once: the files of one run are written into a new
hidden ``.staging-<16 hex digits>`` directory inside it (the same file system, so moving them in is
a rename) and moved in only once the run succeeded. Writing into the directory directly would
delete an earlier run's files (--overwrite) before the new ones exist, and leave a half-written
directory behind a run that fails or is killed. Used by `quiver dump --format arrow` and by
adaptive-arrow's `generate` and `decode`, which word their own messages from the OSError.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

STAGING_DIR = re.compile(r"\.staging-[0-9a-f]{16}")


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


class StagedDir:
    """The files of one run into `out`, staged in `path` and published into `out` by `publish`,
    which then deletes the files it `replaces` (an earlier run's, under --overwrite) that no new
    file took the place of; `discard` removes the staged files and the directories `create` made."""

    def __init__(self, out: Path, replaces: Sequence[Path], created: list[Path], path: Path) -> None:
        self.out, self.replaces, self.created, self.path = out, replaces, created, path
        self.published = False  # the staged files were moved into `out`

    @classmethod
    def create(cls, out: Path, replaces: Sequence[Path] = ()) -> StagedDir:
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

    def write(self, name: str, data: bytes | memoryview) -> None:
        """Stage file `name`; an OSError names the file in `out` it stands for."""
        try:
            (self.path / name).write_bytes(data)
        except OSError as exc:
            exc.filename = str(self.out / name)
            raise

    def publish(self) -> None:
        """Move the staged files into `out` (each a rename over any file of that name), then delete
        the files it `replaces` that no staged file took the place of. An OSError raised while
        `published` is still False failed the move, else the deletion (its filename names the file)."""
        names = sorted(os.listdir(self.path))
        for name in names:
            os.replace(self.path / name, self.out / name)
        self.path.rmdir()
        self.published = True
        taken = set(names)
        for path in self.replaces:
            if path.name not in taken:
                path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove what the run staged and the directories it created (those still empty), unless
        it was published. Never raises: a staging directory left behind is named by the next run."""
        if self.published:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        _remove_empty(self.created)


def _remove_empty(directories: list[Path]) -> None:
    """Remove `directories`, innermost (last) first, stopping at one that is not empty."""
    for directory in reversed(directories):
        try:
            directory.rmdir()
        except OSError:  # someone else's files arrived meanwhile
            return
