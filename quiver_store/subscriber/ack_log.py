"""The shared acknowledgement log (`ack.log`): framed records, group commit, rotation, checkpoints.

One append-only log per core holds every subscriber's outcomes, so progress survives crashes
without per-subscriber files. Records are CRC32C framed; ``commit`` makes them durable with one
fdatasync shared by every caller waiting at that moment (group commit). A checkpoint
(``ack.checkpoint``) snapshots all subscriber state; the log is rotated at each checkpoint and the
files the checkpoint covers are deleted, so replay reads at most one checkpoint interval of
records whatever the history. Byte layouts: docs/formats.md, "Ack log".
"""

from __future__ import annotations

import itertools
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c
import numpy as np

from .. import seq_floor
from ..errors import CorruptionError, QuiverError, StoreClosedError, disk_error
from ..fs import DEFAULT_FS, FileSystem
from ..segment.format import MAX_SEGMENT_BUNDLES
from ..wal import sidecar
from ..wal.format import MAX_SEQUENCE
from .state import Outcome, SegmentCatalog, SubscriberState

LOG_NAME = "ack.log"
CHECKPOINT_NAME = "ack.checkpoint"
LOG_MAGIC = b"QUIVACK\0"
CHECKPOINT_MAGIC = b"QUIVACKC"
VERSION = 1

_HEADER = struct.Struct("<8sHHQ")  # magic, version, reserved, generation; then u32 crc32c
HEADER_SIZE = _HEADER.size + 4  # 24
_FRAME_HEAD = struct.Struct("<IB")  # length of type+body, type
MAX_BODY = 1024
# Subscriber ids are u32 and the checkpoint stores the next one to hand out, so the highest id
# is one below 2**32-1; generations, marks and drop counts stay below 2**63 like sequences, so
# whatever the store adds to them (a rotation, a drop) still fits where it is written.
MAX_SUB_ID = (1 << 32) - 2
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+")  # subscriber names, as registry.validate_name accepts them
MAX_NAME_BYTES = 64

# record types
SEGMENT = 1  # u64 seq | u32 bundle_count
SUBSCRIBE = 2  # u32 sub_id | i64 mark | i64 ts_ns | u8 name_len | name
UNSUBSCRIBE = 3  # u32 sub_id | i64 ts_ns
OUTCOME = 4  # u32 sub_id | u64 seq | u32 bundle_index | u8 outcome | i64 ts_ns
ORPHANED = 5  # u32 sub_id | i64 ts_ns

_SEGMENT = struct.Struct("<QI")
_SUBSCRIBE = struct.Struct("<IqqB")
_UNSUBSCRIBE = struct.Struct("<Iq")
_OUTCOME = struct.Struct("<IQIBq")
_ORPHANED = struct.Struct("<Iq")
_OUTCOME_FRAME = np.dtype([("length", "<u4"), ("type", "u1"), ("sub_id", "<u4"), ("seq", "<u8"), ("index", "<u4"),
                           ("outcome", "u1"), ("ts_ns", "<i8"), ("crc", "<u4")])  # packed: 34 bytes

Record = tuple  # (type, *fields) as decoded below


def encode_segment(seq: int, bundle_count: int) -> bytes:
    return _frame(SEGMENT, _SEGMENT.pack(seq, bundle_count))


def encode_subscribe(sub_id: int, mark: int, ts_ns: int, name: str) -> bytes:
    raw = name.encode()
    return _frame(SUBSCRIBE, _SUBSCRIBE.pack(sub_id, mark, ts_ns, len(raw)) + raw)


def encode_unsubscribe(sub_id: int, ts_ns: int) -> bytes:
    return _frame(UNSUBSCRIBE, _UNSUBSCRIBE.pack(sub_id, ts_ns))


def encode_outcome(sub_id: int, seq: int, index: int, outcome: int, ts_ns: int) -> bytes:
    return _frame(OUTCOME, _OUTCOME.pack(sub_id, seq, index, outcome, ts_ns))


def encode_outcomes(sub_id: int, seq: int, indexes: list[int], outcome: int, ts_ns: int) -> bytes:
    """`encode_outcome` of each of `indexes`, framed at once: a drop writes one record per bundle
    (millions for a large segment), so only the CRCs are computed row by row."""
    frames = np.zeros(len(indexes), _OUTCOME_FRAME)
    frames["length"], frames["type"] = _OUTCOME.size + 1, OUTCOME
    frames["sub_id"], frames["seq"], frames["index"] = sub_id, seq, indexes
    frames["outcome"], frames["ts_ns"] = outcome, ts_ns
    data = frames.view(np.uint8).data
    size, end = _OUTCOME_FRAME.itemsize, _OUTCOME_FRAME.itemsize - 4
    frames["crc"] = [crc32c.crc32c(data[at : at + end]) for at in range(0, len(data), size)]
    return frames.tobytes()


def encode_orphaned(sub_id: int, ts_ns: int) -> bytes:
    return _frame(ORPHANED, _ORPHANED.pack(sub_id, ts_ns))


def _frame(rtype: int, body: bytes) -> bytes:
    head = _FRAME_HEAD.pack(len(body) + 1, rtype)
    return head + body + crc32c.crc32c(head + body).to_bytes(4, "little")


def _check_segment(seq: int) -> None:
    """Segment numbers stay below 2**63 (the checkpoint holds them as int64)."""
    if seq > MAX_SEQUENCE:
        raise ValueError(f"segment sequence {seq} is above 2**63-1, more than any store numbers")


def _check_subscriber(sub_id: int, mark: int) -> None:
    """A subscriber's id leaves room for the next one, and its mark is -1 or a segment number."""
    if sub_id > MAX_SUB_ID:
        raise ValueError(f"subscriber id {sub_id} is above {MAX_SUB_ID}, the highest the store hands out")
    if mark < -1:
        raise ValueError(f"subscriber mark {mark} is below -1")


def _name(raw: bytes) -> str:
    """A subscriber name as the store writes it; any other could never be subscribed again, yet
    would pin every segment it has not resolved."""
    name = raw.decode()
    if len(raw) > MAX_NAME_BYTES or not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"subscriber name {name!r} is not 1 to {MAX_NAME_BYTES} of [A-Za-z0-9_.-]")
    return name


def _check_ascending(values: Sequence[int], what: str) -> None:
    """The store writes every list of a checkpoint sorted and without repeats; a repeat or a
    disorder is damage that a set or dict would otherwise absorb without a word."""
    for before, after in itertools.pairwise(values):
        if after <= before:
            raise ValueError(f"{what} are not strictly ascending: {after} after {before}")


def _check_bundles(count: int, what: str = "bundle count") -> None:
    """Bundle counts and indexes stay within MAX_SEGMENT_BUNDLES (see there)."""
    if count > MAX_SEGMENT_BUNDLES:
        raise ValueError(f"{what} {count} is above {MAX_SEGMENT_BUNDLES}, more bundles than a segment holds")


def decode_body(rtype: int, body: bytes) -> Record | None:
    """Decode one record body; None for a type this version does not know (skipped by length)."""
    if rtype == OUTCOME:
        record = (OUTCOME, *_OUTCOME.unpack(body))
        _check_segment(record[2])
        _check_bundles(record[3] + 1, "bundle index + 1")
        if record[4] > Outcome.DROPPED:
            raise ValueError(f"outcome {record[4]} is none of 0 (ack), 1 (nack) and 2 (dropped)")
        return record
    if rtype == SEGMENT:
        record = (SEGMENT, *_SEGMENT.unpack(body))
        _check_segment(record[1])
        _check_bundles(record[2])
        return record
    if rtype == SUBSCRIBE:
        sub_id, mark, ts, n = _SUBSCRIBE.unpack_from(body)
        _check_subscriber(sub_id, mark)
        name = body[_SUBSCRIBE.size : _SUBSCRIBE.size + n]
        if len(name) != n or _SUBSCRIBE.size + n != len(body):
            raise ValueError("subscriber name length does not match the record length")
        return (SUBSCRIBE, sub_id, mark, ts, _name(name))
    if rtype == UNSUBSCRIBE:
        return (UNSUBSCRIBE, *_UNSUBSCRIBE.unpack(body))
    if rtype == ORPHANED:
        return (ORPHANED, *_ORPHANED.unpack(body))
    return None


def encode_header(generation: int) -> bytes:
    head = _HEADER.pack(LOG_MAGIC, VERSION, 0, generation)
    return head + crc32c.crc32c(head).to_bytes(4, "little")


@dataclass
class ReplayResult:
    """What `AckLog.open` found: the checkpoint payload (or None) and the records after it."""

    checkpoint: bytes | None
    records: list[Record] = field(default_factory=list)
    corruption: list[CorruptionError] = field(default_factory=list)  # tolerated (point_in_time/skip_corrupt)
    torn_bytes: int = 0  # bytes of a torn tail cut from the active log


@dataclass
class _Scan:
    records: list[Record]
    end: int  # offset after the last good frame
    error: CorruptionError | None  # mid-log corruption (a valid frame follows the damage)
    torn: bool


def _valid_frame_at(data: bytes, pos: int) -> int | None:
    """Length of a CRC-valid frame starting at pos, or None."""
    if pos + _FRAME_HEAD.size > len(data):
        return None
    length, _ = _FRAME_HEAD.unpack_from(data, pos)
    end = pos + 4 + length + 4
    if length < 1 or length > MAX_BODY + 1 or end > len(data):
        return None
    crc = int.from_bytes(data[end - 4 : end], "little")
    return end - pos if crc32c.crc32c(data[pos : end - 4]) == crc else None


def _scan(data: bytes, start: int, path: str, *, resync: bool) -> _Scan:
    """Decode frames from `start`; classify the first damage as torn tail or mid-log corruption."""
    records: list[Record] = []
    pos = start
    n = len(data)
    unpack_head = _FRAME_HEAD.unpack_from
    while pos < n:
        size = _valid_frame_at(data, pos)
        if size is None:
            # damage: a torn tail unless a valid frame follows somewhere later
            nxt = next((p for p in range(pos + 1, n - 8) if _valid_frame_at(data, p)), None)
            if nxt is None:
                return _Scan(records, pos, None, True)
            length = unpack_head(data, pos)[0] if pos + 5 <= n else -1
            err = CorruptionError(
                f"ack log record failed its CRC32C/length check (frame length field {length}); "
                f"the next valid record starts at offset {nxt}",
                path=path,
                offset=pos,
            )
            if not resync:
                return _Scan(records, pos, err, False)
            records.append(("corrupt", err))
            pos = nxt
            continue
        length, rtype = unpack_head(data, pos)
        body = data[pos + 5 : pos + 4 + length]
        try:
            rec = decode_body(rtype, body)
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            err = CorruptionError(
                f"ack log record of type {rtype} has a malformed body: {exc}", path=path, offset=pos
            )
            if not resync:
                return _Scan(records, pos, err, False)
            records.append(("corrupt", err))
            rec = None
        if rec is not None:
            records.append(rec)
        pos += size
    return _Scan(records, pos, None, False)


class AckLog:
    """Append-only, CRC-framed, group-committed outcome log with rotation and checkpoints."""

    def __init__(
        self, directory: str, fs: FileSystem, fd: int, generation: int, size: int, sync: bool
    ) -> None:
        self.directory = directory
        self.fs = fs
        self._fd = fd
        self.generation = generation
        self._size = size  # bytes in the active file (written + buffered)
        self._sync = sync
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buf = bytearray()
        self._appended = 0  # global LSN: bytes appended since open, across rotations
        self._durable = 0
        self._flusher = 0  # ident of the thread writing (commit leader or checkpoint); 0: none
        self._failed: BaseException | None = None
        self._cut_short = False  # set with _failed: it was an exception a signal handler raised into a write
        self._closed = False
        self.commits = 0  # fdatasync calls (group commits)

    # -- open / replay ----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: str,
        *,
        fs: FileSystem = DEFAULT_FS,
        recovery: str = "point_in_time",
        sync: bool = True,
    ) -> tuple[AckLog, ReplayResult]:
        """Open (creating) the log in `directory` and read back the checkpoint and every later record.

        A torn tail of the active file is cut. Mid-log damage raises CorruptionError under
        recovery="strict"; "point_in_time" stops there and moves the damaged bytes and every later
        file aside (``*.corrupt``), which only causes redelivery; "skip_corrupt" resynchronises on
        the next valid record.
        """
        fs.makedirs(directory)
        cp_path = os.path.join(directory, CHECKPOINT_NAME)
        checkpoint: bytes | None = None
        cp_gen, cp_off = 0, HEADER_SIZE
        if fs.exists(cp_path):
            checkpoint = fs.read_file(cp_path)
            cp_gen, cp_off = checkpoint_position(checkpoint, cp_path)
        files = _log_files(directory, fs)  # [(generation, path)] ascending, active last
        if checkpoint is None:
            _check_no_checkpoint_needed(files, cp_path)
        result = ReplayResult(checkpoint)
        active_path = os.path.join(directory, LOG_NAME)
        stop = False
        kept: list[tuple[int, str, int]] = []
        for i, (gen, path) in enumerate(files):
            if gen < cp_gen:
                fs.unlink(path)  # fully covered by the checkpoint; its deletion was interrupted
                continue
            data = fs.read_file(path)
            if stop:
                _move_aside(fs, path, 0)
                continue
            start = cp_off if gen == cp_gen else HEADER_SIZE
            is_last = i == len(files) - 1
            scan = _scan(data, min(start, len(data)), path, resync=recovery == "skip_corrupt")
            for rec in scan.records:
                if rec[0] == "corrupt":
                    result.corruption.append(rec[1])
                else:
                    result.records.append(rec)
            if scan.error is not None or (scan.torn and not is_last):
                err = scan.error or CorruptionError(
                    "rotated ack log ends in a partial record (it was fsynced before rotation)",
                    path=path,
                    offset=scan.end,
                )
                if recovery == "strict":
                    raise err
                result.corruption.append(err)
                _move_aside(fs, path, scan.end, keep_prefix=True)
                stop = True
                kept.append((gen, path, scan.end))
                continue
            if scan.torn:
                result.torn_bytes = len(data) - scan.end
            kept.append((gen, path, scan.end))
        if kept and kept[-1][1] == active_path:
            gen, _, end = kept[-1]
            fd = fs.open(active_path, os.O_RDWR)
            if fs.size(fd) != end:
                fs.truncate(fd, end)
                fs.fsync(fd)
            fs.seek(fd, end)
            return cls(directory, fs, fd, gen, end, sync), result
        generation = max([g for g, _ in files] + [cp_gen - 1, 0]) + 1
        fd = _create(fs, directory, generation)
        return cls(directory, fs, fd, generation, HEADER_SIZE, sync), result

    # -- appending --------------------------------------------------------------------------
    def append(self, data: bytes) -> int:
        """Buffer framed records; returns the LSN to pass to `commit` to make them durable."""
        with self._lock:
            self._check()
            self._buf += data
            self._appended += len(data)
            self._size += len(data)
            return self._appended

    def commit(self, lsn: int | None = None) -> None:
        """Return once everything up to `lsn` (default: all appended) is written and fdatasync'ed.

        Concurrent callers share one write + fdatasync: the first becomes the leader, the others
        wait for its result (or lead the next round if their bytes arrived after it started).
        """
        with self._lock:
            target = self._appended if lsn is None else lsn
            while True:
                if self._durable >= target:  # first: a close() or a failure after it does not undo it
                    return
                self._check()
                if not self._flusher:
                    break
                self._wait_for_flusher()
            self._flusher = threading.get_ident()
            data = bytes(self._buf)
            self._buf.clear()
            upto = self._appended
        try:
            self._write(data)
        except BaseException as exc:
            # Never retry a failed fdatasync (the page cache state is unknown): poison the log. The
            # same when a signal handler's exception (Ctrl-C) cut the write or the sync short: whether
            # the records reached the disk is unknown, and waiters must not be told they did.
            self._poison(exc)
            if not isinstance(exc, OSError):
                raise
            raise disk_error(
                exc, "ack log write/fdatasync", self.path, "the acknowledgements it held are not durable; reopen the store"
            ) from exc
        with self._lock:
            self._durable = upto
            self._flusher = 0
            self._cond.notify_all()

    def _wait_for_flusher(self) -> None:
        """Called holding the lock while a write is under way: wait for it to end. A write this
        thread still holds is stale, not under way: a signal handler's exception (Ctrl-C) cut its
        commit or checkpoint short between two statements, outside the code that poisons the log
        on such an exception, and waiting would wait for itself forever. Whether its records
        reached the disk is unknown, so the log is poisoned now, as the interrupted write would
        have been."""
        if self._flusher != threading.get_ident():
            self._cond.wait()
        else:
            self._poison_locked(
                QuiverError("a write of this thread was cut short by an exception a signal handler raised"), cut_short=True
            )

    def _write(self, data: bytes) -> None:
        if data:
            self.fs.write(self._fd, data)
        if self._sync and data:
            self.fs.fdatasync(self._fd)
            self.commits += 1

    def _poison(self, exc: BaseException) -> None:
        with self._lock:
            self._poison_locked(exc, cut_short=not isinstance(exc, Exception))

    def _poison_locked(self, exc: BaseException, *, cut_short: bool) -> None:
        """Called holding the lock: the log takes no more records; waiters wake to the error.
        `cut_short`: `exc` is a signal handler's exception (Ctrl-C, sys.exit()), not a disk error."""
        self._failed = exc
        self._cut_short = cut_short
        self._flusher = 0
        self._cond.notify_all()

    def _check(self) -> None:
        if self._failed is not None:
            failed = self._failed
            why = str(failed) if isinstance(failed, Exception) else f"a write interrupted by {type(failed).__name__}"
            raise QuiverError(f"ack log {self.path} failed earlier ({why}); reopen the store")
        if self._closed:
            raise StoreClosedError(f"ack log {self.path} is closed")

    @property
    def path(self) -> str:
        return os.path.join(self.directory, LOG_NAME)

    @property
    def stopped(self) -> bool:
        """Closed, or poisoned by a failed (or interrupted) write: it takes no more records."""
        return self._closed or self._failed is not None

    @property
    def cut_short(self) -> bool:
        """Stopped because a signal handler's exception (Ctrl-C, a handler's sys.exit()) cut a
        write short, not by a disk error. That exception left the call it cut, so the failure
        has been reported, and every record whose call returned is durable (or, without sync,
        written): the reopen replays the log and cuts the torn tail. A disk error is different:
        it may have met only a background checkpoint, so closing reports it again."""
        return self._cut_short

    @property
    def size(self) -> int:
        return self._size

    # -- rotation + checkpoint --------------------------------------------------------------
    def checkpoint(self, encode_state: Callable[[int, int], bytes]) -> bool:
        """Rotate the log and write a checkpoint covering everything before the new file; False,
        writing nothing, when a signal handler's exception cut a write short (`cut_short`, which
        may show only here, as this thread's own write left claimed): the log is then the truth.

        `encode_state(generation, offset)` returns the checkpoint bytes for the state as of now;
        the caller guarantees no record is appended meanwhile (it holds its own state lock).
        Steps, each crash-safe: flush + fdatasync the active file; rename it to ack.log.<gen>;
        create a fresh ack.log (gen + 1) and fsync the directory; write the checkpoint through a
        temp file, fsync, rename, directory fsync; then delete the covered files.
        """
        with self._lock:
            while self._flusher:
                self._wait_for_flusher()
            if self.cut_short:
                return False
            self._check()
            self._flusher = threading.get_ident()
            data = bytes(self._buf)
            self._buf.clear()
            upto = self._appended
        try:
            self._write(data)
            if not self._sync:
                self.fs.fdatasync(self._fd)
            old_gen = self.generation
            rotated = os.path.join(self.directory, f"{LOG_NAME}.{old_gen}")
            fd, self._fd = self._fd, -1  # until the new file exists: a failure here must not leave a stale fd behind
            self.fs.close(fd)
            self.fs.rename(self.path, rotated)
            self._fd = _create(self.fs, self.directory, old_gen + 1)
            self.generation = old_gen + 1
            self._size = HEADER_SIZE
            payload = encode_state(self.generation, HEADER_SIZE)
            write_atomically(self.fs, self.directory, CHECKPOINT_NAME, payload)
            for gen, path in _log_files(self.directory, self.fs):
                if gen <= old_gen:
                    self.fs.unlink(path)
            self.fs.fsync_dir(self.directory)
        except BaseException as exc:  # an I/O failure, or a signal handler's exception mid-rotation
            self._poison(exc)
            if not isinstance(exc, OSError):
                raise
            raise QuiverError(f"ack log {self.path}: checkpoint/rotation failed ({exc})") from exc
        with self._lock:
            self._durable = upto
            self._flusher = 0
            self._cond.notify_all()
        return True

    def abandon(self) -> None:
        """Drop buffered (unreturned) records and close the file, as a crash would."""
        with self._lock:
            self._buf.clear()
            self._closed = True
            self._cond.notify_all()
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            self.fs.close(fd)

    def close(self) -> None:
        """Flush and fdatasync every buffered record (acks are never lost on a clean close)."""
        if self._closed:
            return
        try:
            if self._failed is None:
                self.commit()
                if not self._sync:
                    self.fs.fdatasync(self._fd)
        finally:  # closed either way: a failed flush is reported, and the file is not left open
            with self._lock:
                self._closed = True
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                self.fs.close(fd)


def checkpoint_position(payload: bytes, path: str) -> tuple[int, int]:
    """Verify a checkpoint's frame and return (generation, offset) where replay starts."""
    if len(payload) < 36 or payload[:8] != CHECKPOINT_MAGIC:
        raise CorruptionError(
            "not an ack checkpoint (bad magic or shorter than 36 bytes)", path=path, offset=0
        )
    crc = int.from_bytes(payload[-4:], "little")
    if crc32c.crc32c(payload[:-4]) != crc:
        raise CorruptionError(
            "ack checkpoint failed its CRC32C check; subscriber state cannot be rebuilt — restore it or "
            "delete ack.checkpoint and ack.log* to restart every subscriber from the oldest segment",
            path=path,
            offset=len(payload) - 4,
        )
    version = int.from_bytes(payload[8:10], "little")
    if version != VERSION:
        raise CorruptionError(
            f"unsupported ack checkpoint version {version} (this build reads {VERSION})", path=path, offset=8
        )
    gen, off = struct.unpack_from("<QQ", payload, 12)
    if gen > MAX_SEQUENCE:
        raise CorruptionError(f"ack checkpoint replay generation {gen} is above 2**63-1", path=path, offset=12)
    if off < HEADER_SIZE:
        raise CorruptionError(
            f"ack checkpoint replay offset {off} is inside the ack log's {HEADER_SIZE}-byte header", path=path, offset=20
        )
    return gen, off


def write_atomically(fs: FileSystem, directory: str, name: str, payload: bytes) -> None:
    """tmp file + fsync + rename + directory fsync: readers see the old or the new bytes."""
    tmp = os.path.join(directory, name + ".tmp")
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write(fd, payload)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, os.path.join(directory, name))
    fs.fsync_dir(directory)


def _create(fs: FileSystem, directory: str, generation: int) -> int:
    path = os.path.join(directory, LOG_NAME)
    fd = fs.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    fs.write(fd, encode_header(generation))
    fs.fsync(fd)
    fs.fsync_dir(directory)
    return fd


def _read_generation(fs: FileSystem, path: str) -> int | None:
    data = fs.read_file(path)[:HEADER_SIZE]
    if len(data) < HEADER_SIZE:
        return None
    magic, version, _, gen = _HEADER.unpack_from(data)
    if magic != LOG_MAGIC or crc32c.crc32c(data[:20]) != int.from_bytes(data[20:24], "little"):
        raise CorruptionError("ack log header is damaged (bad magic or CRC32C)", path=path, offset=0)
    if version != VERSION:
        raise CorruptionError(
            f"unsupported ack log version {version} (this build reads {VERSION})", path=path, offset=8
        )
    if gen > MAX_SEQUENCE:
        raise CorruptionError(f"ack log generation {gen} is above 2**63-1", path=path, offset=12)
    return gen


def _log_files(directory: str, fs: FileSystem, *, repair: bool = True) -> list[tuple[int, str]]:
    """Every ack log file with its generation, oldest first; the active file is the newest."""
    found: list[tuple[int, str]] = []
    for name in fs.listdir(directory):
        if name == LOG_NAME or (name.startswith(LOG_NAME + ".") and name[len(LOG_NAME) + 1 :].isdigit()):
            path = os.path.join(directory, name)
            try:
                gen = _read_generation(fs, path)
            except CorruptionError:
                # The active file is created with its header and fsynced before any record goes in:
                # a damaged header with nothing after it is a creation the power cut short.
                if name != LOG_NAME or fs.file_size(path) > HEADER_SIZE:
                    raise
                gen = None
            if gen is None:
                if name == LOG_NAME:  # created but its header never reached the disk: empty
                    if repair:
                        fs.unlink(path)
                    continue
                raise CorruptionError("rotated ack log is shorter than its header", path=path, offset=0)
            found.append((gen, path))
    found.sort()
    return found


def log_files(directory: str, fs: FileSystem = DEFAULT_FS) -> list[tuple[int, str]]:
    """Ack log files (generation, path), oldest first, without repairing anything."""
    return _log_files(directory, fs, repair=False)


def _move_aside(fs: FileSystem, path: str, offset: int, *, keep_prefix: bool = False) -> None:
    """Preserve damaged bytes in `<path>.corrupt` instead of destroying them."""
    data = fs.read_file(path)
    aside = f"{path}.{offset}.corrupt"
    fd = fs.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write(fd, data[offset:] if keep_prefix else data)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    if keep_prefix:
        fd = fs.open(path, os.O_RDWR)
        try:
            fs.truncate(fd, offset)
            fs.fsync(fd)
        finally:
            fs.close(fd)
    else:
        fs.unlink(path)
    fs.fsync_dir(os.path.dirname(path))


def iter_records(data: bytes, start: int = HEADER_SIZE) -> Iterator[Record]:
    """Records of one log file's bytes (for tools); stops at the first damage."""
    yield from _scan(data, start, "<memory>", resync=False).records


def read_untouched(directory: str, fs: FileSystem = DEFAULT_FS) -> tuple[bytes | None, list[Record]] | None:
    """The checkpoint's bytes and the records after it, read without repairing anything (each
    file up to its first damage); None when the store has neither. For `quiver verify` and for
    the store's open, which must know the ack log's segments before the subscriber hub repairs it."""
    cp_path = os.path.join(directory, CHECKPOINT_NAME)
    checkpoint = fs.read_file(cp_path) if fs.exists(cp_path) else None
    files = log_files(directory, fs)
    if checkpoint is None and not files:
        return None
    if checkpoint is None:
        _check_no_checkpoint_needed(files, cp_path)
    gen, off = checkpoint_position(checkpoint, cp_path) if checkpoint is not None else (0, HEADER_SIZE)
    records: list[Record] = []
    for file_gen, path in files:
        if file_gen >= gen:
            records.extend(iter_records(fs.read_file(path), off if file_gen == gen else HEADER_SIZE))
    return checkpoint, records


def _check_no_checkpoint_needed(files: list[tuple[int, str]], cp_path: str) -> None:
    """Without a checkpoint the log must start at generation 1: a file of a later generation is
    only ever created by a rotation that writes a checkpoint before it deletes the files it covers,
    so their outcomes (and the subscribers they registered) were in a checkpoint that is gone."""
    if files and files[0][0] > 1:
        raise CorruptionError(
            f"missing, but the oldest ack log file ({os.path.basename(files[0][1])}) is generation {files[0][0]}: the "
            "outcomes and subscribers recorded before it were only in this checkpoint. Restore it from a backup, or "
            "remove the ack.log files as well to start every subscriber again from its start position (what it "
            "acknowledged is then delivered again)",
            path=cp_path,
        )


def missing_log(directory: str, fs: FileSystem) -> str | None:
    """Why an ack log file the store at `directory` must have is gone, or None. The store keeps one
    from its first open on (QuiverStore.open creates it with LOCK), a checkpoint points into the file
    that continues it, and segments/next.seq or wal/truncate.offset show that segments were written
    and registered in it."""
    cp_path = os.path.join(directory, CHECKPOINT_NAME)
    files = log_files(directory, fs)
    if fs.exists(cp_path):
        try:
            gen, _ = checkpoint_position(fs.read_file(cp_path), cp_path)
        except CorruptionError:
            return None  # reported as damage by whoever reads the checkpoint
        if any(g >= gen for g, _ in files):
            return None
        return (f"{CHECKPOINT_NAME} points into ack log generation {gen}, which is gone: the outcomes recorded "
                "after the checkpoint are lost (those bundles would be delivered again)")
    evidence = (os.path.join(directory, "segments", seq_floor.NAME), os.path.join(directory, "wal", sidecar.NAME))
    if files or not any(fs.exists(path) for path in evidence):
        return None
    return ("there is no ack log although segments were written and registered in it: every subscriber and "
            "acknowledgement is lost (acked bundles would be delivered again)")


def check_files(directory: str, fs: FileSystem = DEFAULT_FS) -> list[tuple[str, int, CorruptionError | None]]:
    """(path, records, mid-log damage or None) of every ack log file the store would read, for
    `quiver verify`: a torn tail is a normal end (a crash mid-append), damage followed by a valid
    record is corruption (opening moves the bytes from it on aside, losing those outcomes)."""
    cp_path = os.path.join(directory, CHECKPOINT_NAME)
    checkpoint = fs.read_file(cp_path) if fs.exists(cp_path) else None
    gen, off = checkpoint_position(checkpoint, cp_path) if checkpoint is not None else (0, HEADER_SIZE)
    out = []
    for file_gen, path in log_files(directory, fs):
        if file_gen >= gen:
            scanned = _scan(fs.read_file(path), off if file_gen == gen else HEADER_SIZE, path, resync=False)
            out.append((path, len(scanned.records), scanned.error))
    return out


def highest_registered_segment(directory: str, fs: FileSystem = DEFAULT_FS) -> int:
    """The highest segment sequence number the ack log ever registered (-1: none, or an ack log
    too damaged to read, which the subscriber hub's open then reports). Segment numbers must
    continue above it even when the segment files and `next.seq` are gone."""
    try:
        found = read_untouched(directory, fs)
    except (CorruptionError, OSError):
        return -1
    if found is None:
        return -1
    checkpoint, records = found
    cp_path = os.path.join(directory, CHECKPOINT_NAME)
    highest = decode_checkpoint(checkpoint, cp_path).catalog.max_seen if checkpoint is not None else -1
    return max([highest] + [rec[1] for rec in records if rec[0] == SEGMENT])


# -- checkpoint payload ------------------------------------------------------------------------
_CP_HEAD = struct.Struct(
    "<8sHHQQqqI"
)  # magic, version, reserved, generation, offset, created, max_seen, next_id
_CP_SUB = struct.Struct("<IBqqQB")  # sub_id, flags, mark, last_seen_ns, dropped_total, name_len
_CP_ORPHANED = 1  # the one flag bit


@dataclass
class CheckpointState:
    """Decoded checkpoint: the catalog, every subscriber and the id allocator."""

    generation: int
    offset: int
    created_ns: int
    catalog: SegmentCatalog
    subscribers: list[SubscriberState]
    next_sub_id: int


def encode_checkpoint(
    generation: int,
    offset: int,
    created_ns: int,
    catalog: SegmentCatalog,
    subscribers: Iterable[SubscriberState],
    next_sub_id: int,
) -> bytes:
    """Serialize every subscriber's mark, gap set and the known segment bundle counts."""
    items = catalog.items()
    out = [
        _CP_HEAD.pack(
            CHECKPOINT_MAGIC, VERSION, 0, generation, offset, created_ns, catalog.max_seen, next_sub_id
        ),
        struct.pack("<I", len(items)),
    ]
    for seq, count in items:
        out.append(struct.pack("<QI", seq, count))
    subs = list(subscribers)
    out.append(struct.pack("<I", len(subs)))
    for sub in subs:
        name = sub.name.encode()
        out.append(
            _CP_SUB.pack(
                sub.sub_id, _CP_ORPHANED if sub.orphaned else 0, sub.mark, sub.last_seen_ns, sub.dropped_total, len(name)
            )
        )
        out.append(name)
        done = sorted(sub.done)
        out.append(struct.pack(f"<I{len(done)}Q", len(done), *done))
        out.append(struct.pack("<I", len(sub.partial)))
        for seq in sorted(sub.partial):
            idx = sorted(sub.partial[seq])
            out.append(struct.pack(f"<QI{len(idx)}I", seq, len(idx), *idx))
    body = b"".join(out)
    return body + crc32c.crc32c(body).to_bytes(4, "little")


def decode_checkpoint(payload: bytes, path: str) -> CheckpointState:
    """Inverse of `encode_checkpoint`; the frame was verified by `checkpoint_position`."""
    checkpoint_position(payload, path)
    pos = 0
    try:
        _, _, reserved, gen, off, created, max_seen, next_id = _CP_HEAD.unpack_from(payload, 0)
        if reserved:
            raise ValueError(f"reserved header field is {reserved}, not 0")
        if not -1 <= max_seen <= MAX_SEQUENCE:
            raise ValueError(f"highest segment seen {max_seen} is not -1 or a segment number")
        pos = _CP_HEAD.size
        catalog = SegmentCatalog()
        (n,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        previous = -1
        for _ in range(n):
            seq, count = struct.unpack_from("<QI", payload, pos)
            _check_segment(seq)
            _check_bundles(count)
            _check_ascending((previous, seq), "known segments")
            previous = seq
            pos += 12
            catalog.add(seq, count)
        catalog.max_seen = max(catalog.max_seen, max_seen)
        (n,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        subs: list[SubscriberState] = []
        ids: set[int] = set()
        names: set[str] = set()
        for _ in range(n):
            sub_id, flags, mark, seen, dropped, name_len = _CP_SUB.unpack_from(payload, pos)
            _check_subscriber(sub_id, mark)
            if sub_id >= next_id:
                raise ValueError(f"subscriber id {sub_id} is not below {next_id}, the next id to hand out")
            if dropped > MAX_SEQUENCE:
                raise ValueError(f"subscriber {sub_id} dropped {dropped} bundles, above 2**63-1")
            if flags & ~_CP_ORPHANED:
                raise ValueError(f"subscriber {sub_id} has flag bits {flags:#04x}; only bit 0 (orphaned) is defined")
            if sub_id in ids:
                raise ValueError(f"subscriber id {sub_id} appears twice")
            ids.add(sub_id)
            pos += _CP_SUB.size
            name = _name(payload[pos : pos + name_len])
            if name in names:
                raise ValueError(f"subscriber name {name!r} appears twice")
            names.add(name)
            pos += name_len
            (nd,) = struct.unpack_from("<I", payload, pos)
            done_list = struct.unpack_from(f"<{nd}Q", payload, pos + 4)
            _check_segment(max(done_list, default=-1))
            _check_ascending(done_list, f"subscriber {sub_id}'s resolved segments")
            done = set(done_list)
            pos += 4 + 8 * nd
            (np_,) = struct.unpack_from("<I", payload, pos)
            pos += 4
            partial: dict[int, set[int]] = {}
            previous = -1
            for _ in range(np_):
                seq, k = struct.unpack_from("<QI", payload, pos)
                _check_segment(seq)
                _check_ascending((previous, seq), f"subscriber {sub_id}'s gap segments")
                previous = seq
                if seq in done:
                    raise ValueError(f"subscriber {sub_id} lists segment {seq} as resolved and in its gap set")
                indexes = struct.unpack_from(f"<{k}I", payload, pos + 12)
                _check_bundles(max(indexes, default=-1) + 1, "bundle index + 1")
                _check_ascending(indexes, f"subscriber {sub_id}'s resolved bundles of segment {seq}")
                partial[seq] = set(indexes)
                pos += 12 + 4 * k
            subs.append(
                SubscriberState(
                    name,
                    sub_id,
                    mark,
                    last_seen_ns=seen,
                    orphaned=bool(flags & _CP_ORPHANED),
                    dropped_total=dropped,
                    done=done,
                    partial=partial,
                )
            )
    except (struct.error, UnicodeDecodeError, ValueError, QuiverError) as exc:
        raise CorruptionError(f"ack checkpoint body is malformed: {exc}", path=path, offset=pos) from exc
    if pos != len(payload) - 4:
        raise CorruptionError(
            f"ack checkpoint has {len(payload) - 4 - pos} unexpected trailing bytes", path=path, offset=pos
        )
    return CheckpointState(gen, off, created, catalog, subs, next_id)
