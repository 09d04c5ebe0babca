"""The one file-system interface every store read and write goes through.

Tests swap in a subclass that injects faults (EIO, ENOSPC, torn writes, dropped unsynced data)
at any operation, so no module of quiver_store may call ``os``/``open``/``mmap`` on store files
directly.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import stat


class FileSystem:
    """Thin wrapper over POSIX file operations on raw file descriptors."""

    # -- files -------------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """A descriptor of a regular file or directory. O_NONBLOCK (no effect on those) keeps a
        FIFO in a store's place from blocking the open forever; such a file, a device or a socket
        raises OSError naming it."""
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
        kind = os.fstat(fd).st_mode
        if not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
            os.close(fd)
            what = "a FIFO" if stat.S_ISFIFO(kind) else "a socket" if stat.S_ISSOCK(kind) else "a device"
            raise OSError(errno.EINVAL, f"not a regular file ({what})", path)
        return fd

    def close(self, fd: int) -> None:
        os.close(fd)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        """Write all of `data` at the current offset (loops over short writes)."""
        view = memoryview(data)
        total = 0
        while total < len(view):
            total += os.write(fd, view[total:])
        return total

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        view = memoryview(data)
        total = 0
        while total < len(view):
            total += os.pwrite(fd, view[total:], offset + total)
        return total

    def pwritev(self, fd: int, buffers: list, offset: int, nbytes: int | None = None) -> int:
        """Gather-write `buffers` contiguously at `offset` (no joining copy); loops over short writes.

        `nbytes`, their total size when the caller knows it, saves measuring every buffer."""
        if len(buffers) <= 1024:  # IOV_MAX: the usual case is one complete call, without views
            expected = nbytes if nbytes is not None else sum(memoryview(b).nbytes for b in buffers)
            n = os.pwritev(fd, buffers, offset)
            if n == expected:
                return n
        else:
            n = 0
        views = [memoryview(b).cast("B") for b in buffers]
        total = 0
        i = 0
        while n > 0:  # skip what the first call wrote
            if n >= len(views[i]):
                n -= len(views[i])
                total += len(views[i])
                i += 1
            else:
                views[i] = views[i][n:]
                total += n
                n = 0
        while i < len(views):
            batch = views[i : i + 1024]  # IOV_MAX
            n = os.pwritev(fd, batch, offset + total)
            if n == 0 and any(len(v) for v in batch):
                raise OSError(errno.EIO, "pwritev wrote nothing")
            total += n
            for v in batch:  # advance past what was written, keeping a partly written buffer's tail
                if n >= len(v):
                    n -= len(v)
                    i += 1
                else:
                    views[i] = v[n:]
                    break
        return total

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        return os.pread(fd, length, offset)

    def seek(self, fd: int, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(fd, offset, whence)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        os.posix_fallocate(fd, offset, length)

    def punch_hole(self, fd: int, offset: int, length: int) -> None:
        """Deallocate a byte range keeping the file size (Linux FALLOC_FL_PUNCH_HOLE).

        Raises OSError(EOPNOTSUPP) where the platform or file system cannot do it.
        """
        import ctypes
        import ctypes.util

        libc_name = ctypes.util.find_library("c")
        if libc_name is None:
            raise OSError(errno.EOPNOTSUPP, "fallocate is unavailable")
        libc = ctypes.CDLL(libc_name, use_errno=True)
        falloc_fl_keep_size, falloc_fl_punch_hole = 0x01, 0x02
        fn = libc.fallocate
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        if fn(fd, falloc_fl_keep_size | falloc_fl_punch_hole, offset, length) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def mmap(self, fd: int, length: int = 0) -> mmap.mmap:
        """Read-only shared mapping of the whole file."""
        return mmap.mmap(fd, length, access=mmap.ACCESS_READ)

    def read_file(self, path: str) -> bytes:
        fd = self.open(path, os.O_RDONLY)
        try:
            return self.pread(fd, self.size(fd), 0)
        except OSError as exc:  # reads on a descriptor name no file; say which (a directory, EIO)
            exc.filename = exc.filename or path
            raise
        finally:
            self.close(fd)

    def lock_exclusive(self, fd: int) -> None:
        """Non-blocking exclusive flock; BlockingIOError when another process holds it."""
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    # -- directories -------------------------------------------------------------------------
    def lock_directory(self, path: str) -> int:
        """A descriptor of directory `path` holding a non-blocking exclusive flock (BlockingIOError
        when another open file description holds it). Unlike a lock file's, it cannot be removed
        while the holder runs: deleting the directory's LOCK file does not release it."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def unlock_directory(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def replace_file(self, path: str, data: bytes) -> None:
        """tmp file + fdatasync + rename + directory fsync: readers, and a reboot, see the old bytes
        or the new ones, never a mix. A leftover `path + ".tmp"` is an interrupted replace."""
        tmp = path + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.write(fd, data)
            self.fdatasync(fd)
        finally:
            self.close(fd)
        self.rename(tmp, path)
        self.fsync_dir(os.path.dirname(path) or ".")


DEFAULT_FS = FileSystem()
