"""Representative schema per slot: one stable schema covering every stream of a slot across
segments (the seed's DataFusion discussion), and loaders that conform stored batches to it.

Columns: the union, in order of first appearance. Types: the widest seen — a plain value type
beats a dictionary of it, a wider dictionary index beats a narrower one, structs and lists merge
their children the same way, other differences promote as ``pa.unify_schemas(permissive)`` does.
A column missing from some stream is nullable. Conforming reorders, adds null columns and casts.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.types as pat

from ..errors import QuiverError


def _wider_index(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a.bit_width != b.bit_width:
        return a if a.bit_width > b.bit_width else b
    return a  # same width: the first seen wins (deterministic)


def _merge_type(a: pa.DataType, b: pa.DataType, where: str) -> pa.DataType:
    if a.equals(b):
        return a
    if pat.is_dictionary(a) or pat.is_dictionary(b):
        va = a.value_type if pat.is_dictionary(a) else a
        vb = b.value_type if pat.is_dictionary(b) else b
        value = _merge_type(va, vb, where)
        if pat.is_dictionary(a) and pat.is_dictionary(b):
            return pa.dictionary(_wider_index(a.index_type, b.index_type), value, a.ordered and b.ordered)
        return value
    if pat.is_struct(a) and pat.is_struct(b):
        return pa.struct(_merge_fields([list(a), list(b)], where))
    for is_kind, make in ((pat.is_list, pa.list_), (pat.is_large_list, pa.large_list)):
        if is_kind(a) and is_kind(b):
            (field,) = _merge_fields([[a.value_field], [b.value_field]], where)
            return make(field)
    try:
        merged = pa.unify_schemas([pa.schema([("x", a)]), pa.schema([("x", b)])], promote_options="permissive")
    except (pa.ArrowException, TypeError) as e:
        raise QuiverError(f"column {where}: types {a} and {b} have no common representative type ({e})") from None
    return merged.field(0).type


def _merge_fields(groups: list[list[pa.Field]], where: str = "") -> list[pa.Field]:
    order: list[str] = []
    types: dict[str, pa.DataType] = {}
    nullable: dict[str, bool] = {}
    seen: dict[str, int] = {}
    for fields in groups:
        for f in fields:
            if f.name not in types:
                order.append(f.name)
                types[f.name] = f.type
                nullable[f.name] = f.nullable
                seen[f.name] = 0
            else:
                types[f.name] = _merge_type(types[f.name], f.type, f"{where}{f.name}")
                nullable[f.name] = nullable[f.name] or f.nullable
            seen[f.name] += 1
    return [pa.field(n, types[n], nullable[n] or seen[n] < len(groups)) for n in order]


def representative_schema(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """The representative schema of one slot over `schemas` (stream or per-segment schemas)."""
    group = list(schemas)
    if not group:
        raise QuiverError("representative_schema needs at least one schema")
    return pa.schema(_merge_fields([list(s) for s in group]))


def _conform_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type.equals(target):
        return arr
    if pat.is_struct(target) and pat.is_struct(arr.type):
        names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = [
            _conform_array(arr.field(names[f.name]), f.type) if f.name in names else pa.nulls(len(arr), f.type)
            for f in target
        ]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if (pat.is_list(target) and pat.is_list(arr.type)) or (pat.is_large_list(target) and pat.is_large_list(arr.type)):
        values = _conform_array(arr.values, target.value_type)
        kind = pa.ListArray if pat.is_list(target) else pa.LargeListArray
        mask = arr.is_null() if arr.null_count else None
        return kind.from_arrays(arr.offsets, values, type=target, mask=mask)
    return arr.cast(target)


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with the columns, order and types of `schema` (missing columns become nulls)."""
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        try:
            columns.append(_conform_array(batch.column(i), f.type) if i >= 0 else pa.nulls(batch.num_rows, f.type))
        except pa.ArrowException as e:
            raise QuiverError(f"column {f.name!r} cannot be conformed to {f.type}: {e}") from None
    return pa.RecordBatch.from_arrays(columns, schema=schema)
