"""Reading and replacing columns of a record batch by dotted path (``id``, ``resource.id``), and the
``encoding`` field metadata that marks how an id column is encoded.

A struct child is read raw (its own validity, not merged with the struct's): ids are renumbered and
encoded slot for slot, so whatever the input held comes back.
"""

from __future__ import annotations

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


def encoded_paths(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(path, encoding)`` of every field (top level or struct child) carrying ``encoding``."""
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
