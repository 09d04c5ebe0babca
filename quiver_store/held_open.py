"""Whether a live QuiverStore holds a store directory open, for the read-only commands (`quiver`,
`adaptive-arrow decode STORE`) that read a store without opening it (offline.py) and say so when a
writer may be changing its files meanwhile."""

from __future__ import annotations

import os

from .engine import LOCK_NAME


def held_open(path: str | os.PathLike[str]) -> bool:
    """Whether a live QuiverStore holds the store at `path`: it keeps an exclusive flock on the
    store directory and on its LOCK file (a writer of an older version locks only LOCK). Each is
    probed with a non-blocking shared flock, released at once: it fails only against a holder's
    exclusive lock, and probes of concurrent read-only commands do not conflict with each other.
    Nothing is created (no LOCK file means no lock). A writer opening the store in the instant a
    probe holds its shared lock waits it out: QuiverStore.open retries for engine.LOCK_PATIENCE,
    far longer than a probe lasts."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): nothing to tell
        return False
    for target, flags in ((path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)), (os.path.join(path, LOCK_NAME), os.O_RDONLY)):
        try:
            fd = os.open(target, flags)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a file system without flock: cannot tell
            continue
        finally:
            os.close(fd)  # releases the probe's lock, if it got one
    return False
