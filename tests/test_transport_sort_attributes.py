"""``sort.sort_attributes`` (the value columns merged into one key) orders and quasi-delta encodes
an attribute table exactly as its nine keys sorted one by one do, and declines what it cannot do."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transport import delta
from adaptive_arrow.transport.sort import DEFAULT_SORT_ORDERS, Ordering, sort, sort_attributes, sort_keys
from otap_model import PayloadType, reference_schema

PT = PayloadType.LOG_ATTRS
ORDER = DEFAULT_SORT_ORDERS[PT]
COLUMN_OF_TYPE = {1: "str", 2: "int", 3: "double", 4: "bool", 7: "bytes", 5: "ser", 6: "ser"}


def _value(column: str, rng: np.random.Generator, wide: bool) -> object:
    if column == "str":
        return f"v{rng.integers(0, 10**6 if wide else 40)}"
    if column == "int":
        return int(rng.integers(-(2**62), 2**62)) if wide else int(rng.integers(0, 5))
    if column == "double":
        return float(rng.normal() * 1e6) if wide else float(rng.integers(0, 3))
    if column == "bool":
        return bool(rng.integers(0, 2))
    return bytes([int(rng.integers(0, 4))])


def _table(n: int, seed: int, wide: bool, stray: bool, strings_only: bool = False) -> tuple[pa.RecordBatch, pa.Array]:
    """An attribute table; ``stray``: one row also holds a value outside its type's column."""
    rng = np.random.default_rng(seed)
    if strings_only:
        types = np.ones(n, dtype=np.uint8)
    else:
        types = rng.choice([0, 1, 2, 3, 4, 5, 6, 7], size=n, p=[0.05, 0.35, 0.2, 0.2, 0.05, 0.05, 0.05, 0.05])
    cols: dict[str, list[object]] = {c: [None] * n for c in ("str", "int", "double", "bool", "bytes", "ser")}
    for row, t in enumerate(types):
        column = COLUMN_OF_TYPE.get(int(t))
        if column is not None and rng.random() < 0.9:  # sometimes the active value is null
            cols[column][row] = _value(column, rng, wide)
    if stray:
        row = int(rng.integers(0, n))
        other = "int" if types[row] != 2 else "str"
        cols[other][row] = _value(other, rng, wide)
    schema = reference_schema(PT)
    arrays = {
        "parent_id": pa.array(rng.integers(0, 2**16 if wide else 50, n), pa.uint16()),
        "key": pa.array([f"k{k}" for k in rng.integers(0, 60 if wide else 6, n)]),
        "type": pa.array(types, pa.uint8()),
        **{c: pa.array(v, schema.field(c).type) for c, v in cols.items()},
    }
    batch = pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)
    return batch, arrays["parent_id"]


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 1200), st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_merged_value_key_sorts_and_encodes_like_the_separate_keys(n: int, seed: int, wide: bool, stray: bool) -> None:
    batch, parent_ids = _table(n, seed, wide, stray)
    keys = sort_keys(batch, ORDER, PT.name)
    plain = sort(keys, n)
    merged = sort_attributes(keys, batch.column("type"), n)
    if merged is None:
        return
    if plain.perm is None:
        assert merged.perm is None
    else:
        assert merged.perm is not None and np.array_equal(merged.perm, plain.perm)
    assert len(merged.words) <= len(plain.words)
    if stray:
        assert not _merged(merged)
    expected = delta.encode_parent_ids(PT, batch, parent_ids, plain, keys)
    assert delta.encode_parent_ids(PT, batch, parent_ids, merged, keys).equals(expected)


def _merged(ordering: Ordering | None) -> bool:
    """Whether the ordering packs the value columns as one merged key (they share a field)."""
    if ordering is None:
        return False
    fields = [ordering.fields[path] for path in ("str", "int", "double") if path in ordering.fields]
    return len(fields) > 1 and len(set(fields)) == 1


def test_a_value_outside_its_type_column_is_not_merged() -> None:
    batch, parent_ids = _table(3000, 7, True, False)  # ranked value keys still overflow one word
    keys = sort_keys(batch, ORDER, PT.name)
    assert _merged(sort_attributes(keys, batch.column("type"), 3000))
    ints = batch.column("int").to_pylist()
    row = batch.column("type").to_pylist().index(1)
    ints[row] = 5  # a str row that also holds an int
    bad = batch.set_column(batch.schema.get_field_index("int"), batch.schema.field("int"), pa.array(ints, pa.int64()))
    bad_keys = sort_keys(bad, ORDER, PT.name)
    ordering = sort_attributes(bad_keys, bad.column("type"), 3000)
    assert not _merged(ordering)
    if ordering is not None:  # the value keys ranked, sorted apart
        plain = sort(bad_keys, 3000)
        assert plain.perm is not None and ordering.perm is not None and np.array_equal(ordering.perm, plain.perm)
        expected = delta.encode_parent_ids(PT, bad, parent_ids, plain, bad_keys)
        assert delta.encode_parent_ids(PT, bad, parent_ids, ordering, bad_keys).equals(expected)


def test_narrow_keys_and_other_orders_are_left_to_sort() -> None:
    batch, _ = _table(100, 3, False, False, strings_only=True)
    keys = sort_keys(batch, ORDER, PT.name)
    assert sort_attributes(keys, batch.column("type"), 100) is None  # one word as they are
    wide, _ = _table(300, 7, True, False)
    other = sort_keys(wide, ("key", *ORDER[1:]), PT.name)
    assert sort_attributes(other, wide.column("type"), 300) is None
