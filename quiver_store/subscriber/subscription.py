"""The consumer-facing handles: a Subscription yields Deliveries, each settled exactly once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..bundle import RecordBundle
from ..errors import ConfigError, QuiverError, StoreClosedError
from .state import Outcome

if TYPE_CHECKING:
    from .registry import SubscriberRegistry


class Delivery:
    """One bundle handed to one subscriber; settle it with ack(), nack() or defer().

    The bundle is read lazily from the segment file (memory-mapped) on first access, and by ack()
    if it was not read before: an ack may let retention delete the segment at once, and the bundle
    must stay readable after it (`d.ack(); use(d.bundle)`, at-most-once processing).
    """

    __slots__ = ("_bundle", "_registry", "_settled", "bundle_index", "segment_seq", "sub_id", "subscriber")

    def __init__(
        self, registry: SubscriberRegistry, subscriber: str, sub_id: int, segment_seq: int, bundle_index: int
    ) -> None:
        self._registry = registry
        self.subscriber = subscriber
        self.sub_id = sub_id
        self.segment_seq = segment_seq
        self.bundle_index = bundle_index
        self._bundle: RecordBundle | None = None
        self._settled: str | None = None

    @property
    def bundle(self) -> RecordBundle:
        if self._bundle is None:
            with self._registry.calls.inside():  # a close() from a signal handler waits for the read
                self._bundle = self._registry.read_bundle(self.segment_seq, self.bundle_index)
        return self._bundle

    def ack(self) -> bool:
        """Resolve the bundle for this subscriber; durable in the ack log when this returns.

        Returns False when retention had already dropped the bundle (nothing to record).
        """
        if self._bundle is None and self._settled is None:
            # Dropped by retention or unreadable: the ack is still recorded and `bundle` raises why.
            with self._registry.calls.inside(), contextlib.suppress(QuiverError):
                self._bundle = self._registry.read_bundle(self.segment_seq, self.bundle_index)
        return self._settle("ack", Outcome.ACK)

    def nack(self) -> bool:
        """Record a failed attempt; the bundle is redelivered after the exponential backoff."""
        return self._settle("nack", Outcome.NACK)

    def defer(self) -> bool:
        """Give the bundle back unprocessed; it is eligible for delivery again at once (not logged)."""
        return self._settle("defer", "defer")

    def _settle(self, what: str, outcome: Outcome | str) -> bool:
        if self._settled is not None:
            raise QuiverError(
                f"delivery of segment {self.segment_seq} bundle {self.bundle_index} to {self.subscriber!r} "
                f"was already settled with {self._settled}(); cannot {what}() it again"
            )
        with self._registry.calls.inside():
            result = self._registry.settle(self, outcome)  # type: ignore[arg-type]
        self._settled = what
        return result

    @property
    def settled(self) -> str | None:
        return self._settled

    def __repr__(self) -> str:
        return (
            f"Delivery({self.subscriber!r}, segment_seq={self.segment_seq}, bundle_index={self.bundle_index})"
        )


class Subscription:
    """A named cursor over finalized bundles, delivered in (segment_seq, bundle_index) order."""

    def __init__(self, registry: SubscriberRegistry, name: str) -> None:
        self._registry = registry
        self.name = name

    def next(self, timeout: float | None = None) -> Delivery | None:
        """The next eligible bundle; blocks up to `timeout` seconds (None: until one arrives).

        Returns None on timeout; raises StoreClosedError once the store is closed, ConfigError for
        a timeout that is not None or a number of seconds >= 0 (infinity waits like None).
        """
        wait = _wait_seconds(timeout)
        with self._registry.calls.inside():
            return self._registry.next_delivery(self.name, wait)

    def __iter__(self) -> Iterator[Delivery]:
        """Yield deliveries until the store closes."""
        while True:
            try:
                with self._registry.calls.inside():
                    delivery = self._registry.next_delivery(self.name, None)
            except StoreClosedError:
                return
            if delivery is not None:
                yield delivery

    def stats(self) -> dict[str, object]:
        with self._registry.calls.inside():
            return next((s for s in self._registry.describe() if s["name"] == self.name), {})

    def __repr__(self) -> str:
        return f"Subscription({self.name!r})"


def _wait_seconds(timeout: object) -> float | None:
    """`timeout` checked up front: a NaN deadline would never pass and one of another type would fail
    deep in the wait. Beyond what a condition wait accepts (infinity included) it becomes None."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout != timeout or timeout < 0:
        raise ConfigError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
    return None if timeout >= threading.TIMEOUT_MAX else float(timeout)
