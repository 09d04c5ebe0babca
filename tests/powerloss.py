"""A FileSystem that simulates power loss: it remembers what each fsync made durable and, after a
crash at a chosen operation, builds the directory a machine would find on reboot.

The model follows RocksDB's FaultInjectionTestFS and SQLite's crash VFS: file contents are durable
up to the last fsync/fdatasync of the file; directory entries (creations, renames, unlinks) only
after an fsync of their directory. At the crash, each file with unsynced changes keeps either its
synced content, all of its current content, a torn mix (the synced bytes with a random prefix
of the changed range applied, optionally followed by garbage, as a sector written halfway), or
any subset of its changed 4 KiB pages with the old or the new size (write-back out of order); each
directory keeps either its synced entries or its current ones. Operation number `crash_at` (counting
every call that changes or syncs something) and everything after it never happens: it raises
`PowerLoss`, an OSError, so the store fails the way it fails on a dead disk.
"""

from __future__ import annotations

import errno
import os
import random
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from quiver_store.fs import FileSystem

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = 4096  # the unit in which the page cache writes a file back


class PowerLoss(OSError):
    def __init__(self) -> None:
        super().__init__(errno.EIO, "simulated power loss")


@dataclass
class _Inode:
    current_path: str  # where its bytes live on the real disk now (moves with renames)
    durable: bytes = b""  # content as of the last fsync / fdatasync
    synced_once: bool = False
    detached: bytes | None = None  # its content when it lost its name (unlinked, or renamed over)


@dataclass
class _State:
    names: dict[str, int] = field(default_factory=dict)  # path -> inode, as the running process sees it
    durable_names: dict[str, dict[str, int]] = field(default_factory=dict)  # dir -> {name: inode} at its last fsync
    dirs: set[str] = field(default_factory=set)


class PowerLossFS(FileSystem):
    def __init__(self, root: str, crash_at: int | None = None, skip_sync_site: str | None = None) -> None:
        self.root = os.path.abspath(root)
        self.crash_at = crash_at
        self.skip_sync_site = skip_sync_site  # "module.py:line" whose syncs make nothing durable
        self.sync_sites: set[str] = set()
        self.ops = 0
        self.crashed = False
        self._lock = threading.RLock()
        self._inodes: list[_Inode] = []
        self._fds: dict[int, int] = {}
        self._state = _State()
        self._adopt_existing()

    # -- bookkeeping -------------------------------------------------------------------------
    def _adopt_existing(self) -> None:
        """Everything already on disk under root is durable (it survived an earlier reboot)."""
        os.makedirs(self.root, exist_ok=True)
        for directory, _subdirs, files in os.walk(self.root):
            self._state.dirs.add(directory)
            entries = self._state.durable_names.setdefault(directory, {})
            for name in files:
                path = os.path.join(directory, name)
                with open(path, "rb") as f:
                    ino = self._new_inode(path, f.read())
                self._state.names[path] = ino
                entries[name] = ino

    def _new_inode(self, path: str, durable: bytes = b"") -> int:
        self._inodes.append(_Inode(path, durable, synced_once=bool(durable)))
        return len(self._inodes) - 1

    def _step(self) -> None:
        """Count one operation that changes or syncs state; fail it and all later ones after the crash."""
        with self._lock:
            if self.crashed:
                raise PowerLoss()
            if self.crash_at is not None and self.ops >= self.crash_at:
                self.crashed = True
                raise PowerLoss()
            self.ops += 1

    # -- files -------------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = os.path.abspath(path)
        mutating = bool(flags & (os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_RDWR))
        if mutating:
            self._step()
        with self._lock:
            fd = super().open(path, flags, mode)
            ino = self._state.names.get(path)
            if ino is None:
                ino = self._new_inode(path)
                self._state.names[path] = ino
            self._fds[fd] = ino
            return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)
        super().close(fd)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        self._step()
        return super().write(fd, data)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        self._step()
        return super().pwrite(fd, data, offset)

    def pwritev(self, fd: int, buffers: list, offset: int, nbytes: int | None = None) -> int:
        self._step()
        return super().pwritev(fd, buffers, offset, nbytes)

    def truncate(self, fd: int, length: int) -> None:
        self._step()
        super().truncate(fd, length)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        self._step()
        super().fallocate(fd, offset, length)

    def punch_hole(self, fd: int, offset: int, length: int) -> None:
        self._step()
        super().punch_hole(fd, offset, length)

    def fdatasync(self, fd: int) -> None:
        self._step()
        super().fdatasync(fd)
        if self._sync_counts():
            self._capture(fd)

    def fsync(self, fd: int) -> None:
        self._step()
        super().fsync(fd)
        if self._sync_counts():
            self._capture(fd)

    def _sync_counts(self) -> bool:
        """Record the store's call site of this sync; False when it is the one being left out."""
        frame = sys._getframe(2)
        while frame.f_code.co_filename.endswith(("powerloss.py", os.path.join("quiver_store", "fs.py"))):
            frame = frame.f_back  # type: ignore[assignment]
        site = f"{os.path.relpath(frame.f_code.co_filename, _REPO)}:{frame.f_lineno}"
        with self._lock:
            self.sync_sites.add(site)
        return site != self.skip_sync_site

    def _capture(self, fd: int) -> None:
        with self._lock:
            inode = self._inodes[self._fds[fd]]
            with open(f"/proc/self/fd/{fd}", "rb") as f:  # the fd may be write-only
                inode.durable = f.read()
            inode.synced_once = True

    # -- directories -------------------------------------------------------------------------
    def fsync_dir(self, path: str) -> None:
        self._step()
        super().fsync_dir(path)
        if not self._sync_counts():
            return
        path = os.path.abspath(path)
        with self._lock:
            self._state.durable_names[path] = {
                os.path.basename(p): ino for p, ino in self._state.names.items() if os.path.dirname(p) == path
            }

    def rename(self, src: str, dst: str) -> None:
        self._step()
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        with self._lock:
            replaced = self._state.names.get(dst)
            if replaced is not None:
                self._detach(replaced, dst)
            super().rename(src, dst)
            ino = self._state.names.pop(src)
            self._state.names[dst] = ino
            self._inodes[ino].current_path = dst

    def unlink(self, path: str) -> None:
        self._step()
        path = os.path.abspath(path)
        with self._lock:
            if path in self._state.names:
                self._detach(self._state.names[path], path)
            super().unlink(path)
            self._state.names.pop(path, None)

    def _detach(self, ino: int, path: str) -> None:
        """Keep the bytes of an inode that loses its name: an unsynced directory may still hold
        the old entry after a reboot, and the path then shows another file's (or no) bytes."""
        with open(path, "rb") as f:
            self._inodes[ino].detached = f.read()

    def makedirs(self, path: str) -> None:
        self._step()
        path = os.path.abspath(path)
        with self._lock:
            super().makedirs(path)
            while path.startswith(self.root) and path not in self._state.dirs:
                self._state.dirs.add(path)  # directories are taken as durable once created
                self._state.durable_names.setdefault(path, {})
                path = os.path.dirname(path)

    # -- the reboot --------------------------------------------------------------------------
    def durable_image(self, target: str, rng: random.Random, torn: bool = True, reordered: bool = False) -> dict[str, str]:
        """Write the directory tree a reboot would find into `target`; return, per file written,
        which fate its unsynced changes met (for failure messages). `reordered`: every file with
        unsynced changes gets the same adversarial fate instead of a random one: new size, its
        odd-numbered pages new and its even-numbered ones (the first among them) old."""
        os.makedirs(target)  # must not exist: stale files would pass for survivors
        fates: dict[str, str] = {}
        with self._lock:
            current_by_dir: dict[str, dict[str, int]] = {}
            for p, ino in self._state.names.items():
                current_by_dir.setdefault(os.path.dirname(p), {})[os.path.basename(p)] = ino
            contents: dict[int, bytes] = {}
            for directory in sorted(self._state.dirs):
                durable = self._state.durable_names.get(directory, {})
                current = current_by_dir.get(directory, {})
                entries = durable if not torn or durable == current or rng.random() < 0.5 else current
                out_dir = os.path.join(target, os.path.relpath(directory, self.root))
                os.makedirs(out_dir, exist_ok=True)
                for name, ino in entries.items():
                    if ino not in contents:
                        contents[ino], fate = self._survivor(ino, rng, torn, reordered)
                        fates[os.path.relpath(os.path.join(directory, name), self.root)] = fate
                    with open(os.path.join(out_dir, name), "wb") as f:
                        f.write(contents[ino])
        return fates

    def _survivor(self, ino: int, rng: random.Random, torn: bool, reordered: bool = False) -> tuple[bytes, str]:
        inode = self._inodes[ino]
        if inode.detached is not None:
            current = inode.detached
        else:
            with open(inode.current_path, "rb") as f:
                current = f.read()
        durable = inode.durable
        if current == durable:
            return durable, "synced"
        if not torn:
            return durable, "unsynced changes dropped"
        first_diff = next((i for i, (a, b) in enumerate(zip(durable, current)) if a != b), min(len(durable), len(current)))
        if reordered:
            return _pages_landed(durable, current, first_diff, lambda page: page % 2 == 1, new_size=True)
        choice = rng.random()
        if choice < 0.25:
            return durable, "unsynced changes dropped"
        if choice < 0.4:
            return current, "unsynced changes all landed"
        if choice < 0.6:
            return _pages_landed(durable, current, first_diff, lambda page: rng.random() < 0.5, rng.random() < 0.5)
        cut = first_diff + rng.randrange(max(1, len(current) - first_diff + 1))
        mixed = current[:cut] + durable[cut:]
        if choice < 0.8:
            return mixed, f"torn at byte {cut}"
        room = len(current) - cut  # a half-written sector holds garbage only where the write went
        if room <= 0:
            return mixed, f"torn at byte {cut}"
        garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, min(64, room) + 1)))
        return mixed[:cut] + garbage + mixed[cut + len(garbage):], f"torn at byte {cut} with {len(garbage)} garbage bytes"


def _pages_landed(
    durable: bytes, current: bytes, first_diff: int, lands: Callable[[int], bool], new_size: bool
) -> tuple[bytes, str]:
    """Write-back in any order: each 4 KiB page of the changed range holds its new bytes where
    `lands(page)`, else its old ones (zeros past the old end), and the size is the new or the old one.
    So a later page of one write, or a later write, can land while an earlier one did not (SQLite's
    crash VFS, ALICE)."""
    length = len(current) if new_size else len(durable)
    old = durable[:length].ljust(length, b"\0")
    out = bytearray(old)
    landed = []
    for page in range(first_diff // PAGE, -(-length // PAGE)):
        if lands(page):
            lo, hi = page * PAGE, min((page + 1) * PAGE, length)
            out[lo:hi] = current[lo:hi].ljust(hi - lo, b"\0")
            landed.append(page)
    return bytes(out), f"{length} bytes, new content in pages {landed} only"


class IoErrorFS(FileSystem):
    """Fails operation number `fail_at` (counting calls that change or sync something) with
    `code` (EIO, ENOSPC), once or, with `persistent`, that one and every later one; the process
    keeps running, unlike PowerLossFS."""

    def __init__(self, fail_at: int | None, code: int, persistent: bool = False) -> None:
        self.fail_at, self.code, self.persistent = fail_at, code, persistent
        self.ops = 0
        self.failed = 0
        self._lock = threading.Lock()

    def _step(self) -> None:
        with self._lock:
            index = self.ops
            self.ops += 1
            if self.fail_at is None or index < self.fail_at or (index > self.fail_at and not self.persistent):
                return
            self.failed += 1
        raise OSError(self.code, f"injected {errno.errorcode[self.code]} at operation {index}")

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & (os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_RDWR):
            self._step()
        return super().open(path, flags, mode)


def _failing(name: str):
    """An IoErrorFS method: count the operation (maybe failing it), then do it."""

    def method(self: IoErrorFS, *args, **kwargs):
        self._step()
        return getattr(FileSystem, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("write", "pwrite", "pwritev", "truncate", "fallocate", "punch_hole", "fdatasync", "fsync", "fsync_dir",
              "rename", "unlink", "makedirs"):
    setattr(IoErrorFS, _name, _failing(_name))
