"""CallDepth: close() from a signal handler that interrupted a call of the same store.

Python runs a signal handler in the main thread between two bytecodes, possibly inside a store
call that holds one of the store's locks. A handler calling `store.close()` then waited for that
lock forever (6 hangs in 8 SIGTERM runs of a `close(); sys.exit(0)` handler). So the public calls
a main loop sits in count themselves per thread, and a close() made inside one is carried out when
the outermost call on that thread returns or raises: after the handler's sys.exit() unwinds it, or
as soon as the interrupted call finishes if the handler returns. Calls that block check for it
at least every CLOSE_CHECK seconds and then end with StoreClosedError: a subscriber's next(), and
an ingest held by backpressure (size cap or a lagging finalizer), whose bundle is then not stored.

The count alone can lie: a Ctrl-C landing in the context manager's exit, before the count goes
down, leaves the thread counted as inside a call that has ended, and a later close() (the `with`
block's own, on the way out) was deferred to a return that never comes; the process then hung
in interpreter shutdown, waiting for a producer thread the close would have stopped. So the
outermost call's frame is kept, and a close() defers only while that frame is on the stack.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar, cast

log = logging.getLogger("quiver_store")

CLOSE_CHECK = 0.5  # seconds: the longest a blocked next() waits before looking for a deferred close


class CallDepth:
    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def inside(self) -> Iterator[None]:
        """Wrap a public call: counts it, then runs a close deferred during it on the way out."""
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth == 0:
            local.outer = sys._getframe(2)  # the caller of the `with` (contextmanager's __enter__ is frame 1)
        local.depth = depth + 1
        try:
            yield
        except BaseException as leaving:
            local.depth = depth
            if depth == 0:
                local.outer = None  # (a frame holds its locals: the call's bundle, for one)
                self._run_deferred(leaving)
            raise
        local.depth = depth
        if depth == 0:
            local.outer = None
            self._run_deferred(None)

    def _run_deferred(self, leaving: BaseException | None) -> None:
        """Run the close deferred during this call. When the call is leaving with an exception (the
        handler's sys.exit(), Ctrl-C), a failing close does not replace it: its error becomes a note."""
        deferred = getattr(self._local, "deferred", None)
        if deferred is None:
            return
        self._local.deferred = None
        if leaving is None:
            deferred()
        else:
            run_noting_failure(deferred, leaving, "then the close() deferred to the end of this call failed")

    def deferring(self) -> bool:
        """A close is waiting for this thread's call to end (blocking waits then end it early)."""
        return getattr(self._local, "deferred", None) is not None

    def defer_if_inside(self, action: Callable[[], None]) -> bool:
        """Called by close(): if this thread is inside a call, run `action` when it leaves and say so.
        A count left behind by a call that an exception cut short in its exit is reset instead."""
        local = self._local
        if getattr(local, "depth", 0) == 0:
            return False
        outer = getattr(local, "outer", None)
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame is not outer:
            frame = frame.f_back
        if frame is None:  # that call has ended: nothing will run the action
            local.depth, local.outer = 0, None
            return False
        local.deferred = action
        return True


Method = TypeVar("Method", bound=Callable[..., Any])


def counted(method: Method) -> Method:
    """Decorator for a public method of an object with a `_calls: CallDepth`: the call counts, so a
    close() from a signal handler that interrupts it (and may find one of its locks held) waits
    for it to end instead of deadlocking."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._calls.inside():
            return method(self, *args, **kwargs)

    return cast(Method, call)


def run_noting_failure(action: Callable[[], None], leaving: BaseException, what: str) -> None:
    """Run `action` (a close) while `leaving` propagates. If it fails, its error does not replace
    `leaving` (Ctrl-C's KeyboardInterrupt, a handler's SystemExit, the caller's own error): it is
    logged and added to `leaving` as a note."""
    try:
        action()
    except Exception as error:
        log.warning("%s (while %s propagated): %s", what, type(leaving).__name__, error)
        leaving.add_note(f"{what}: {error}")

