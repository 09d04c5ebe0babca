"""Per-subscriber progress: high-water mark, gap set, in-flight and nack backoff. Pure, no I/O.

The mark follows the seed: the highest segment, contiguous over the segments the store knows,
whose bundles are all resolved (acked or dropped). Bundles resolved beyond the mark live in the
gap set, keyed by (segment_seq, bundle_index); a segment whose bundles are all in the gap set is
kept as one entry of ``done`` until the mark reaches it. Segments the catalog does not know
(never finalized, or deleted after every subscriber resolved them) are skipped by the mark.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from ..config import SubscriberConfig
from ..errors import QuiverError

Key = tuple[int, int]  # (segment_seq, bundle_index)


class Outcome(IntEnum):
    """Outcome codes, as stored in the ack log."""

    ACK = 0
    NACK = 1
    DROPPED = 2


class SegmentCatalog:
    """Finalized segments still on disk, in sequence order, with their bundle counts."""

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._counts: dict[int, int] = {}
        self.max_seen = -1  # highest sequence number ever added (never decreases)

    def add(self, seq: int, bundle_count: int) -> bool:
        """Register a segment; False when it was already known with the same count."""
        if seq < 0 or bundle_count < 0:
            raise QuiverError(f"segment {seq}: sequence and bundle count must be >= 0, got {bundle_count}")
        known = self._counts.get(seq)
        if known is not None:
            if known != bundle_count:
                raise QuiverError(
                    f"segment {seq} was registered with {known} bundles and now with {bundle_count}: "
                    "sequence numbers must never be reused"
                )
            return False
        bisect.insort(self._seqs, seq)
        self._counts[seq] = bundle_count
        self.max_seen = max(self.max_seen, seq)
        return True

    def remove(self, seq: int) -> None:
        if self._counts.pop(seq, None) is not None:
            del self._seqs[bisect.bisect_left(self._seqs, seq)]

    def count(self, seq: int) -> int | None:
        return self._counts.get(seq)

    def __contains__(self, seq: object) -> bool:
        return seq in self._counts

    def __len__(self) -> int:
        return len(self._seqs)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._seqs))

    def items(self) -> list[tuple[int, int]]:
        return [(s, self._counts[s]) for s in self._seqs]

    def first_at_or_after(self, seq: int) -> int | None:
        i = bisect.bisect_left(self._seqs, seq)
        return self._seqs[i] if i < len(self._seqs) else None

    def after(self, seq: int) -> list[int]:
        return self._seqs[bisect.bisect_right(self._seqs, seq) :]

    @property
    def first(self) -> int | None:
        return self._seqs[0] if self._seqs else None

    @property
    def last(self) -> int | None:
        return self._seqs[-1] if self._seqs else None


def backoff_delay(config: SubscriberConfig, attempt: int) -> float:
    """Seconds before redelivering a bundle nacked for the `attempt`-th time (1-based), exponential."""
    delay = config.nack_backoff_initial * config.nack_backoff_multiplier ** max(attempt - 1, 0)
    return min(delay, config.nack_backoff_max)


@dataclass
class SubscriberState:
    """Everything the store knows about one subscriber's progress."""

    name: str
    sub_id: int
    mark: int  # every known segment <= mark is resolved
    last_seen_ns: int = 0
    orphaned: bool = False
    dropped_total: int = 0  # bundles resolved as dropped for this subscriber (metrics)
    done: set[int] = field(default_factory=set)  # fully resolved segments above the mark
    partial: dict[int, set[int]] = field(default_factory=dict)  # resolved bundle indexes above the mark
    # delivery bookkeeping, never persisted: a restart redelivers everything unresolved
    cursor: Key | None = None  # next never-delivered candidate
    in_flight: set[Key] = field(default_factory=set)
    _ready: list[Key] = field(default_factory=list)  # deferred or backoff expired, min-heap
    _waiting: list[tuple[float, Key]] = field(default_factory=list)  # (due, key) min-heap
    attempts: dict[Key, int] = field(default_factory=dict)

    # -- resolution -------------------------------------------------------------------------
    def is_resolved(self, seq: int, index: int) -> bool:
        if seq <= self.mark or seq in self.done:
            return True
        got = self.partial.get(seq)
        return got is not None and index in got

    def segment_resolved(self, seq: int) -> bool:
        return seq <= self.mark or seq in self.done

    def resolve(self, seq: int, index: int, catalog: SegmentCatalog) -> bool:
        """Record an ack or drop; True when the bundle was not resolved before."""
        key = (seq, index)
        self.in_flight.discard(key)
        self.attempts.pop(key, None)
        if self.is_resolved(seq, index):
            return False
        count = catalog.count(seq)
        if count is not None and not 0 <= index < count:
            raise QuiverError(
                f"subscriber {self.name!r}: bundle index {index} out of range for segment {seq} ({count} bundles)"
            )
        got = self.partial.setdefault(seq, set())
        got.add(index)
        if count is not None and len(got) >= count:
            del self.partial[seq]
            self.done.add(seq)
            self.advance(catalog)
        return True

    def advance(self, catalog: SegmentCatalog) -> None:
        """Move the mark over every known segment that is fully resolved, in order."""
        for seq in catalog.after(self.mark):
            if seq not in self.done:
                break
            self.done.discard(seq)
            self.mark = seq
        # segments the catalog forgot (deleted) below the next unresolved one no longer matter
        self.done = {s for s in self.done if s > self.mark}
        for seq in [s for s in self.partial if s <= self.mark]:
            del self.partial[seq]

    def complete_known(self, catalog: SegmentCatalog) -> None:
        """Turn partial entries whose segment count became known and full into done segments."""
        for seq in list(self.partial):
            count = catalog.count(seq)
            if count is not None and len(self.partial[seq]) >= count:
                del self.partial[seq]
                self.done.add(seq)
        self.advance(catalog)

    def recount(self, seq: int, logged: int, catalog: SegmentCatalog) -> None:
        """`seq` was resolved against `logged` bundles, but `catalog` now counts it otherwise: keep
        what was resolved below both counts, as gaps, so the other bundles are delivered. A mark
        at or past `seq` steps back below it, the known segments it passed becoming done ones."""
        count = catalog.count(seq) or 0
        if self.segment_resolved(seq):
            self.done.update(s for s in catalog.after(seq) if s <= self.mark)
            self.mark = min(self.mark, seq - 1)
            self.done.discard(seq)
            self.partial[seq] = set(range(min(logged, count)))
        elif seq in self.partial:
            self.partial[seq] = {i for i in self.partial[seq] if i < count}

    def drop_rest(self, seq: int, catalog: SegmentCatalog) -> list[int]:
        """Resolve every bundle of `seq` not resolved yet at once (a drop); returns their indexes."""
        missing = self.unresolved(seq, catalog)
        if missing:
            self.partial.pop(seq, None)
            self.done.add(seq)
            self.in_flight = {k for k in self.in_flight if k[0] != seq}
            self.attempts = {k: v for k, v in self.attempts.items() if k[0] != seq}
            self.advance(catalog)
        return missing

    def unresolved(self, seq: int, catalog: SegmentCatalog) -> list[int]:
        """Bundle indexes of `seq` this subscriber still has to resolve."""
        if self.segment_resolved(seq):
            return []
        got = self.partial.get(seq, set())
        everyone = np.arange(catalog.count(seq) or 0, dtype=np.int64)
        return everyone[~np.isin(everyone, np.fromiter(got, np.int64, len(got)))].tolist()

    def unresolved_count(self, seq: int, catalog: SegmentCatalog) -> int:
        """How many bundles of `seq` are still unresolved, without listing up to 2**22 of them."""
        if self.segment_resolved(seq):
            return 0
        count = catalog.count(seq) or 0
        return count - sum(1 for index in self.partial.get(seq, ()) if index < count)

    def forget_segment(self, seq: int, catalog: SegmentCatalog) -> None:
        """The segment left the catalog (deleted): drop every trace of it."""
        self.done.discard(seq)
        self.partial.pop(seq, None)
        self.in_flight = {k for k in self.in_flight if k[0] != seq}
        self._ready = [k for k in self._ready if k[0] != seq]
        heapq.heapify(self._ready)
        self._waiting = [w for w in self._waiting if w[1][0] != seq]
        heapq.heapify(self._waiting)
        self.attempts = {k: v for k, v in self.attempts.items() if k[0] != seq}
        self.advance(catalog)

    # -- delivery ---------------------------------------------------------------------------
    def next_delivery(self, now: float, catalog: SegmentCatalog) -> Key | None:
        """The lowest (seq, index) eligible for delivery now, claimed as in flight; None if none."""
        while self._waiting and self._waiting[0][0] <= now:
            heapq.heappush(self._ready, heapq.heappop(self._waiting)[1])
        while self._ready:
            key = heapq.heappop(self._ready)
            if key not in self.in_flight and key[0] in catalog and not self.is_resolved(*key):
                self.in_flight.add(key)
                return key
        fresh = self._fresh(catalog)
        if fresh is not None:
            self.in_flight.add(fresh)
            self.cursor = (fresh[0], fresh[1] + 1)
        return fresh

    def _fresh(self, catalog: SegmentCatalog) -> Key | None:
        seq, index = self.cursor if self.cursor is not None else (self.mark + 1, 0)
        if seq <= self.mark:
            seq, index = self.mark + 1, 0
        while True:
            found = catalog.first_at_or_after(seq)
            if found is None:
                self.cursor = (seq, index)
                return None
            if found != seq:
                seq, index = found, 0
            count = catalog.count(seq) or 0
            if not self.segment_resolved(seq):
                got = self.partial.get(seq, set())
                while index < count and index in got:
                    index += 1
                if index < count:
                    return (seq, index)
            seq, index = seq + 1, 0

    def nack(self, key: Key, now: float, config: SubscriberConfig) -> float:
        """Schedule a redelivery after the exponential backoff; returns the due time."""
        self.in_flight.discard(key)
        attempt = self.attempts.get(key, 0) + 1
        self.attempts[key] = attempt
        due = now + backoff_delay(config, attempt)
        heapq.heappush(self._waiting, (due, key))
        return due

    def defer(self, key: Key) -> None:
        """Release the claim; the bundle is eligible again at once."""
        self.in_flight.discard(key)
        heapq.heappush(self._ready, key)

    def next_due(self) -> float | None:
        return self._waiting[0][0] if self._waiting else None

    # -- observation ------------------------------------------------------------------------
    def gap_set_size(self) -> int:
        return sum(len(v) for v in self.partial.values())

    def gap_keys(self) -> list[Key]:
        return sorted((s, i) for s, got in self.partial.items() for i in got)

    def lag(self, catalog: SegmentCatalog) -> tuple[int, int]:
        """(bundles, segments) still unresolved in the known segments."""
        bundles = segments = 0
        for seq in catalog.after(self.mark):
            if seq in self.done:
                continue
            segments += 1
            bundles += (catalog.count(seq) or 0) - len(self.partial.get(seq, ()))
        return bundles, segments
