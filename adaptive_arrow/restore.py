"""Undo the adaptive transforms: bring an emitted table back to its plain reference shape.

Dictionary columns are cast back to their value types, absent optional columns (and pruned
struct children, union variants) come back as nulls in reference order. Field metadata the
encoder kept (``encoding`` of id columns) is merged onto the reference field so that
``transport.restore`` can still see how ids are encoded.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.types as pt

from otap_model.schema import fill_under_null_structs

from .errors import DecodingError
from .table_encoder import list_parts, union_parts


def _merge_metadata(ref: pa.Field, got: pa.Field | None) -> dict[bytes, bytes] | None:
    md = dict(ref.metadata or {})
    if got is not None and got.metadata:
        md.update(got.metadata)
    return md or None


def _restore_field(ref: pa.Field, got: pa.Field | None) -> pa.Field:
    """The reference field, with the emitted field's metadata merged in (recursively)."""
    t = ref.type
    gt = got.type if got is not None else None
    if pt.is_struct(t):
        kids = []
        for i in range(t.num_fields):
            child = t.field(i)
            gidx = gt.get_field_index(child.name) if gt is not None and pt.is_struct(gt) else -1
            kids.append(_restore_field(child, gt.field(gidx) if gt is not None and gidx >= 0 else None))
        t = pa.struct(kids)
    elif pt.is_map(t):
        t = pa.map_(
            _restore_field(t.key_field, gt.key_field if gt is not None else None),
            _restore_field(t.item_field, gt.item_field if gt is not None else None),
        )
    elif pt.is_list(t):
        t = pa.list_(_restore_field(t.value_field, gt.value_field if gt is not None else None))
    return pa.field(ref.name, t, nullable=ref.nullable, metadata=_merge_metadata(ref, got))


def _restore_array(ref: pa.Field, out: pa.Field, array: pa.Array | None, length: int) -> pa.Array:
    """`array` (emitted shape, or None when absent) in the shape of `out` (the restored field)."""
    t = out.type
    if array is None:
        return pa.nulls(length, t)
    if isinstance(array, pa.DictionaryArray):
        array = array.dictionary_decode()
    if pt.is_struct(t):
        if not isinstance(array, pa.StructArray):
            raise DecodingError(f"column {ref.name}: expected a struct, got {array.type}")
        got_type = array.type
        flat = array.flatten()
        kids = []
        for i in range(t.num_fields):
            gidx = got_type.get_field_index(t.field(i).name)
            kid = _restore_array(ref.type.field(i), t.field(i), flat[gidx] if gidx >= 0 else None, len(array))
            kids.append(kid if t.field(i).nullable else fill_under_null_structs(kid, array))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(kids, fields=list(t), mask=mask)
    if pt.is_map(t):
        offsets, entries = list_parts(array)
        keys = _restore_array(ref.type.key_field, t.key_field, entries.field(0), len(entries))
        items = _restore_array(ref.type.item_field, t.item_field, entries.field(1), len(entries))
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)
    if pt.is_list(t):
        offsets, values = list_parts(array)
        values = _restore_array(ref.type.value_field, t.value_field, values, len(values))
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(offsets, values, type=t, mask=mask)
    if pt.is_union(t):
        got_type = array.type
        by_code = {got_type.type_codes[i]: i for i in range(got_type.num_fields)}
        kids, names = [], []
        for i, code in enumerate(t.type_codes):
            field = t.field(i)
            names.append(field.name)
            if code in by_code:
                kids.append(_restore_array(ref.type.field(i), field, array.field(by_code[code]), 0))
            else:
                kids.append(pa.nulls(0 if t.mode == "dense" else len(array), field.type))
        types, offsets = union_parts(array)
        if offsets is not None:
            return pa.UnionArray.from_dense(types, offsets, kids, names, list(t.type_codes))
        return pa.UnionArray.from_sparse(types, kids, names, list(t.type_codes))
    if not array.type.equals(t):
        raise DecodingError(f"column {ref.name}: emitted type {array.type} cannot be restored to {t}")
    return array


def _required_children(t: pa.DataType) -> bool:
    """A struct with a not-null child (the log body's ``type``): restored even when the emitted
    type matches, so that the child holds a value under null structs."""
    return pt.is_struct(t) and any(not t.field(i).nullable for i in range(t.num_fields))


class RestorePlan:
    """How to restore records of one emitted schema: per reference field, the restored field and
    the emitted column it comes from. Built once per schema; columns whose emitted type already
    is the restored type are passed through without a visit."""

    def __init__(self, schema: pa.Schema, reference: pa.Schema, where: str):
        names = set(reference.names)
        unknown = [n for n in schema.names if n not in names]
        if unknown:
            raise DecodingError(f"{where}: columns {unknown} are not in the reference schema")
        self.source = schema
        self.columns: list[tuple[pa.Field, pa.Field, int, bool]] = []  # (ref, out, emitted index, as is)
        for ref in reference:
            idx = schema.get_field_index(ref.name)
            got = schema.field(idx) if idx >= 0 else None
            out = _restore_field(ref, got)
            as_is = got is not None and got.type.equals(out.type) and not _required_children(out.type)
            self.columns.append((ref, out, idx, as_is))
        self.schema = pa.schema([out for _, out, _, _ in self.columns], metadata=schema.metadata)

    def apply(self, batch: pa.RecordBatch, where: str) -> pa.RecordBatch:
        columns = []
        for ref, out, idx, as_is in self.columns:
            if as_is:
                columns.append(batch.column(idx))
                continue
            try:
                columns.append(_restore_array(ref, out, batch.column(idx) if idx >= 0 else None, batch.num_rows))
            except (pa.ArrowException, ValueError, TypeError, IndexError) as exc:
                raise DecodingError(f"{where}.{ref.name}: cannot restore the plain column: {exc}") from exc
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def restore_table(batch: pa.RecordBatch, reference: pa.Schema, where: str) -> pa.RecordBatch:
    """`batch` (an adaptive record) in the plain shape of `reference`."""
    return RestorePlan(batch.schema, reference, where).apply(batch, where)
