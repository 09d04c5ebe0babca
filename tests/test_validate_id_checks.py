"""The encoder's id checks read Arrow buffers in one kernel each and must answer as the numpy
computations they replaced: ``_all_in`` as set membership of the ids in the valid keys,
``_first_duplicate`` (u16 / u32 ids, as the schema checks allow) as the most frequent repeated
value (counting table) or the smallest repeated one (sort, for sparse ids). Columns are sliced so
bit offsets are exercised, and values reach the limits where the kernels hand over to the
general path (sparse ids, 64-bit ids).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow import validate

values = st.lists(st.one_of(st.none(), st.integers(0, 40), st.integers(0, 2**64 - 1)), max_size=60)
types = st.sampled_from([pa.uint16(), pa.uint32(), pa.int32(), pa.uint64()])


def _column(items: list[int | None], type_: pa.DataType, skip: int) -> pa.Array:
    top = {pa.uint16(): 2**16 - 1, pa.uint32(): 2**32 - 1, pa.uint64(): 2**64 - 1}.get(type_, 2**31 - 1)
    items = [None if v is None else v % (top + 1) for v in items]
    return pa.array([3, None] * 5 + items, type_).slice(skip)  # bit offsets 0 to 9


def _old_first_duplicate(ids: pa.Array) -> int | None:
    """The numpy computation ``_first_duplicate`` replaced."""
    if ids.null_count:
        ids = ids.drop_null()
    if len(ids) < 2:
        return None
    values = ids.to_numpy()
    if pa.types.is_unsigned_integer(ids.type) and int(values.max()) < 8 * len(values) + 1024:
        counts = np.bincount(values)
        top = int(counts.argmax())
        return top if counts[top] > 1 else None
    ordered = np.sort(values)
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    return int(ordered[same[0]]) if same.size else None


@settings(max_examples=300, deadline=None)
@given(values, types, st.integers(0, 9))
def test_first_duplicate_equals_the_numpy_computation(items: list[int | None], type_: pa.DataType, skip: int) -> None:
    ids = _column(items, type_, skip)
    found = validate._first_duplicate(ids)
    if type_ != pa.uint64():  # ids are u16 / u32; 64-bit ones take the sort: any repeated value
        assert found == _old_first_duplicate(ids)
    valid = [v for v in ids.to_pylist() if v is not None]
    assert (found is None) == (len(set(valid)) == len(valid))
    assert found is None or valid.count(found) > 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1), max_size=40),
    values,
    st.sampled_from([pa.uint16(), pa.uint32(), pa.uint64()]),
    st.integers(0, 9),
    st.booleans(),
)
def test_all_in_is_membership_in_the_valid_keys(
    id_items: list[int], key_items: list[int | None], type_: pa.DataType, skip: int, from_keys: bool
) -> None:
    keys = _column(key_items, type_, skip)
    valid_keys = [k for k in keys.to_pylist() if k is not None]
    if from_keys and valid_keys:  # mostly present ids, so the True answer is drawn too
        id_items = [valid_keys[i % len(valid_keys)] for i in id_items]
    ids = _column(id_items, type_, 0).slice(10)  # no nulls, as check_ids guarantees
    assert validate._all_in(ids, keys) == set(ids.to_pylist()).issubset(valid_keys)
