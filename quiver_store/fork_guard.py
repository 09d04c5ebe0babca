"""A store opened before os.fork() belongs to the parent: in the child it refuses every call.

The child inherits the store's open WAL, ack log and lock file descriptors but none of its threads.
Used there, an ingest was acknowledged and then lost when the parent wrote its next entry at the
same WAL offset, and flush() hung. So right after a fork every open store in the child is marked,
and its calls raise QuiverError telling to open the store after the fork instead; close() in the
child only forgets the store (the files are the parent's). Registered once, at import.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class _Forkable(Protocol):
    def _left_in_parent(self, parent_pid: int) -> None: ...


_OPEN: weakref.WeakSet[_Forkable] = weakref.WeakSet()
_PID = [os.getpid()]  # the pid the tracked stores were opened in, as of the last fork


def track(store: _Forkable) -> None:
    """`store` was just opened in this process."""
    _OPEN.add(store)


def forget(store: _Forkable) -> None:
    _OPEN.discard(store)


def _in_child() -> None:
    parent, _PID[0] = _PID[0], os.getpid()
    stores = list(_OPEN)
    _OPEN.clear()
    for store in stores:
        store._left_in_parent(parent)


def _before_fork() -> None:
    _PID[0] = os.getpid()


os.register_at_fork(before=_before_fork, after_in_child=_in_child)
