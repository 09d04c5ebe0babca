"""QuiverStore: one store directory, one writer. WAL first, then open segment, then segment files.

Threads: the caller's `ingest` serializes its bundle and group-commits it to the WAL (the caller
that finds no commit in progress leads the write + fdatasync); committed entries go, in log order,
to the *applier* thread, which appends them to the open segment and seals it on size, stream count
or the `max_open_duration` timer; sealed segments go to the *finalizer* thread, which writes the
segment file, then advances the WAL truncation point past it and tells listeners. A failed
finalize keeps the sealed segment (and its WAL range) and retries with backoff.

A bundle of `StoreConfig.direct_bundle_size` bytes or more (durability "fsync") is not logged: it takes its
place in log order from the group committer, the applier seals the open segment in front of it and
hands it to the finalizer as a segment of its own, and `ingest` returns once that file is durable.
Its bytes are written once instead of twice (WAL, then segment). Because the finalizer writes in
order, every entry logged before it is in a durable segment first, so replay, which skips WAL
entries up to the newest segment's last sequence, never skips an unsegmented one.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import absent, exit_guard, fork_guard, progress, progress_ledger, seq_floor
from .bundle import RecordBundle
from .config import StoreConfig
from .errors import (
    ConfigError,
    CorruptionError,
    NotAStoreError,
    QuiverError,
    StoreClosedError,
    StoreFullError,
    disk_error,
)
from .fs import DEFAULT_FS, FileSystem
from .handoff import Handoff
from .layout import DEFAULT_LAYOUT, Layout
from .reentry import CallDepth, counted, run_noting_failure
from .segment.accumulator import OpenSegment
from .segment.format import MAX_SEGMENT_BUNDLES
from .segment.info import SegmentInfo
from .segment.writer import write_segment
from .subscriber import ack_log
from .subscriber.hub import SubscriberHub
from .subscriber.subscription import Subscription
from .wal import replay
from .wal.bundle_codec import BundleEncoder, Checked, decode_bundle
from .wal.format import HEADER_LEN, MAX_SEQUENCE, decimal
from .wal.group_commit import GroupCommitter, Pending
from .wal.rotation import ACTIVE, chunk_name, list_chunks
from .wal.writer import Position, WalWriter, probe_punch_hole

log = logging.getLogger("quiver_store")

LOCK_NAME = "LOCK"
SEGMENT_SUFFIX = ".qseg"
SEGMENT_QUARANTINE = "quarantine"  # segments/quarantine/: segment files the store could not read at open
META_WAL_FIRST = "quiver.wal.first_sequence"
META_WAL_LAST = "quiver.wal.last_sequence"
META_LAYOUT = "quiver.layout"
META_REASON = "quiver.finalize_reason"
META_SIGNALS = "quiver.signals"
EXIT_JOIN = 10.0  # seconds to wait for each store thread at interpreter exit (a segment write finishing)
RETRY_BACKOFF = (0.05, 5.0)  # first and largest delay between finalize attempts, seconds
FINALIZE_POLL = 0.2  # seconds between checks for a failing finalizer while flush/close wait
APPLY_LINGER = 0.005  # seconds a busy applier waits for the next fdatasync's wake-up before polling
APPLY_BATCH = 4  # committed entries that make the next fdatasync wake a busy applier
FLOOR_RESERVE = 16  # segment numbers reserved per floor write; close gives back the unused ones


@dataclass(frozen=True)
class BundleReceipt:
    """What `ingest` promises: the WAL sequence and position of the bundle's entry.

    `wal_generation`/`wal_offset` are None under durability "none" (the entry is still buffered)
    and for a direct bundle, which is instead already in segment `segment_sequence`.
    """

    sequence: int
    wal_generation: int | None
    wal_offset: int | None
    ingestion_time_ns: int
    segment_sequence: int | None = None


@dataclass
class _Sealed:
    """A segment handed to the finalizer (segment None: a barrier that only resolves waiters)."""

    segment: OpenSegment | None
    first_sequence: int = -1
    last_sequence: int = -1
    end: Position | None = None  # WAL position just after its last entry
    reason: str = ""
    waiters: list[Handoff] = field(default_factory=list)
    direct: bool = False  # one WAL-bypassing bundle: its producer waits on `waiters` for the file


T = TypeVar("T")
LOCK_PATIENCE = 0.2  # seconds: the read-only tools' lock probe (held_open.py: quiver, adaptive-arrow decode) holds a shared flock for microseconds


def _patiently(take_lock: Callable[[], T]) -> T:
    """`take_lock()`, retried for LOCK_PATIENCE while it raises BlockingIOError: a lock held that
    briefly (the probe) must not pass for a second writer."""
    deadline = time.monotonic() + LOCK_PATIENCE
    while True:
        try:
            return take_lock()
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def segment_path(segments_dir: str, seq: int) -> str:
    return os.path.join(segments_dir, f"{seq:016d}{SEGMENT_SUFFIX}")


def list_segment_seqs(fs: FileSystem, segments_dir: str) -> list[int]:
    out = []
    for name in fs.listdir(segments_dir):
        seq = decimal(name[: -len(SEGMENT_SUFFIX)]) if name.endswith(SEGMENT_SUFFIX) else None
        if seq is not None:
            out.append(seq)
    return sorted(out)


def newest_covered_sequence(fs: FileSystem, segments_dir: str, info_of: Callable[[int], SegmentInfo] | None = None) -> int:
    """Highest WAL sequence recorded by the newest readable segment (-1 if none).

    Replay skips WAL entries at or below it: they are already in a durable segment, even when a
    crash came between the segment's rename and the sidecar update.
    """
    from .segment.reader import SegmentReader

    def read_info(seq: int) -> SegmentInfo:
        with SegmentReader.open(segment_path(segments_dir, seq), fs=fs) as reader:
            return reader.info

    for seq in reversed(list_segment_seqs(fs, segments_dir)):
        try:
            info = (info_of or read_info)(seq)
        except QuiverError as exc:
            log.warning("segment %d unreadable while looking for the WAL floor: %s", seq, exc)
            continue
        value = decimal(info.metadata.get(META_WAL_LAST, ""))
        if value is not None:
            return value
    return -1


def _check_store_path(fs: FileSystem, path: str, wal_dir: str, segments_dir: str) -> None:
    """Refuse, before anything is created, a store path that is a file or holds a file where the
    store keeps a directory, a path inside another store's wal/ or segments/ (a likely slip for
    the store itself, which would otherwise leave a second store nested in the first), and a
    directory that holds other things and is not a store (a slip for a new folder: the store would
    scatter wal/, segments/, LOCK and ack.log among someone else's files)."""
    norm = os.path.normpath(path)
    name, parent = os.path.basename(norm), os.path.dirname(norm) or "."
    if name in ("wal", "segments") and all(fs.exists(os.path.join(parent, n)) for n in (LOCK_NAME, "wal", "segments")):
        raise NotAStoreError(f"{path} is the {name}/ directory of the store {parent}, not a store: open {parent}")
    for d in (path, wal_dir, segments_dir):
        if not fs.exists(d):
            continue
        try:
            fs.listdir(d)
        except NotADirectoryError:
            if d == path:
                raise NotAStoreError(f"store path {path} is a file, not a store directory: pass a directory "
                                     "(QuiverStore.open creates it when missing)") from None
            raise NotAStoreError(f"{d} is a file where a store keeps its {os.path.basename(d)}/ directory: "
                                 f"{path} is not a Quiver store") from None
    _refuse_foreign_directory(fs, path)


FOREIGN_ALLOWED = frozenset({"lost+found"})
"""Entries a new store's directory may already hold: ext4 puts lost+found at the root of a volume,
so a disk mounted for the store alone is not a foreign directory."""


def _refuse_foreign_directory(fs: FileSystem, path: str) -> None:
    """NotAStoreError when `path` holds entries and is not a store (store_dir.store_problem)."""
    from .store_dir import store_problem  # store_dir reads this module's file names

    if not fs.exists(path):
        return
    entries = sorted(set(fs.listdir(path)) - FOREIGN_ALLOWED)
    if not entries:
        return
    problem = store_problem(path)
    if problem is None:
        return
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    raise NotAStoreError(
        f"{path} {problem}, and it holds other entries ({shown}): QuiverStore.open creates a store only "
        f"in a new or empty directory; pass one, such as {os.path.join(path, 'quiver')}"
    )


def _store_path(path: object) -> str:
    """The store directory as a str, or NotAStoreError naming what was passed instead."""
    try:
        name = os.fsdecode(path)  # type: ignore[arg-type]
    except TypeError:
        raise NotAStoreError(
            f"store path must be a str, bytes or os.PathLike naming a directory, got {type(path).__name__} {path!r}"
        ) from None
    if not name:
        raise NotAStoreError("store path is empty: pass the store's directory (QuiverStore.open creates it when missing)")
    if "\0" in name:
        raise NotAStoreError(f"store path {name!r} contains a NUL character")
    return name


def core_path(root: str, core: int) -> str:
    """Directory of core `core`'s store under a shared root."""
    if isinstance(core, bool) or not isinstance(core, int) or core < 0:
        raise ConfigError(f"core must be an int >= 0, got {core!r}")
    return os.path.join(_store_path(root), f"core_{core}")


def core_numbers(root: str | os.PathLike[str]) -> list[int]:
    """The N of every per-core store directory `core_N` under `root`, ascending (none when `root`
    is not a directory)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return []
    return sorted(int(n[len("core_"):]) for n in os.listdir(root)
                  if re.fullmatch(r"core_\d+", n) and os.path.isdir(os.path.join(root, n)))


def open_cores(
    root: str, cores: int | None = None, config: StoreConfig | None = None, *, layout: Layout | None = None, fs: FileSystem | None = None
) -> list[QuiverStore]:
    """One independent store per core under `root` (`core_0/`, `core_1/`, ...).

    Each store has its own WAL, segments and lock; `config.cores` (or `cores`) divides the
    retention size cap evenly between them (seed: Phase 1 per-core static cap).
    """
    config = config or StoreConfig()
    n = cores if cores is not None else config.cores
    if n != config.cores:
        config = StoreConfig(config.segment, config.wal, config.retention, config.subscribers, cores=n)
    stores: list[QuiverStore] = []
    try:
        for core in range(n):
            stores.append(QuiverStore.open(core_path(root, core), config, layout=layout, fs=fs))
    except BaseException:
        for s in stores:
            s.close()
        raise
    return stores


class QuiverStore:
    """A durable Arrow segment store in one directory (see the module docstring for the flow)."""

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, path: str | bytes | os.PathLike[str] | os.PathLike[bytes], config: StoreConfig | None = None, *,
        layout: Layout | None = None, fs: FileSystem | None = None
    ) -> QuiverStore:
        """Open the store at `path` (str, bytes or os.PathLike), replaying its WAL, or create one
        there when `path` is missing or an empty directory (NotAStoreError for a directory that
        holds other things). Context manager."""
        path = _store_path(path)
        if config is not None and not isinstance(config, StoreConfig):
            raise ConfigError(f"config must be a StoreConfig, got {type(config).__name__}")
        if layout is not None and not isinstance(layout, Layout):
            raise ConfigError(f"layout must be a quiver_store.Layout, got {type(layout).__name__}")
        store = cls.__new__(cls)
        try:
            store._init(path, config or StoreConfig(), layout or DEFAULT_LAYOUT, fs or DEFAULT_FS)
        except OSError as exc:  # a full disk, a read-only file system, a directory where a file belongs
            raise disk_error(
                exc, "opening the store", exc.filename or path, "the store is not open; what it holds is kept, and a later open retries"
            ) from exc
        return store

    def _init(self, path: str, config: StoreConfig, layout: Layout, fs: FileSystem) -> None:
        t0 = time.perf_counter()
        self.path = path
        self.config = config
        self.layout = layout
        self.fs = fs
        self.wal_dir = os.path.join(path, "wal")
        self.segments_dir = os.path.join(path, "segments")
        self._closed = True
        self._forked_away: str | None = None  # set in a child process forked after open (fork_guard.py)
        self._calls = CallDepth()  # close() from a signal handler inside a call waits for it (reentry.py)
        self._lock_fd = -1
        self._dir_lock_fd = -1
        self.stats_counters: dict[str, Any] = collections.defaultdict(int)
        for key in ("replayed_entries", "corrupt_entries", "quarantined_bytes", "torn_tail_bytes", "segments_written",
                    "segment_bytes_written", "finalize_errors", "wal_entries_covered", "sidecar_fallbacks", "direct_bundles"):
            self.stats_counters[key] = 0
        self.corruption_reports: list[dict[str, Any]] = []
        _check_store_path(fs, path, self.wal_dir, self.segments_dir)
        for d in (path, self.wal_dir, self.segments_dir):
            try:
                fs.makedirs(d)
            except NotADirectoryError:
                raise NotAStoreError(f"store path {path} lies below a file, not a directory") from None
        self._acquire_lock()
        try:
            self._recover()
        except BaseException:
            self._abort_open()
            raise
        # -- subscribers, ack log, retention (quiver_store/subscriber/hub.py) --
        try:
            self._hub = SubscriberHub.open(self, path, config, fs=fs)
        except BaseException:
            self._shutdown()
            raise
        self._hub.registry.calls = self._calls
        self._hub.start(f"quiver-maintenance[{path}]")
        # -- end subscribers --
        fork_guard.track(self)
        exit_guard.track(self)
        self.stats_counters["open_seconds"] = time.perf_counter() - t0

    def _acquire_lock(self) -> None:
        """One writer per store: an exclusive flock on the store directory (which deleting the LOCK
        file cannot undo) and on the LOCK file, which names the holder's process id."""
        lock_path = os.path.join(self.path, LOCK_NAME)
        already_open = QuiverError(
            f"store {self.path} is already open by another writer (lock file {lock_path}); "
            "a store has a single writer: close the other QuiverStore or process first"
        )
        try:
            self._dir_lock_fd = _patiently(lambda: self.fs.lock_directory(self.path))
        except BlockingIOError:
            raise already_open from None
        try:
            fd = self.fs.open(lock_path, os.O_RDWR | os.O_CREAT)
            try:
                _patiently(lambda: self.fs.lock_exclusive(fd))  # (a writer of an older version locks only this file)
            except BlockingIOError:
                self.fs.close(fd)
                raise already_open from None
            try:
                self.fs.truncate(fd, 0)
                self.fs.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except BaseException:
                self.fs.unlock(fd)
                self.fs.close(fd)
                raise
        except BaseException:
            self._release_lock()
            raise
        self._lock_fd = fd

    def _abort_open(self) -> None:
        """Undo a failed open: stop what recovery started and release the lock, so the same
        process can open the store again once the cause is fixed."""
        if getattr(self, "_finalizer", None) is not None:
            self._shutdown()  # joins the threads, closes the WAL, releases the lock
            return
        wal = getattr(self, "_wal", None)
        if wal is not None:
            wal.close()
        self._release_lock()

    def _release_lock(self) -> None:
        # Each descriptor is taken out of the store before it is let go: a signal handler's exception
        # landing after the close must not leave its number for a second close (EBADF, or another
        # file's descriptor by then). Closing it releases its lock too, should the unlock be cut.
        if self._lock_fd >= 0:
            fd, self._lock_fd = self._lock_fd, -1
            try:
                self.fs.unlock(fd)
            finally:
                self.fs.close(fd)
        if self._dir_lock_fd >= 0:
            fd, self._dir_lock_fd = self._dir_lock_fd, -1
            self.fs.unlock_directory(fd)

    def _recover(self) -> None:
        fs, cfg = self.fs, self.config
        # Segment files: names only (metadata is read lazily), plus leftovers of interrupted writes.
        leftovers = [n for n in fs.listdir(self.segments_dir) if n.endswith(SEGMENT_SUFFIX + ".tmp") or n in (seq_floor.NAME + ".tmp", progress_ledger.NAME + ".tmp")]
        for name in leftovers:
            fs.unlink(os.path.join(self.segments_dir, name))
        if leftovers:
            fs.fsync_dir(self.segments_dir)
        self._segment_sizes: dict[int, int] = {s: fs.file_size(segment_path(self.segments_dir, s)) for s in list_segment_seqs(fs, self.segments_dir)}
        self._segment_infos: dict[int, SegmentInfo] = {}
        self._set_aside_unreadable_segments()
        floor, floor_problem = seq_floor.read(fs, self.segments_dir)
        if floor_problem:
            log.warning(floor_problem)
        highest = max(self._segment_sizes, default=-1)
        # The ack log remembers segment numbers even when segments/ (and next.seq in it) is gone.
        registered = ack_log.highest_registered_segment(self.path, fs)
        if registered >= 0 and not fs.exists(os.path.join(self.segments_dir, seq_floor.NAME)):
            self.record_corruption(
                CorruptionError(
                    f"no {seq_floor.NAME} although the ack log registered segments up to {registered}: the "
                    "directory was removed or replaced, and the segments it held are lost",
                    path=self.segments_dir,
                ),
                f"segment numbers continue after {registered}",
                source="segments",
            )
        gone = ack_log.missing_log(self.path, fs)
        if gone is not None:
            self.record_corruption(
                CorruptionError(gone, path=os.path.join(self.path, ack_log.LOG_NAME)),
                "started a new ack log; subscribers resume from what is left (at least once: acked bundles may come again)",
                source="ack log",
            )
        self._next_segment_seq = max(floor.next_segment, highest + 1, registered + 1)
        self._floor_written = floor.next_segment
        self._floor_covered = floor.wal_covered
        self._floor_lock = threading.Lock()  # the finalizer and retention both write the floor
        covered = max(floor.wal_covered - 1, newest_covered_sequence(fs, self.segments_dir, self._segment_info))
        self._wal_covered = covered
        # WAL: plan, act, then build the writer over what is left.
        plan = replay.plan_recovery(fs, self.wal_dir, self.layout.cfg_hash, cfg.wal.recovery, covered, cfg.wal.durability)
        replay.apply_plan(fs, plan)
        self._record_plan(plan)
        # WAL sequences no segment will hold, for the next segment's metadata (absent.py); the
        # applier and finalizer add direct bundles that fail, under self._lock.
        self._absent: list[absent.Range] = list(plan.absent)
        chunks = {g: fs.file_size(os.path.join(self.wal_dir, chunk_name(g))) for g in list_chunks(fs, self.wal_dir)}
        active = os.path.join(self.wal_dir, ACTIVE)
        active_file_size = fs.file_size(active) if fs.exists(active) else 0
        active_size = active_file_size if plan.active_end is None else plan.active_end  # before its zero tail
        active_gen = max([plan.active_generation] + [g + 1 for g in chunks])
        point = plan.sidecar_reset or (plan.sidecar_point if plan.sidecar_problem is None else None)
        self._wal = WalWriter(
            fs,
            self.wal_dir,
            cfg.wal,
            self.layout.cfg_hash,
            active_generation=active_gen,
            active_size=active_size if active_size >= HEADER_LEN else 0,
            chunks=chunks,
            active_file_size=active_file_size,
            truncate_point=point,
            punch_supported=probe_punch_hole(fs, self.wal_dir),
            backpressure_timeout=cfg.retention.backpressure_timeout,
        )
        self._wal.on_full = lambda reason: self._request_seal(f"WAL cap: {reason}")
        next_wal_seq = max(plan.last_sequence, covered) + 1
        self._direct_size = cfg.direct_bundle_size
        self._segment_codec = cfg.segment.codec()
        self._committer = GroupCommitter(self._wal, cfg.wal, next_wal_seq, self._on_commit, before_sync=self._wake_applier)
        self._encoder = BundleEncoder(self.layout)
        self._listeners: list[Callable[[SegmentInfo], None]] = []
        # Producer offsets (progress.py): from bundles ingested or replayed since open, plus the
        # finalized segments' progress records and the ledger of deleted segments' offsets
        # (progress_ledger.py), read on the first committed_offset() call.
        self._progress: dict[str, int] = {}
        self._progress_lock = threading.Lock()
        self._progress_read = False
        self._ledger: dict[str, int] | None = None  # the ledger file's offsets, once read
        # Applier state. One lock, three conditions, so each wake-up reaches only the thread it is for.
        # Blocks take the RLock itself, not a Condition: Condition.__enter__/__exit__ are Python code,
        # where a signal handler's exception (sys.exit in a SIGTERM handler) can leave the lock held.
        # Wake-ups are notify_all, never notify(): an exception landing inside notify() between its
        # release of a waiter and that waiter's removal leaves a stale waiter that the next notify()
        # releases instead of the live one (wal/preallocator.py), a wake-up lost for good.
        self._lock = lock = threading.RLock()
        self._cv = threading.Condition(lock)  # progress: inbox drained (_admit), sealed queue shrank (_seal)
        self._apply_cv = threading.Condition(lock)  # the applier waits here for inbox items
        self._finalize_cv = threading.Condition(lock)  # the finalizer waits here for sealed segments
        self._applier_prompt = True  # the applier is idle: a commit must wake it at once
        self._inbox: collections.deque[Any] = collections.deque()
        self._inbox_bytes = 0
        self._inbox_limit = max(cfg.segment.target_size // 2, 4 << 20)
        self._open: OpenSegment | None = None
        self._open_first = -1
        self._open_last = -1
        self._open_end: Position | None = None
        self._open_deadline = 0.0
        # Finalizer state.
        self._sealed: collections.deque[_Sealed] = collections.deque()
        self._finalize_error: BaseException | None = None
        self._stopping = False
        self._abandoned = False
        self._halted: BaseException | None = None  # a logged bundle the open segment could not take
        self._closed = False
        self._closer: int | None = None  # the thread running close(); a concurrent close waits for it
        self._close_lock = threading.Lock()  # taken directly in blocks, as _lock is
        self._close_cv = threading.Condition(self._close_lock)
        # Ingests under way, per thread: close() refuses new ones, then waits for those of other
        # threads before it finalizes and closes the WAL (an append on a closed descriptor could land
        # in another file). Its own thread's count may be stale: a signal handler's exception can
        # interrupt the decrement.
        self._ingesting: collections.Counter[int] = collections.Counter()
        self._ingests_lock = threading.Lock()
        self._ingests_cv = threading.Condition(self._ingests_lock)
        self._closing = False
        self._applier = threading.Thread(target=self._apply_loop, name=f"quiver-applier[{self.path}]", daemon=True)
        self._finalizer = threading.Thread(target=self._finalize_loop, name=f"quiver-finalizer[{self.path}]", daemon=True)
        self._applier.start()
        self._finalizer.start()
        t = time.perf_counter()
        for entry, pos, path in plan.entries:
            try:
                bundle = decode_bundle(entry, self.layout, path)
            except QuiverError as exc:
                self._report(exc, "entry skipped: its CRC is valid but its content is not")
                continue
            self._push(("entry", entry.sequence, pos, entry.size, bundle, entry.size, None))
            self.stats_counters["replayed_entries"] += 1
            if progress.PROGRESS_SLOT in bundle.slots:
                self._note_progress(bundle)
        self._wait_applied()
        self.stats_counters["replay_seconds"] = time.perf_counter() - t

    def _set_aside_unreadable_segments(self) -> None:
        """A segment whose metadata cannot be read (cut short, a damaged footer) is moved to
        segments/quarantine/ and the store opens without it, as if it had vanished: bundles the WAL
        still holds are replayed, the others are reported and recorded as dropped for the subscribers
        that had not read them. `wal.recovery="strict"` refuses to open instead."""
        self.set_aside_segments: set[int] = set()
        for seq in sorted(self._segment_sizes):
            try:
                self._segment_info(seq)
            except CorruptionError as exc:
                if self.config.wal.recovery == "strict":
                    refused = CorruptionError(
                        f"{exc}; wal.recovery='strict' refuses to open a store with a damaged segment (the default "
                        "recovery moves it to segments/quarantine/ and opens without it)"
                    )
                    refused.path, refused.offset = exc.path, exc.offset
                    raise refused from exc
                qdir = os.path.join(self.segments_dir, SEGMENT_QUARANTINE)
                self.fs.makedirs(qdir)
                path = segment_path(self.segments_dir, seq)
                self.fs.rename(path, os.path.join(qdir, os.path.basename(path)))
                self.fs.fsync_dir(qdir)
                self.fs.fsync_dir(self.segments_dir)
                del self._segment_sizes[seq]
                self.set_aside_segments.add(seq)
                self.record_corruption(
                    exc, f"moved to segments/{SEGMENT_QUARANTINE}/; opened without it (bundles still in the WAL are replayed, "
                    "the others are dropped for subscribers that had not read them)", source="segments",
                )

    def _record_plan(self, plan: replay.RecoveryPlan) -> None:
        c = self.stats_counters
        c["wal_entries_covered"] += sum(f.covered for f in plan.files)
        c["wal_unknown_entries"] += sum(f.unknown for f in plan.files)
        c["wal_hole_bytes"] += sum(f.holes for f in plan.files)
        c["quarantined_bytes"] += plan.quarantined_bytes
        if plan.sidecar_problem:
            c["sidecar_fallbacks"] += 1
            log.warning("WAL sidecar ignored (%s): scanning from the start of the log", plan.sidecar_problem)
        if plan.torn is not None:
            c["torn_tail_bytes"] += plan.torn[2]
        for err in plan.corruptions:
            if isinstance(err, replay.WalCutError):
                action = "the sidecar points at the start of the log that is left"
            elif isinstance(err, replay.WalGapError):
                action = "every intact frame after the gap is replayed"
            elif plan.mode == "skip_corrupt":
                action = "resynchronised on the next valid frame"
            else:
                action = "stopped here; the rest moved to wal/quarantine/"
            self._report(err, action)

    def _report(self, err: QuiverError, action: str) -> None:
        self.stats_counters["corrupt_entries"] += 1
        self.record_corruption(err, action)

    def record_corruption(self, err: QuiverError, action: str, source: str = "WAL") -> None:
        """Keep `err` in `stats()["corruption_reports"]` (with what recovery did about it, and
        which part of the store it concerns) and log it: damage found while opening is never silent."""
        report = {"source": source, "path": getattr(err, "path", None), "offset": getattr(err, "offset", None),
                  "error": str(err), "action": action}
        self.corruption_reports.append(report)
        log.error("%s corruption: %s (%s)", source, err, action)

    # -- ingest ----------------------------------------------------------------------------------
    @counted
    def ingest(self, bundle: RecordBundle) -> BundleReceipt:
        """Append `bundle` to the WAL; return once durable under `wal.durability`."""
        me = threading.get_ident()
        with self._ingests_lock:
            if self._closing and not self._closed:
                raise StoreClosedError(f"store {self.path} is closing (close() called on another thread); this bundle was not stored")
            self._ingesting[me] += 1
        try:
            receipt = self._ingest(bundle)
            if progress.PROGRESS_SLOT in bundle.slots:
                self._note_progress(bundle)
            return receipt
        finally:
            with self._ingests_lock:
                self._ingesting[me] -= 1
                if not self._ingesting[me]:
                    del self._ingesting[me]  # one entry per thread ingesting now, not per thread ever
                self._ingests_cv.notify_all()

    def _ingest(self, bundle: RecordBundle) -> BundleReceipt:
        self._check_open()
        if not isinstance(bundle, RecordBundle):
            raise QuiverError(f"ingest expects a quiver_store.RecordBundle, got {type(bundle).__name__}")
        if not bundle.slots:
            raise QuiverError(
                "cannot ingest a bundle without any slot: it holds no data to store. Skip empty input before "
                "ingest (adaptive_arrow's encode_records gives such a bundle for an OTLP request without records)"
            )
        self.layout.check_slots(bundle.slots)
        if progress.PROGRESS_SLOT in bundle.slots:
            progress.check_progress(bundle.slots[progress.PROGRESS_SLOT])
        checked, epoch = self._encoder.check(bundle)  # names, schema vs fingerprint: before anything is logged
        if self._halted is not None:
            raise QuiverError(
                f"store {self.path} stopped accepting bundles: placing logged bundles into segments failed "
                f"({self._halted!r}); every bundle it acknowledged is kept in the WAL. Close and reopen "
                "the store to replay them"
            )
        if self._direct_size:
            large = self._large_size(checked)
            if large:
                return self._ingest_direct(bundle, checked, large)
        self._committer.arriving()
        try:
            bitmap, parts, parts_len, sizes = self._encoder.encode(bundle, checked)
            self._hub.before_ingest(parts_len)  # size cap (retention.py); the WAL bytes this bundle adds
            self._admit()
        except BaseException:
            self._committer.cancel_arrival()
            raise
        ts = bundle.ingestion_time_ns
        assert ts is not None
        # The applier's hints: the slots' IPC sizes it would measure again, and the check's epoch.
        req = self._committer.append(ts, bitmap, parts, parts_len, (bundle, (sizes, epoch)), announced=True)
        pos = req.position
        return BundleReceipt(req.sequence, pos.generation if pos else None, pos.offset if pos else None, ts)

    def _large_size(self, checked: Checked) -> int:
        """The Arrow bytes of the bundle as it would be logged (dictionaries compacted) if at least
        `direct_bundle_size`, else 0. The buffers' total (under 1 us for four slots) rules out most
        bundles; `nbytes` (about 20 us) then counts only the sliced ranges."""
        batches = [batch for _, _, batch, _ in checked]
        limit = self._direct_size
        if sum(b.get_total_buffer_size() for b in batches) < limit:
            return 0
        size = sum(b.nbytes for b in batches)
        return size if size >= limit else 0

    def _ingest_direct(self, bundle: RecordBundle, checked: Checked, size: int) -> BundleReceipt:
        """A large bundle: a segment file of its own, written in log order, acknowledged once durable.
        Its segment holds the batches as they would have been logged (dictionaries compacted).
        (Nothing to serialize before it queues, so it does not announce itself to a gathering leader.)"""
        self._hub.before_ingest(size)
        self._admit()
        ts = bundle.ingestion_time_ns
        assert ts is not None
        if any(batch is not bundle.slots[slot] for slot, _, batch, _ in checked):
            bundle = RecordBundle({slot: batch for slot, _, batch, _ in checked}, bundle.fingerprints, ts)
        written: Handoff[SegmentInfo] = Handoff()
        req = self._committer.append_direct(ts, (bundle, written, size))
        info: SegmentInfo = written.result()
        return BundleReceipt(req.sequence, None, None, ts, info.seq)

    def _admit(self) -> None:
        """Bound the memory of committed-but-unapplied bundles (backpressure when finalize lags)."""
        if self._inbox_bytes < self._inbox_limit:
            return
        deadline = time.monotonic() + self.config.retention.backpressure_timeout
        with self._lock:
            while self._inbox_bytes >= self._inbox_limit and not self._stopping:
                if self._calls.deferring():  # close() from a signal handler that interrupted this wait
                    raise StoreClosedError(f"store {self.path} is closing (close() called during ingest); this bundle was not stored")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreFullError(
                        f"store {self.path}: {self._inbox_bytes} bytes wait for the open segment while the finalizer "
                        f"is behind (last error: {self._finalize_error!r}); waited retention.backpressure_timeout="
                        f"{self.config.retention.backpressure_timeout}s"
                    )
                self._cv.wait(min(left, 0.5))

    def _on_commit(self, batch: list[Pending]) -> None:
        """Called by the group-commit leader in log order: queue the entries for the applier.

        A busy applier is not woken here: it would take the GIL from the producer that is about to
        return and serialize its next bundle. The next commit wakes it just before its fdatasync
        (`_wake_applier`), when the GIL is free, or the applier's APPLY_LINGER timeout does.
        """
        with self._lock:
            direct = False
            for r in batch:
                if r.direct:  # its producer waits for the applier and finalizer
                    bundle, written, n = r.payload
                    self._inbox.append(("direct", r.sequence, None, n, (bundle, written), n))
                    direct = True
                else:
                    n = r.size
                    bundle, hints = r.payload
                    self._inbox.append(("entry", r.sequence, r.position, n, bundle, n, hints))
                self._inbox_bytes += n
            if self._applier_prompt or direct:
                self._apply_cv.notify_all()

    def _wake_applier(self) -> None:
        """Group-commit hook, run right before an fdatasync: apply earlier entries while it waits.

        Waking a waiting thread costs the producer about 10 us of CPU on the project's VM (a futex
        wake), so a busy applier is woken once APPLY_BATCH entries wait (four entries take it about
        60 us, less than the fdatasync); fewer are picked up by the next such wake-up or by its
        APPLY_LINGER timeout. An idle applier is woken at once by `_on_commit`."""
        if len(self._inbox) >= APPLY_BATCH:
            with self._lock:
                self._apply_cv.notify_all()

    # -- applier -----------------------------------------------------------------------------------
    def _push(self, item: tuple) -> None:
        with self._lock:
            if self._stopping and (item[0] == "barrier" or (item[0] == "seal" and item[2] is not None)):
                # The applier may be gone already: nobody would ever answer (a flush() on another
                # thread that passed its open check just before close() stopped the threads).
                raise StoreClosedError(f"store {self.path} is closing; close() finalizes what is open "
                                       "(or keeps it in the WAL for the next open)")
            if item[0] == "entry":
                self._inbox_bytes += item[5]
            self._inbox.append(item)
            self._apply_cv.notify_all()

    def _wait_applied(self) -> None:
        fut: Handoff[None] = Handoff()
        self._push(("barrier", fut))
        fut.result()

    def _apply_loop(self) -> None:
        seg_cfg = self.config.segment
        linger = False  # the last round applied entries: more are likely, woken by the next fdatasync
        while True:
            with self._lock:
                while not self._inbox and not self._stopping:
                    timeout = None
                    if self._open is not None:
                        timeout = max(0.0, self._open_deadline - time.monotonic())
                    if self.config.wal.durability == "none" and self._committer.has_buffered():
                        timeout = min(timeout if timeout is not None else 1.0, max(self.config.wal.flush_interval, 0.05))
                    if linger:
                        timeout = APPLY_LINGER if timeout is None else min(timeout, APPLY_LINGER)
                    if timeout == 0.0:
                        break
                    self._applier_prompt = not linger
                    woken = self._apply_cv.wait(timeout)
                    self._applier_prompt = True
                    if not woken:
                        break
                if (not self._inbox and self._stopping) or self._abandoned:
                    return
                items = list(self._inbox)
                self._inbox.clear()
            linger = bool(items)
            for item in items:
                try:
                    self._apply(item, seg_cfg)
                except BaseException as exc:  # keep the thread alive; the error shows in stats
                    self.stats_counters["applier_errors"] += 1
                    self.stats_counters["last_applier_error"] = repr(exc)
                    log.exception("applier failed on %s", item[0])
                    if item[0] == "direct":  # never logged: its producer hears that it was not stored
                        item[4][1].set_exception(QuiverError(f"bundle {item[1]} was not stored: {exc!r}"))
                        self._note_unstored(item[1])
                    elif item[0] in ("entry", "seal"):
                        # Fail-stop: a later segment's WAL truncation would pass this acknowledged
                        # bundle (or the open segment's), so nothing after it is placed until a
                        # reopen replays them all from the WAL.
                        self._halted = exc
                        if item[0] == "seal" and item[2] is not None:
                            item[2].set_exception(QuiverError(f"sealing the open segment ({item[1]!r}) failed: {exc!r}"))
            if items:
                with self._lock:
                    self._inbox_bytes -= sum(i[5] for i in items if i[0] in ("entry", "direct"))
                    self._cv.notify_all()
            if self._open is not None and time.monotonic() >= self._open_deadline:
                self._seal("max_open_duration")
            if self.config.wal.durability == "none" and self._committer.has_buffered():
                try:
                    self._committer.commit_buffered()
                except QuiverError as exc:
                    log.error("buffered WAL write failed: %s", exc)

    def _apply(self, item: tuple, seg_cfg: Any) -> None:
        kind = item[0]
        if kind == "entry":
            _, seq, pos, size, bundle, _, hints = item
            if self._halted is not None:
                return  # stays in the WAL only; replayed on reopen
            if self._open is None:
                self._start_segment(seq)
            assert self._open is not None
            try:
                self._open.append(bundle, *(hints or ()))
            except QuiverError as exc:
                if self._open.is_empty:
                    raise
                log.warning("bundle %d conflicts with the open segment (%s); sealing it and starting a new one", seq, exc)
                self._seal("schema conflict")
                self._start_segment(seq)
                self._open.append(bundle, *(hints or ()))
            self._open_last = seq
            if pos is not None:
                self._open_end = Position(pos.generation, pos.offset + size)
            if self._open.serialized_size >= seg_cfg.target_size:
                self._seal("target_size")
            elif self._open.stream_count >= seg_cfg.max_stream_count:
                self._seal("max_stream_count")
            elif self._open.bundle_count >= MAX_SEGMENT_BUNDLES:  # the ack log reads no larger count
                self._seal("max_bundles")
        elif kind == "direct":
            self._apply_direct(item)
        elif kind == "seal":
            _, reason, fut = item
            self._seal(reason, fut)
        elif kind == "barrier":
            item[1].set_result(None)

    def _apply_direct(self, item: tuple) -> None:
        """Seal the open segment, then queue the direct bundle as a segment of its own behind it."""
        _, seq, _, _, (bundle, written), _ = item
        if self._halted is not None:
            written.set_exception(QuiverError(f"bundle {seq} was not stored: the store stopped placing bundles ({self._halted!r})"))
            self._note_unstored(seq)
            return
        segment = OpenSegment(self.config.segment)
        segment.append(bundle)
        if self._open is not None and not self._open.is_empty:
            self._seal("direct bundle")
        self._open = None
        with self._lock:
            self._wait_for_room()
            if self._abandoned:
                written.set_exception(StoreClosedError(f"store {self.path} stopped before bundle {seq} was stored"))
                return
            self._sealed.append(_Sealed(segment, seq, seq, None, "direct", [written], direct=True))
            self.stats_counters["direct_bundles"] += 1
            self._finalize_cv.notify_all()

    def _note_unstored(self, seq: int) -> None:
        """A direct bundle that will be in no segment (its producer got the error): recorded in the
        next segment's metadata, so that verify does not take its sequence for a lost segment."""
        with self._lock:
            self._absent.append((seq, seq, absent.UNACKNOWLEDGED))

    def _start_segment(self, seq: int) -> None:
        self._open = OpenSegment(self.config.segment)
        self._open_first = seq
        self._open_deadline = time.monotonic() + self.config.segment.max_open_duration

    def _seal(self, reason: str, fut: Handoff | None = None) -> None:
        """Hand the open segment (or, when empty, a barrier) to the finalizer."""
        with self._lock:
            if self._abandoned:
                return
            trigger = ""
            if self._open is None or self._open.is_empty:
                self._open = None
                sealed = _Sealed(None, reason=reason)
            else:
                self._wait_for_room()
                if self._abandoned:
                    return
                sealed = _Sealed(self._open, self._open_first, self._open_last, self._open_end, reason)
                trigger = f"finalize_trigger_{reason.split(':')[0].replace(' ', '_')}"
            if fut is not None:
                sealed.waiters.append(fut)
            self._sealed.append(sealed)
            if trigger:  # let go of the open segment only once it is queued: an error cannot drop it
                self._open = None
                self.stats_counters[trigger] += 1
            self._finalize_cv.notify_all()

    def _wait_for_room(self) -> None:
        """Called holding the lock. Memory bound: at most one sealed segment waits while another is
        being written."""
        while len(self._sealed) >= 2 and not self._stopping:
            self._cv.wait(0.5)

    def _request_seal(self, reason: str, fut: Handoff | None = None) -> None:
        self._push(("seal", reason, fut))

    # -- finalizer ---------------------------------------------------------------------------------
    def _finalize_loop(self) -> None:
        delay = RETRY_BACKOFF[0]
        while True:
            with self._lock:
                while not self._sealed and not self._stopping:
                    self._finalize_cv.wait()
                if not self._sealed or self._abandoned:
                    return
                sealed = self._sealed[0]
            try:
                info = self._finalize(sealed) if sealed.segment is not None else None
            except BaseException as exc:
                self._finalize_error = exc
                self.stats_counters["finalize_errors"] += 1
                self.stats_counters["last_finalize_error"] = repr(exc)
                log.error("finalize of a segment (%d bundles) failed, data kept in memory and WAL: %s", sealed.segment.bundle_count if sealed.segment else 0, exc)
                failure = self._finalize_failure(exc)
                with self._lock:
                    for queued in self._sealed:  # everyone waiting behind the failing segment hears of it
                        dropped = QuiverError(f"bundle {queued.first_sequence} was not stored: a segment write failed ({exc!r})")
                        for w in queued.waiters:
                            w.set_exception(dropped if queued.direct else failure)
                    # A direct bundle was never logged or acknowledged: drop it rather than store it
                    # after its producer was told it failed (the ones behind keep their order).
                    for queued in self._sealed:
                        if queued.direct:
                            self._note_unstored(queued.first_sequence)
                    self._sealed = collections.deque(q for q in self._sealed if not q.direct)
                    self._cv.notify_all()
                    if self._stopping:
                        return
                    self._finalize_cv.wait(delay)
                delay = min(delay * 2, RETRY_BACKOFF[1])
                continue
            delay = RETRY_BACKOFF[0]
            self._finalize_error = None
            with self._lock:
                if self._sealed and self._sealed[0] is sealed:  # _abandon or a failure may have removed it
                    self._sealed.popleft()
                self._cv.notify_all()
            for w in sealed.waiters:
                w.set_result(info)

    def _finalize(self, sealed: _Sealed) -> SegmentInfo:
        assert sealed.segment is not None
        seq = self._next_segment_seq
        if seq > MAX_SEQUENCE - FLOOR_RESERVE:  # (the data stays in memory and in the WAL)
            raise CorruptionError(
                f"segment numbers are used up: the next would be {seq}, and no number past {MAX_SEQUENCE} is "
                f"read back; a damaged {seq_floor.NAME}, segment file name or ack log record set them this high. "
                "Close the store and repair or remove that file", path=self.segments_dir,
            )
        if self._floor_written <= seq:  # reserve a run of numbers: one floor write per FLOOR_RESERVE segments
            self._write_floor(seq + FLOOR_RESERVE, self._wal_covered + 1)
        metadata = {
            META_WAL_FIRST: str(sealed.first_sequence),
            META_WAL_LAST: str(sealed.last_sequence),
            META_LAYOUT: self.layout.name,
            META_REASON: sealed.reason,
        }
        signals = self.layout.signals_of(acc.slot for acc in sealed.segment.streams if acc.rows)
        if signals:
            metadata[META_SIGNALS] = ",".join(signals)
        with self._lock:
            recorded = list(self._absent)
        if recorded:
            metadata[absent.META_KEY] = absent.encode(recorded)
        event_cols = {slot: cols[0] for slot, cols in self.layout.event_time_columns if cols}  # type: ignore[misc, union-attr]
        path = segment_path(self.segments_dir, seq)
        info = write_segment(
            sealed.segment, path, seq, fs=self.fs, metadata=metadata, event_time_columns=event_cols,
            compression=self._segment_codec,
        )
        self._next_segment_seq = seq + 1
        self._segment_sizes[seq] = info.size_bytes
        self._segment_infos[seq] = info
        self._wal_covered = max(self._wal_covered, sealed.last_sequence)
        if recorded:
            with self._lock:
                self._absent = [r for r in self._absent if r not in recorded]
        c = self.stats_counters
        c["segments_written"] += 1
        c["segment_bytes_written"] += info.size_bytes
        c["segment_bundles_written"] += info.bundle_count
        if sealed.end is not None:
            try:
                self._wal.truncate_to(sealed.end)
            except (OSError, QuiverError) as exc:  # the segment is durable; truncation can wait
                c["truncate_errors"] += 1
                log.error("WAL truncation after segment %d failed: %s", seq, exc)
        for fn in list(self._listeners):
            try:
                fn(info)
            except Exception:
                log.exception("finalize listener %r failed for segment %d", fn, seq)
        return info

    # -- flush / close ------------------------------------------------------------------------------
    @counted
    def finalize_now(self, reason: str = "requested") -> SegmentInfo | None:
        """Seal the open segment now and wait until its file is durable; None if it was empty.
        `reason` is recorded in the segment's metadata (`quiver.finalize_reason`)."""
        self._check_open()
        if not isinstance(reason, str) or not reason:
            raise ConfigError(f"finalize_now(reason=...): the reason must be a non-empty str, got {reason!r}")
        self._committer.commit_buffered()
        fut: Handoff[SegmentInfo | None] = Handoff()
        self._request_seal(reason, fut)
        while True:
            try:
                return fut.result(timeout=FINALIZE_POLL)
            except TimeoutError:
                # A finalizer that keeps failing (a dead disk) fills the sealed queue, and the applier
                # then waits for room and never reaches this request: report the failure instead of
                # hanging. (With room left, the request is queued and hears of the next failure.)
                failure = self._finalize_error
                if failure is not None and len(self._sealed) >= 2:
                    raise self._finalize_failure(failure) from failure

    def _finalize_failure(self, exc: BaseException) -> QuiverError:
        """What a failed segment write tells the callers waiting for it: a full disk is a
        StoreFullError, and a disk error carries errno, filename and the OSError as __cause__."""
        consequence = "the data stays in memory and in the WAL and is retried"
        if isinstance(exc, OSError):
            failure = disk_error(exc, "writing a segment file", exc.filename or self.segments_dir, consequence)
        else:
            failure = QuiverError(f"finalize failed: {exc!r}; {consequence}")
        failure.__cause__ = exc
        return failure

    def flush(self) -> None:
        """Make every ingested bundle part of a durable segment file."""
        self.finalize_now("flush")

    def close(self) -> None:
        """Finalize what is open, stop the threads, release the lock. Idempotent. In a process
        forked after open it only forgets the store: the files and threads are the parent's. Called
        from a signal handler that interrupted a call of this store, it runs when that call ends.
        A close() from another thread while one runs waits for it to finish, then returns (or, if a
        signal cut that one short before the store was closed, closes it). Ingests under way on
        other threads finish first; new ones raise StoreClosedError."""
        if self._closed:
            return
        if self._calls.defer_if_inside(self.close):
            log.info("close() called inside a call of store %s on the same thread (a signal handler?): "
                     "closing when that call returns", self.path)
            return
        if self._forked_away is not None:
            self._closed = True
            return
        with self._calls.inside():  # a signal handler's close() during this one runs after it
            claimed = False  # set before self._closer, so a signal between the two hands nothing back
            try:
                with self._close_lock:
                    while self._closer is not None:
                        self._close_cv.wait()
                    if self._closed:
                        return
                    claimed = True
                    self._closer = threading.get_ident()
                self._close()
            finally:
                if claimed:  # closed, failed or cut short: waiters look again, and close if need be
                    with self._close_lock:
                        self._closer = None
                        self._close_cv.notify_all()

    def _close(self) -> None:
        error: BaseException | None = None
        self._hub.retention.closed = True  # an ingest waiting for space at the size cap gives up now
        self._wait_for_ingests()
        try:
            if not self._stopping:  # else a close cut short inside its shutdown got past its finalize
                self.finalize_now("close")
                self._give_back_reserved_numbers()
        except BaseException as exc:  # the data stays in the WAL and is replayed on the next open
            error = exc
        try:
            self._hub.close()  # flush + checkpoint the ack log; wakes blocked subscribers
        except BaseException as exc:
            error = error or exc
        self._shutdown()
        if error is None:
            return
        what = f"store {self.path} closed without finalizing its open segment (kept in the WAL)"
        if not isinstance(error, Exception):  # a second Ctrl-C, a handler's sys.exit: let it end the program
            error.add_note(f"{what}; the next open replays it")
            raise error
        raise QuiverError(f"{what}: {error}") from error

    def _wait_for_ingests(self) -> None:
        """Refuse new ingests, then wait for those under way on other threads. Each ends within
        retention.backpressure_timeout (its longest wait); past that, close goes on with a warning."""
        me = threading.get_ident()
        deadline = time.monotonic() + self.config.retention.backpressure_timeout + 5.0
        with self._ingests_lock:
            self._closing = True
            while busy := sorted(t for t, n in self._ingesting.items() if n > 0 and t != me):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("store %s: closing while ingests on threads %s are still under way", self.path, busy)
                    return
                self._ingests_cv.wait(left)

    def _shutdown(self) -> None:
        with self._lock:
            self._stopping = True
            self._notify_all_threads()
        self._applier.join()
        self._finalizer.join()
        closed = StoreClosedError(f"store {self.path} closed before the bundle was stored")
        for sealed in self._sealed:  # left by a crash-style stop or a finalizer that kept failing
            for w in sealed.waiters:
                w.set_exception(closed)
        for item in self._inbox:
            if item[0] == "direct":
                item[4][1].set_exception(closed)
        self._wal.close()
        self._release_lock()
        self._closed = True
        fork_guard.forget(self)
        exit_guard.forget(self)

    def _notify_all_threads(self) -> None:
        """Called holding the lock: wake the applier, the finalizer and every waiter."""
        self._cv.notify_all()
        self._apply_cv.notify_all()
        self._finalize_cv.notify_all()

    def _stop_threads_at_exit(self) -> None:
        """exit_guard: the interpreter is exiting with this store open (close() never ran or was cut
        short). Stop its threads as a crash would: nothing more is finalized, the WAL keeps what was
        acknowledged, and the next open replays it. A segment write under way finishes first."""
        log.warning("store %s still open at interpreter exit: stopping its threads; the next open replays the WAL", self.path)
        self._stop_as_a_crash()
        self._hub.stop_thread(EXIT_JOIN)
        for thread in (self._applier, self._finalizer):
            thread.join(EXIT_JOIN)

    def _abandon(self) -> None:
        """Test support: stop without finalizing, as a crash would (the WAL is left as written)."""
        self._hub.abandon()
        self._stop_as_a_crash()
        self._shutdown()

    def _stop_as_a_crash(self) -> None:
        """Tell the applier and finalizer to stop; like a crash, no new seal or finalize starts."""
        with self._lock:
            self._stopping = True
            self._abandoned = True
            self._notify_all_threads()

    def __enter__(self) -> QuiverStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        """Close the store. When the block is already leaving with an exception (Ctrl-C's
        KeyboardInterrupt included), a failing close does not replace it: the close's error is
        logged and added to it as a note, and the original exception goes on."""
        if exc is None:
            self.close()
        else:
            run_noting_failure(self.close, exc, f"then closing the Quiver store {self.path} failed")

    def _check_open(self) -> None:
        if self._forked_away is not None:
            raise QuiverError(self._forked_away)
        if self._closed or self._stopping:
            raise StoreClosedError(f"store {self.path} is closed")

    def _left_in_parent(self, parent_pid: int) -> None:
        """fork_guard: this is a child process forked after the store was opened in `parent_pid`."""
        self._forked_away = (
            f"store {self.path} was opened in process {parent_pid} before it forked; this process ({os.getpid()}) "
            "cannot use it (it has the parent's files but not its threads). Open the store after the fork, in "
            "the process that uses it; one process opens a store directory at a time"
        )
        self._hub.registry.forked_away = self._forked_away
        exit_guard.forget(self)  # its threads are the parent's: nothing to stop in this process

    # -- reading ------------------------------------------------------------------------------------
    def _segment_info(self, seq: int) -> SegmentInfo:
        info = self._segment_infos.get(seq)
        if info is None:
            from .segment.reader import SegmentReader

            with SegmentReader.open(segment_path(self.segments_dir, seq), fs=self.fs) as reader:
                info = reader.info
            self._segment_infos[seq] = info
        return info

    @counted
    def segments(self) -> list[SegmentInfo]:
        """Every finalized segment, ascending by sequence (metadata read lazily, then cached)."""
        return [self._segment_info(s) for s in sorted(self._segment_sizes)]

    def bundles(self) -> Iterator[tuple[int, int, RecordBundle]]:
        """(segment_seq, bundle_index, bundle) for every finalized bundle, in order; a segment that
        retention (or delete_segment) removes while the iteration runs is skipped from then on."""
        from .segment.reader import SegmentReader

        for seq in sorted(self._segment_sizes):
            try:
                reader = SegmentReader.open(segment_path(self.segments_dir, seq), fs=self.fs)
            except QuiverError as exc:
                if getattr(exc, "errno", None) == errno.ENOENT and seq not in self._segment_sizes:
                    continue  # deleted since the listing
                raise
            with reader:
                for index, bundle in enumerate(reader.bundles()):
                    yield seq, index, bundle

    # -- producer progress (progress.py) -----------------------------------------------------------
    @counted
    def committed_offset(self, producer: str) -> int:
        """How many input items `producer` has stored: the largest offset of its progress records
        (`progress.with_progress`) among the bundles this store holds, 0 when it has none.

        A writer that runs again after a failure skips that many items of its input, so each is
        stored exactly once. The first call reads the progress slot of every finalized segment;
        bundles ingested or replayed since open are counted as they come. Offsets in segments that
        retention deleted stay counted: they are kept in segments/progress.ledger before the file goes.
        """
        self._check_open()
        problem = progress.producer_problem(producer)
        if problem:
            raise QuiverError(f"committed_offset: not a producer name: {producer!r}: {problem}")
        with self._progress_lock:
            if not self._progress_read:
                progress.merge(self._progress, self._ledger_offsets())
                progress.merge(self._progress, self._segments_progress())
                self._progress_read = True
            return self._progress.get(producer, 0)

    def _note_progress(self, bundle: RecordBundle) -> None:
        producer, offset = progress.record(bundle.slots[progress.PROGRESS_SLOT])
        with self._progress_lock:
            progress.merge(self._progress, {producer: offset})

    def _segments_progress(self) -> dict[str, int]:
        offsets: dict[str, int] = {}
        for seq in sorted(self._segment_sizes):
            progress.merge(offsets, self._segment_progress(seq))
        return offsets

    def _segment_progress(self, seq: int) -> dict[str, int]:
        """The offsets of one segment's progress records ({} once retention deleted it)."""
        from .segment.reader import SegmentReader

        try:
            reader = SegmentReader.open(segment_path(self.segments_dir, seq), fs=self.fs)
        except QuiverError as exc:
            if getattr(exc, "errno", None) == errno.ENOENT:
                return {}  # deleted by retention since the listing
            raise
        with reader:
            return progress.segment_offsets(reader)

    def _ledger_offsets(self) -> dict[str, int]:
        """The ledger file's offsets, read once (callers hold _progress_lock)."""
        if self._ledger is None:
            self._ledger = progress_ledger.read(self.fs, self.segments_dir)
        return self._ledger

    def _keep_progress(self, seq: int) -> None:
        """Before segment `seq` is deleted, merge its progress records into the ledger, durably."""
        try:
            offsets = self._segment_progress(seq)
        except QuiverError as exc:  # its records are as unreadable as its data: nothing to keep
            log.warning("segment %d: progress records unreadable before deletion (%s)", seq, exc)
            return
        if not offsets:
            return
        with self._progress_lock:
            ledger = dict(self._ledger_offsets())
            progress.merge(ledger, offsets)
            if ledger != self._ledger:
                progress_ledger.write(self.fs, self.segments_dir, ledger)
                self._ledger = ledger

    # -- subscribers (quiver_store/subscriber/) ------------------------------------------------------
    @counted
    def subscribe(self, name: str, start: str = "earliest") -> Subscription:
        """Register (or resume) subscriber `name`; see docs/user-guide.md, "Subscribers"."""
        self._check_open()
        return self._hub.subscribe(name, start)  # type: ignore[arg-type]

    @counted
    def unsubscribe(self, name: str) -> None:
        """Remove subscriber `name` durably and release the segments it pinned."""
        self._check_open()
        self._hub.unsubscribe(name)

    @counted
    def maintain(self) -> None:
        """Run retention now (orphans, max_age, steady-state cleanup, ack log checkpoint)."""
        self._check_open()
        self._hub.tick()

    # -- hooks for retention and subscribers --------------------------------------------------------
    def add_finalize_listener(self, fn: Callable[[SegmentInfo], None]) -> None:
        """Call `fn(info)` (on the finalizer thread) after each segment file is durable."""
        self._listeners.append(fn)

    @counted
    def delete_segment(self, seq: int, reason: str) -> int:
        """Unlink a segment file and fsync the directory; returns the bytes freed."""
        if seq not in self._segment_sizes:
            raise QuiverError(f"store {self.path}: no segment {seq} to delete")
        if self._floor_covered <= self._wal_covered:
            # The WAL may still hold this segment's entries (truncation failed or has not run yet):
            # once the file is gone, only the floor keeps a reopen from replaying them as new data.
            self._write_floor(self._floor_written, self._wal_covered + 1)
        self._keep_progress(seq)
        path = segment_path(self.segments_dir, seq)
        size = self._segment_sizes.pop(seq)
        self._segment_infos.pop(seq, None)
        self.fs.unlink(path)
        self.fs.fsync_dir(self.segments_dir)
        self.stats_counters["segments_deleted"] += 1
        log.info("deleted segment %d (%d bytes): %s", seq, size, reason)
        return size

    def _write_floor(self, next_segment: int, wal_covered: int) -> None:
        """Durably record that segment numbers below `next_segment` are taken and WAL entries below
        `wal_covered` are in durable segments (never lowering either)."""
        with self._floor_lock:
            next_segment = max(next_segment, self._floor_written)
            wal_covered = max(wal_covered, self._floor_covered)
            seq_floor.write(self.fs, self.segments_dir, seq_floor.SequenceFloor(next_segment, wal_covered))
            self._floor_written, self._floor_covered = next_segment, wal_covered

    def _give_back_reserved_numbers(self) -> None:
        """After the last finalize: lower the floor to the next unused segment number, so a clean
        close and reopen leaves no gap (only a crash skips the rest of a reserved run)."""
        with self._floor_lock:
            if self._floor_written > self._next_segment_seq:
                floor = seq_floor.SequenceFloor(self._next_segment_seq, self._floor_covered)
                seq_floor.write(self.fs, self.segments_dir, floor)
                self._floor_written = self._next_segment_seq

    @counted
    def disk_usage(self) -> int:
        """Bytes of WAL (live), segment files and ack log files of this store."""
        acks = 0
        for name in self.fs.listdir(self.path):
            if name.startswith("ack."):
                with contextlib.suppress(FileNotFoundError):  # renamed or removed since listdir (ack.checkpoint.tmp, a rotated log)
                    acks += self.fs.file_size(os.path.join(self.path, name))
        return self._wal.usage() + sum(self._segment_sizes.values()) + acks

    @counted
    def open_segment_bytes(self) -> int:
        """Bytes held in memory: the open segment, sealed ones not yet written, and committed bundles
        the applier has yet to add (counted by their WAL frame size)."""
        with self._lock:
            total = self._inbox_bytes + sum(s.segment.serialized_size for s in self._sealed if s.segment is not None)
            if self._open is not None:
                total += self._open.serialized_size
            return total

    @counted
    def stats(self) -> dict[str, Any]:
        """Counters and gauges (a snapshot; values are plain ints, floats, strings and lists)."""
        out: dict[str, Any] = dict(self.stats_counters)
        out.update(self._committer.stats)
        out.update(self._wal.stats)
        out["group_commit_sizes"] = dict(sorted(self._committer.group_sizes.items()))
        out["wal_bytes"] = self._wal.usage()
        out["wal_files"] = self._wal.file_count()
        out["wal_hole_punching"] = self._wal.punch_supported
        out["next_wal_sequence"] = self._committer.next_sequence
        out["next_segment_sequence"] = self._next_segment_seq
        out["segments"] = len(self._segment_sizes)
        out["segment_bytes"] = sum(self._segment_sizes.values())
        out["open_segment_bytes"] = self.open_segment_bytes()
        out["open_segment_bundles"] = self._open.bundle_count if self._open is not None else 0
        out["pending_finalize"] = len(self._sealed)
        out["finalize_failing"] = self._finalize_error is not None
        out["halted"] = None if self._halted is None else repr(self._halted)
        out["corruption_reports"] = list(self.corruption_reports)
        if hasattr(self, "_hub"):
            out.update(self._hub.metrics())
            out["subscribers"] = self._hub.describe()
        return out
