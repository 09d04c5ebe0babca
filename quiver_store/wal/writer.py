"""The WAL files on disk: appends, rotation, the size/chunk cap, truncation and prefix reclaim.

Positions are (generation, logical offset): the logical offset of a byte never changes, even when
the active file's prefix is reclaimed by rewriting (the shift is kept in memory; the sidecar stores
physical offsets). Only one thread appends at a time (the group-commit leader); the finalizer calls
`truncate_to` and the preallocator `extend_tail` concurrently, so file state is guarded by `lock`.
Under durability "fsync" the active file holds up to `wal.preallocate` zero bytes after its last
entry (`size` is the end of the log, `file_end` the end of the file; preallocator.py says why).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..config import WalConfig
from ..errors import QuiverError, StoreFullError, disk_error
from ..fs import FileSystem
from . import sidecar
from .format import HEADER_LEN, encode_header
from .preallocator import Preallocator
from .rotation import ACTIVE, chunk_name

log = logging.getLogger("quiver_store.wal")

# Punch / rewrite the covered prefix of the active file once this many bytes are reclaimable (and
# whatever is covered when the WAL is at its cap). Those bytes count as usage against wal.max_size and
# retention.size_cap until then, so a per-core cap must exceed min(this, wal.rotation_size) plus room
# for bundles (docs/user-guide.md); at 1 MiB the step wedged caps of about 1 MiB per core.
RECLAIM_THRESHOLD = 64 << 10


class Position(NamedTuple):
    """A WAL position, ordered by (generation, offset). A named tuple: one is made per entry on the
    ingest path, about a third of a frozen dataclass's cost."""

    generation: int
    offset: int  # logical


PUNCH_PROBE = ".punch_probe"
"""probe_punch_hole's scratch file in wal/, deleted at once; a crash can leave it behind."""


def probe_punch_hole(fs: FileSystem, wal_dir: str) -> bool:
    """Can this file system deallocate a range of a file? Tried on a scratch file at open."""
    path = os.path.join(wal_dir, PUNCH_PROBE)
    fd = fs.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        fs.write(fd, b"\1" * 16384)
        fs.punch_hole(fd, 4096, 8192)
        return fs.pread(fd, 8192, 4096) == b"\0" * 8192
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS):
            log.warning("WAL hole-punch probe failed (%s): reclaiming the WAL prefix by rewriting instead", exc)
        return False
    finally:
        fs.close(fd)
        fs.unlink(path)


class WalWriter:
    """Owns the active WAL file descriptor and the list of rotated chunks."""

    def __init__(
        self,
        fs: FileSystem,
        wal_dir: str,
        config: WalConfig,
        cfg_hash: bytes,
        *,
        active_generation: int,
        active_size: int,
        chunks: dict[int, int],
        active_file_size: int | None = None,
        truncate_point: sidecar.TruncatePoint | None,
        punch_supported: bool,
        backpressure_timeout: float,
    ) -> None:
        self.fs = fs
        self.wal_dir = wal_dir
        self.config = config
        self.cfg_hash = cfg_hash
        self.lock = threading.RLock()
        self.space = threading.Condition(self.lock)
        self.punch_supported = punch_supported
        self.backpressure_timeout = backpressure_timeout
        self.on_full: Callable[[str], None] | None = None
        self.generation = active_generation
        self.chunks = dict(chunks)  # generation -> physical size (rotated, read-only)
        self._shift: dict[int, int] = {}  # generation -> bytes removed from the front by rewrites
        self._reclaimed: dict[int, int] = {}  # generation -> bytes punched out (still in the file size)
        self._sidecar = truncate_point
        self._rewrite_at: int | None = None  # physical offset the next rewrite may drop up to
        self.fd = -1
        self.size = 0  # end of the log in the active file: the next entry goes here
        self.file_end = 0  # end of the active file: [size, file_end) are zeros written by extend_tail
        self.broken = False  # a failed fdatasync, or a partial write that could not be removed
        self.failure: BaseException | None = None  # the failed fdatasync that stopped the WAL
        self.stats = {"rotations": 0, "holes_punched": 0, "rewrites": 0, "chunks_deleted": 0, "wal_full_waits": 0,
                      "preallocated_bytes": 0, "preallocate_errors": 0}
        self.preallocate = config.preallocate if config.durability == "fsync" else 0
        path = os.path.join(wal_dir, ACTIVE)
        point = truncate_point
        if point is not None and point.generation == active_generation and point.offset > max(active_size, HEADER_LEN):
            # Recovery puts such a sidecar back to the header (replay.py, _behind_sidecar); were one
            # to get through, bytes up to it would be taken for a covered prefix and punched out.
            raise QuiverError(f"{path}: the truncate point {point} lies past the end of the log ({active_size} bytes)")
        if active_size >= HEADER_LEN:
            self.fd = fs.open(path, os.O_WRONLY)
            self.size = active_size
            self.file_end = max(active_size, active_file_size or 0)
        else:
            self._create_active()
        if point is not None and point.generation == self.generation:
            # The prefix the sidecar covers is in segments: punched before the restart, or not yet.
            # Either way it must not count as usage again (punching a hole twice is harmless); below
            # RECLAIM_THRESHOLD it counts until reclaimed, as before the restart.
            self._reclaim_active(min(point.offset, self.size))
        self._preallocator: Preallocator | None = None
        if self.preallocate:
            self._preallocator = Preallocator(self, f"quiver-wal-prealloc[{wal_dir}]")
            self._want_tail()

    # -- layout ---------------------------------------------------------------------------------
    def _create_active(self) -> None:
        path = os.path.join(self.wal_dir, ACTIVE)
        fd = self.fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.fs.write(fd, encode_header(self.cfg_hash))
        self.fs.fdatasync(fd)
        self.fs.fsync_dir(self.wal_dir)
        self.fd = fd
        self.size = HEADER_LEN
        self.file_end = HEADER_LEN

    def end_position(self) -> Position:
        with self.lock:
            return Position(self.generation, self.size + self._shift.get(self.generation, 0))

    def usage(self) -> int:
        """Bytes of WAL still allocated: every chunk and the active file, minus punched holes."""
        with self.lock:
            return self._usage()

    def _usage(self) -> int:
        """`usage()` for a caller holding the lock (the append path: no sums over empty maps).

        Bytes a pending rewrite drops are not counted: the next append drops them before it writes,
        so a size-cap check made before that append must not count them (it would refuse the
        append that frees them)."""
        total = self.size + (sum(self.chunks.values()) if self.chunks else 0)
        if self._rewrite_at is not None:
            total -= self._rewrite_at - HEADER_LEN
        return total - sum(self._reclaimed.values()) if self._reclaimed else total

    def file_count(self) -> int:
        return len(self.chunks) + 1

    # -- appends --------------------------------------------------------------------------------
    def append(
        self, frames: Sequence[list], sizes: Sequence[int], sync: bool, before_sync: Callable[[], None] | None = None
    ) -> list[Position]:
        """Write frames (each a list of buffers) contiguously with one gather write; their positions.

        `before_sync` runs after the write, right before the fdatasync (the GIL is free during it)."""
        total = sum(sizes)
        with self.lock:
            if self.failure is not None:  # the preallocator's fdatasync failed
                raise QuiverError(f"fdatasync of the WAL failed: {self.failure}; close and reopen the store")
            try:
                self._make_room(total)
                if self._rewrite_at is not None:
                    self._rewrite()
                start = self.size
                try:
                    self.fs.pwritev(self.fd, [b for f in frames for b in f], start, total)
                except OSError:
                    self._undo_partial_write(start)
                    raise
            except OSError as exc:
                after = "the WAL takes no more writes: close and reopen the store" if self.broken else "retry once there is room"
                raise disk_error(exc, "WAL write", self.wal_dir, f"the entry was not logged; {after}") from exc
            self.size = end = start + total
            if end > self.file_end:
                self.file_end = end
            # Large groups skip the zero-fill: their fdatasync is dominated by the data itself, and
            # zeros written ahead of them would double the bytes written (bench_pipeline: encode +
            # store of 1.2 MB bundles 12-22% over encoding alone without it, 21-51% with it).
            if total <= self.preallocate >> 2 and self.file_end - end < self.preallocate >> 1:
                self._want_tail()
            shift = self._shift.get(self.generation, 0)
            out = []
            pos = start + shift
            for n in sizes:
                out.append(Position(self.generation, pos))
                pos += n
        if sync:
            if before_sync is not None:
                before_sync()
            try:
                self.fs.fdatasync(self.fd)
            except OSError as exc:
                # Never retry a failed fdatasync and trust it (the kernel may have dropped the pages):
                # the WAL takes no more writes in this process; reopening replays what is on disk.
                raise self._failed_sync(exc) from exc
        return out

    def _failed_sync(self, exc: OSError) -> QuiverError:
        self.broken = True
        self.failure = exc
        return QuiverError(f"fdatasync of the WAL failed: {exc}; close and reopen the store")

    def _undo_partial_write(self, start: int) -> None:
        """A failed write may have left part of a frame; cut it so later frames stay reachable."""
        try:
            self.fs.truncate(self.fd, start)
        except OSError as exc:
            self.broken = True
            raise QuiverError(f"WAL {self.wal_dir}/{ACTIVE}: cannot remove a partial write at offset {start}: {exc}") from exc
        self.file_end = start

    # -- pre-extension ----------------------------------------------------------------------------
    def _want_tail(self) -> None:
        """Ask the preallocator for more zeros, unless the file is already zero-filled up to rotation."""
        if self._preallocator is not None and self.file_end < self.config.rotation_size:
            self._preallocator.request()

    def extend_tail(self) -> None:
        """Zero-fill the active file up to `preallocate` bytes past its last entry (preallocator thread).

        The zeros are written under the lock, so no append, rotation or rewrite overlaps them (an
        append may overwrite them before they are synced: its own fdatasync then syncs both). The
        fdatasync runs outside the lock, on a descriptor of its own, so a write error is reported to
        it and to the writer's descriptor alike; a failure stops the WAL as the writer's own would.
        """
        with self.lock:
            start = self.file_end
            stop = min(self.size + self.preallocate, self.config.rotation_size)
            if self.fd < 0 or self.failure is not None or stop <= start:
                return
            fd = self.fs.open(os.path.join(self.wal_dir, ACTIVE), os.O_WRONLY)
            try:
                self.fs.pwrite(fd, bytes(stop - start), start)
            except BaseException:
                self.fs.close(fd)
                raise
            self.file_end = stop
            self.stats["preallocated_bytes"] += stop - start
        try:
            self.fs.fdatasync(fd)
        except OSError as exc:
            with self.lock:
                raise self._failed_sync(exc) from exc
        finally:
            self.fs.close(fd)

    def _at_cap(self, nbytes: int) -> str | None:
        rotate = self.size > HEADER_LEN and self.size + nbytes > self.config.rotation_size
        files = len(self.chunks) + 1 + (1 if rotate else 0)
        live = self._usage() + nbytes + (HEADER_LEN if rotate else 0)
        if files > self.config.max_chunks:
            return f"wal.max_chunks={self.config.max_chunks} files reached ({len(self.chunks) + 1} WAL files in use)"
        if live > self.config.max_size:
            return f"wal.max_size={self.config.max_size} bytes reached ({self.usage()} bytes in use, {nbytes} more needed)"
        return None

    def _make_room(self, nbytes: int) -> None:
        if nbytes + HEADER_LEN > self.config.max_size:
            raise StoreFullError(
                f"a WAL write of {nbytes} bytes can never fit under wal.max_size={self.config.max_size}; raise wal.max_size"
            )
        reason = self._at_cap(nbytes)
        if reason is not None:
            self._reclaim_covered()
            reason = self._at_cap(nbytes)
        if reason is not None:
            self.stats["wal_full_waits"] += 1
            deadline = time.monotonic() + self.backpressure_timeout
            if self.on_full is not None:
                self.on_full(reason)
            while reason is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreFullError(
                        f"WAL full: {reason}; waited {self.backpressure_timeout}s "
                        "(retention.backpressure_timeout) for finalized segments to free WAL space"
                    )
                self.space.wait(min(left, 0.5))
                self._reclaim_covered()
                reason = self._at_cap(nbytes)
        if self.size > HEADER_LEN and self.size + nbytes > self.config.rotation_size:
            try:
                self._rotate()
            except OSError:
                self.broken = True  # half-rotated files: let recovery sort them out on reopen
                raise

    def _rotate(self) -> None:
        if self.preallocate or self.file_end > self.size:
            # A rotated chunk ends with its last entry: cut the zero tail (also what a failed
            # zero-fill write may have left beyond file_end).
            self.fs.truncate(self.fd, self.size)
            self.file_end = self.size
        self.fs.fdatasync(self.fd)
        fd, self.fd = self.fd, -1
        self.fs.close(fd)
        gen = self.generation
        self.fs.rename(os.path.join(self.wal_dir, ACTIVE), os.path.join(self.wal_dir, chunk_name(gen)))
        self.chunks[gen] = self.size
        self.generation = gen + 1
        self._rewrite_at = None
        self._create_active()  # also fsyncs the directory, making the rename durable
        self.stats["rotations"] += 1
        self._want_tail()

    # -- truncation -----------------------------------------------------------------------------
    def truncate_to(self, pos: Position) -> None:
        """Everything before `pos` is in durable segments: persist the sidecar, reclaim space."""
        with self.lock:
            gen, off = pos.generation, pos.offset
            if gen in self.chunks and off - self._shift.get(gen, 0) >= self.chunks[gen]:
                later = [g for g in self.chunks if g > gen]
                gen, off = (min(later), HEADER_LEN) if later else (self.generation, HEADER_LEN)
            phys = off - self._shift.get(gen, 0)
            point = sidecar.TruncatePoint(phys, gen)
            if self._sidecar is not None and (self._sidecar.generation, self._sidecar.offset) >= (gen, phys):
                return
            sidecar.write(self.fs, self.wal_dir, point)
            self._sidecar = point
            dead = [g for g in self.chunks if g < gen]
            for g in dead:
                self.fs.unlink(os.path.join(self.wal_dir, chunk_name(g)))
                del self.chunks[g]
                self._reclaimed.pop(g, None)
                self._shift.pop(g, None)
                self.stats["chunks_deleted"] += 1
            if dead:
                self.fs.fsync_dir(self.wal_dir)
            if gen == self.generation:
                self._reclaim_active(phys)
            self.space.notify_all()

    def _reclaim_covered(self) -> None:
        """At the WAL cap (appending thread, lock held): reclaim every byte of the active file that
        the truncation point covers, whatever the step."""
        point = self._sidecar
        if point is not None and point.generation == self.generation:
            self._reclaim_active(point.offset, force=True)
            if self._rewrite_at is not None:
                self._rewrite()

    def _reclaim_active(self, phys: int, *, force: bool = False) -> None:
        done = HEADER_LEN + self._reclaimed.get(self.generation, 0)
        if phys <= done or (phys - done < RECLAIM_THRESHOLD and not force):
            return
        if self.punch_supported:
            try:
                self.fs.punch_hole(self.fd, done, phys - done)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    raise
                self.punch_supported = False
            else:
                self._reclaimed[self.generation] = phys - HEADER_LEN
                self.stats["holes_punched"] += 1
                return
        self._rewrite_at = phys  # done by the next append, which owns the file exclusively

    def _rewrite(self) -> None:
        """Copy the needed tail into a fresh file, as the seed describes, where holes are unsupported."""
        cut = self._rewrite_at
        self._rewrite_at = None
        if cut is None or cut <= HEADER_LEN:
            return
        src = os.path.join(self.wal_dir, ACTIVE)
        tmp = src + ".new"
        reader = self.fs.open(src, os.O_RDONLY)
        try:
            tail = self.fs.pread(reader, self.size - cut, cut)
        finally:
            self.fs.close(reader)
        fd = self.fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.fs.write(fd, encode_header(self.cfg_hash) + tail)
            self.fs.fdatasync(fd)
        except BaseException:
            self.fs.close(fd)
            self.fs.unlink(tmp)
            raise
        # Offset HEADER_LEN is right for the new file and safe for the old one (replay skips entries
        # already in segments by sequence number), so a crash on either side of the rename is fine.
        point = sidecar.TruncatePoint(HEADER_LEN, self.generation)
        sidecar.write(self.fs, self.wal_dir, point)
        self._sidecar = point
        self.fs.rename(tmp, src)
        self.fs.fsync_dir(self.wal_dir)
        self.fs.close(self.fd)
        self.fd = fd
        self._shift[self.generation] = self._shift.get(self.generation, 0) + cut - HEADER_LEN
        self.size = self.file_end = HEADER_LEN + len(tail)
        self.stats["rewrites"] += 1
        self._want_tail()

    def close(self) -> None:
        if self._preallocator is not None:
            self._preallocator.stop()
        with self.lock:
            if self.fd >= 0:
                fd, self.fd = self.fd, -1
                self.fs.close(fd)
