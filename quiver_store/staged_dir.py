"""A command's output directory filled all at once: the files of one run are written into a new
hidden ``.staging-<16 hex digits>`` directory inside it (the same file system, so moving them in is
a rename) and moved in only once the run succeeded. Writing into the directory directly would
delete an earlier run's files (--overwrite) before the new ones exist, and leave a half-written
directory behind a run that fails or is killed. Used by `quiver dump --format arrow` and by
adaptive-arrow's `generate` and `decode`, which word their own messages from the OSError.

Publishing is all or nothing too: the files it replaces (same names, and an earlier run's that
--overwrite deletes) are first moved aside into ``.staging-…/.earlier``, then the new files are
moved in; when a move fails, the new files already moved in are moved back and the earlier files
restored, so the output directory is left exactly as it was (PublishError says so). Should that
rollback fail as well, nothing is deleted: PublishError names the files of the run left in the
output directory and the staging directory that holds the rest, and ``discard`` keeps it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

STAGING_DIR = re.compile(r"\.staging-[0-9a-f]{16}")
EARLIER = ".earlier"  # in the staging directory: the files publish replaces, until every new file is in


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


class PublishError(OSError):
    """StagedDir.publish failed. `errno`, `strerror` and `filename` are those of the failure (the
    file in `out` being moved; `failure` is "<name>: <strerror>", or "<name> (moving the earlier file
    aside): <strerror>" when it was the file of `out` being replaced); `published` says whether all of
    the run's files are in `out` (then only the clean-up after them failed). `state(option)` is the
    sentence that says what `out` holds now, naming it by the command's option (``--out``):

    - rolled back (`rollback_failure` None, `published` False): `out` is exactly as it was;
    - stuck (`rollback_failure` set): `new_in_out` are the run's files left in `out`,
      `earlier_kept` the files of `out` left in the staging directory's ``.earlier``, and the
      staging directory (kept by ``discard``) holds the run's other files;
    - published: the staging directory, and the earlier files in it, could not be deleted.
    """

    def __init__(self, staged: StagedDir, name: str, cause: BaseException, *, doing: str = "", published: bool = False,
                 rollback_failure: str | None = None, new_in_out: Sequence[str] = (), earlier_kept: Sequence[str] = (),
                 staged_left: Sequence[str] = (), names: Sequence[str] = (), aside: Sequence[str] = ()) -> None:
        if isinstance(cause, OSError):
            super().__init__(cause.errno, cause.strerror or str(cause), str(staged.out / name))
        else:  # Ctrl-C between two moves, and the rollback failed
            super().__init__(None, "interrupted", str(staged.out / name))
        self.failure = f"{name}{doing}: {self.strerror}"
        self.out, self.staging = staged.out, staged.path
        self.published, self.rollback_failure = published, rollback_failure
        self.new_in_out, self.earlier_kept, self.staged_left = list(new_in_out), list(earlier_kept), list(staged_left)
        self._names, self._aside = list(names), list(aside)

    def state(self, option: str) -> str:
        """What `out` (called `option`) and the staging directory hold now, and what to do."""
        if self.published:
            if self.earlier_kept:
                return (f"delete {self.staging}, which holds the {len(self.earlier_kept)} earlier file(s) of {option} "
                        "they replaced")
            return f"delete {self.staging}"
        if self.rollback_failure is None:
            return f"{option} is left as it was"
        held = []
        if self.new_in_out:
            held.append(f"{option} holds this run's {_named(self.new_in_out, self._names)}")
        if self.staged_left:
            held.append(f"{self.staging} holds this run's {_named(self.staged_left, self._names)}")
        if self.earlier_kept:
            held.append(f"{self.staging / EARLIER} holds {option}'s earlier {_named(self.earlier_kept, self._aside)}")
        fix = "move them back into place by hand" if self.earlier_kept else "sort them out by hand"
        return (f"putting {option} back failed too ({self.rollback_failure}), so nothing was deleted: "
                f"{'; '.join(held)}; {fix}, then delete {self.staging}")


def _named(chosen: Sequence[str], among: Sequence[str]) -> str:
    """The file names `chosen` out of `among` in few words, each run of three or more that are
    consecutive in `among` (sorted) as "first .. last", and their number when more than one."""
    order = sorted(among)
    index = {n: i for i, n in enumerate(order)}
    picked = sorted(chosen, key=lambda n: index.get(n, -1))
    runs: list[list[str]] = []
    for n in picked:
        if runs and index.get(n, -1) == index.get(runs[-1][-1], -2) + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]} .. {r[-1]}" if len(r) > 2 else ", ".join(r) for r in runs]
    return ", ".join(parts) + (f" ({len(picked)} files)" if len(picked) > 1 else "")


class StagedDir:
    """The files of one run into `out`, staged in `path` and published into `out` by `publish`,
    which replaces the files of those names and deletes the files it `replaces` (an earlier run's,
    under --overwrite) that no new file took the place of; `discard` removes the staged files and
    the directories `create` made."""

    def __init__(self, out: Path, replaces: Sequence[Path], created: list[Path], path: Path) -> None:
        self.out, self.replaces, self.created, self.path = out, replaces, created, path
        self.published = False  # the staged files were moved into `out`
        self.kept = False  # a failed publish could not be rolled back: `path` holds what `out` lacks

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
        _check_name(name)
        try:
            (self.path / name).write_bytes(data)
        except OSError as exc:
            exc.filename = str(self.out / name)
            raise

    def open(self, name: str) -> BinaryIO:
        """Stage file `name` written piece by piece (`quiver dump` streams Arrow record batches
        into it): a new binary file for the caller to write and close. A failure opening it names
        the file in `out` it stands for; one writing or closing it does not, the caller names it."""
        _check_name(name)
        try:
            return open(self.path / name, "wb")
        except OSError as exc:
            exc.filename = str(self.out / name)
            raise

    def publish(self) -> None:
        """Move the staged files into `out`, all or none (see the module's docstring): the files
        they replace and those of `replaces` are moved aside first and deleted once every new file
        is in. Raises PublishError, which says what `out` holds."""
        done: list[str] = []  # new files moved into `out`
        aside: list[str] = []  # files of `out` moved into `earlier`
        names: list[str] = []
        earlier = self.path / EARLIER
        name, doing = self.path.name, ""
        try:
            names = sorted(os.listdir(self.path))
            name = f"{self.path.name}/{EARLIER}"
            os.mkdir(earlier)
            doing = " (moving the earlier file aside)"
            for name in sorted({*names, *(p.name for p in self.replaces)}):
                if _moved(self.out / name, earlier / name):
                    aside.append(name)
            doing = ""
            for name in names:
                os.replace(self.path / name, self.out / name)
                done.append(name)
        except BaseException as exc:
            self._roll_back(name, doing, exc, names, done, aside)
            raise
        self.published = True
        try:
            for gone in aside:
                name = f"{self.path.name}/{EARLIER}/{gone}"
                os.unlink(earlier / gone)
            name = f"{self.path.name}/{EARLIER}"
            os.rmdir(earlier)
            name = self.path.name
            os.rmdir(self.path)
        except OSError as exc:
            raise PublishError(self, name, exc, published=True, earlier_kept=_listed(earlier)) from exc

    def _roll_back(self, name: str, doing: str, exc: BaseException, names: list[str], done: list[str],
                   aside: list[str]) -> None:
        """After `exc` at file `name`: move the new files in `done` back into staging, then the
        earlier ones in `aside` back into `out` (never over a new file stuck there); raise
        PublishError, or return for anything but an OSError (a Ctrl-C) when all went back."""
        earlier = self.path / EARLIER
        stuck: list[str] = []  # new files still in `out`
        failure: str | None = None
        for moved in reversed(done):
            try:
                os.replace(self.out / moved, self.path / moved)
            except OSError as e:
                stuck.append(moved)
                failure = failure or f"{moved}: {e.strerror or e}"
        kept: list[str] = []  # earlier files still in `earlier`
        for moved in aside:
            if moved in stuck:
                kept.append(moved)
                continue
            try:
                os.replace(earlier / moved, self.out / moved)
            except OSError as e:
                kept.append(moved)
                failure = failure or f"{moved}: {e.strerror or e}"
        if failure is None:
            with contextlib.suppress(OSError):  # missing (failed before it was made), or a leftover discard deletes
                os.rmdir(earlier)
            if not isinstance(exc, OSError):
                return  # publish re-raises the Ctrl-C
        else:
            self.kept = True
        left = [n for n in _listed(self.path) if n != EARLIER]
        raise PublishError(self, name, exc, doing=doing, rollback_failure=failure, new_in_out=sorted(stuck), earlier_kept=kept,
                           staged_left=left, names=names, aside=aside) from exc

    def discard(self) -> None:
        """Remove what the run staged and the directories it created (those still empty), unless
        it was published, or a failed publish could not be rolled back (then the staging directory
        holds files `out` lacks, which the PublishError named). Never raises: a staging directory
        left behind is named by the next run."""
        if self.published or self.kept or _listed(self.path / EARLIER):
            return  # the last: a publish interrupted while it rolled back
        shutil.rmtree(self.path, ignore_errors=True)
        _remove_empty(self.created)


def _check_name(name: str) -> None:
    if name.startswith("."):  # .earlier is publish's
        raise ValueError(f"staged file names do not start with '.': {name!r}")


def _moved(path: Path, to: Path) -> bool:
    """Move `path` to `to` unless it is missing or a directory (no file goes over a directory: the
    move of the new file then fails, which rolls back)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return False
    except FileNotFoundError:
        return False
    try:
        os.replace(path, to)
    except FileNotFoundError:  # gone meanwhile
        return False
    return True


def _listed(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def _remove_empty(directories: list[Path]) -> None:
    """Remove `directories`, innermost (last) first, stopping at one that is not empty."""
    for directory in reversed(directories):
        try:
            directory.rmdir()
        except OSError:  # someone else's files arrived meanwhile
            return
