"""Delta and quasi-delta id encodings, and the row-equality rules quasi-delta runs follow.

*Delta* (ids, data point parent ids): the first valid value as is, then the difference to the
previous valid value; null slots stay null, store 0 and do not move the running value.

*Quasi-delta* (other parent ids): a row that equals the previous row on its table's equality columns
stores the difference to the previous parent id, any other row the absolute value. Equality, with
nulls never equal to anything:

* attributes: same ``type``, same ``key`` and same value in the column of that type; Empty (0),
  Map (5) and Slice (6) values never compare equal;
* span events: same ``name``; span links: same ``trace_id``;
* exemplars: same value kind (int or double) and the same value (doubles compared bit for bit).

The decoder recomputes the same equality from the unchanged columns, so no run marker travels;
``equal_runs`` is that decoder-side rule on column values. The encoder (``encode_parent_ids``)
applies the same rule to the columns' sort keys, read through the sort permutation, so it neither
gathers the sorted columns first nor compares strings again: equal keys mean equal values
(dense ranks of distinct values, injective integer and float bit keys).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otap_model import PayloadType
from otap_model.payload import ATTRIBUTE_TABLES, DATA_POINT_TABLES, EXEMPLAR_TABLES

from . import kernels
from .columns import SchemaCache, get_column, get_field, unsigned_array, unsigned_values
from .errors import TransportError
from .sort import Key, Ordering, column_key, validity

_ATTR_VALUE_COLUMNS = ((1, "str"), (2, "int"), (3, "double"), (4, "bool"), (7, "bytes"))


def delta_decode(ids: pa.Array) -> pa.Array:
    values, valid = unsigned_values(ids)
    out = np.empty_like(values)
    kernels.delta_decode(values, kernels.NO_NULLS if valid is None else valid, out)
    return unsigned_array(out, ids, valid)


def quasi_delta_decode(parent_ids: pa.Array, eq: np.ndarray) -> pa.Array:
    values, _ = unsigned_values(parent_ids)
    out = np.empty_like(values)
    kernels.quasi_delta_decode(values, eq, out)
    return unsigned_array(out, parent_ids, None)


_NO_KEY = np.empty(0, dtype=np.uint64)
_ZERO = np.uint64(0)


def encode_parent_ids(
    pt: PayloadType,
    batch: pa.RecordBatch,
    parent_ids: pa.Array,
    ordering: Ordering,
    keys: dict[str, Key | None],
) -> pa.Array:
    """The (quasi-)delta encoding of ``parent_ids`` in sorted order, ``batch`` being the unsorted
    table, ``keys`` the sort keys already computed for it (any other column's key is computed
    here) and ``ordering`` the sort."""
    values, _ = unsigned_values(parent_ids)
    rows = kernels.IDENTITY if ordering.perm is None else ordering.perm
    out = np.empty_like(values)
    if pt in DATA_POINT_TABLES:
        kernels.delta_perm(values, rows, out)
        return unsigned_array(out, parent_ids, None)
    where = pt.name
    if pt in ATTRIBUTE_TABLES:
        types = get_column(batch, "type")
        if types is None:
            raise TransportError(f"{pt.name}: attribute table without a type column")
        layout = _attrs_layout(batch, ordering, keys)
        if layout is not None:
            kernels.attrs_quasi_delta_sorted(values, rows, ordering.sorted_words(), *layout, out)
            return unsigned_array(out, parent_ids, None)
        if pa.types.is_dictionary(types.type):
            types = types.dictionary_decode()
        if not pa.types.is_integer(types.type) or types.null_count == len(types):
            type_values, (bitmap, offset) = _NO_KEY, (kernels.NO_BITMAP, 0)
        else:
            type_values, (bitmap, offset) = _raw(types), validity(types)
        key, key_null = _eq_key(batch, "key", keys, where)
        columns = [_eq_key(batch, name, keys, where) for name in ("str", "int", "double", "bool", "bytes")]
        kernels.attrs_quasi_delta(
            values, rows, type_values, bitmap, offset, key, key_null,
            *(part for column in columns for part in column), out,
        )
        return unsigned_array(out, parent_ids, None)
    eq = np.ones(len(values), dtype=np.bool_)
    if pt is PayloadType.SPAN_EVENTS:
        kernels.key_equal(*_eq_key(batch, "name", keys, where), rows, eq)
    elif pt is PayloadType.SPAN_LINKS:
        kernels.key_equal(*_eq_key(batch, "trace_id", keys, where), rows, eq)
    elif pt in EXEMPLAR_TABLES:
        ints, doubles = _eq_key(batch, "int_value", keys, where), _eq_key(batch, "double_value", keys, where)
        kernels.exemplar_equal(*ints, *doubles, rows, eq)
    else:
        raise TransportError(f"{pt.name}: has no quasi-delta encoded column")
    kernels.quasi_delta_perm(values, rows, eq, out)
    return unsigned_array(out, parent_ids, None)


_ATTR_FIELDS = ("type", "key", "str", "int", "double", "bool", "bytes")


def _attrs_layout(
    batch: pa.RecordBatch, ordering: Ordering, keys: dict[str, Key | None]
) -> tuple[np.ndarray, np.ndarray, np.uint64] | None:
    """Where ``kernels.attrs_quasi_delta_sorted`` finds each equality column in the sort's packed
    words (layout, null keys, lowest type code); None when some column's key is not usable that
    way (not a sort key, a narrow float compared by raw bits, a ranked or signed type column)."""
    if not ordering.words:
        return None
    narrow = _narrow_floats(batch.schema)
    if narrow is None:
        return None
    layout = np.zeros((len(_ATTR_FIELDS), 4), dtype=np.int64)
    nulls = np.zeros(len(_ATTR_FIELDS), dtype=np.uint64)
    for f, path in enumerate(_ATTR_FIELDS):
        if path not in keys:
            return None
        key = keys[path]
        if key is None:
            continue  # absent or all null: mode 0
        if narrow[f]:
            return None
        if path not in ordering.fields:
            layout[f, 0] = 1  # zero-width key: one value, no nulls
            continue
        word, shift, bits, null = ordering.fields[path]
        layout[f] = (2, word, shift, bits)
        nulls[f] = null
    type_key = keys["type"]
    if type_key is not None and (type_key.dense or "type" in ordering.ranked):
        return None
    return layout, nulls, np.uint64(type_key.low if type_key is not None else 0)


_NARROW = SchemaCache()


def _narrow_floats(schema: pa.Schema) -> tuple[bool, ...] | None:
    """Per ``_ATTR_FIELDS`` column: is it a float narrower than 64 bits (plain or dictionary)?
    None when ``type`` is not a plain unsigned integer. Depends only on the schema, so cached."""
    found = _NARROW.get(None, schema)
    if found is None:
        types = get_field(schema, "type")
        if types is None or not pa.types.is_unsigned_integer(types.type):
            found = ()
        else:
            found = tuple(_narrow_float(get_field(schema, path)) for path in _ATTR_FIELDS)
        _NARROW.put(None, schema, found)
    return cast(tuple[bool, ...], found) or None


def _narrow_float(field: pa.Field | None) -> bool:
    if field is None:
        return False
    type_ = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    return pa.types.is_floating(type_) and type_.bit_width < 64


def _eq_key(batch: pa.RecordBatch, path: str, keys: dict[str, Key | None], where: str) -> tuple[np.ndarray, np.uint64]:
    """A key under which rows compare equal exactly when the column's values are bit for bit
    equal (empty: absent or all-null column), and the key of null rows."""
    column = get_column(batch, path)
    if column is None or column.null_count == len(column):
        return _NO_KEY, _ZERO
    type_ = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_floating(type_) and type_.bit_width < 64:
        # the sort key widens to float64, which may merge NaN payloads: compare raw bits instead
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        raw = _raw(column).astype(np.uint64)
        if column.null_count:
            raw[~column.is_valid().to_numpy(zero_copy_only=False)] = np.uint64(1 << 63)
        return raw, np.uint64(1 << 63)
    key = keys[path] if path in keys else column_key(column, f"{where}.{path}")
    assert key is not None
    return key.values, key.null


def _raw(column: pa.Array) -> np.ndarray:
    width = column.type.bit_width // 8
    raw = np.frombuffer(column.buffers()[1], dtype=np.dtype(f"<u{width}"))
    return raw[column.offset : column.offset + len(column)]


def equal_runs(batch: pa.RecordBatch, pt: PayloadType) -> np.ndarray:
    """``eq[i]``: row ``i`` equals row ``i - 1`` under the quasi-delta rule of ``pt`` (``eq[0]`` False)."""
    n = batch.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.bool_)
    if pt in ATTRIBUTE_TABLES:
        types = get_column(batch, "type")
        if types is None:
            raise TransportError(f"{pt.name}: attribute table without a type column")
        type_values = types.fill_null(0).to_numpy(zero_copy_only=False)
        value_equal = np.zeros(n, dtype=np.bool_)
        for code, name in _ATTR_VALUE_COLUMNS:
            value_equal |= (type_values == code) & _shift_equal(get_column(batch, name), n)
        return _shift_equal(types, n) & _shift_equal(get_column(batch, "key"), n) & value_equal
    if pt is PayloadType.SPAN_EVENTS:
        return _shift_equal(get_column(batch, "name"), n)
    if pt is PayloadType.SPAN_LINKS:
        return _shift_equal(get_column(batch, "trace_id"), n)
    if pt in EXEMPLAR_TABLES:
        ints, doubles = get_column(batch, "int_value"), get_column(batch, "double_value")
        return (_shift_equal(ints, n) & _both_null(doubles, n)) | (
            _shift_equal(doubles, n) & _both_null(ints, n)
        )
    raise TransportError(f"{pt.name}: has no quasi-delta encoded column")


def _shift_equal(column: pa.Array | None, n: int) -> np.ndarray:
    """``out[i]``: ``column[i] == column[i - 1]``, both valid; False for row 0 and absent columns."""
    out = np.zeros(n, dtype=np.bool_)
    if column is None or n < 2 or column.null_count == n:
        return out
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    type_ = column.type
    if pa.types.is_floating(type_) or pa.types.is_integer(type_) or pa.types.is_temporal(type_):
        width = type_.bit_width // 8
        raw = np.frombuffer(column.buffers()[1], dtype=np.dtype(f"<u{width}"))
        raw = raw[column.offset : column.offset + n]
        out[1:] = raw[1:] == raw[:-1]  # bit for bit: NaN equals the same NaN, -0.0 differs from 0.0
        if column.null_count:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            out[1:] &= valid[1:] & valid[:-1]
        return out
    same = pc.equal(column.slice(1), column.slice(0, n - 1)).fill_null(False)
    out[1:] = same.to_numpy(zero_copy_only=False)
    return out


def _both_null(column: pa.Array | None, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.bool_)
    if column is None:
        out[1:] = True
        return out
    if column.null_count == 0:
        return out
    null = column.is_null().to_numpy(zero_copy_only=False)
    out[1:] = null[1:] & null[:-1]
    return out
