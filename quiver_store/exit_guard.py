"""Stores still open when the interpreter exits have their background threads stopped first.

A store whose close() never ran, or was cut short (Ctrl-C pressed twice), still has its daemon
threads when Python shuts down. Python ends such a thread the next time it takes the GIL; one that
is inside pyarrow's C++ then (the finalizer writing a segment) is torn down through C++ frames and
the process aborts ("terminate called without an active exception", SIGABRT). The WAL holds every
acknowledged bundle either way; stopping the threads first, as a crash would (nothing more is
finalized), makes the exit an ordinary one. atexit callbacks run before that teardown.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from typing import Protocol

log = logging.getLogger("quiver_store")


class _Stoppable(Protocol):
    def _stop_threads_at_exit(self) -> None: ...


_OPEN: weakref.WeakSet[_Stoppable] = weakref.WeakSet()


def track(store: _Stoppable) -> None:
    """`store` was just opened; it is forgotten when closed (or garbage-collected)."""
    _OPEN.add(store)


def forget(store: _Stoppable) -> None:
    _OPEN.discard(store)


def _stop_open_stores() -> None:
    for store in list(_OPEN):
        try:
            store._stop_threads_at_exit()
        except BaseException as exc:  # the process is ending (a Ctrl-C here too): report, stop the others
            log.warning("stopping a Quiver store's threads at exit failed: %r", exc)


atexit.register(_stop_open_stores)
