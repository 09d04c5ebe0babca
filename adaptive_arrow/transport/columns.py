"""Reading and replacing columns of a record batch by dotted path (``id``, ``resource.id``), and the
``encoding`` field metadata that marks how an id column is encoded.

A struct child is read raw (its own validity, not merged with the struct's): ids are renumbered and
encoded slot for slot, so whatever the input held comes back.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pyarrow as pa

ENCODING_KEY = b"encoding"
PLAIN, DELTA, QUASI_DELTA = "plain", "delta", "quasidelta"


def get_column(batch: pa.RecordBatch, path: str) -> pa.Array | None:
    """The array at ``path``, or None when the batch has no such column."""
    head, _, rest = path.partition(".")
    index = batch.schema.get_field_index(head)
    if index < 0:
        return None
    array = batch.column(index)
    if not rest:
        return array
    if not pa.types.is_struct(array.type) or array.type.get_field_index(rest) < 0:
        return None
    return array.field(rest)


def get_field(schema: pa.Schema, path: str) -> pa.Field | None:
    """The field at ``path`` (top level or one struct level down), or None."""
    head, _, rest = path.partition(".")
    index = schema.get_field_index(head)
    if index < 0:
        return None
    field = schema.field(index)
    if not rest:
        return field
    if not pa.types.is_struct(field.type) or field.type.get_field_index(rest) < 0:
        return None
    return field.type.field(rest)


def encoding_of(field: pa.Field) -> str | None:
    """The field's ``encoding`` metadata value, or None when absent."""
    value = (field.metadata or {}).get(ENCODING_KEY)
    return value.decode() if value is not None else None


def _with_encoding(field: pa.Field, encoding: str | None) -> pa.Field:
    metadata = dict(field.metadata or {})
    metadata.pop(ENCODING_KEY, None)
    if encoding is not None:
        metadata[ENCODING_KEY] = encoding.encode()
    return field.with_metadata(metadata) if metadata else field.remove_metadata()


class SchemaCache:
    """Values derived from a schema, computed once per distinct schema, so per-batch schema work
    becomes a short scan. Schemas are matched with ``equals(check_metadata=True)`` (field
    metadata matters here, and ``hash(schema)`` costs several microseconds while ``equals`` costs
    tens of nanoseconds); each (tag, field count) keeps its most recent ``per_key`` schemas."""

    def __init__(self, per_key: int = 8) -> None:
        self._entries: dict[tuple[object, int], list[tuple[pa.Schema, object]]] = {}
        self._per_key = per_key

    def get(self, tag: object, schema: pa.Schema) -> object | None:
        for known, value in self._entries.get((tag, len(schema)), ()):
            if known is schema or known.equals(schema, check_metadata=True):
                return value
        return None

    def put(self, tag: object, schema: pa.Schema, value: object) -> None:
        entries = self._entries.setdefault((tag, len(schema)), [])
        entries.insert(0, (schema, value))
        del entries[self._per_key :]


_ENCODED_PATHS = SchemaCache()
_REPLACED = SchemaCache()


def encoded_paths(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(path, encoding)`` of every field (top level or struct child) carrying ``encoding``."""
    found = _ENCODED_PATHS.get(None, schema)
    if found is None:
        found = _encoded_paths(schema)
        _ENCODED_PATHS.put(None, schema, found)
    return cast(list[tuple[str, str]], found)


def _encoded_paths(schema: pa.Schema) -> list[tuple[str, str]]:
    found = []
    for field in schema:
        if (encoding := encoding_of(field)) is not None:
            found.append((field.name, encoding))
        if pa.types.is_struct(field.type):
            for child in field.type:
                if (encoding := encoding_of(child)) is not None:
                    found.append((f"{field.name}.{child.name}", encoding))
    return found


def replace_column(
    batch: pa.RecordBatch, path: str, array: pa.Array, encoding: str | None
) -> pa.RecordBatch:
    """The batch with ``path`` replaced by ``array``, its ``encoding`` metadata set (None: removed)."""
    head, _, rest = path.partition(".")
    index = batch.schema.get_field_index(head)
    field = batch.schema.field(index)
    if rest:
        struct = batch.column(index)
        child_index = field.type.get_field_index(rest)
        children = [struct.field(i) for i in range(field.type.num_fields)]
        children[child_index] = array
        fields = list(field.type)
        fields[child_index] = _with_encoding(fields[child_index], encoding).with_type(array.type)
        mask = struct.is_null() if struct.null_count else None
        new_column = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
        new_field = pa.field(field.name, new_column.type, field.nullable, field.metadata)
    else:
        new_column = array
        new_field = _with_encoding(field, encoding).with_type(array.type)
    columns = list(batch.columns)
    columns[index] = new_column
    schema = batch.schema.set(index, new_field)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def replace_columns(batch: pa.RecordBatch, replaced: dict[str, tuple[pa.Array, str]]) -> pa.RecordBatch:
    """The batch with each ``path`` of ``replaced`` holding its array, marked with its encoding.

    The arrays keep the types of the columns they replace, so the new schema (and the struct types
    of replaced struct children) depends only on the input schema and the replaced paths: it is
    built once per input schema and reused.
    """
    if not replaced:
        return batch
    tag = tuple((path, encoding) for path, (_, encoding) in replaced.items())
    plan = _REPLACED.get(tag, batch.schema)
    if plan is None:
        plan = _replacement_plan(batch.schema, tag)
        _REPLACED.put(tag, batch.schema, plan)
    schema, structs = cast(_Plan, plan)
    columns = batch.columns
    for path, (array, _) in replaced.items():
        head, _, rest = path.partition(".")
        if not rest:
            columns[batch.schema.get_field_index(head)] = array
    for index, (fields, children) in structs.items():
        struct = batch.column(index)
        arrays = [struct.field(i) for i in range(len(fields))]
        for child_index, path in children:
            arrays[child_index] = replaced[path][0]
        mask = struct.is_null() if struct.null_count else None
        columns[index] = pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


_Plan = tuple[pa.Schema, dict[int, tuple[list[pa.Field], list[tuple[int, str]]]]]


def _replacement_plan(schema: pa.Schema, tag: tuple[tuple[str, str], ...]) -> _Plan:
    """The output schema, and per struct column with replaced children its new child fields and
    (child index, path) of each replaced child."""
    structs: dict[int, tuple[list[pa.Field], list[tuple[int, str]]]] = {}
    for path, encoding in tag:
        head, _, rest = path.partition(".")
        index = schema.get_field_index(head)
        field = schema.field(index)
        if rest:
            fields, children = structs.setdefault(index, (list(field.type), []))
            child_index = field.type.get_field_index(rest)
            fields[child_index] = _with_encoding(fields[child_index], encoding)
            children.append((child_index, path))
        else:
            schema = schema.set(index, _with_encoding(field, encoding))
    for index, (fields, _) in structs.items():
        field = schema.field(index)
        schema = schema.set(index, pa.field(field.name, pa.struct(fields), field.nullable, field.metadata))
    return schema, structs


def unsigned_values(array: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A u16/u32 array's values (read-only view; null slots hold whatever the buffer holds) and its
    validity mask (None when there are no nulls)."""
    values = np.frombuffer(array.buffers()[1], dtype=array.type.to_pandas_dtype())
    values = values[array.offset : array.offset + len(array)]
    if array.null_count == 0:
        return values, None
    return values, array.is_valid().to_numpy(zero_copy_only=False)


def unsigned_array(values: np.ndarray, like: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """An array of ``like``'s type holding ``values``, null where ``valid`` is False."""
    if valid is None:
        return pa.Array.from_buffers(like.type, len(values), [None, pa.py_buffer(values)])
    return pa.array(values, type=like.type, mask=~valid)
