"""The stream-dictionary memos number values exactly as pyarrow's dictionary_encode over the
committed stream dictionary followed by the batch (null slots 0, so the wire bytes are the same),
and uncommitted batches leave no trace."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transform.dictionary import dictionary_encode
from adaptive_arrow.transform.memo import ArrowMemo, HashMemo, new_memo

TYPES = [pa.string(), pa.large_binary(), pa.binary(8), pa.int64(), pa.uint32(), pa.duration("ns"), pa.float64()]
WORDS = ["", "a", "bb", "service.name", "x" * 8, "y" * 9, "z" * 17, "https://opentelemetry.io/schemas/1.24.0"]


def _array(t: pa.DataType, raw: list[int]) -> pa.Array:
    picks = [None if p < 0 else p for p in raw]
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
        st.lists(st.integers(-10, 40), max_size=60),  # negative: null (about a fifth of the slots)
        st.sampled_from([1, 30]),  # repeats: > 512 rows of repeated values take the pyarrow-hashed path
        st.integers(0, 3),  # slice offset
        st.booleans(),  # commit?
    ),
    min_size=1,
    max_size=6,
)


def _run(t: pa.DataType, seq: list[tuple[pa.Array, bool]]) -> None:
    """Feed (array, commit?) pairs to a fresh memo, checking each against dictionary_encode."""
    memo = new_memo(t)
    assert isinstance(memo, ArrowMemo if pa.types.is_floating(t) else HashMemo)
    committed = pa.array([], t)
    views: list[tuple[pa.Array, pa.Array]] = []  # (memo's zero-copy array, independent copy)
    for array, commit in seq:
        codes = memo.encode(array)
        assert len(codes) == len(array)
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        assert not codes[~valid].any()  # null slots 0, as pyarrow leaves them
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


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TYPES), batches)
def test_memo_matches_dictionary_encode(t: pa.DataType, seq: list[tuple[list[int], int, int, bool]]) -> None:
    _run(t, [(_array(t, picks * repeats).slice(min(offset, len(picks))), commit) for picks, repeats, offset, commit in seq])


@pytest.mark.parametrize("t", TYPES)
def test_large_repetitive_batches(t: pa.DataType) -> None:
    """Batches over 512 rows of mostly repeated values: pyarrow hashes them, the memo maps the
    distinct ones (the first batch's dictionary is kept as is until the next batch)."""
    rng = np.random.default_rng(7)

    def batch(lo: int, hi: int, n: int = 3000) -> pa.Array:
        return _array(t, rng.integers(lo, hi, n).tolist())  # negatives are nulls

    _run(t, [
        (batch(-5, 40), False),  # dropped: the next batch starts from an empty memo again
        (batch(-5, 40), True),
        (batch(-5, 80), False),  # new values pending, then dropped
        (batch(20, 120).slice(7), True),
        (batch(0, 200), True),
    ])


def _twin_run(t: pa.DataType, seq: list[tuple[pa.Array, bool]]) -> None:
    """A memo fed each batch dictionary-encoded (as the encoder hashes sort columns first) numbers
    values exactly as a memo fed the plain batches."""
    plain, hashed = new_memo(t), new_memo(t)
    for array, commit in seq:
        codes = plain.encode(array)
        assert np.array_equal(hashed.encode(pc.dictionary_encode(array)), codes)
        assert hashed.size == plain.size
        assert hashed.values(hashed.size).equals(plain.values(plain.size))
        if commit:
            plain.commit(plain.size)
            hashed.commit(hashed.size)


BINARY_TYPES = [t for t in TYPES if pa.types.is_string(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(BINARY_TYPES), batches)
def test_dictionary_encoded_batches_match_plain_ones(t: pa.DataType, seq: list[tuple[list[int], int, int, bool]]) -> None:
    _twin_run(t, [(_array(t, picks * repeats).slice(min(offset, len(picks))), commit) for picks, repeats, offset, commit in seq])


@pytest.mark.parametrize("t", BINARY_TYPES)
def test_dictionary_with_unused_and_reordered_entries(t: pa.DataType) -> None:
    """A flattened struct child masks rows of its dictionary-encoded values (unused entries), and
    a sorted batch uses its dictionary out of order: only used values enter, in row order."""
    rng = np.random.default_rng(3)
    plain, hashed = new_memo(t), new_memo(t)
    for lo, hi in ((0, 30), (10, 60), (50, 90)):
        array = _array(t, rng.integers(lo, hi, 900).tolist())
        rows = pa.array(rng.permutation(len(array)))
        struct = pa.StructArray.from_arrays([pc.dictionary_encode(array)], names=["v"], mask=pa.array(rng.random(len(array)) < 0.4))
        struct_plain = pa.StructArray.from_arrays([array], names=["v"], mask=struct.is_null())
        encoded = struct.take(rows).flatten()[0]
        codes = plain.encode(struct_plain.take(rows).flatten()[0])
        assert np.array_equal(hashed.encode(encoded), codes)
        assert hashed.values(hashed.size).equals(plain.values(plain.size))
        plain.commit(plain.size)
        hashed.commit(hashed.size)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(BINARY_TYPES), st.lists(st.integers(-40, 6), max_size=300), st.integers(0, 11))
def test_sparse_dictionary_encode_matches_pyarrow(t: pa.DataType, picks: list[int], offset: int) -> None:
    """Mostly-null columns hash only their valid values; the result means what pyarrow's does."""
    array = _array(t, picks).slice(min(offset, len(picks)))
    got, want = dictionary_encode(array), pc.dictionary_encode(array)
    assert got.dictionary.equals(want.dictionary)
    assert got.indices.null_count == want.indices.null_count
    assert got.indices.is_valid().equals(want.indices.is_valid())
    valid = want.indices.is_valid().to_numpy(zero_copy_only=False)
    assert np.array_equal(got.indices.to_numpy(zero_copy_only=False)[valid], want.indices.to_numpy(zero_copy_only=False)[valid])
    assert got.dictionary_decode().equals(array)
