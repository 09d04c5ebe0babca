"""Input checks of the encoder: a bundle must hold plain tables of the reference schemas whose
parent ids point at existing parents. Runs before any encoder state changes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otap_model import OtapBundle, PayloadType, Signal, reference_schema, relations
from otap_model.schema import strip_annotations

from .errors import EncodingError

ENCODING_KEY = b"encoding"


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
        raise EncodingError(f"{pt.name}: missing column(s) {missing}; plain tables carry every reference column")
    if got.names != ref.names:
        raise EncodingError(f"{pt.name}: columns {got.names} are not in reference order {ref.names}")
    for want, have in zip(ref, got):
        w, h = strip_annotations(want), strip_annotations(have)
        if not w.equals(h):
            raise EncodingError(f"{pt.name}.{want.name}: wrong type {_describe(h)}, expected {_describe(w)}")


def _column(batch: pa.RecordBatch, path: str) -> tuple[pa.Field, pa.Array]:
    head, _, rest = path.partition(".")
    field = batch.schema.field(head)
    array = batch.column(head)
    if rest:
        idx = field.type.get_field_index(rest)
        field = field.type.field(idx)
        array = array.flatten()[idx]
    return field, array


def _plain(field: pa.Field) -> bool:
    md = field.metadata or {}
    return md.get(ENCODING_KEY, b"plain") == b"plain"


_MAX_TABLE = 1 << 22  # largest id for which a presence table beats hashing


def _all_in(ids: pa.Array, keys: pa.Array) -> bool:
    """Whether every (non-null) id is one of the non-null keys.

    Ids are small dense integers in practice: a numpy presence table indexed by id answers in
    two vectorised passes; other types, or ids too large for a table, hash with ``is_in``.
    """
    if len(ids) == 0:
        return True
    if keys.null_count:
        keys = keys.drop_null()
    if len(keys) == 0:
        return False
    if not (pa.types.is_unsigned_integer(ids.type) and pa.types.is_unsigned_integer(keys.type)):
        return bool(pc.all(pc.is_in(ids, value_set=keys)).as_py())
    k = keys.to_numpy()
    i = ids.to_numpy()
    top = int(k.max())
    if top >= _MAX_TABLE:
        return bool(pc.all(pc.is_in(ids, value_set=keys)).as_py())
    if int(i.max()) > top:
        return False
    present = np.zeros(top + 1, dtype=np.bool_)
    present[k] = True
    return bool(present[i].all())


def check_ids(bundle: OtapBundle) -> None:
    """Every parent_id must be non-null and reference an existing parent id (plain ids only)."""
    for rel in relations(Signal(bundle.signal)):
        child = bundle.tables.get(rel.child)
        if child is None or child.num_rows == 0:
            continue
        pfield, pid = _column(child, "parent_id")
        if pid.null_count:
            raise EncodingError(f"{rel.child.name}.parent_id: {pid.null_count} null value(s); parent ids are required")
        if not _plain(pfield):
            continue
        parent = bundle.tables.get(rel.parent)
        if parent is None:
            raise EncodingError(
                f"{rel.child.name}.parent_id: {child.num_rows} row(s) reference {rel.parent.name}.{rel.parent_column}, "
                f"but the bundle has no {rel.parent.name} table"
            )
        kfield, keys = _column(parent, rel.parent_column)
        if not _plain(kfield):
            continue
        if not _all_in(pid, keys):
            bad = pc.filter(pid, pc.invert(pc.is_in(pid, value_set=keys.drop_null())))
            raise EncodingError(
                f"{rel.child.name}.parent_id: {len(bad)} value(s) out of range (e.g. {bad[0].as_py()}): "
                f"no {rel.parent.name}.{rel.parent_column} has that id"
            )


def check_bundle(bundle: OtapBundle, signal: Signal) -> None:
    if not isinstance(bundle, OtapBundle):
        raise EncodingError(f"expected an otap_model.OtapBundle, got {type(bundle).__name__}")
    if Signal(bundle.signal) is not signal:
        raise EncodingError(f"bundle holds {bundle.signal} but this encoder encodes {signal.value}")
    for pt, batch in bundle.tables.items():
        check_schema(PayloadType(pt), batch)
    check_ids(bundle)
