"""Reading, replacing and gathering columns of a record batch by dotted path (``id``,
``resource.id``), and the ``encoding`` field metadata that marks how an id column is encoded.

A struct child is read raw (its own validity, not merged with the struct's): ids are renumbered and
encoded slot for slot, so whatever the input held comes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import pyarrow as pa

from . import kernels

ENCODING_KEY = b"encoding"
PLAIN, DELTA, QUASI_DELTA = "plain", "delta", "quasidelta"


def get_column(batch: pa.RecordBatch, path: str, positions: Mapping[str, int] | None = None) -> pa.Array | None:
    """The array at ``path``, or None when the batch has no such column. ``positions`` (top-level
    name -> index, unique names only) spares the schema look-up to callers that ask for many paths.
    A struct child is null wherever its struct is (``flatten``), whatever its own buffers hold."""
    head, _, rest = path.partition(".")
    index = batch.schema.get_field_index(head) if positions is None else positions.get(head, -1)
    if index < 0:
        return None
    array = batch.column(index)
    if not rest:
        return array
    child = array.type.get_field_index(rest) if pa.types.is_struct(array.type) else -1
    if child < 0:
        return None
    return array.flatten()[child] if array.null_count else array.field(child)


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

    The arrays keep the types of the columns they replace, so the new fields (and the struct types
    of replaced struct children) depend only on the input schema and the replaced paths: they are
    built once per input schema and reused. Each replaced column is set in place of the old one
    (``set_column``), which costs less than rebuilding the batch from all its columns.
    """
    if not replaced:
        return batch
    tag = tuple((path, encoding) for path, (_, encoding) in replaced.items())
    plan = _REPLACED.get(tag, batch.schema)
    if plan is None:
        plan = _replacement_plan(batch.schema, tag)
        _REPLACED.put(tag, batch.schema, plan)
    out = batch
    for index, field, children, fields in cast(_Plan, plan):
        if not children:
            out = out.set_column(index, field, replaced[field.name][0])
            continue
        struct = batch.column(index)
        arrays = [struct.field(i) for i in range(len(fields))]
        for child_index, path in children:
            arrays[child_index] = replaced[path][0]
        mask = struct.is_null() if struct.null_count else None
        out = out.set_column(index, field, pa.StructArray.from_arrays(arrays, fields=fields, mask=mask))
    return out


_Plan = list[tuple[int, pa.Field, list[tuple[int, str]], list[pa.Field]]]


def _replacement_plan(schema: pa.Schema, tag: tuple[tuple[str, str], ...]) -> _Plan:
    """Per replaced top-level column: its index and new field, and for a struct with replaced
    children the (child index, path) of each and the struct's new child fields."""
    top: dict[int, pa.Field] = {}
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
            top[index] = _with_encoding(field, encoding)
    plan: _Plan = [(index, field, [], []) for index, field in top.items()]
    for index, (fields, children) in structs.items():
        field = schema.field(index)
        plan.append((index, pa.field(field.name, pa.struct(fields), field.nullable, field.metadata), children, fields))
    return plan


def values_view(array: pa.Array, dtype: np.dtype) -> np.ndarray:
    """A fixed-width array's values as a read-only view of its buffer, without copying (null slots
    hold whatever the buffer holds). ``dtype`` must match the array's value width."""
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + len(array)]


def unsigned_values(array: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A u16/u32 array's values (read-only view; null slots hold whatever the buffer holds) and its
    validity mask (None when there are no nulls)."""
    values = values_view(array, array.type.to_pandas_dtype())
    if array.null_count == 0:
        return values, None
    return values, array.is_valid().to_numpy(zero_copy_only=False)


def unsigned_array(values: np.ndarray, like: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """An array of ``like``'s type holding ``values``, null where ``valid`` is False."""
    if valid is None:
        return pa.Array.from_buffers(like.type, len(values), [None, pa.py_buffer(values)])
    return pa.array(values, type=like.type, mask=~valid)


GATHER_MIN_ROWS = 4096
"""Below this many rows ``gather`` is one ``take``: the cheap paths save less than their calls cost."""
_SPARSE = 4
"""A flat column with at most one valid slot in this many is scattered instead of taken."""


def gather(batch: pa.RecordBatch, perm: np.ndarray) -> pa.RecordBatch:
    """``batch.take(perm)``, byte for byte, with the null-heavy columns built cheaply.

    ``take`` visits every slot of every column, so an all-null attribute value column of 30,000
    rows costs as much as a full one (binary: 200 us). Here an all-null flat column becomes a
    fresh null array, and a flat column with few valid slots is scattered: each valid row is
    written to its sorted position (``kernels.inverse``), with zeroed values and empty strings in
    the null slots, which is what ``take`` leaves there. Every other column goes through one
    ``take`` of the remaining columns.
    """
    n = batch.num_rows
    if n < GATHER_MIN_ROWS:
        return batch.take(perm)
    cheap: list[tuple[int, str, pa.Array]] = []
    for i in _flat_columns(batch.schema):
        column = batch.column(i)
        nulls = column.null_count
        if nulls == n:
            cheap.append((i, "null", column))
        elif nulls and _SPARSE * (n - nulls) <= n:
            cheap.append((i, "scatter", column))
    if not cheap:
        return batch.take(perm)
    scratch = _Scratch(perm)
    arrays = [_nulls(column) if kind == "null" else _scatter(column, scratch) for _, kind, column in cheap]
    if len(cheap) == batch.num_columns:
        return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
    skipped = {i for i, _, _ in cheap}
    out = batch.select([i for i in range(batch.num_columns) if i not in skipped]).take(perm)
    for (i, _, _), array in zip(cheap, arrays):  # ascending, so each lands at its own index
        out = out.add_column(i, batch.schema.field(i), array)
    return out


_FLAT = SchemaCache()


def _flat_columns(schema: pa.Schema) -> list[int]:
    """Indices of the top-level columns ``gather`` may build itself (cached per schema)."""
    found = _FLAT.get(None, schema)
    if found is None:
        found = [i for i, field in enumerate(schema) if _flat(field.type)]
        _FLAT.put(None, schema, found)
    return cast(list[int], found)


def _flat(type_: pa.DataType) -> bool:
    value_type = type_.value_type if pa.types.is_dictionary(type_) else type_
    return _offsets_dtype(value_type) is not None or pa.types.is_boolean(value_type) or _width(value_type) > 0


def _width(type_: pa.DataType) -> int:
    """Byte width of a fixed-width type ``gather`` scatters (0: not one)."""
    if pa.types.is_fixed_size_binary(type_):
        return int(type_.byte_width)
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_temporal(type_):
        bits = type_.bit_width
        return bits // 8 if bits in (8, 16, 32, 64) else 0
    return 0


def _offsets_dtype(type_: pa.DataType) -> type[np.int32] | type[np.int64] | None:
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return np.int32
    if pa.types.is_large_string(type_) or pa.types.is_large_binary(type_):
        return np.int64
    return None


def _nulls(column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        indices = pa.nulls(len(column), column.type.index_type)
        return pa.DictionaryArray.from_arrays(indices, column.dictionary, safe=False)
    return pa.nulls(len(column), column.type)


class _Scratch:
    """Per-table arrays shared by the scattered columns: the inverse permutation and row buffer."""

    def __init__(self, perm: np.ndarray) -> None:
        self.perm = perm
        self._inv: np.ndarray | None = None
        self.rows = np.empty(perm.size, dtype=np.int64)

    @property
    def inv(self) -> np.ndarray:
        if self._inv is None:
            self._inv = np.empty(self.perm.size, dtype=np.int64)
            kernels.inverse(self.perm, self._inv)
        return self._inv


def _scatter(column: pa.Array, scratch: _Scratch) -> pa.Array:
    """``column.take(perm)`` by writing its valid rows to their sorted positions."""
    if pa.types.is_dictionary(column.type):
        indices = _scatter(column.indices, scratch)
        return pa.DictionaryArray.from_arrays(indices, column.dictionary, safe=False)
    n = len(column)
    type_ = column.type
    buffers = column.buffers()
    offset = column.offset
    k = kernels.valid_rows(np.frombuffer(buffers[0], dtype=np.uint8), offset, n, scratch.rows)
    rows = scratch.rows[:k]
    inv = scratch.inv
    bits = np.zeros((n + 7) // 8, dtype=np.uint8)
    offsets_dtype = _offsets_dtype(type_)
    if offsets_dtype is not None:
        offsets: np.ndarray = np.frombuffer(buffers[1], dtype=offsets_dtype)[offset : offset + n + 1]
        out_offsets: np.ndarray = np.zeros(n + 1, dtype=offsets_dtype)
        kernels.scatter_lengths(offsets, rows, inv, out_offsets, bits)
        np.cumsum(out_offsets, out=out_offsets)
        data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.empty(0, dtype=np.uint8)
        out = np.empty(int(out_offsets[n]), dtype=np.uint8)
        kernels.scatter_bytes(data, offsets, rows, inv, out_offsets, out)
        value_buffers = [pa.py_buffer(out_offsets), pa.py_buffer(out)]
    elif pa.types.is_boolean(type_):
        values = np.frombuffer(buffers[1], dtype=np.uint8)
        out = np.zeros((n + 7) // 8, dtype=np.uint8)
        kernels.scatter_bits(values, offset, rows, inv, out, bits)
        value_buffers = [pa.py_buffer(out)]
    else:
        width = _width(type_)
        if width in (1, 2, 4, 8):
            values = np.frombuffer(buffers[1], dtype=np.dtype(f"<u{width}"))[offset : offset + n]
            out = np.zeros(n, dtype=values.dtype)
        else:
            values = np.frombuffer(buffers[1], dtype=np.uint8)[offset * width : (offset + n) * width].reshape(n, width)
            out = np.zeros((n, width), dtype=np.uint8)
        kernels.scatter_values(values, rows, inv, out, bits)
        value_buffers = [pa.py_buffer(out)]
    return pa.Array.from_buffers(type_, n, [pa.py_buffer(bits), *value_buffers], n - k)
