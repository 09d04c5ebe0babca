"""One outcome handed from a store thread to the caller waiting for it, safe against signals.

`concurrent.futures.Future` guards its state with a `threading.Condition`, whose `__enter__` is
Python code. When a signal handler raises in the waiting thread (`sys.exit` in a SIGTERM handler)
right after that lock was taken and before the `with` body began (bpo-29988), the lock stays held,
and the store thread that later completes the future blocks on it for good: the finalizer hang of
session 23's torture run (docs/reliability.md). A `Handoff` has no lock that both sides take. The
setter appends its outcome to a list, one atomic step that also decides which setter was first,
then opens a gate. The waiter blocks on the gate for at most RECHECK seconds at a time and looks
at the list in between, so a gate left shut by an interrupted setter or waiter delays it by at
most that, and no interruption anywhere leaves a thread blocked for good.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")

# Seconds a waiter blocks on the gate before it looks at the outcome again. It matters only when an
# interrupted setter or waiter left the gate shut; normally the gate opens with the outcome.
RECHECK = 0.5


class Handoff(Generic[T]):
    """A one-shot result: `set_result` / `set_exception` once (later calls are ignored), then
    `result()`; `wait()` alone makes it a one-shot event."""

    __slots__ = ("_gate", "_outcomes")

    def __init__(self) -> None:
        self._outcomes: list[tuple[T | None, BaseException | None]] = []  # the first one counts
        self._gate = threading.Lock()  # held until an outcome is stored
        self._gate.acquire()

    def done(self) -> bool:
        return bool(self._outcomes)

    def set_result(self, value: T) -> bool:
        """Store `value` unless an outcome is stored already; True if this call stored it."""
        return self._settle(value, None)

    def set_exception(self, error: BaseException) -> bool:
        """Make `result()` raise `error` unless an outcome is stored already."""
        return self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> bool:
        mine = (value, error)
        self._outcomes.append(mine)  # atomic under the GIL: the first appended is the outcome
        if self._outcomes[0] is not mine:
            return False
        self._gate.release()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until an outcome is stored, at most `timeout` seconds; True if one is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._outcomes:
            wait = RECHECK if deadline is None else min(RECHECK, deadline - time.monotonic())
            if wait <= 0:
                return False
            if self._gate.acquire(timeout=wait):
                self._gate.release()  # open for good: any other waiter passes too
        return True

    def result(self, timeout: float | None = None) -> T:
        """Wait for the outcome: return the value or raise the error. The builtin TimeoutError
        after `timeout` seconds without one."""
        if not self.wait(timeout):
            raise TimeoutError(f"no outcome within {timeout} s")
        value, error = self._outcomes[0]
        if error is not None:
            raise error
        return value  # type: ignore[return-value]
