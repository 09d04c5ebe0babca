"""Input checks of the encoder: a bundle must hold plain tables of the reference schemas whose
parent ids point at existing parents. Runs before any encoder state changes. The decoder reuses
the value checks (not-null columns, AnyValue type codes, parents present) on what it decodes."""

from __future__ import annotations

from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import Message

from otap_model import SIGNAL_PAYLOADS, OtapBundle, PayloadType, Signal, reference_schema, relations
from otap_model.payload import ATTRIBUTE_TABLES
from otap_model.schema import conform_hint, strip_annotations

from .errors import AdaptiveArrowError, EncodingError
from .transport import PLAIN, TransportError, check_encoding, kernels
from .transport.columns import SchemaCache, encoded_paths, encoding_of, get_field, values_view
from .transport.sort import validity


def _describe(f: pa.Field) -> str:
    return f"{f.type} (nullable={f.nullable})"


def check_schema(pt: PayloadType, batch: pa.RecordBatch) -> None:
    """Raise EncodingError naming the first unknown, missing, misplaced or mistyped column."""
    if not isinstance(batch, pa.RecordBatch):
        raise EncodingError(f"{pt.name}: expected a pyarrow.RecordBatch, got {type(batch).__name__}")
    ref = reference_schema(pt)
    got = batch.schema
    if got.equals(ref):  # names, types (nested ones included) and nullability; metadata ignored
        return
    unknown = [n for n in got.names if ref.get_field_index(n) < 0]
    if unknown:
        raise EncodingError(f"{pt.name}: unknown column(s) {unknown}; the reference schema has {ref.names}")
    missing = [n for n in ref.names if n not in got.names]
    if missing:
        raise EncodingError(f"{pt.name}: missing column(s) {missing}; plain tables carry every reference column{conform_hint(pt)}")
    if got.names != ref.names:
        raise EncodingError(f"{pt.name}: columns {got.names} are not in reference order {ref.names}{conform_hint(pt)}")
    for want, have in zip(ref, got):
        w, h = strip_annotations(want), strip_annotations(have)
        if not w.equals(h):
            raise EncodingError(f"{pt.name}.{want.name}: wrong type {_describe(h)}, expected {_describe(w)}{conform_hint(pt)}")


def _column(batch: pa.RecordBatch, path: str) -> tuple[pa.Field, pa.Array]:
    head, _, rest = path.partition(".")
    field = batch.schema.field(head)
    array = batch.column(head)
    if rest:
        idx = field.type.get_field_index(rest)
        field = field.type.field(idx)
        array = array.flatten()[idx] if array.null_count else array.field(idx)
    return field, array


def _plain(field: pa.Field) -> bool:
    return encoding_of(field) in (None, PLAIN)


_MAX_TABLE = 1 << 22  # largest id for which a presence table beats hashing


def _all_in(ids: pa.Array, keys: pa.Array) -> bool:
    """Whether every id (``ids`` has no nulls) is one of the non-null keys.

    Ids are small dense integers in practice: one kernel builds a presence table indexed by id and
    looks every id up; other types, or ids too large for a table, hash with ``is_in``.
    """
    if len(ids) == 0:
        return True
    if _narrow(ids.type) and _narrow(keys.type):
        bitmap, offset = validity(keys)
        found = kernels.ids_present(_values(ids), _values(keys), bitmap, offset, _MAX_TABLE)
        if found >= 0:
            return bool(found)
    if keys.null_count:
        keys = keys.drop_null()
    if len(keys) == 0:
        return False
    return bool(pc.all(pc.is_in(ids, value_set=keys)).as_py())


def _narrow(type_: pa.DataType) -> bool:
    """Unsigned and at most 32 bits wide: values the id kernels read as int64 (ids are u16 / u32)."""
    return pa.types.is_unsigned_integer(type_) and type_.bit_width <= 32


def _values(array: pa.Array) -> np.ndarray:
    return values_view(array, array.type.to_pandas_dtype())


def check_parents(bundle: OtapBundle, error: type[AdaptiveArrowError] = EncodingError, where: str = "") -> None:
    """Every child table with rows needs its parent table (shared by the encoder and decoder)."""
    for rel in relations(Signal(bundle.signal)):
        child = bundle.tables.get(rel.child)
        if child is None or child.num_rows == 0:
            continue
        parent = bundle.tables.get(rel.parent)
        if parent is None or parent.num_rows == 0:
            raise error(
                f"{where}{rel.child.name}.parent_id: {child.num_rows} row(s) reference {rel.parent.name}.{rel.parent_column}, "
                f"but the bundle has no {rel.parent.name} table"
            )


def check_ids(bundle: OtapBundle) -> None:
    """Every parent_id must be non-null and reference an existing parent id (plain ids only)."""
    check_parents(bundle)
    for rel in relations(Signal(bundle.signal)):
        child = bundle.tables.get(rel.child)
        if child is None or child.num_rows == 0:
            continue
        pfield, pid = _column(child, "parent_id")
        if pid.null_count:
            raise EncodingError(f"{rel.child.name}.parent_id: {pid.null_count} null value(s); parent ids are required")
        if not _plain(pfield):
            continue
        kfield, keys = _column(bundle.tables[rel.parent], rel.parent_column)
        if not _plain(kfield):
            continue
        if not _all_in(pid, keys):
            bad = pc.filter(pid, pc.invert(pc.is_in(pid, value_set=keys.drop_null())))
            raise EncodingError(
                f"{rel.child.name}.parent_id: {len(bad)} value(s) out of range (e.g. {bad[0].as_py()}): "
                f"no {rel.parent.name}.{rel.parent_column} has that id"
            )


def _first_duplicate(ids: pa.Array) -> int | None:
    """A non-null value that occurs more than once, or None (the most frequent one from a
    counting table for dense small unsigned ids, the smallest repeated one from a sort otherwise)."""
    if _narrow(ids.type):
        bitmap, offset = validity(ids)
        found = int(kernels.most_repeated(_values(ids), bitmap, offset))
        if found != -2:  # -2: too sparse for a counting table
            return None if found < 0 else found
    if ids.null_count:
        ids = ids.drop_null()
    if len(ids) < 2:
        return None
    ordered = np.sort(ids.to_numpy())
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    return int(ordered[same[0]]) if same.size else None


def check_unique_ids(bundle: OtapBundle) -> None:
    """The ``id`` of a table that child tables point at must be unique among its non-null values:
    a repeated id gives the rows' children to both, and sorting then moves them to the wrong
    record. ``resource.id`` and ``scope.id`` repeat by design and are not checked."""
    parents = {rel.parent for rel in relations(Signal(bundle.signal)) if rel.parent_column == "id"}
    for pt in parents:
        table = bundle.tables.get(pt)
        if table is None or table.num_rows < 2:
            continue
        field, ids = _column(table, "id")
        if not _plain(field):
            continue
        dup = _first_duplicate(ids)
        if dup is not None:
            rows = _rows(pc.equal(ids, pa.scalar(dup, ids.type)))
            raise EncodingError(
                f"{pt.name}.id: value {dup} is duplicated ({rows.size} rows, e.g. rows {rows[:5].tolist()}); "
                "ids that child tables reference must be unique within the table"
            )


_MAX_TYPE_CODE = 7  # EMPTY, STR, INT, DOUBLE, BOOL, MAP, SLICE, BYTES (otap_model.otlp.anyvalue)


def check_values(bundle: OtapBundle, error: type[AdaptiveArrowError] = EncodingError, where: str = "") -> None:
    """Not-null top-level columns hold no nulls and attribute tables' AnyValue ``type`` codes are
    defined ones: nulls and unknown codes would reach OTLP as garbage or fail its conversion.
    The log body's ``type`` is checked likewise where the body is not null."""
    for key, batch in bundle.tables.items():
        pt = PayloadType(key)
        for i in _not_null(pt, batch.schema):
            array = batch.column(i)
            if array.null_count:
                raise _null_error(error, f"{where}{pt.name}.{batch.schema.field(i).name}", array.is_null())
        if pt is PayloadType.LOGS and batch.num_rows:
            _check_body(batch.column("body"), error, f"{where}{pt.name}.body.type")
        if pt in ATTRIBUTE_TABLES and batch.num_rows:
            codes = batch.column("type")
            top = _top(codes)
            if top is not None and top > _MAX_TYPE_CODE:
                row = int(_rows(pc.greater(codes, _MAX_TYPE_CODE))[0])
                raise error(
                    f"{where}{pt.name}.type: unknown AnyValue type code {top} at row {row}; "
                    f"defined codes are 0 (empty) to {_MAX_TYPE_CODE} (bytes)"
                )


def _top(codes: pa.Array) -> int | None:
    """The largest valid code (None: none), read from the buffer when the codes are unsigned and
    not null (a few microseconds where ``pc.max`` costs about 15 in place)."""
    if len(codes) and codes.null_count == 0 and pa.types.is_unsigned_integer(codes.type):
        return int(_values(codes).max())
    return pc.max(codes).as_py()


_NOT_NULL = SchemaCache()


def _not_null(pt: PayloadType, schema: pa.Schema) -> list[int]:
    """Positions of the schema's not-null top-level fields, found once per schema (wrapping every
    column of every table in Python objects cost about 100 us per metrics bundle)."""
    found = _NOT_NULL.get(pt, schema)
    if found is None:
        found = [i for i, field in enumerate(schema) if not field.nullable]
        _NOT_NULL.put(pt, schema, found)
    return cast(list[int], found)


def _check_body(body: pa.Array, error: type[AdaptiveArrowError], where: str) -> None:
    """A present body needs a defined AnyValue type code (slots under a null body are free)."""
    codes = body.field("type")
    if codes.null_count == 0:  # no null code anywhere; codes under null bodies may only raise the max
        top = _top(codes)
        if top is None or top <= _MAX_TYPE_CODE:
            return
    present = body.is_valid()
    nulls = pc.and_(present, codes.is_null())
    if pc.any(nulls).as_py():
        raise _null_error(error, f"{where} of a present body", nulls)
    bad = pc.and_(present, pc.greater(codes, _MAX_TYPE_CODE))
    if pc.any(bad).as_py():
        rows = _rows(bad)
        raise error(
            f"{where}: unknown AnyValue type code {codes[int(rows[0])].as_py()} at row {int(rows[0])}; "
            f"defined codes are 0 (empty) to {_MAX_TYPE_CODE} (bytes)"
        )


def _rows(mask: pa.Array) -> np.ndarray:
    """Row numbers where a boolean mask is true (null counts as false)."""
    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))


def _null_error(error: type[AdaptiveArrowError], where: str, nulls: pa.Array) -> AdaptiveArrowError:
    rows = _rows(nulls)
    return error(f"{where}: {rows.size} null value(s) in a not-null column (e.g. rows {rows[:5].tolist()})")


def _making_a_bundle(value: object) -> str:
    """How to make a bundle of the likeliest things given instead: an OTLP request or its bytes, a table."""
    if isinstance(value, bytes | bytearray | memoryview | Message):
        return ": convert OTLP with otap_model.from_otlp first"
    if isinstance(value, pa.RecordBatch | pa.Table):
        return ": wrap tables as OtapBundle(signal, {PayloadType: table})"
    return ""


def check_tables(bundle: OtapBundle, signal: Signal) -> None:
    """The bundle's signal and table keys: payload types of ``signal`` only."""
    try:
        got = Signal(bundle.signal)
    except ValueError:
        raise EncodingError(
            f"bundle.signal {bundle.signal!r} is not a signal; expected one of {[s.value for s in Signal]}"
        ) from None
    if got is not signal:
        raise EncodingError(f"bundle holds {got.value} but this encoder encodes {signal.value}")
    if not isinstance(bundle.tables, dict):
        raise EncodingError(f"bundle.tables must be a dict of payload type to RecordBatch, got {type(bundle.tables).__name__}")
    allowed = SIGNAL_PAYLOADS[signal]
    for key in bundle.tables:
        try:
            pt = PayloadType(key)
        except (ValueError, TypeError):
            raise EncodingError(f"{signal.value} bundle: table key {key!r} is not a payload type id") from None
        if pt not in allowed:
            raise EncodingError(
                f"{signal.value} bundle: payload type {pt.name} ({int(pt)}) does not belong to signal {signal.value}; "
                f"its payload types are {[p.name for p in allowed]}"
            )


def check_encodings(bundle: OtapBundle) -> None:
    """Id encodings marked on the input must be ones the decoder undoes: sorting restores them
    first, but an unsorted encode passes them through to the envelope."""
    for pt, batch in bundle.tables.items():
        for path, encoding in encoded_paths(batch.schema):
            try:
                field = get_field(batch.schema, path)
                assert field is not None  # encoded_paths only lists existing fields
                check_encoding(PayloadType(pt), path, field.type, encoding)
            except TransportError as exc:
                raise EncodingError(str(exc)) from None


def check_bundle(bundle: OtapBundle, signal: Signal) -> None:
    if not isinstance(bundle, OtapBundle):
        raise EncodingError(f"expected an otap_model.OtapBundle, got {type(bundle).__name__}{_making_a_bundle(bundle)}")
    check_tables(bundle, signal)
    for pt, batch in bundle.tables.items():
        check_schema(PayloadType(pt), batch)
    check_values(bundle)
    check_encodings(bundle)
    check_unique_ids(bundle)
    check_ids(bundle)
