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
from collections.abc import Callable
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
