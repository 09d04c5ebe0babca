"""``columns.gather`` is ``RecordBatch.take`` byte for byte, whichever path each column takes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transport import columns

TYPES = [
    pa.int64(), pa.uint8(), pa.uint16(), pa.int32(), pa.float64(), pa.float32(), pa.bool_(), pa.string(),
    pa.binary(), pa.large_string(), pa.binary(16), pa.binary(8), pa.timestamp("ns", tz="UTC"),
    pa.dictionary(pa.int32(), pa.string()), pa.struct([("a", pa.int32())]), pa.list_(pa.float64()),
    pa.struct([("u", pa.uint32()), ("s", pa.string()), ("d", pa.dictionary(pa.int32(), pa.string())), ("l", pa.list_(pa.int64()))]),
]


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def _column(rng: np.random.Generator, type_: pa.DataType, n: int, density: float) -> pa.Array:
    valid = rng.random(n) < density
    value_type = type_.value_type if pa.types.is_dictionary(type_) else type_
    if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
        values: list[object] = [f"s{rng.integers(0, 50)}" * int(rng.integers(0, 3)) for _ in range(n)]
    elif pa.types.is_binary(value_type):
        values = [bytes(rng.integers(0, 256, int(rng.integers(0, 5)), dtype=np.uint8)) for _ in range(n)]
    elif pa.types.is_fixed_size_binary(value_type):
        values = [bytes(rng.integers(0, 256, value_type.byte_width, dtype=np.uint8)) for _ in range(n)]
    elif pa.types.is_boolean(value_type):
        values = list(rng.random(n) < 0.5)
    elif pa.types.is_floating(value_type):
        values = list(rng.normal(size=n))
    elif pa.types.is_struct(value_type):  # children null on their own, not only under a null struct
        children = [_column(rng, value_type.field(i).type, n, float(rng.choice([0.0, 0.05, 0.6, 1.0])))
                    for i in range(value_type.num_fields)]
        mask = pa.array(~valid) if not valid.all() else None
        return pa.StructArray.from_arrays(children, fields=list(value_type), mask=mask)
    elif pa.types.is_list(value_type):
        values = [list(rng.normal(size=int(rng.integers(0, 3)))) for _ in range(n)]
    elif pa.types.is_timestamp(value_type):
        values = [int(v) for v in rng.integers(0, 2**40, n)]
    else:
        values = [int(v) for v in rng.integers(0, 100, n)]
    masked = [v if ok else None for v, ok in zip(values, valid, strict=True)]
    if pa.types.is_timestamp(value_type):
        return pa.array(masked, pa.int64()).cast(value_type)
    array = pa.array(masked, value_type)
    return array.dictionary_encode() if pa.types.is_dictionary(type_) else array


@pytest.fixture(autouse=True)
def _every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "GATHER_MIN_ROWS", 0)  # the cheap paths at any size


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from([0.0, 0.02, 0.2, 0.5, 0.97, 1.0])), min_size=1, max_size=6),
    st.integers(1, 300),
    st.integers(0, 9),
    st.integers(0, 2**32 - 1),
)
def test_gather_is_take_byte_for_byte(
    specs: list[tuple[pa.DataType, float]], n: int, start: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    arrays = [_column(rng, t, n + start, d).slice(start, n) for t, d in specs]  # sliced: offsets honoured
    batch = pa.RecordBatch.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
    batch = batch.replace_schema_metadata({"k": "v"})
    perm = rng.permutation(n)
    gathered, taken = columns.gather(batch, perm), batch.take(perm)
    assert gathered.schema.equals(taken.schema, check_metadata=True)
    assert gathered.equals(taken)
    for i in range(batch.num_columns):
        one = pa.schema([batch.schema.field(i)])
        assert _ipc(pa.RecordBatch.from_arrays([gathered.column(i)], schema=one)) == _ipc(
            pa.RecordBatch.from_arrays([taken.column(i)], schema=one)
        ), specs[i]


def test_garbage_in_null_slots_is_zeroed_as_take_does() -> None:
    values = np.array([5, 6, 7, 8, 9, 10, 11, 12], dtype=np.int64)
    valid = np.packbits(np.array([1, 0, 0, 0, 0, 0, 0, 0], dtype=bool), bitorder="little")
    array = pa.Array.from_buffers(pa.int64(), 8, [pa.py_buffer(valid), pa.py_buffer(values)], 7)
    text = pa.Array.from_buffers(
        pa.string(), 8, [pa.py_buffer(valid), pa.py_buffer(np.arange(9, dtype=np.int32)), pa.py_buffer(b"abcdefgh")], 7
    )
    batch = pa.RecordBatch.from_arrays([array, text], names=["i", "s"])
    perm = np.arange(8)[::-1].copy()
    gathered = columns.gather(batch, perm)
    assert np.frombuffer(gathered.column(0).buffers()[1], dtype=np.int64).tolist() == [0] * 7 + [5]
    assert _ipc(gathered) == _ipc(batch.take(perm))
