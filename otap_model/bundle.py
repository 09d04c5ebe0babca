"""OtapBundle: one signal's plain OTAP tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from .errors import MissingTableError, SchemaError
from .payload import SIGNAL_PAYLOADS, PayloadType, Signal


@dataclass
class OtapBundle:
    """The payload tables of one batch of one signal, in plain encoding.

    Plain encoding: every table has exactly its payload type's reference schema (all columns,
    native types, plain ids). Payload types with no rows are absent from `tables`.
    """

    signal: Signal
    tables: dict[PayloadType, pa.RecordBatch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            self.signal = Signal(self.signal)
        except ValueError:
            raise SchemaError(f"OtapBundle: signal {self.signal!r} is not one of {[s.value for s in Signal]}") from None
        if not isinstance(self.tables, Mapping):
            raise SchemaError(f"OtapBundle: tables must be a dict of PayloadType to pyarrow.RecordBatch, got {type(self.tables).__name__}")
        if all(type(pt) is PayloadType and type(t) is pa.RecordBatch for pt, t in self.tables.items()):
            self._check_signal(self.tables)
            return
        keys = {key: self._payload_type(key) for key in self.tables}
        self._check_signal(keys.values())
        self.tables = {keys[key]: _as_batch(table, key) for key, table in self.tables.items()}

    def _payload_type(self, key: object) -> PayloadType:
        try:
            return PayloadType(key)  # type: ignore[arg-type]
        except ValueError:
            raise SchemaError(
                f"OtapBundle({self.signal.value}): table key {key!r} is not a payload type (PayloadType member or its number)"
            ) from None

    def _check_signal(self, payload_types: Iterable[PayloadType]) -> None:
        allowed = SIGNAL_PAYLOADS[self.signal]
        for pt in payload_types:
            if pt not in allowed:
                raise SchemaError(
                    f"payload type {PayloadType(pt).name} does not belong to signal {self.signal.value}; "
                    f"its payload types are {[p.name for p in allowed]}"
                )

    def __getitem__(self, pt: PayloadType) -> pa.RecordBatch:
        try:
            return self.tables[pt]
        except KeyError:
            raise MissingTableError(self._missing(pt)) from None

    def _missing(self, pt: object) -> str:
        present = ", ".join(PayloadType(t).name for t in self.tables) or "none"
        try:
            payload = PayloadType(pt)  # type: ignore[arg-type]
        except ValueError:
            return f"{pt!r} is not a payload type (PayloadType member or its number); this bundle's tables: {present}"
        if payload not in SIGNAL_PAYLOADS[self.signal]:
            return f"{payload.name} does not belong to signal {self.signal.value}; this bundle's tables: {present}"
        return (
            f"this {self.signal.value} bundle has no {payload.name} table (payload types without rows are absent; "
            f"bundle.get(PayloadType.{payload.name}) returns None); its tables: {present}"
        )

    def get(self, pt: PayloadType) -> pa.RecordBatch | None:
        return self.tables.get(pt)

    @property
    def num_rows(self) -> int:
        """Rows of the root table (log records, spans or metrics)."""
        from .payload import ROOT_PAYLOAD

        root = self.tables.get(ROOT_PAYLOAD[self.signal])
        return 0 if root is None else root.num_rows

    def equals(self, other: object, *, check_metadata: bool = False) -> bool:
        """Same signal and equal tables; a missing table equals an empty one."""
        if not isinstance(other, OtapBundle) or other.signal != self.signal:
            return False
        for pt in set(self.tables) | set(other.tables):
            mine, theirs = self.tables.get(pt), other.tables.get(pt)
            if mine is None or theirs is None:
                if (mine if mine is not None else theirs).num_rows:  # type: ignore[union-attr]
                    return False
                continue
            if not mine.equals(theirs, check_metadata=check_metadata):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return self.equals(other)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(cls, signal: Signal, tables: Mapping[PayloadType, pa.RecordBatch]) -> OtapBundle:
        """Build a bundle dropping empty tables."""
        return cls(signal, {PayloadType(pt): t for pt, t in tables.items() if t.num_rows})


def _as_batch(table: object, key: object) -> pa.RecordBatch:
    """A table as the one RecordBatch a bundle holds (a pyarrow Table is combined)."""
    if isinstance(table, pa.RecordBatch):
        return table
    if isinstance(table, pa.Table):
        return one_batch(table)
    name = PayloadType(key).name  # type: ignore[arg-type]
    raise SchemaError(
        f"OtapBundle: the {name} table must be a pyarrow.RecordBatch or Table, got {type(table).__name__} "
        f"(otap_model.conform(table, PayloadType.{name}) takes pandas and other Arrow producers' tables)"
    )


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """The rows of a pyarrow Table as one RecordBatch (chunks combined; zero-copy for one chunk)."""
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)
