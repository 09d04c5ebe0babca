"""The per-table fast paths of the sort keys equal the general path.

``column_key`` picks a column's kind from a cache keyed by Arrow type id instead of a chain of
``pa.types`` tests, short string columns skip a copy of their ranks, and ``sort_keys`` finds the
columns of a table through one name map instead of ``get_column`` per path. Each is compared here
with what it replaced: the type tests, the order of the values themselves (``pc.rank``), and
``get_column`` + ``column_key`` path by path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transport import TransportError
from adaptive_arrow.transport.columns import get_column
from adaptive_arrow.transport.sort import (
    _BOOL,
    _BYTES,
    _DICTIONARY,
    _FLOAT,
    _OTHER,
    _SHORT,
    _SIGNED,
    _UNSIGNED,
    _kind,
    _ranked,
    column_key,
    sort_keys,
)

TYPES = [
    pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(), pa.int8(), pa.int16(), pa.int32(), pa.int64(),
    pa.float32(), pa.float64(), pa.timestamp("ns"), pa.timestamp("s"), pa.duration("ns"), pa.date32(),
    pa.bool_(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.binary(4),
    pa.dictionary(pa.uint8(), pa.string()), pa.dictionary(pa.uint16(), pa.binary()),
    pa.list_(pa.int32()), pa.struct([("a", pa.int32())]),
]  # fmt: skip


def _expected_kind(type_: pa.DataType) -> tuple[int, np.dtype | None]:
    """The ``pa.types`` chain the cache replaced."""
    if pa.types.is_dictionary(type_):
        return _DICTIONARY, None
    if any(test(type_) for test in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                                     pa.types.is_large_binary, pa.types.is_fixed_size_binary)):  # fmt: skip
        return _BYTES, None
    if pa.types.is_boolean(type_):
        return _BOOL, None
    width = type_.bit_width // 8 if pa.types.is_primitive(type_) else 0
    if pa.types.is_floating(type_):
        return _FLOAT, np.dtype(f"<f{width}")
    if pa.types.is_signed_integer(type_) or pa.types.is_temporal(type_):
        return _SIGNED, np.dtype(f"<i{width}")
    if pa.types.is_unsigned_integer(type_):
        return _UNSIGNED, np.dtype(f"<u{width}")
    return _OTHER, None


@settings(max_examples=60, deadline=None)
@given(st.permutations(TYPES))
def test_kind_cache_gives_the_type_tests_answer_in_any_order(types: list[pa.DataType]) -> None:
    for type_ in types:  # a type id seen first through another unit or width hits the cache
        assert _kind(type_) == _expected_kind(type_), type_


def _values(type_: pa.DataType) -> st.SearchStrategy:
    if pa.types.is_boolean(type_):
        return st.booleans()
    if pa.types.is_floating(type_):
        # no NaN (unordered), no -0.0 (equal to 0.0 but another bit pattern)
        return st.floats(allow_nan=False, width=type_.bit_width).map(lambda x: x + 0.0)
    if pa.types.is_integer(type_):
        bits = type_.bit_width
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if pa.types.is_signed_integer(type_) else (0, 2**bits - 1)
        return st.one_of(st.integers(low, high), st.sampled_from([low, high]))
    if pa.types.is_temporal(type_):
        half = 2 ** (type_.bit_width - 2)
        return st.integers(-half, half)
    if pa.types.is_fixed_size_binary(type_):
        return st.binary(min_size=type_.byte_width, max_size=type_.byte_width)
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return st.binary(max_size=3)
    return st.text(alphabet="abc\u00e9", max_size=3)


SORTABLE = [t for t in TYPES if not pa.types.is_nested(t) and not pa.types.is_dictionary(t)]


@st.composite
def columns(draw: st.DrawFn) -> pa.Array:
    type_ = draw(st.sampled_from(SORTABLE))
    values = draw(st.lists(st.one_of(st.none(), _values(type_)), min_size=1, max_size=150))
    skip = draw(st.integers(0, 9))
    array = pa.array([None] * skip + values, type_).slice(skip)  # bit offsets 0 to 9
    if draw(st.booleans()) and (pa.types.is_string(type_) or pa.types.is_binary(type_)):
        array = pc.dictionary_encode(array)
    return array


@settings(max_examples=300, deadline=None)
@given(columns())
def test_column_key_orders_like_the_values(column: pa.Array) -> None:
    if column.null_count == len(column):
        return  # sort_keys never keys an all-null column
    key = column_key(column, "T.c")
    plain = column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
    ranks = pc.rank(plain, sort_keys="ascending", tiebreaker="dense").to_numpy()  # nulls last
    valid = plain.is_valid().to_numpy(zero_copy_only=False)
    assert key.values.dtype == np.uint64 and key.values.size == len(column)
    assert (key.values[~valid] == key.null).all()
    assert (key.values[valid] < key.null).all()
    order = np.argsort(ranks, kind="stable")
    assert (np.argsort(key.values, kind="stable") == order).all()  # same order, ties kept
    by_rank = key.values[order]
    assert (np.diff(ranks[order]) == 0).tolist() == (np.diff(by_rank) == 0).tolist()  # equal iff equal
    assert int(key.values.max()) < 2**key.bits


def test_column_key_of_an_unsortable_type_names_the_column() -> None:
    with pytest.raises(TransportError, match=r"T\.c: cannot sort by a column of type list<item: int32>"):
        column_key(pa.array([[1], [2]], pa.list_(pa.int32())), "T.c")


PATHS = ["a", "b", "s.x", "s.y", "t.x", "missing", "s.missing", "a.x"]


@st.composite
def tables(draw: st.DrawFn) -> pa.RecordBatch:
    n = draw(st.integers(2, 40))
    ints = st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=n, max_size=n)
    fields: dict[str, pa.Array] = {}
    for name in draw(st.lists(st.sampled_from(["a", "b", "s", "t"]), unique=True)):
        if name == "s":
            fields[name] = pa.StructArray.from_arrays([pa.array(draw(ints), pa.uint16()), pa.array(draw(ints), pa.int32())], ["x", "y"])
        else:
            fields[name] = pa.array(draw(ints), pa.uint32())
    names = list(fields)
    arrays = list(fields.values())
    if names and draw(st.booleans()):  # a duplicate name: get_column finds no such column
        names.append(names[0])
        arrays.append(arrays[0])
    if not names:
        return pa.RecordBatch.from_arrays([pa.array([0] * n, pa.uint8())], ["z"])
    return pa.RecordBatch.from_arrays(arrays, names)


@settings(max_examples=200, deadline=None)
@given(tables(), st.lists(st.sampled_from(PATHS), unique=True, min_size=1))
def test_sort_keys_finds_the_columns_get_column_finds(batch: pa.RecordBatch, paths: list[str]) -> None:
    keys = sort_keys(batch, paths, "T")
    assert list(keys) == paths
    for path in paths:
        column = get_column(batch, path)
        if column is None or column.null_count == len(column):
            assert keys[path] is None, path
        else:
            expected = column_key(column, f"T.{path}")
            got = keys[path]
            assert got is not None
            assert (got.values == expected.values).all() and (got.null, got.bits, got.low) == (expected.null, expected.bits, expected.low)


@st.composite
def short_byte_columns(draw: st.DrawFn) -> pa.Array:
    type_ = draw(st.sampled_from([pa.string(), pa.large_string(), pa.binary(), pa.binary(2)]))
    n = draw(st.integers(1, _SHORT))
    pool = draw(st.lists(_values(type_), min_size=1, max_size=6))
    null_share = draw(st.sampled_from([0.0, 0.3, 0.8]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = [None if rng.random() < null_share else pool[int(rng.integers(len(pool)))] for _ in range(n)]
    skip = draw(st.integers(0, 9))
    return pa.array([None] * skip + values, type_).slice(skip)


@settings(max_examples=200, deadline=None)
@given(short_byte_columns())
def test_short_byte_columns_ranked_by_row_equal_the_dictionary_route(column: pa.Array) -> None:
    if column.null_count == len(column):
        return
    if 2 * column.null_count > len(column):  # the dictionary route of mostly-null columns
        encoded = pc.dictionary_encode(pc.drop_null(column))
        expected = _ranked(encoded.indices, encoded.dictionary, column)
    else:
        encoded = pc.dictionary_encode(column)
        expected = _ranked(encoded.indices, encoded.dictionary)
    key = column_key(column, "T.c")
    assert key.values.tolist() == expected.values.tolist()
    assert (key.null, key.bits, key.dense) == (expected.null, expected.bits, expected.dense)
