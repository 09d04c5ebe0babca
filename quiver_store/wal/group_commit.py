"""Group commit: concurrent and back-to-back appends share one write and one fdatasync.

Leader/follower: a caller that finds no commit in progress becomes the leader, takes every queued
frame, writes them with one write(2) and (durability "fsync") one fdatasync, hands them to
`on_commit` in log order, then wakes the followers whose frames it covered. Followers queued
during the leader's fdatasync form the next group. No thread hand-off on the single-producer path.

A *direct* request (`append_direct`) takes a sequence number and a place in log order, and its
bundle goes into a segment file of its own (see QuiverStore); `on_commit` hands it on between the
entries logged before and after it. The log gets only a slot-less marker frame for it, so that
every sequence number has a frame and recovery can tell entries that were lost from ones that were
never logged (wal/replay.py). A group of markers alone is not synced: a marker matters only
when a later frame follows it, and that frame's fdatasync makes it durable too.

Under durability "fsync" a group opens with a *synced* frame that names the sequences earlier
fdatasyncs made durable. A power loss damages or zeroes only frames never synced, which were never
acknowledged; so recovery counts damage to frames a later synced frame vouches for as a loss of
acknowledged bundles, and other damage as what it cannot judge (absent.DAMAGED).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..config import WalConfig
from ..errors import QuiverError
from .format import (
    ENTRY_DIRECT,
    ENTRY_HEAD_LEN,
    ENTRY_RECORD_BUNDLE,
    FRAME_OVERHEAD,
    SYNCED_ENTRY_LEN,
    entry_parts,
    synced_parts,
)
from .writer import Position, WalWriter

SYNCED_FRAME_LEN = FRAME_OVERHEAD + SYNCED_ENTRY_LEN
NONE_BUFFER_BYTES = 1 << 20  # durability "none": write once this much is buffered
GATHER_WAIT = 0.002  # seconds a new leader waits, at most, for producers still serializing


class Pending:
    """One appended entry waiting for its group to be committed."""

    __slots__ = ("committed", "direct", "error", "frame", "payload", "position", "sequence", "size", "ts")

    def __init__(self, sequence: int, ts: int, frame: list, size: int, payload: Any, direct: bool = False) -> None:
        self.sequence = sequence
        self.ts = ts
        self.frame = frame  # buffers of the whole frame, for one gather write
        self.size = size  # bytes of the frame
        self.payload = payload
        self.direct = direct  # a direct request: the frame is its marker
        self.position: Position | None = None
        self.committed = False  # written (and synced) and handed to on_commit
        self.error: BaseException | None = None


class GroupCommitter:
    def __init__(
        self,
        writer: WalWriter,
        config: WalConfig,
        next_sequence: int,
        on_commit: Callable[[list[Pending]], None],
        before_sync: Callable[[], None] | None = None,
    ) -> None:
        self.writer = writer
        self.before_sync = before_sync  # run by the leader between its write and its fdatasync
        self.durability = config.durability
        self.flush_interval = config.flush_interval
        self.on_commit = on_commit
        # `with self._lock`, not `with self._cond`: a Condition's Python-level __exit__ can be cut
        # short by a signal handler's exception, leaving the lock held (engine.py says more). An
        # RLock, though never taken twice, for its exact `_is_owned()`: see `_lead`.
        self._lock = lock = threading.RLock()
        self._cond = threading.Condition(lock)
        self._gather = threading.Condition(lock)  # a new leader waits here for producers mid-encode
        self._arriving = 0
        self._gathering = False  # a leader waits on _gather (skip notify calls when nobody does)
        self._waiters = 0  # threads waiting on _cond for a commit to finish
        self._queue: list[Pending] = []
        self._queued_bytes = 0
        self._leader = False
        self._leader_thread = 0  # who leads: a thread never waits for its own (stale) leadership
        self._leading: list[Pending] = []  # the leader's batch, while it commits
        self._next_seq = next_sequence
        # What the synced frames say (format.ENTRY_SYNCED): the frames of sequences _synced_from..
        # _synced_to, all written by this process, were fdatasynced (None: none yet). Frames
        # replayed from earlier processes are not vouched for.
        self._synced_from = next_sequence
        self._synced_to: int | None = None
        self._failed: BaseException | None = None
        self.stats = {"commits": 0, "fsyncs": 0, "bytes_written": 0, "entries": 0, "max_group": 0}
        self.group_sizes: dict[int, int] = {}

    @property
    def next_sequence(self) -> int:
        return self._next_seq

    def arriving(self) -> None:
        """Announce an append that is still being serialized, so a new leader waits for it."""
        with self._lock:
            self._arriving += 1

    def cancel_arrival(self) -> None:
        with self._lock:
            self._arriving -= 1
            if self._gathering and not self._arriving:  # it waits for all of them: wake it once
                self._gather.notify_all()

    def append(self, ts: int, bitmap: int, parts: list, parts_len: int, payload: Any, *, announced: bool = False) -> Pending:
        """Queue one entry; return once it is durable under the configured policy."""
        with self._lock:
            seq = self._take_sequence(announced)
            frame = entry_parts(ENTRY_RECORD_BUNDLE, ts, seq, bitmap, parts, parts_len)
            req = Pending(seq, ts, frame, parts_len + FRAME_OVERHEAD + ENTRY_HEAD_LEN, payload)
            self._queue.append(req)
            self._queued_bytes += req.size
            if self.durability == "none":
                if self._queued_bytes >= NONE_BUFFER_BYTES and not self._leader:
                    self._lead(sync=False)
                return req
            self._await(req)
        if req.error is not None:
            raise req.error
        return req

    def append_direct(self, ts: int, payload: Any) -> Pending:
        """Give a bundle that bypasses the log its sequence number and a marker frame; return once
        every entry before it was committed and `on_commit` has handed it on, in order."""
        if self.durability == "none":
            raise QuiverError("a direct (WAL-bypassing) bundle needs wal.durability 'fsync' or 'os'")
        with self._lock:
            seq = self._take_sequence(announced=False)
            req = Pending(seq, ts, entry_parts(ENTRY_DIRECT, ts, seq, 0, [], 0), FRAME_OVERHEAD + ENTRY_HEAD_LEN, payload, direct=True)
            self._queue.append(req)
            self._await(req)
        if req.error is not None:
            raise req.error
        return req

    def _take_sequence(self, announced: bool) -> int:
        """Called holding the lock: the next sequence number (after the producer's announcement)."""
        if announced:
            self._arriving -= 1
            if self._gathering and not self._arriving:  # it waits for all of them: wake it once
                self._gather.notify_all()
        if self._failed is not None:
            raise QuiverError(f"the WAL stopped accepting writes after {_stop_reason(self._failed)}; close and reopen the store")
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _await(self, req: Pending) -> None:
        """Called holding the lock: lead or follow commits until `req` is committed or failed."""
        while not req.committed and req.error is None:
            if not self._led_by_another():
                self._lead(sync=self.durability == "fsync")
            else:
                self._wait()

    def commit_buffered(self) -> None:
        """Write whatever is queued, fdatasynced under "fsync"; used by flush, close and the "none"
        timer. Nothing queued means nothing to do: under "fsync" every acknowledged entry is already
        synced, and a flush makes "os" and "none" entries durable in the segment file it fsyncs."""
        with self._lock:
            while self._led_by_another():
                self._wait()
            if self._failed is not None:
                raise QuiverError(f"the WAL stopped accepting writes after {_stop_reason(self._failed)}")
            if self._queue:
                error = self._lead(sync=self.durability == "fsync")
                if error is not None:
                    raise QuiverError(f"WAL commit failed: {error}") from error

    def _write(self, group: list[Pending], sync: bool) -> None:
        """One gather write (and fdatasync) of the group's frames; positions and counters
        (`entries` counts logged bundles, not direct markers). A synced group opens with a frame
        saying which earlier frames are synced (each synced group adds some, so it always says more
        than the one before)."""
        frames = [r.frame for r in group]
        sizes = [r.size for r in group]
        if sync and self._synced_to is not None:
            frames.insert(0, synced_parts(group[0].ts, self._synced_from, self._synced_to))
            sizes.insert(0, SYNCED_FRAME_LEN)
        positions = self.writer.append(frames, sizes, sync=sync, before_sync=self.before_sync)
        for r, p in zip(group, positions[-len(group):]):
            r.position = p
        if sync:
            self._synced_to = group[-1].sequence
        n = len(group)
        stats = self.stats
        stats["commits"] += 1
        stats["entries"] += n - sum(r.direct for r in group)
        stats["bytes_written"] += sum(sizes)
        if n > stats["max_group"]:
            stats["max_group"] = n
        self.group_sizes[n] = self.group_sizes.get(n, 0) + 1
        if sync:
            stats["fsyncs"] += 1

    def _wait(self) -> None:
        self._waiters += 1
        try:
            self._cond.wait()
        finally:
            self._waiters -= 1

    def has_buffered(self) -> bool:
        return bool(self._queue)

    def _led_by_another(self) -> bool:
        """Called holding the lock. Leadership this thread still holds is stale: an exception a signal
        handler raised (sys.exit in a SIGTERM handler) cut its commit short at some bytecode, and a
        close deferred to the end of that call must not wait for it. The entries of the cut batch
        were not acknowledged; their waiters get an error instead of waiting forever."""
        if self._leader and self._leader_thread == threading.get_ident():
            self._leader = False
            cut = QuiverError("the WAL commit of this entry was cut short by an exception a signal handler raised; it was not acknowledged")
            for r in self._leading:  # followers in the cut batch would wait for it forever
                if not r.committed and r.error is None:
                    r.error = cut
            self._leading = []
            self._cond.notify_all()
        return self._leader

    def _lead(self, sync: bool) -> BaseException | None:
        """Called holding the condition's lock; drops it around the I/O. Returns the I/O error, if any
        (the batch's requests carry it too)."""
        self._leader_thread = threading.get_ident()
        self._leader = True
        if sync:  # let producers that are serializing right now join this group (bounded wait)
            deadline = time.monotonic() + GATHER_WAIT
            self._gathering = True
            while self._arriving > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._gather.wait(left)
            self._gathering = False
        batch: list[Pending] = []
        error: BaseException | None = None
        late: BaseException | None = None  # a signal handler's exception inside the `finally` below
        try:
            self._cond.release()
            if self.flush_interval > 0 and self.durability != "none":
                time.sleep(self.flush_interval)
            with self._lock:
                batch, self._queue = self._queue, []
                self._leading = batch
                self._queued_bytes = 0
            if batch:
                self._write(batch, sync and not all(r.direct for r in batch))
                self.on_commit(batch)
                for r in batch:
                    r.committed = True
        except BaseException as exc:
            error = exc
        finally:
            # A signal handler's exception (Ctrl-C, sys.exit in a SIGTERM handler) can land just
            # before or just after the release above: take the lock back only if it went. (It
            # used to be released outside this block: an exception right after it left the
            # caller's `with` releasing an unlocked lock, and a RuntimeError replaced the Ctrl-C.)
            # Ones landing here, before the lock is back (a double Ctrl-C), must not leave without
            # it either: the first such exception waits until the commit's bookkeeping is done.
            while True:
                try:
                    if not self._lock._is_owned():  # type: ignore[attr-defined]
                        self._cond.acquire()
                    break
                except BaseException as exc:
                    late = late or exc
            self._leader = False
            self._leading = []
            if error is not None:
                self._fail_batch(batch, error)
            if self._waiters:
                self._cond.notify_all()
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt or SystemExit from a signal handler: the caller's own
        if late is not None:
            raise late
        return error

    def _fail_batch(self, batch: list[Pending], error: BaseException) -> None:
        """Called holding the lock: give every request of a failed commit its error. Entries already
        written may or may not be synced, so the WAL takes no more writes in this process (reopening
        replays what is on disk). An exception a signal handler raised in the committing thread
        (Ctrl-C's KeyboardInterrupt, a handler's sys.exit) is said to be one, not an I/O failure."""
        interrupted = not isinstance(error, Exception)
        what = f"the WAL commit was interrupted by {type(error).__name__}" if interrupted else f"fdatasync of the WAL failed: {error}"
        for r in batch:
            if r.position is None and not interrupted:
                r.error = error
            elif r.position is None:
                r.error = QuiverError(f"{what} before this entry was written; it was not acknowledged")
            else:  # written, then the sync failed or was cut short: durability unknown
                r.error = QuiverError(f"{what}; this entry was not acknowledged")
        if self.writer.broken or any(r.position is not None for r in batch):
            self._failed = error
            for r in self._queue:
                r.error = QuiverError(f"the WAL stopped accepting writes after {_stop_reason(error)}")
            self._queue = []


def _stop_reason(error: BaseException) -> str:
    """What stopped the WAL, for the errors of later calls."""
    return f"an I/O failure ({error})" if isinstance(error, Exception) else f"{type(error).__name__} during a commit"
