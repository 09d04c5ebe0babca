"""Raise an exception at an exact statement, as a signal handler would.

Python runs a signal handler (Ctrl-C's KeyboardInterrupt, a SIGTERM handler's sys.exit) between
any two bytecodes of the main thread, so every statement boundary of a store call is a place a
handler's exception can appear. The random-signal tests (test_interrupt.py) find such windows by
chance; these helpers pin one down so a test can hit it every time."""

from __future__ import annotations

import dis
import functools
import inspect
import itertools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any


def raise_before(
    function: Callable[..., Any], line_text: str, exc: type[BaseException] = KeyboardInterrupt, *, lines_after: int = 0,
    when: Callable[[Any], bool] | None = None,
) -> Any:
    """A trace function that raises `exc` just before the first line of `function` containing
    `line_text` runs (or the line `lines_after` lines below it, to land right after a statement),
    in frames for which `when(frame)` holds if given. Install it with sys.settrace on the thread
    that will make the call."""

    def handler() -> None:
        raise exc

    return run_before(function, line_text, handler, lines_after=lines_after, once=False, when=when)


def run_before(
    function: Callable[..., Any], line_text: str, handler: Callable[[], None], *, lines_after: int = 0, once: bool = True,
    when: Callable[[Any], bool] | None = None,
) -> Any:
    """Like raise_before, but runs `handler` there (a signal handler, which may call the store and
    then return or raise); only the first time the line runs unless `once` is false."""
    lines, first = inspect.getsourcelines(function)
    target = first + next(i for i, text in enumerate(lines) if line_text in text) + lines_after
    code = function.__code__
    ran = False

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal ran
        if event == "line" and frame.f_lineno == target and not (once and ran) and (when is None or when(frame)):
            ran = True
            handler()
        return local

    return lambda frame, event, arg: local if frame.f_code is code else None


def run_on_a_thread(body: Callable[[], None], timeout: float = 20.0) -> None:
    """Run `body` on a daemon thread (sys.settrace is per thread) and fail if it does not end
    within `timeout` seconds: the failure these windows used to cause is a hang."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            body()
        except BaseException as exc:  # reported on the test's thread
            errors.append(exc)
        finally:
            sys.settrace(None)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), f"hung for {timeout:.0f} s"
    if errors:
        raise errors[0]


@functools.cache
def _after_check(code: Any) -> frozenset[int]:
    """Offsets of the instructions before which CPython 3.11 runs pending signal handlers in `code`,
    besides its entry: each one after a call or a backward jump (its eval breaker is checked on
    entering a function, when a call returns and on backward jumps; BEFORE_WITH, for one, is not)."""
    return frozenset(
        after.offset for before, after in itertools.pairwise(dis.get_instructions(code))
        if before.opname in ("CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD")
    )


def raise_at_check(index: int, files: tuple[str, ...], exc: type[BaseException] = KeyboardInterrupt) -> Any:
    """A trace function that raises `exc` at the `index`-th point (counting from 0) where a signal
    handler could run in frames of code from `files` (`_after_check`), or never if fewer are
    reached. Walking `index` from 0 until a call ends on its own puts a handler's exception at
    each such point in turn. `fired_in()` on the returned function names the function it was
    raised in (its qualified name), or is None."""
    seen = 0
    fired: list[str] = []

    def point(frame: Any) -> None:
        nonlocal seen
        if seen == index and not fired:
            fired.append(frame.f_code.co_qualname)
            raise exc
        seen += 1

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode" and frame.f_lasti in _after_check(frame.f_code):
            point(frame)
        return local

    def trace(frame: Any, event: str, arg: Any) -> Any:  # called as each frame begins: its entry
        if frame.f_code.co_filename not in files:
            return None
        point(frame)
        frame.f_trace_opcodes = True
        return local

    trace.fired_in = lambda: fired[0] if fired else None  # type: ignore[attr-defined]
    return trace


RETURN_VALUE = dis.opmap["RETURN_VALUE"]
RESUME = dis.opmap["RESUME"]


def _handler_of(code: Any, offset: int) -> Any:
    """The exception-table entry that handles an exception raised at `offset` (None: none)."""
    for entry in dis._parse_exception_table(code):  # type: ignore[attr-defined]
        if entry.start <= offset < entry.end:
            return entry.target, entry.depth, entry.lasti
    return None


@functools.cache
def _loop_checks(code: Any) -> frozenset[int]:
    """The JUMP_BACKWARDs of `code` before which an exception is handled as CPython handles the
    one its eval breaker raises after the jump (at the code unit before the jump's target)."""
    return frozenset(
        ins.offset for ins in dis.get_instructions(code)
        if ins.opname == "JUMP_BACKWARD" and _handler_of(code, ins.offset) == _handler_of(code, ins.argval - 2)
    )


class SignalsAt:
    """Runs `handler` where CPython 3.11 would run a signal handler in the calling thread's frames
    of code for which `traced(code)` holds: at the `at[0]`-th such point (counting from 0), then
    at the `at[1]`-th point after that one, and so on (a signal sent twice); an entry of `at` may
    instead be a predicate on (frame, kind of point) that picks its point. Install it on the
    thread that makes the calls (`install()`; per thread, like sys.settrace).

    The points are the ones where CPython checks its eval breaker: a function's start and a
    generator's resumption (RESUME; not a throw() into it), the end of a call into C (a profile
    "c_return"), and a backward jump (a trace "opcode" event before it, where the exception
    table handles an exception there as it handles one after the jump). A handler's exception
    after a C call is raised by the call, as CPython raises it (`raise_at_check` raises it at
    the next instruction, which after the last call of a `with` or `try` body lies outside the
    block: a lock released by the `with` stays held there, which no signal can do). The end of a
    call of Python code counts too (a profile "return"; raised as the callee's exception, so the
    caller's handler is the call's): CPython checks there only when the call went through C (a
    class, `__exit__` ...), so this over-approximates, as a handler running at the callee's end.

    The handler runs traced (sys.call_tracing), as a real handler's Python code is: a second
    signal can land inside it (in the close() a SIGTERM handler makes). When it raises, CPython
    drops the trace or profile function that called it; the other one puts both back at its next
    event. `fired` lists where the handler ran: (function, file, line, kind of point)."""

    def __init__(
        self, handler: Callable[[], None], at: Sequence[int | Callable[[Any, str], bool]], traced: Callable[[Any], bool]
    ) -> None:
        self.handler = handler
        self._gaps = list(at)
        self.traced = traced
        self.seen = 0  # points since the start or since the handler last ran
        self.total = 0  # every point passed
        self.fired: list[tuple[str, str, int, str]] = []
        self._rearm = False

    def install(self) -> None:
        sys.settrace(self._trace)
        sys.setprofile(self._profile)

    def uninstall(self) -> None:
        sys.settrace(None)
        sys.setprofile(None)

    def _point(self, frame: Any, kind: str) -> None:
        self.total += 1
        target = self._gaps[0] if self._gaps else None
        if target is None or (not target(frame, kind) if callable(target) else self.seen != target):
            self.seen += 1
            return
        del self._gaps[0]
        self.seen = 0
        code = frame.f_code
        self.fired.append((code.co_qualname, code.co_filename.rsplit("/", 1)[-1], frame.f_lineno, kind))
        try:
            sys.call_tracing(self.handler, ())
        except BaseException:
            self._rearm = True
            raise

    def _put_back(self, frame: Any) -> None:
        self._rearm = False
        self.install()
        while frame is not None:
            if self.traced(frame.f_code) and _loop_checks(frame.f_code):
                frame.f_trace, frame.f_trace_lines, frame.f_trace_opcodes = self._local, False, True
            frame = frame.f_back

    def _trace(self, frame: Any, event: str, arg: Any) -> Any:
        if self._rearm:
            self._put_back(frame)
        if not self.traced(frame.f_code) or not _loop_checks(frame.f_code):
            return None
        frame.f_trace_lines, frame.f_trace_opcodes = False, True
        return self._local

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if self._rearm:
            self._put_back(frame)
        if event == "opcode" and frame.f_lasti in _loop_checks(frame.f_code):
            self._point(frame, "loop")
        return self._local

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if self._rearm:
            self._put_back(frame)
        code = frame.f_code
        if event == "c_return":
            if self.traced(code):
                self._point(frame, "after a C call")
        elif event == "call":
            if self.traced(code) and code.co_code[frame.f_lasti] == RESUME and code.co_code[frame.f_lasti + 1] < 2:
                self._point(frame, "entry")
        elif event == "return" and self._returns_to_traced(frame):
            self._point(frame.f_back, "after a call")

    def _returns_to_traced(self, frame: Any) -> bool:
        """A traced frame returns to a traced caller: not a generator's yield, nor a frame left by an
        exception, nor an untraced callee (a weakref callback that ran during a call, say)."""
        code, back = frame.f_code, frame.f_back
        return self.traced(code) and code.co_code[frame.f_lasti] == RETURN_VALUE and back is not None and self.traced(back.f_code)


def point_at(function: Callable[..., Any], line_text: str, kind: str) -> Callable[[Any, str], bool]:
    """For SignalsAt's `at`: the first point of `kind` ("entry", "after a C call", "after a call",
    "loop") on the first line of `function` containing `line_text`."""
    lines, first = inspect.getsourcelines(function)
    target = first + next(i for i, text in enumerate(lines) if line_text in text)
    code = function.__code__
    return lambda frame, seen: frame.f_code is code and frame.f_lineno == target and seen == kind
