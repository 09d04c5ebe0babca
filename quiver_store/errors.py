"""Exceptions raised by quiver_store. Messages say what was wrong, where, and what to do."""


class QuiverError(Exception):
    """Base class of every quiver_store error."""


class ConfigError(QuiverError):
    """A configuration value is invalid (names the key and the accepted range)."""


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
