"""Exceptions raised by quiver_store. Messages say what was wrong, where, and what to do."""


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
    """The store reached its size cap (or WAL cap) and could not make room in time."""


class StoreClosedError(QuiverError):
    """An operation was attempted on a closed store or subscription."""
