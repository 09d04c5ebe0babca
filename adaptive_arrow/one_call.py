"""OneCallAtATime: an Encoder or Decoder refuses a call while another thread is inside one.

Each is one OTAP stream, whose envelopes are made (or read) one at a time in the order they travel.
Two threads inside one encoder interleave its plan and commit steps, which produced envelopes that
decoded to other data, Arrow errors, and an encoder that failed every later batch. Waiting instead
of refusing would not make sharing correct: the threads would still send their envelopes in an order
the stream did not make them. A refused call changes no state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import AdaptiveArrowError


class OneCallAtATime:
    def __init__(self, owner: str, error: type[AdaptiveArrowError]) -> None:
        self._owner = owner
        self._error = error
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, method: str) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise self._error(
                f"{self._owner}.{method}: this {self._owner} is in use by another thread. One {self._owner} is one "
                f"OTAP stream: give each thread its own {self._owner}, or hold one lock around each call and the "
                "send (or receive) of its envelope, so the stream's order is the order on the wire"
            )
        try:
            yield
        finally:
            self._lock.release()
