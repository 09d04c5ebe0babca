"""Retention: steady-state cleanup, time retention and the per-core size cap.

Every deletion follows one protocol, so no subscriber is ever left with an unfillable gap:
durably record `dropped` for each outstanding (segment, bundle, subscriber) in the ack log, then
delete the file through the engine (unlink + directory fsync), then forget the segment.
Steady-state deletion finds nobody outstanding except orphaned subscribers; `drop_oldest` and
`max_age` may find anyone (that is the loss the operator chose, counted in metrics).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .config import StoreConfig
from .errors import QuiverError, StoreClosedError, StoreFullError, disk_error
from .subscriber.registry import SubscriberRegistry

log = logging.getLogger("quiver_store.retention")

BACKPRESSURE_RECHECK = 0.25  # seconds between usage re-checks while blocked (WAL truncation is not notified)


class SegmentLike(Protocol):
    seq: int
    size_bytes: int
    ingestion_time_max_ns: int


class StoreHooks(Protocol):
    """The engine hooks retention drives (quiver.md interface)."""

    def segments(self) -> Sequence[Any]: ...
    def delete_segment(self, seq: int, reason: str) -> int: ...
    def disk_usage(self) -> int: ...
    def open_segment_bytes(self) -> int: ...
    def finalize_now(self, reason: str) -> Any: ...


def steady_state_victims(
    segments: Sequence[SegmentLike], processed: Callable[[int], bool], headroom: int
) -> list[SegmentLike]:
    """Fully processed segments to delete, oldest first, keeping the newest ones within `headroom` bytes."""
    done = [s for s in segments if processed(s.seq)]
    kept = 0
    keep: set[int] = set()
    for seg in sorted(done, key=lambda s: s.seq, reverse=True):
        if kept + seg.size_bytes > headroom:
            break
        kept += seg.size_bytes
        keep.add(seg.seq)
    return sorted((s for s in done if s.seq not in keep), key=lambda s: s.seq)


def expired_segments(
    segments: Sequence[SegmentLike], now_ns: int, max_age: float | None
) -> list[SegmentLike]:
    """Segments whose newest bundle was ingested more than `max_age` seconds ago."""
    if max_age is None:
        return []
    cutoff = now_ns - int(max_age * 1e9)
    return sorted((s for s in segments if s.ingestion_time_max_ns < cutoff), key=lambda s: s.seq)


def core_label(path: str) -> str:
    match = re.search(r"core_(\d+)/?$", path)
    return match.group(1) if match else "0"


class Retention:
    """Applies the retention policy of one core's store."""

    def __init__(
        self,
        config: StoreConfig,
        store: StoreHooks,
        registry: SubscriberRegistry,
        *,
        core_id: str = "0",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self.store = store
        self.registry = registry
        self.core_id = core_id
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.RLock()  # one deletion pass at a time
        self._pressure = threading.Lock()  # producers at the cap queue here
        self.evictions: dict[str, int] = {}
        self.dropped_bundles: dict[str, int] = {}
        self.throttle_total = 0
        self.closed = False

    # -- the deletion protocol --------------------------------------------------------------
    def _delete(self, seq: int, reason: str) -> int:
        dropped = self.registry.drop_segment(seq)  # durable before the file goes
        try:
            freed = self.store.delete_segment(seq, reason)
        except OSError as exc:
            raise disk_error(
                exc, f"deleting segment {seq} ({reason})", exc.filename or f"segment {seq}", "it is kept and deleted again later"
            ) from exc
        self.registry.forget_segment(seq, reason)
        self.evictions[reason] = self.evictions.get(reason, 0) + 1
        if dropped:
            self.dropped_bundles[reason] = self.dropped_bundles.get(reason, 0) + sum(dropped.values())
        self.registry.notify_progress()
        return freed

    def delete_stale(self, seqs: Sequence[int]) -> None:
        """Delete again segments whose earlier deletion did not survive a crash (never redelivered)."""
        with self._lock:
            for seq in seqs:
                self.store.delete_segment(seq, "stale")
                self.evictions["stale"] = self.evictions.get("stale", 0) + 1

    # -- steady state and time --------------------------------------------------------------
    def sweep(self) -> int:
        """Orphan check, time retention, then steady-state cleanup. Returns bytes freed."""
        if self.closed:
            return 0
        self.registry.check_orphans()
        freed = 0
        with self._lock:
            segments = list(self.store.segments())
            for seg in expired_segments(segments, self._wall(), self.config.retention.max_age):
                freed += self._delete(seg.seq, "age")
            segments = list(self.store.segments())
            for seg in steady_state_victims(
                segments, self.registry.processed, self.config.retention.steady_state_headroom
            ):
                freed += self._delete(seg.seq, "processed")
        return freed

    def on_processed(self, seq: int) -> None:
        """Segment `seq` (and maybe others) just became fully processed (last ack, unsubscribe,
        orphan, a new "latest" subscriber): delete every fully processed segment now."""
        if self.closed:
            return
        with self._lock:
            segments = list(self.store.segments())
            try:
                for seg in steady_state_victims(
                    segments, self.registry.processed, self.config.retention.steady_state_headroom
                ):
                    self._delete(seg.seq, "processed")
            except QuiverError as exc:  # the ack that called us is durable: failing it would misreport it
                log.error("steady-state cleanup failed (the next maintenance sweep retries it): %s", exc)

    # -- size cap ---------------------------------------------------------------------------
    def make_room(self, incoming: int) -> None:
        """Called by ingest before appending `incoming` bytes; enforces the per-core size cap.

        Evicts fully processed segments first (ignoring headroom), finalizes a non-empty open
        segment early, then applies the policy: `backpressure` blocks up to
        `retention.backpressure_timeout` for subscribers to make progress and raises
        StoreFullError; `drop_oldest` deletes the oldest finalized segments after recording
        `dropped` outcomes for every subscriber still waiting for them.
        """
        cap = self.config.per_core_size_cap
        if cap is None or self.store.disk_usage() + incoming <= cap:
            return
        if incoming > cap:
            raise self._full(
                cap, incoming, f"a bundle of {incoming} bytes can never fit under the per-core cap of {cap} bytes; "
                "raise retention.size_cap"
            )
        policy = self.config.retention.size_cap_policy
        deadline = self._clock() + self.config.retention.backpressure_timeout
        throttled = False
        with self._pressure:
            while True:
                if self.closed:
                    raise StoreClosedError("the store closed while ingest was waiting for space")
                if self.registry.calls.deferring():  # close() from a signal handler that interrupted this wait
                    raise StoreClosedError("the store is closing (close() called while ingest waited for space); this bundle was not stored")
                if self._fits(cap, incoming) or self._evict_processed(cap, incoming):
                    return
                if self.store.open_segment_bytes() > 0:
                    self.store.finalize_now("size_cap")
                    if self._fits(cap, incoming) or self._evict_processed(cap, incoming):
                        return
                if policy == "drop_oldest":
                    segments = sorted(self.store.segments(), key=lambda s: s.seq)
                    if not segments:
                        raise self._full(cap, incoming, "nothing finalized is left to drop")
                    with self._lock:
                        self._delete(segments[0].seq, "drop_oldest")
                    continue
                if not throttled:
                    throttled = True
                    self.throttle_total += 1
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise self._full(
                        cap,
                        incoming,
                        f"subscribers did not free space within {self.config.retention.backpressure_timeout}s",
                    )
                self.registry.wait_for_progress(min(remaining, BACKPRESSURE_RECHECK))

    def _fits(self, cap: int, incoming: int) -> bool:
        return self.store.disk_usage() + incoming <= cap

    def _evict_processed(self, cap: int, incoming: int) -> bool:
        with self._lock:
            for seg in sorted(self.store.segments(), key=lambda s: s.seq):
                if self._fits(cap, incoming):
                    return True
                if self.registry.processed(seg.seq):
                    self._delete(seg.seq, "size")
            return self._fits(cap, incoming)

    def _full(self, cap: int, incoming: int, why: str) -> StoreFullError:
        usage = self.store.disk_usage()
        return StoreFullError(
            f"core {self.core_id} reached its size cap: usage {usage} bytes + {incoming} incoming > cap {cap} bytes "
            f"(retention.size_cap {self.config.retention.size_cap} / {self.config.cores} cores, policy "
            f"{self.config.retention.size_cap_policy}); {why}"
        )

    # -- observation ------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        usage = self.store.disk_usage()
        cap = self.config.per_core_size_cap
        core = f'{{core_id="{self.core_id}"}}'
        out: dict[str, Any] = {
            "quiver.ingest.throttle_total": self.throttle_total,
            f"quiver.core.bytes{core}": usage,
            f"quiver.core.cap_fraction{core}": (usage / cap) if cap else 0.0,
        }
        for reason in sorted({"processed", "size", "drop_oldest", "age", *self.evictions}):
            out[f'quiver.gc.evictions_total{{reason="{reason}"}}'] = self.evictions.get(reason, 0)
        for reason, n in sorted(self.dropped_bundles.items()):
            out[f'quiver.retention.dropped_bundles_total{{reason="{reason}"}}'] = n
        return out
