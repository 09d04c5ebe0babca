"""What makes a directory a Quiver store: the one rule the `quiver` commands (cli.py) and
`adaptive-arrow pipeline --store` apply before reading a store or writing one.

QuiverStore.open creates, in this order: the directory, ``wal/``, ``segments/``, ``LOCK`` (which
nothing deletes), a scratch file ``wal/.punch_probe`` it deletes at once, ``wal/quiver.wal`` (its
header, then a zero tail) and ``ack.log``. A directory is taken for a store, or for what a crash or
a copy left of one, when it has ``wal/`` or ``segments/`` and one of:

- ``LOCK``, a regular file;
- a WAL file in ``wal/``: ``quiver.wal``, a rotated ``quiver.wal.<generation>`` or ``truncate.offset``,
  judged by name, not content: an active WAL cut while being created or with a damaged header is
  the store's own, for ``quiver verify`` and ``replay`` to report (QuiverStore.open recreates the
  first, refuses the second);
- a store file in ``segments/``: a segment ``<seq>.qseg``, ``next.seq`` or ``progress.ledger`` (a
  ``segments/`` directory copied out of a store);
- nothing but ``wal/``, holding nothing or ``.punch_probe``, and an empty ``segments/`` if any: an
  open cut short before it created ``LOCK`` or ``quiver.wal``, or whose ``LOCK`` a power cut lost
  (its directory entry was not synced yet); it holds no data.

A directory that merely holds folders named ``wal`` or ``segments`` is none of these.
"""

from __future__ import annotations

import os
import re

from . import progress_ledger, seq_floor
from .engine import LOCK_NAME, SEGMENT_SUFFIX, core_numbers
from .errors import NotAStoreError
from .wal import sidecar
from .wal.rotation import ACTIVE
from .wal.writer import PUNCH_PROBE

_WAL_FILE = re.compile(rf"{re.escape(ACTIVE)}(?:\.\d+)?|{re.escape(sidecar.NAME)}")
_SEGMENTS_FILE = re.compile(rf"\d+{re.escape(SEGMENT_SUFFIX)}|{re.escape(seq_floor.NAME)}|{re.escape(progress_ledger.NAME)}")
_MISSING_FILES = {
    "wal": "no WAL file in wal/ (quiver.wal)",
    "segments": "no segment files in segments/ (<seq>.qseg, next.seq)",
}


def store_problem(path: str | os.PathLike[str]) -> str | None:
    """None when `path` is a Quiver store directory (see the module docstring); otherwise why not,
    in words that follow the path: "does not exist ...", "is a file, ...", "is not a Quiver store:
    it has no ..." (saying what is missing, and where the store probably is)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return "does not exist (expected a Quiver store directory holding wal/ and segments/)"
    if not os.path.isdir(path):
        return "is a file, not a Quiver store directory (one holding wal/ and segments/)"
    dirs = {name: os.path.join(path, name) for name in ("wal", "segments")}
    for name, d in dirs.items():
        if os.path.exists(d) and not os.path.isdir(d):
            return f"is not a Quiver store: its {name} is a file, not a directory"
    present = [name for name, d in dirs.items() if os.path.isdir(d)]
    if not present:
        return f"is not a Quiver store: it has no wal/ or segments/ directory{_hint(path)}"
    if os.path.isfile(os.path.join(path, LOCK_NAME)):
        return None
    listed = {name: os.listdir(dirs[name]) for name in present}
    if any(_WAL_FILE.fullmatch(n) for n in listed.get("wal", [])):
        return None
    if any(_SEGMENTS_FILE.fullmatch(n) for n in listed.get("segments", [])):
        return None
    if "wal" in present and set(os.listdir(path)) <= set(dirs) and set(listed["wal"]) <= {PUNCH_PROBE} \
            and not listed.get("segments"):
        return None  # an open cut short: no data yet
    has = " and ".join(f"{name}/" for name in present)
    missing = ["no LOCK file", *(_MISSING_FILES[name] if name in present else f"no {name}/ directory" for name in dirs)]
    return f"is not a Quiver store: it has {has} but {', '.join(missing[:-1])} and {missing[-1]}"


def check_store_dir(path: str) -> tuple[str, str]:
    """The wal/ and segments/ directories of the store at `path` (either may be absent), or
    NotAStoreError naming `path` and what it is instead (store_problem)."""
    problem = store_problem(path)
    if problem is not None:
        raise NotAStoreError(f"{path} {problem}")
    return os.path.join(path, "wal"), os.path.join(path, "segments")


def _hint(path: str) -> str:
    """Where the store probably is, when `path` is part of one or holds per-core stores."""
    norm = os.path.normpath(path)
    name, parent = os.path.basename(norm), os.path.dirname(norm) or "."
    if name in ("wal", "segments") and os.path.isdir(os.path.join(parent, "wal" if name == "segments" else "segments")):
        return f" (it is the {name}/ directory of the store {parent}: pass {parent})"
    cores = [f"core_{n}" for n in core_numbers(path)]
    if cores:
        return f" (it holds the per-core stores {', '.join(cores[:3])}{', ...' if len(cores) > 3 else ''}: pass one of them)"
    return ""


def output_inside(out: str | os.PathLike[str], store: str | os.PathLike[str]) -> str | None:
    """How an output directory lies in a store being read: "the store", "inside the store", or
    None when outside it. Compared as real paths (links resolved): files written there would land
    among the store's own, which a live writer may be using (`quiver dump --output`,
    `adaptive-arrow decode STORE --out`)."""
    real_out, real_store = os.path.realpath(out), os.path.realpath(store)
    if real_out == real_store:
        return "the store"
    return "inside the store" if os.path.commonpath([real_out, real_store]) == real_store else None
