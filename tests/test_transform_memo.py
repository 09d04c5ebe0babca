"""The stream-dictionary memos number values exactly as pyarrow's dictionary_encode over the
committed stream dictionary followed by the batch (null slots 0, so the wire bytes are the same),
and uncommitted batches leave no trace."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transform.memo import ArrowMemo, HashMemo, new_memo

TYPES = [pa.string(), pa.large_binary(), pa.binary(8), pa.int64(), pa.uint32(), pa.duration("ns"), pa.float64()]
WORDS = ["", "a", "bb", "service.name", "x" * 8, "y" * 9, "z" * 17, "https://opentelemetry.io/schemas/1.24.0"]


def _array(t: pa.DataType, picks: list[int | None]) -> pa.Array:
    if pa.types.is_fixed_size_binary(t):
        return pa.array([None if p is None else p.to_bytes(8, "little") for p in picks], t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t):
        values = [None if p is None else WORDS[p % len(WORDS)] + str(p // len(WORDS)) for p in picks]
        return pa.array([v if v is None or pa.types.is_string(t) else v.encode() for v in values], t)
    if pa.types.is_floating(t):
        return pa.array([None if p is None else p / 2 for p in picks], t)
    return pa.array(picks, t)


batches = st.lists(
    st.tuples(
        st.lists(st.one_of(st.none(), st.integers(0, 40)), max_size=60),
        st.integers(0, 3),  # slice offset
        st.booleans(),  # commit?
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(TYPES), batches)
def test_memo_matches_dictionary_encode(t: pa.DataType, seq: list[tuple[list[int | None], int, bool]]) -> None:
    memo = new_memo(t)
    assert isinstance(memo, ArrowMemo if pa.types.is_floating(t) else HashMemo)
    committed = pa.array([], t)
    views: list[tuple[pa.Array, pa.Array]] = []  # (memo's zero-copy array, independent copy)
    for picks, offset, commit in seq:
        array = _array(t, picks).slice(min(offset, len(picks)))
        codes = memo.encode(array)
        assert len(codes) == len(array)
        assert not codes[~array.is_valid().to_numpy(zero_copy_only=False)].any()  # null slots 0, as pyarrow leaves them
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        if valid.any():
            expected = pa.chunked_array([committed, array], type=t).dictionary_encode()
            last = expected.chunk(expected.num_chunks - 1)
            assert np.array_equal(codes[valid], last.indices.to_numpy(zero_copy_only=False)[valid])
            assert memo.values(memo.size).equals(last.dictionary)
            after = last.dictionary
        else:
            assert memo.size == len(committed)
            after = committed
        if commit:
            memo.commit(memo.size)
            committed = after
            views.append((memo.values(memo.size), after))
    for view, copy in views:  # later batches (committed or dropped) never overwrite committed values
        assert view.equals(copy)
