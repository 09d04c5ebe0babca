"""Exceptions raised by quiver_store. Messages say what was wrong, where, and what to do."""

from __future__ import annotations

import errno


class QuiverError(Exception):
    """Base class of every quiver_store error."""


class ConfigError(QuiverError):
    """A configuration value is invalid (names the key and the accepted range)."""


class NotAStoreError(ConfigError):
    """A store path names something that is not a Quiver store directory (a file, a store's own
    wal/ or segments/ subdirectory, a missing path or an unrelated directory); the message says which."""


class BundleError(QuiverError, ValueError):
    """A RecordBundle was built from invalid parts (slot id, batch, fingerprint, ingestion time).

    Also a ValueError, which RecordBundle raised before it had its own exception."""


class CorruptionError(QuiverError):
    """Stored bytes failed validation. `path` and `offset` locate the damage when known."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None) -> None:
        self.path = path
        self.offset = offset
        where = ""
        if path is not None:
            where = f"{path}" + (f" at offset {offset}" if offset is not None else "") + ": "
        super().__init__(where + message)


class StoreFullError(QuiverError):
    """The store reached its size cap (or WAL cap) and could not make room in time, or the disk is full."""


class StoreClosedError(QuiverError):
    """An operation was attempted on a closed store or subscription."""


DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_error(exc: OSError, action: str, path: str, consequence: str) -> QuiverError:
    """The package's exception for a failed file operation, so callers never see a bare OSError.

    `action` failed on `path` with `exc`; `consequence` says what that means for the caller's data.
    A full disk (ENOSPC, EDQUOT) becomes StoreFullError, like a full size cap: the remedy is the same
    (free space, retry). Anything else becomes QuiverError. Both carry `errno` and `filename`; raise
    them `from exc` so the OSError stays as `__cause__`.
    """
    if exc.errno in DISK_FULL:
        error: QuiverError = StoreFullError(f"disk full: {path}: {action} failed ({exc}); {consequence}")
    else:
        error = QuiverError(f"{path}: {action} failed ({exc}); {consequence}")
    error.errno = exc.errno  # type: ignore[attr-defined]
    error.filename = path  # type: ignore[attr-defined]
    return error
