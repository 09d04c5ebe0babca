"""The per-column fast paths of id renumbering and parent id encoding equal the general path.

``renumber_delta`` finds the largest id and repacks the validity in one kernel pass (no
``pc.max``, no ``is_valid``); the exemplar equality rule is one kernel instead of four; the
attribute layout reads a per-schema cache. Each is compared here with the straightforward
computation it replaced, on random small columns (sliced, so bit offsets are exercised too).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transport import TransportError, kernels
from adaptive_arrow.transport.delta import encode_parent_ids, equal_runs
from adaptive_arrow.transport.ids import Renumbering, renumber_delta
from adaptive_arrow.transport.sort import sort, sort_keys
from otap_model import PayloadType

id_lists = st.lists(st.one_of(st.none(), st.integers(0, 2**16 - 1)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(id_lists, st.sampled_from([pa.uint16(), pa.uint32()]), st.integers(0, 9))
def test_renumber_delta_buffers_equal_the_general_path(values: list[int | None], type_: pa.DataType, skip: int) -> None:
    ids = pa.array([7, None] * 5 + values, type_).slice(skip)  # bit offsets 0 to 9
    encoded, mapping = renumber_delta(ids, "T.id")
    valid = ids.is_valid().to_numpy(zero_copy_only=False)
    largest = pc.max(ids).as_py()
    assert mapping.lut.size == (0 if largest is None else largest + 1)
    if ids.null_count:
        assert encoded.buffers()[0].to_pybytes() == np.packbits(valid, bitorder="little").tobytes()
    else:
        assert encoded.buffers()[0] is None
    assert encoded.null_count == ids.null_count and encoded.offset == 0
    seen: dict[int, int] = {}
    dense = [None if v is None else seen.setdefault(v, len(seen)) for v in ids.to_pylist()]
    present = [v for v in dense if v is not None]
    steps = iter((b - a) % 2**type_.bit_width for a, b in zip([0, *present], present, strict=False))
    assert encoded.to_pylist() == [None if v is None else next(steps) for v in dense]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(0, 2**32 - 1)), max_size=40))
def test_valid_max_is_pc_max_and_bits_are_packbits(values: list[int | None]) -> None:
    array = pa.array([1, None, 3, *values], pa.uint32()).slice(3)
    bits = np.zeros((len(array) + 7) // 8, dtype=np.uint8)
    data = np.frombuffer(array.buffers()[1], dtype=np.uint32)[array.offset : array.offset + len(array)]
    bitmap = np.frombuffer(array.buffers()[0], dtype=np.uint8) if array.null_count else kernels.NO_BITMAP
    largest = kernels.valid_max(data, bitmap, array.offset, bits)
    expected = pc.max(array).as_py()
    assert largest == (-1 if expected is None else expected)
    if array.null_count:
        assert bits.tobytes() == np.packbits(array.is_valid().to_numpy(zero_copy_only=False), bitorder="little").tobytes()


def _key_rule(key: np.ndarray, null: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(equal and valid, both null) against the previous row, the rule ``exemplar_equal`` fuses."""
    if key.size == 0:
        return np.zeros(n, dtype=np.bool_), np.r_[False, np.ones(max(n - 1, 0), dtype=np.bool_)][:n]
    equal = np.r_[False, (key[1:] == key[:-1]) & (key[1:] != null)][:n]
    both = np.r_[False, (key[1:] == null) & (key[:-1] == null)][:n]
    return equal, both


keys = st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(keys, keys, st.booleans(), st.booleans(), st.randoms())
def test_exemplar_equal_is_the_composed_key_rules(ints: list, doubles: list, no_ints: bool, no_doubles: bool, rng) -> None:
    n = min(len(ints), len(doubles))
    null = np.uint64(9)
    int_key = np.array([null if v is None else v for v in ints[:n]], dtype=np.uint64)
    double_key = np.array([null if v is None else v for v in doubles[:n]], dtype=np.uint64)
    if no_ints:
        int_key = np.empty(0, dtype=np.uint64)
    if no_doubles:
        double_key = np.empty(0, dtype=np.uint64)
    perm = np.arange(n, dtype=np.intp)
    rng.shuffle(perm)
    for rows in (kernels.IDENTITY, perm):
        ordered_ints = int_key if rows is kernels.IDENTITY or not int_key.size else int_key[perm]
        ordered_doubles = double_key if rows is kernels.IDENTITY or not double_key.size else double_key[perm]
        int_equal, ints_null = _key_rule(ordered_ints, null, n)
        double_equal, doubles_null = _key_rule(ordered_doubles, null, n)
        expected = (int_equal & doubles_null) | (double_equal & ints_null)
        eq = np.ones(n, dtype=np.bool_)
        kernels.exemplar_equal(int_key, null, double_key, null, rows, eq)
        assert eq.tolist() == expected.tolist()


@st.composite
def attribute_tables(draw: st.DrawFn) -> pa.RecordBatch:
    """Attribute tables of every shape the layout meets: any type code (Empty, Map, Slice and
    unknown ones too), constant or varying keys and values, nulls, absent value columns, float32
    doubles (the per-column fallback)."""
    n = draw(st.integers(0, 40))
    small = st.integers(0, 2)
    rows = draw(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 9]), small, small, small), min_size=n, max_size=n))
    columns: dict[str, pa.Array] = {
        "parent_id": pa.array([p for _, _, _, p in rows], pa.uint16()),
        "type": pa.array([t for t, _, _, _ in rows], pa.uint8()),
    }
    key_shape = draw(st.sampled_from(["absent", "constant", "varied"]))
    if key_shape == "constant":
        columns["key"] = pa.array(["k"] * n)
    elif key_shape == "varied":
        columns["key"] = pa.array([None if k == 2 and draw(st.booleans()) else f"k{k}" for _, k, _, _ in rows])
    for code, name, type_ in ((1, "str", pa.string()), (2, "int", pa.int64()), (3, "double", draw(st.sampled_from([pa.float64(), pa.float32()]))),
                              (4, "bool", pa.bool_()), (7, "bytes", pa.binary())):
        if draw(st.booleans()):
            cast = {"str": str, "int": int, "double": float, "bool": bool, "bytes": lambda v: bytes([v])}[name]
            columns[name] = pa.array([cast(v) if t == code and v != 2 else None for t, _, v, _ in rows], type_)
    return pa.RecordBatch.from_pydict(columns)


@settings(max_examples=200, deadline=None)
@given(attribute_tables())
def test_attribute_parent_ids_follow_the_decoder_rule(batch: pa.RecordBatch) -> None:
    """The encoding from the packed words (or the fallback) is what ``equal_runs`` on the sorted
    table decodes; the second call reads the layout's schema cache."""
    order = ("type", "key", "str", "int", "double", "bool", "bytes", "parent_id")
    keys = sort_keys(batch, order, "ATTRS") if batch.num_rows > 1 else {}
    ordering = sort(keys, batch.num_rows)
    rows = np.arange(batch.num_rows) if ordering.perm is None else ordering.perm
    sorted_batch = batch.take(rows)
    eq = equal_runs(sorted_batch, PayloadType.LOG_ATTRS)
    plain = sorted_batch.column("parent_id").to_numpy().astype(np.int64)
    expected = np.where(eq, plain - np.r_[0, plain[:-1]], plain) % 2**16
    for _ in range(2):
        encoded = encode_parent_ids(PayloadType.LOG_ATTRS, batch, batch.column("parent_id"), ordering, keys)
        assert encoded.to_pylist() == expected.tolist()


def test_apply_reports_wrong_type_null_and_dangling_parent_ids() -> None:
    _, mapping = renumber_delta(pa.array([5, 3], pa.uint16()), "P.id")
    assert isinstance(mapping, Renumbering)
    assert mapping.apply(pa.array([3, 5, 3], pa.uint32()), "C", "P.id").to_pylist() == [1, 0, 1]
    with pytest.raises(TransportError, match=r"^C: id column has type int32; expected uint16 or uint32$"):
        mapping.apply(pa.array([3], pa.int32()), "C", "P.id")
    with pytest.raises(TransportError, match=r"^C: parent_id is null at row 1; every child row needs a parent$"):
        mapping.apply(pa.array([3, None], pa.uint16()), "C", "P.id")
    with pytest.raises(TransportError, match=r"^C: parent_id 4 at row 1 matches no P\.id \(a dangling reference"):
        mapping.apply(pa.array([3, 4], pa.uint16()), "C", "P.id")
