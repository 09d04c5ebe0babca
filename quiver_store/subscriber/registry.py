"""All subscribers of one store: replay from the ack log, delivery, outcomes, orphans, drops.

The registry is the only writer of the ack log. Every state change is applied under one lock in
the same order it is appended to the log (so a checkpoint taken under that lock is exact), and
`ack()` returns only after the group commit made its record durable.

A change cut short by an exception (a signal handler's, which Python raises between any two
bytecodes of the main thread: Ctrl-C, a SIGTERM handler's sys.exit) can leave the state in memory
torn: an ack that completed a segment removed its partial entry before adding it to the done set,
and a checkpoint written from that state (the close's) dropped the segment's earlier, durable
acks with the log files it replaced, so they were delivered again after the reopen. So each change
runs inside `_changing()`, and once one is cut short the registry takes no more calls and writes
no checkpoint; the ack log, flushed at close, still holds every outcome, and the next open replays it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..bundle import RecordBundle
from ..config import SubscriberConfig
from ..errors import CorruptionError, QuiverError, StoreClosedError
from ..fs import DEFAULT_FS, FileSystem
from ..reentry import CLOSE_CHECK, CallDepth, run_noting_failure
from . import ack_log as log
from .state import Key, Outcome, SegmentCatalog, SubscriberState
from .subscription import Delivery, Subscription

READER_CACHE = 8
DELETED_REASONS_KEPT = 1024  # why recently deleted segments went, for a late read's error message
DELETION_CAUSES = {  # retention's deletion reasons, as a reader of a deleted segment is told
    "processed": "every subscriber had settled it, so steady-state cleanup deleted it",
    "size": "every subscriber had settled it, so the size cap deleted it",
    "drop_oldest": "retention.size_cap_policy 'drop_oldest' deleted it at the size cap",
    "age": "retention.max_age deleted it",
    "stale": "its deletion before a restart was completed",
}

Start = Literal["earliest", "latest"]


class BundleReader(Protocol):
    def bundle(self, index: int) -> RecordBundle: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class SegmentRef:
    """What the registry needs to know about a finalized segment."""

    seq: int
    bundle_count: int
    path: str


def validate_name(name: object) -> str:
    """Subscriber names: non-empty, at most 64 bytes of [A-Za-z0-9_.-] (they are stored in the ack log)."""
    if not isinstance(name, str) or not name:
        raise QuiverError(f"subscriber name must be a non-empty string, got {name!r}")
    if len(name.encode()) > log.MAX_NAME_BYTES:
        raise QuiverError(
            f"subscriber name {name[:70]!r} is {len(name.encode())} bytes; the limit is {log.MAX_NAME_BYTES}"
        )
    if not log.NAME_PATTERN.fullmatch(name):
        raise QuiverError(f"subscriber name {name!r} may only contain letters, digits, '_', '.' and '-'")
    return name


@dataclass
class RebuiltState:
    catalog: SegmentCatalog
    subscribers: dict[int, SubscriberState]
    next_sub_id: int
    records: int  # records replayed after the checkpoint
    damage: list[str] = field(default_factory=list)  # records that contradict the segments registered before them


def rebuild(checkpoint: bytes | None, records: Iterable[log.Record], checkpoint_path: str) -> RebuiltState:
    """Apply a checkpoint and the records after it; replay is idempotent, so overlap is harmless."""
    if checkpoint is not None:
        cp = log.decode_checkpoint(checkpoint, checkpoint_path)
        catalog, subs, next_id = cp.catalog, {s.sub_id: s for s in cp.subscribers}, cp.next_sub_id
    else:
        catalog, subs, next_id = SegmentCatalog(), {}, 0
    n = 0
    damage: list[str] = []
    for rec in records:
        n += 1
        kind = rec[0]
        if kind == log.OUTCOME:
            _, sub_id, seq, index, outcome, ts = rec
            sub = subs.get(sub_id)
            if sub is None:
                continue
            count = catalog.count(seq)
            if count is not None and index >= count:
                damage.append(f"an outcome for bundle {index} of segment {seq}, registered with {count} bundles")
                continue
            if outcome == Outcome.DROPPED:
                if sub.resolve(seq, index, catalog):
                    sub.dropped_total += 1
            else:
                sub.last_seen_ns = max(sub.last_seen_ns, ts)
                if outcome == Outcome.ACK:
                    sub.resolve(seq, index, catalog)
        elif kind == log.SEGMENT:
            _, seq, count = rec
            known = catalog.count(seq)
            if known is not None and known != count:
                damage.append(f"segment {seq} registered again with {count} bundles, first with {known}")
                continue
            if catalog.add(seq, count):
                for sub in subs.values():
                    if count == 0 and seq > sub.mark:
                        sub.done.add(seq)
                    sub.complete_known(catalog)
        elif kind == log.SUBSCRIBE:
            _, sub_id, mark, ts, name = rec
            for other in [s for s in subs.values() if s.name == name and s.sub_id != sub_id]:
                del subs[other.sub_id]
            sub = subs.get(sub_id)
            if sub is None:
                subs[sub_id] = SubscriberState(name, sub_id, mark, last_seen_ns=ts)
            else:
                sub.orphaned = False
                sub.last_seen_ns = max(sub.last_seen_ns, ts)
            next_id = max(next_id, sub_id + 1)
        elif kind == log.UNSUBSCRIBE:
            subs.pop(rec[1], None)
        elif kind == log.ORPHANED:
            sub = subs.get(rec[1])
            if sub is not None:
                sub.orphaned = True
    return RebuiltState(catalog, subs, next_id, n, damage)


class SubscriberRegistry:
    """Subscribers, their progress and the ack log of one store directory."""

    def __init__(
        self,
        directory: str,
        ack: log.AckLog,
        state: RebuiltState,
        *,
        fs: FileSystem,
        config: SubscriberConfig,
        reader_factory: Callable[[str], BundleReader],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.directory = directory
        self.fs = fs
        self.config = config
        self._log = ack
        self.catalog = state.catalog
        self._by_id = state.subscribers
        self._next_id = state.next_sub_id
        self._depth = state.records  # records since the last checkpoint
        self._reader_factory = reader_factory
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._paths: dict[int, str] = {}
        self._deleted_why: dict[int, str] = {}  # seq -> retention reason, the last DELETED_REASONS_KEPT
        self._readers: OrderedDict[int, BundleReader] = OrderedDict()
        self._readers_lock = threading.Lock()
        self._waiting: dict[str, int] = {}  # threads blocked in next(), per subscriber
        self._progress_waiters = 0
        self._closed = False
        self._torn: BaseException | None = None  # what cut a change short (`_changing`)
        self.forked_away: str | None = None
        self.calls = CallDepth()  # the store's, once it opened the registry (quiver_store/reentry.py)
        self.on_processed: Callable[[int], None] | None = None  # set by the hub: a segment became deletable
        self.counters: dict[str, int] = {
            "orphaned_total": 0,
            "segment_dropped_total": 0,
            "checkpoints_total": 0,
        }
        # damage found while opening, with what was done about it (the hub reports them to the store)
        self.recovery_reports: list[tuple[CorruptionError, str, str]] = []  # (error, action, source)

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str,
        segments: Iterable[SegmentRef],
        *,
        fs: FileSystem = DEFAULT_FS,
        config: SubscriberConfig | None = None,
        reader_factory: Callable[[str], BundleReader],
        sync: bool = True,
        recovery: str = "point_in_time",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], int] = time.time_ns,
        set_aside: frozenset[int] = frozenset(),
    ) -> tuple[SubscriberRegistry, list[int]]:
        """Replay the ack log and reconcile it with the segments on disk. `set_aside` are segments
        the store moved to quarantine at this open (already reported): they are dropped silently.

        Returns the registry and the sequence numbers of segments found on disk that the log says
        were already deleted after every subscriber resolved them (a deletion that did not survive
        a crash): the caller deletes them again instead of redelivering dropped data.
        """
        ack, replay = log.AckLog.open(directory, fs=fs, recovery=recovery, sync=sync)
        try:
            state = rebuild(replay.checkpoint, replay.records, os.path.join(directory, log.CHECKPOINT_NAME))
            contradictions = [CorruptionError(f"a record contradicts the ones before it: {why}", path=ack.path) for why in state.damage]
            if contradictions and recovery == "strict":
                raise contradictions[0]
        except BaseException:
            ack.close()
            raise
        reg = cls(
            directory,
            ack,
            state,
            fs=fs,
            config=config or SubscriberConfig(),
            reader_factory=reader_factory,
            clock=clock,
            wall_clock=wall_clock,
        )
        reg.recovery_reports = [
            (err, "the damaged bytes were moved aside to a .corrupt file; outcomes recorded in them are lost, "
                  "so their bundles may be delivered again", "ack log")
            for err in replay.corruption
        ] + [(err, "the record is ignored", "ack log") for err in contradictions]
        stale = reg._reconcile(list(segments), set_aside)
        return reg, stale

    def _reconcile(self, on_disk: list[SegmentRef], set_aside: frozenset[int] = frozenset()) -> list[int]:
        disk = {s.seq: s for s in on_disk}
        stale: list[int] = []
        now = self._wall()
        with self._lock:
            for seq in list(self.catalog):
                if seq not in disk:  # deleted by retention (all resolved first) or gone some other way
                    owed = self._drop_locked(seq, now)
                    if owed and seq not in set_aside:  # retention resolves every bundle before deleting: lost
                        waiting = ", ".join(f"{name} ({n} bundle{'s' * (n != 1)})" for name, n in sorted(owed.items()))
                        self.recovery_reports.append((
                            CorruptionError(
                                f"segment {seq} is missing: the ack log registered it, and retention never "
                                f"deleted it, as subscribers still waited for it: {waiting}"
                            ),
                            "its unresolved bundles are recorded as dropped for those subscribers",
                            "segments",
                        ))
                    self._forget_locked(seq)
            for seq in sorted(disk):
                ref = disk[seq]
                self._paths[seq] = ref.path
                if seq in self.catalog:
                    if self.catalog.count(seq) != ref.bundle_count:
                        self._recount_locked(ref)
                    continue
                if seq <= self.catalog.max_seen:
                    stale.append(seq)
                    continue
                self._add_segment_locked(ref)
            for sub in self._by_id.values():
                sub.complete_known(self.catalog)
                sub.last_seen_ns = max(
                    sub.last_seen_ns, now
                )  # restored subscribers get a full orphan_timeout
        self._log.commit()
        return stale

    def _recount_locked(self, ref: SegmentRef) -> None:
        """The ack log registered a segment on disk with another bundle count than the segment has:
        damage (the segment's own count is the truth). Left as it was, subscribers would be handed
        bundles that do not exist, or never the ones past the logged count."""
        logged = self.catalog.count(ref.seq) or 0
        self.catalog.remove(ref.seq)
        self.catalog.add(ref.seq, ref.bundle_count)
        for sub in self._by_id.values():
            sub.recount(ref.seq, logged, self.catalog)
        self.recovery_reports.append((
            CorruptionError(
                f"segment {ref.seq} holds {ref.bundle_count} bundles, but the ack log registered it with {logged}",
                path=os.path.join(self.directory, log.LOG_NAME),
            ),
            "the segment's own count is used: its bundles past the logged count are delivered, those past its own are not",
            "ack log",
        ))

    # -- subscribers ------------------------------------------------------------------------
    def subscribe(self, name: str, start: Start = "earliest") -> Subscription:
        """Register `name` (or resume it, keeping its progress; `start` only applies to new names)."""
        validate_name(name)
        if start not in ("earliest", "latest"):
            raise QuiverError(f"subscribe({name!r}): start must be 'earliest' or 'latest', got {start!r}")
        with self._lock:
            self._check()
            now = self._wall()
            sub = self._by_name(name)
            created_latest = sub is None and start == "latest"
            if sub is None:
                if start == "earliest":
                    first = self.catalog.first
                    mark = first - 1 if first is not None else self.catalog.max_seen
                else:
                    mark = self.catalog.max_seen
                if self._next_id > log.MAX_SUB_ID:
                    raise QuiverError(f"subscribe({name!r}): every subscriber id was handed out ({log.MAX_SUB_ID + 1})")
            with self._changing():
                if sub is None:
                    sub = SubscriberState(name, self._next_id, mark, last_seen_ns=now)
                    self._next_id += 1
                    self._by_id[sub.sub_id] = sub
                sub.orphaned = False
                sub.last_seen_ns = now
                lsn = self._append(log.encode_subscribe(sub.sub_id, sub.mark, now, name))
        self._log.commit(lsn)
        if created_latest:  # it is owed nothing retained: that may complete existing segments
            self._after_progress(list(self.catalog))
        return Subscription(self, name)

    def unsubscribe(self, name: str) -> None:
        """Remove `name` and everything it pinned (recorded durably in the ack log)."""
        validate_name(name)
        with self._lock:
            self._check()
            sub = self._by_name(name)
            if sub is None:
                raise QuiverError(f"unsubscribe: no subscriber named {name!r}")
            with self._changing():
                del self._by_id[sub.sub_id]
                lsn = self._append(log.encode_unsubscribe(sub.sub_id, self._wall()))
            self._cond.notify_all()
        self._log.commit(lsn)
        self._after_progress(list(self.catalog))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(s.name for s in self._by_id.values())

    def _by_name(self, name: str) -> SubscriberState | None:
        return next((s for s in self._by_id.values() if s.name == name), None)

    def _require(self, name: str) -> SubscriberState:
        sub = self._by_name(name)
        if sub is None:
            raise QuiverError(f"subscriber {name!r} is not registered (unsubscribed?)")
        return sub

    def _touch(self, sub: SubscriberState) -> int | None:
        """Record activity; a returning orphan is re-activated (logged). Returns an LSN to commit."""
        sub.last_seen_ns = self._wall()
        if sub.orphaned:
            sub.orphaned = False
            return self._append(log.encode_subscribe(sub.sub_id, sub.mark, sub.last_seen_ns, sub.name))
        return None

    # -- delivery ---------------------------------------------------------------------------
    def next_delivery(self, name: str, timeout: float | None) -> Delivery | None:
        """Block until a bundle is eligible for `name` (finalize, defer and backoff wake it up)."""
        deadline = None if timeout is None else self._clock() + timeout
        lsn = None
        delivery: Delivery | None = None
        with self._lock:
            self._waiting[name] = self._waiting.get(name, 0) + 1
            try:
                while True:
                    self._check()
                    sub = self._require(name)
                    now = self._clock()
                    with self._changing():
                        lsn = self._touch(sub) or lsn
                        key = sub.next_delivery(now, self.catalog)
                    if key is not None:
                        delivery = Delivery(self, name, sub.sub_id, key[0], key[1])
                        break
                    wait = None
                    due = sub.next_due()
                    if due is not None:
                        wait = max(due - now, 0.0)
                    if deadline is not None:
                        remaining = deadline - now
                        if remaining <= 0:
                            delivery = None
                            break
                        wait = remaining if wait is None else min(wait, remaining)
                    if self.calls.deferring():  # close() from a signal handler that interrupted this wait
                        raise StoreClosedError("the store is closing (close() called during next()); subscriptions ended")
                    self._cond.wait(CLOSE_CHECK if wait is None else min(wait, CLOSE_CHECK))
            finally:
                self._waiting[name] -= 1
        if lsn is not None:
            self._log.commit(lsn)
        return delivery

    def settle(self, delivery: Delivery, outcome: Outcome | Literal["defer"]) -> bool:
        """Apply ack / nack / defer of a delivery. Returns False for an ack of a dropped bundle."""
        seq, index = delivery.segment_seq, delivery.bundle_index
        key: Key = (seq, index)
        processed = False
        lsn: int | None = None
        with self._lock:
            self._check()
            sub = self._by_id.get(delivery.sub_id)
            if sub is None:
                raise QuiverError(
                    f"subscriber {delivery.subscriber!r} was unsubscribed; the delivery cannot be settled"
                )
            with self._changing():
                lsn = self._touch(sub)
                if seq not in self.catalog or (
                    outcome != "defer" and sub.is_resolved(seq, index) and key not in sub.in_flight
                ):
                    sub.in_flight.discard(key)
                    self._cond.notify_all()
                    return False  # dropped by retention (or already resolved): nothing to record
                now_ns = self._wall()
                if outcome == Outcome.ACK:
                    sub.resolve(seq, index, self.catalog)
                    lsn = self._append(log.encode_outcome(sub.sub_id, seq, index, Outcome.ACK, now_ns))
                    processed = sub.segment_resolved(seq) and self._processed_locked(seq)
                    if self._progress_waiters:
                        self._cond.notify_all()
                elif outcome == Outcome.NACK:
                    sub.nack(key, self._clock(), self.config)
                    lsn = self._append(log.encode_outcome(sub.sub_id, seq, index, Outcome.NACK, now_ns))
                    self._cond.notify_all()
                else:
                    sub.defer(key)
                    self._cond.notify_all()
        if lsn is not None:
            self._log.commit(lsn)
        if processed:
            self._after_progress([seq])
        self.maybe_checkpoint()
        return True

    def _after_progress(self, seqs: list[int]) -> None:
        """Let retention clean up: some of `seqs` may have become fully processed."""
        if self.on_processed is not None and seqs:
            self.on_processed(seqs[0])

    def read_bundle(self, seq: int, index: int) -> RecordBundle:
        """Read a bundle through a small cache of open segment readers (zero-copy mmap)."""
        with self._readers_lock:
            reader = self._readers.get(seq)
            if reader is None:
                path = self._paths.get(seq)
                if path is None or seq not in self.catalog:
                    why = DELETION_CAUSES.get(self._deleted_why.get(seq, ""), "it was deleted")
                    raise QuiverError(f"segment {seq} is gone before bundle {index} was read: {why}")
                reader = self._reader_factory(path)
                self._readers[seq] = reader
                while len(self._readers) > READER_CACHE:
                    self._readers.popitem(last=False)[1].close()
            else:
                self._readers.move_to_end(seq)
            return reader.bundle(index)

    # -- segments ---------------------------------------------------------------------------
    @property
    def log_stopped(self) -> bool:
        """The ack log takes no more records (closed, or stopped by a failed or interrupted write)."""
        return self._log.stopped

    def on_segment_finalized(self, info: Any) -> None:
        """Finalize listener: the segment is durable; make it deliverable and wake subscribers."""
        ref = SegmentRef(info.seq, info.bundle_count, info.path)
        with self._lock:
            if ref.seq in self.catalog:
                return
            if ref.seq <= self.catalog.max_seen:
                raise QuiverError(
                    f"segment sequence {ref.seq} was already used (highest seen {self.catalog.max_seen}); "
                    "reusing it would hide new data from subscribers"
                )
            with self._changing():
                self._paths[ref.seq] = ref.path
                self._add_segment_locked(ref)
            self._cond.notify_all()
        if ref.bundle_count == 0:
            self._after_progress([ref.seq])

    def _add_segment_locked(self, ref: SegmentRef) -> None:
        self.catalog.add(ref.seq, ref.bundle_count)
        self._append(log.encode_segment(ref.seq, ref.bundle_count))  # durable with the next commit
        if ref.bundle_count == 0:
            for sub in self._by_id.values():
                if ref.seq > sub.mark:
                    sub.done.add(ref.seq)
                    sub.advance(self.catalog)

    def _processed_locked(self, seq: int) -> bool:
        pinning = [s for s in self._by_id.values() if not s.orphaned]
        return bool(pinning) and all(s.segment_resolved(seq) for s in pinning)

    def processed(self, seq: int) -> bool:
        """Every non-orphaned subscriber resolved every bundle of `seq` (and there is at least one)."""
        with self._lock:
            return seq in self.catalog and self._processed_locked(seq)

    def drop_segment(self, seq: int) -> dict[str, int]:
        """Durably record `dropped` for every outstanding (seq, bundle, subscriber) before a deletion.

        Returns bundles dropped per subscriber (empty when nobody was waiting for the segment).
        """
        with self._lock:
            self._check()
            with self._changing():
                dropped = self._drop_locked(seq, self._wall())
        self._log.commit()
        return dropped

    def _drop_locked(self, seq: int, now_ns: int) -> dict[str, int]:
        dropped: dict[str, int] = {}
        for sub in self._by_id.values():
            missing = sub.drop_rest(seq, self.catalog)
            if not missing:
                continue
            self._append(log.encode_outcomes(sub.sub_id, seq, missing, Outcome.DROPPED, now_ns))
            sub.dropped_total += len(missing)
            dropped[sub.name] = len(missing)
        if dropped:
            self.counters["segment_dropped_total"] += 1
        return dropped

    def forget_segment(self, seq: int, reason: str = "") -> None:
        """The segment file was deleted (retention's `reason`): stop tracking it and close its reader."""
        with self._lock, self._changing():
            self._forget_locked(seq)
            if reason:
                self._deleted_why[seq] = reason
                while len(self._deleted_why) > DELETED_REASONS_KEPT:
                    self._deleted_why.pop(next(iter(self._deleted_why)))
            self._cond.notify_all()

    def _forget_locked(self, seq: int) -> None:
        self.catalog.remove(seq)
        self._paths.pop(seq, None)
        for sub in self._by_id.values():
            sub.forget_segment(seq, self.catalog)
        with self._readers_lock:
            reader = self._readers.pop(seq, None)
        if reader is not None:
            reader.close()

    def wait_for_progress(self, timeout: float) -> None:
        """Block until an ack, a drop or a deletion happens, or `timeout` seconds pass (backpressure)."""
        with self._lock:
            self._progress_waiters += 1
            try:
                self._cond.wait(timeout)
            finally:
                self._progress_waiters -= 1

    def notify_progress(self) -> None:
        with self._lock:
            self._cond.notify_all()

    # -- orphans ----------------------------------------------------------------------------
    def check_orphans(self) -> list[str]:
        """Mark subscribers absent longer than `orphan_timeout` as orphaned (logged durably).

        An orphan stops pinning segments: retention deletes what only it was waiting for and
        records `dropped` outcomes for it first, so when it returns it resumes after them.
        """
        timeout = self.config.orphan_timeout
        if timeout is None:
            return []
        limit = int(timeout * 1e9)
        newly: list[str] = []
        with self._lock:
            if self._closed:
                return []
            now = self._wall()
            with self._changing():
                for sub in self._by_id.values():
                    if sub.orphaned or self._waiting.get(sub.name, 0) or now - sub.last_seen_ns <= limit:
                        continue
                    sub.orphaned = True
                    self._append(log.encode_orphaned(sub.sub_id, now))
                    self.counters["orphaned_total"] += 1
                    newly.append(sub.name)
        if newly:
            self._log.commit()
            self._after_progress(list(self.catalog))
        return newly

    # -- checkpoints ------------------------------------------------------------------------
    def _append(self, data: bytes) -> int:
        self._depth += 1
        return self._log.append(data)

    def maybe_checkpoint(self) -> bool:
        if (
            self._depth >= self.config.ack_log_checkpoint_interval
            or self._log.size >= self.config.ack_log_rotation_size
        ):
            return self.checkpoint()
        return False

    def checkpoint(self) -> bool:
        """Snapshot every subscriber into ack.checkpoint and rotate the log (bounds replay time);
        never from a torn state (`_changing`): the log it would replace is then the only truth.
        Nor after a signal handler's exception cut a write of the log short (`AckLog.cut_short`):
        the reopen replays the log, and a close() made by a second handler does not raise the
        first one's cut again in place of its exit."""
        with self._lock:
            if self._closed or self._depth == 0 or self._torn is not None:
                return False
            if not self._log.checkpoint(
                lambda gen, off: log.encode_checkpoint(
                    gen, off, self._wall(), self.catalog, self._by_id.values(), self._next_id
                )
            ):
                return False
            self._depth = 0
            self.counters["checkpoints_total"] += 1
            return True

    # -- observation ------------------------------------------------------------------------
    def describe(self) -> list[dict[str, Any]]:
        """Per subscriber: mark, gap set, lag, in-flight and drop counts (for stats and the CLI)."""
        with self._lock:
            out = []
            for sub in sorted(self._by_id.values(), key=lambda s: s.name):
                lag_b, lag_s = sub.lag(self.catalog)
                out.append(
                    {
                        "name": sub.name,
                        "id": sub.sub_id,
                        "mark": sub.mark,
                        "orphaned": sub.orphaned,
                        "gap_set_size": sub.gap_set_size(),
                        "gaps": sub.gap_keys()[:16],
                        "done_segments": sorted(sub.done),
                        "lag_bundles": lag_b,
                        "lag_segments": lag_s,
                        "in_flight": len(sub.in_flight),
                        "dropped_bundles": sub.dropped_total,
                        "last_seen_ns": sub.last_seen_ns,
                    }
                )
            return out

    def metrics(self) -> dict[str, Any]:
        subs = self.describe()
        out: dict[str, Any] = {
            "quiver.ack_log.depth": self._depth,
            "quiver.ack_log.bytes": self._log.size,
            "quiver.ack_log.commits_total": self._log.commits,
            "quiver.ack_log.checkpoints_total": self.counters["checkpoints_total"],
            "quiver.subscriber.count": len(subs),
            "quiver.subscriber.orphaned_total": self.counters["orphaned_total"],
            "quiver.segment.dropped_total": self.counters["segment_dropped_total"],
            "quiver.subscriber.dropped_bundles_total": sum(s["dropped_bundles"] for s in subs),
        }
        for s in subs:
            label = f'{{subscriber="{s["name"]}"}}'
            out[f"quiver.subscriber.dropped_bundles_total{label}"] = s["dropped_bundles"]
            out[f"quiver.subscriber.gap_set_size{label}"] = s["gap_set_size"]
            out[f"quiver.subscriber.lag_bundles{label}"] = s["lag_bundles"]
            out[f"quiver.subscriber.lag_segments{label}"] = s["lag_segments"]
            out[f"quiver.subscriber.in_flight{label}"] = s["in_flight"]
            out[f"quiver.subscriber.high_water_mark{label}"] = s["mark"]
        return out

    # -- lifecycle --------------------------------------------------------------------------
    def _check(self) -> None:
        if self.forked_away is not None:  # the store's message (engine.QuiverStore._left_in_parent)
            raise QuiverError(self.forked_away)
        if self._closed:
            raise StoreClosedError("the store is closed; subscriptions ended")
        if self._torn is not None:
            cause = type(self._torn).__name__ + (f": {self._torn}" if str(self._torn) else "")
            raise QuiverError(
                f"a change of the subscriber state was cut short ({cause}), so the state in memory may be torn; "
                "the outcomes recorded before it are in the ack log: reopen the store"
            )

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Wrap a change of the state a checkpoint records (holding the lock): an exception that
        leaves it marks the state torn, so it is never checkpointed or used again."""
        try:
            yield
        except BaseException as exc:
            if self._torn is None:
                self._torn = exc
            raise

    def abandon(self) -> None:
        """Stop as a crash would: no flush of buffered records, no checkpoint (test support)."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()
        self._log.abandon()

    def close(self) -> None:
        """Flush every outcome (fdatasync), write a final checkpoint, wake blocked subscribers."""
        if self._closed:
            return
        try:
            self.checkpoint()
        except BaseException as leaving:  # (a signal handler's exit, Ctrl-C): closing the rest must not replace it
            run_noting_failure(self._shut, leaving, "then closing the ack log failed")
            raise
        self._shut()

    def _shut(self) -> None:
        """Closed either way: blocked subscribers wake, readers and the log are closed."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()
        with self._readers_lock:
            for reader in self._readers.values():
                reader.close()
            self._readers.clear()
        self._log.close()


def read_offline(directory: str, *, fs: FileSystem = DEFAULT_FS) -> RebuiltState:
    """Rebuild subscriber state without modifying any file (for `quiver inspect`)."""
    found = log.read_untouched(directory, fs) if fs.exists(directory) else None
    checkpoint, records = found if found is not None else (None, [])
    return rebuild(checkpoint, records, os.path.join(directory, log.CHECKPOINT_NAME))
