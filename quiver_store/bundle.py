"""RecordBundle: the generic unit Quiver stores, a set of optional Arrow batches keyed by slot."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import blake3
import pyarrow as pa
import pyarrow.types as pat

from .errors import BundleError

MAX_SLOTS = 64


def default_fingerprint(schema: pa.Schema) -> bytes:
    """32-byte blake3 of the schema's IPC serialization with metadata removed.

    Embedders with their own notion of schema identity (the OTAP adapter uses the schema
    signature) pass fingerprints explicitly instead.
    """
    return blake3.blake3(schema.remove_metadata().serialize().to_pybytes()).digest()


def repeated_names(schema: pa.Schema) -> list[tuple[str, list[str], list[str]]]:
    """(where, repeated names, all names) for the top level of `schema` and each struct in it
    (also inside lists, maps, dictionaries) where two columns or fields share a name. `where` is
    "" for the top level, else the struct column's path ("res", "spans.item"). The store finds
    columns and struct fields by name (segment directories, representative schemas, conforming),
    so a repeated one is stored or read wrong. Union children are found by type code, not name."""
    found: list[tuple[str, list[str], list[str]]] = []
    _repeated(schema.names, schema.types, "", True, found)
    return found


def _repeated(
    names: list[str], types: list[pa.DataType], path: str, by_name: bool, found: list[tuple[str, list[str], list[str]]]
) -> None:
    if by_name and len(set(names)) != len(names):
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        found.append((path, [n for n, c in counts.items() if c > 1], names))
    for name, t in zip(names, types, strict=True):
        while pat.is_dictionary(t):
            t = t.value_type
        if t.num_fields:  # struct, list, map, union, run-end encoded: walk every child field
            children = [t.field(i) for i in range(t.num_fields)]
            where = f"{path}.{name}" if path else name
            _repeated([f.name for f in children], [f.type for f in children], where, pat.is_struct(t), found)


def _repeated_message(slot: int, where: str, repeated: list[str], names: list[str]) -> str:
    listed = ", ".join(repr(n) for n in repeated)
    plural = len(repeated) > 1
    if where:
        what = f"struct column {where!r} uses the field name{'s' if plural else ''} {listed} more than once (fields: {names})"
        kind = "struct fields"
    else:
        what = f"the column name{'s' if plural else ''} {listed} {'are' if plural else 'is'} used more than once (columns: {names})"
        kind = "columns"
    return f"RecordBundle: slot {slot}: {what}; the store finds {kind} by name, so each needs its own: rename the duplicates"


# A not-null field's place: the top-level column index, then one step per level below it (a
# struct child's index, or VALUES for the items of a list or the entries of a map).
VALUES = -1
FieldPath = tuple[int, ...]


@dataclass(frozen=True)
class NotNullFields:
    """Where a schema declares fields not null: top-level column indices (checked together, one
    `select` + `drop_null` per batch however many) and the paths of deeper fields."""

    columns: tuple[int, ...]
    nested: tuple[FieldPath, ...]


def not_null_fields(schema: pa.Schema) -> NotNullFields | None:
    """Every field `schema` declares not null, at any depth (inside structs, lists and maps;
    dictionaries by their indices; unions are not walked: they have no validity of their own).
    None when there is none."""
    found: list[FieldPath] = []
    for i, f in enumerate(schema):
        _not_null(f, (i,), found)
    if not found:
        return None
    return NotNullFields(tuple(p[0] for p in found if len(p) == 1), tuple(p for p in found if len(p) > 1))


def _not_null(f: pa.Field, path: FieldPath, found: list[FieldPath]) -> None:
    if not f.nullable:
        found.append(path)
    t = f.type
    if pat.is_struct(t):
        for j in range(t.num_fields):
            _not_null(t.field(j), (*path, j), found)
    elif pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t) or pat.is_map(t):
        _not_null(t.field(0), (*path, VALUES), found)  # a map's: its entries, struct<key, value>


def unmasked_nulls(batch: pa.RecordBatch, path: FieldPath) -> int:
    """How many values of the field at `path` are null where every level above it holds a value:
    the nulls Arrow readers that enforce nullability (arrow-rs, for one) refuse. A null under a
    null struct row or a null list is no value at all, so it does not count."""
    array = batch.column(path[0])
    above = 0  # nulls the level above `array` passed down to it
    for step in path[1:]:
        if step == VALUES:
            if pat.is_map(array.type):  # (no flatten kernel for maps) the entries the slice spans
                start, end = array.offsets[0].as_py(), array.offsets[-1].as_py()
                array = array.values.slice(start, end - start)
            else:
                array = array.flatten()  # the items of the rows that hold a list
            above = 0
        else:
            above = array.null_count
            array = array.flatten()[step] if above else array.field(step)  # the struct's nulls merged in
    return array.null_count - above


def field_name(schema: pa.Schema, path: FieldPath) -> str:
    """The dotted name of the field at `path` ("body.type", "spans.item", "attrs.entries.key")."""
    f = schema.field(path[0])
    names = [f.name]
    for step in path[1:]:
        f = f.type.field(0 if step == VALUES else step)
        names.append(f.name)
    return ".".join(names)


def _null_message(slot: int, name: str, count: int) -> str:
    return (
        f"RecordBundle: slot {slot}: field {name!r} is declared not null but holds {count} null value"
        f"{'s' if count > 1 else ''}; Arrow readers that enforce nullability (arrow-rs, so every Rust "
        "consumer) refuse such a batch. Fill the nulls or declare the field nullable; nothing was written"
    )


@dataclass
class RecordBundle:
    """Slots (ids < 64) mapped to record batches, with a schema fingerprint per slot."""

    slots: Mapping[int, pa.RecordBatch]
    fingerprints: Mapping[int, bytes] | None = None
    ingestion_time_ns: int | None = None
    _fingerprints: dict[int, bytes] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.slots, Mapping):
            raise BundleError(
                f"RecordBundle slots must be a mapping of slot id -> pyarrow.RecordBatch, got {type(self.slots).__name__}"
            )
        slots: dict[int, pa.RecordBatch] = {}
        for slot, batch in self.slots.items():
            if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < MAX_SLOTS:
                raise BundleError(
                    f"RecordBundle: slot id {slot!r} is out of range: slot ids are integers in [0, {MAX_SLOTS})"
                )
            if not isinstance(batch, pa.RecordBatch):
                raise BundleError(
                    f"RecordBundle: slot {slot}: expected a pyarrow.RecordBatch, got {type(batch).__name__}"
                )
            slots[int(slot)] = batch
        slots = dict(sorted(slots.items()))
        if self.fingerprints is not None and not isinstance(self.fingerprints, Mapping):
            raise BundleError(
                f"RecordBundle fingerprints must be a mapping of slot id -> 32 bytes, got {type(self.fingerprints).__name__}"
            )
        given = dict(self.fingerprints or {})
        for slot, fp in given.items():
            if slot not in slots:
                raise BundleError(f"RecordBundle: fingerprint given for slot {slot!r}, which has no batch")
            if not isinstance(fp, bytes | bytearray | memoryview) or len(fp) != 32:
                got = f"{len(fp)} bytes" if isinstance(fp, bytes | bytearray | memoryview) else type(fp).__name__
                raise BundleError(f"RecordBundle: slot {slot}: schema fingerprint must be 32 bytes, got {got}")
        ts = self.ingestion_time_ns
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or not -(1 << 63) <= ts < 1 << 63):
            raise BundleError(
                f"RecordBundle: ingestion_time_ns must be an int64 of nanoseconds since the epoch, got {ts!r}"
            )
        self.slots = slots
        self._fingerprints = {s: bytes(given[s]) if s in given else default_fingerprint(b.schema) for s, b in slots.items()}
        self.fingerprints = self._fingerprints
        if self.ingestion_time_ns is None:
            self.ingestion_time_ns = time.time_ns()

    def check_names(self) -> None:
        """BundleError for a repeated column or struct field name. `ingest` checks it (once per
        schema: wal/bundle_codec.py); a bundle read back from storage is not, so one stored before
        this check existed still reads back."""
        for slot in self.slots:
            self.check_slot_names(slot)

    def check_slot_names(self, slot: int) -> None:
        for where, repeated, names in repeated_names(self.slots[slot].schema)[:1]:
            raise BundleError(_repeated_message(slot, where, repeated, names))

    def check_slot_nulls(self, slot: int, fields: NotNullFields) -> None:
        """BundleError for a null value in a field the slot's schema declares not null
        (`fields` = not_null_fields of that schema, which the caller caches per schema)."""
        batch = self.slots[slot]
        columns = fields.columns
        if columns and batch.select(columns).drop_null().num_rows != batch.num_rows:  # (no null: its input back)
            self._refuse_nulls(slot, [(i,) for i in columns])
        if fields.nested:
            self._refuse_nulls(slot, fields.nested)

    def _refuse_nulls(self, slot: int, paths: Iterable[FieldPath]) -> None:
        batch = self.slots[slot]
        for path in paths:
            count = unmasked_nulls(batch, path)
            if count:
                raise BundleError(_null_message(slot, field_name(batch.schema, path), count))

    def fingerprint(self, slot: int) -> bytes:
        try:
            return self._fingerprints[slot]
        except KeyError:
            raise BundleError(
                f"RecordBundle: slot {slot!r} has no fingerprint: slots were added after the bundle was built "
                "(build a new RecordBundle instead)"
            ) from None

    @property
    def slot_bitmap(self) -> int:
        bitmap = 0
        for slot in self.slots:
            bitmap |= 1 << slot
        return bitmap

    def equals(self, other: object) -> bool:
        """Same slots with equal batches (schemas and data; metadata ignored)."""
        if not isinstance(other, RecordBundle) or set(self.slots) != set(other.slots):
            return False
        return all(self.slots[s].equals(other.slots[s]) for s in self.slots)
