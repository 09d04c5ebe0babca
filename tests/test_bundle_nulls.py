"""`ingest` refuses a batch holding nulls in a field its schema declares not null, at any depth,
before anything is logged. Was: stored and acknowledged (found by fuzzing WAL frames, session 21),
so a reader that enforces nullability (arrow-rs: `RecordBatch::try_new`, `StructArray::try_new`)
could not read the store's own segment, and `quiver dump` failed on it. A null under a null
struct row or a null list is no value and passes, as arrow-rs lets it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store import BundleError, QuiverStore, RecordBundle, StoreConfig, WalConfig
from quiver_store.bundle import NotNullFields, field_name, not_null_fields, unmasked_nulls

QUIET = StoreConfig(wal=WalConfig(durability="none"))
REQUIRED = pa.field("x", pa.int64(), nullable=False)


def refused(batch: pa.RecordBatch, slot: int = 5) -> str:
    bundle = RecordBundle({slot: batch})
    with pytest.raises(BundleError) as caught:
        fields = not_null_fields(batch.schema)
        assert fields is not None
        bundle.check_slot_nulls(slot, fields)
    return str(caught.value)


def nested(schema: pa.Schema) -> tuple[tuple[int, ...], ...]:
    fields = not_null_fields(schema)
    assert fields is not None
    return fields.nested


def test_a_null_in_a_not_null_column_is_refused_naming_slot_field_and_count() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([1, None, None]), pa.array(["a", None, "c"])], schema=pa.schema([REQUIRED, ("s", pa.string())]))
    assert refused(batch) == (
        "RecordBundle: slot 5: field 'x' is declared not null but holds 2 null values; Arrow readers that enforce "
        "nullability (arrow-rs, so every Rust consumer) refuse such a batch. Fill the nulls or declare the field "
        "nullable; nothing was written"
    )
    assert "holds 1 null value;" in refused(batch.slice(1, 1))
    fields = not_null_fields(batch.schema)
    assert fields == NotNullFields((0,), ())
    RecordBundle({5: batch.slice(0, 1)}).check_slot_nulls(5, fields)  # its one row holds a value
    assert not_null_fields(pa.schema([("s", pa.string())])) is None


def test_nested_fields_count_only_nulls_their_parents_do_not_explain() -> None:
    inner = pa.struct([pa.field("z", pa.int8(), nullable=False)])
    outer = pa.struct([REQUIRED, pa.field("inner", inner)])
    structs = pa.StructArray.from_arrays(
        [pa.array([1, None, 3, 4]), pa.StructArray.from_arrays([pa.array([None, 5, 6, None], pa.int8())], fields=list(inner))],
        fields=list(outer),
        mask=pa.array([False, True, False, False]),
    )
    batch = pa.RecordBatch.from_arrays([structs], names=["s"])
    # s.x: its one null is under the null row 1; s.inner.z: rows 0 and 3 hold a struct but no z
    assert [(field_name(batch.schema, p), unmasked_nulls(batch, p)) for p in nested(batch.schema)] == [("s.x", 0), ("s.inner.z", 2)]
    assert "field 's.inner.z' is declared not null but holds 2 null values" in refused(batch)
    assert [unmasked_nulls(batch.slice(1, 2), p) for p in nested(batch.schema)] == [0, 0]

    items = pa.list_(pa.field("item", pa.int64(), nullable=False))
    lists = pa.array([[1, 2], None, [None], []], type=items)
    batch = pa.RecordBatch.from_arrays([lists], names=["l"])
    assert "field 'l.item' is declared not null but holds 1 null value;" in refused(batch)
    assert unmasked_nulls(batch.slice(0, 2), (0, -1)) == 0

    maps = pa.array([[("a", 1)], None, [("b", None)]], type=pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)))
    batch = pa.RecordBatch.from_arrays([maps], names=["m"])
    assert nested(batch.schema) == ((0, -1), (0, -1, 0), (0, -1, 1))
    assert "field 'm.entries.value' is declared not null but holds 1 null value;" in refused(batch)
    assert unmasked_nulls(batch.slice(0, 2), (0, -1, 1)) == 0


def test_dictionary_columns_count_null_indices() -> None:
    values = pa.DictionaryArray.from_arrays(pa.array([0, None, 1], pa.int8()), pa.array(["a", "b"]))
    batch = pa.RecordBatch.from_arrays([values], schema=pa.schema([pa.field("d", values.type, nullable=False)]))
    assert "field 'd' is declared not null but holds 1 null value;" in refused(batch)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=0, max_size=30),
    start=st.integers(0, 30),
    length=st.integers(0, 30),
)
def test_the_count_matches_rows_where_the_struct_holds_a_value_and_the_child_does_not(
    rows: list[tuple[bool, bool]], start: int, length: int
) -> None:
    """Against a row-by-row count: (struct valid, child valid) per row, over any slice."""
    child = pa.array([7 if child_valid else None for _, child_valid in rows], pa.int64())
    structs = pa.StructArray.from_arrays([child], fields=[REQUIRED], mask=pa.array([not valid for valid, _ in rows], pa.bool_()))
    batch = pa.RecordBatch.from_arrays([structs], names=["s"]).slice(start, length)
    expected = sum(1 for valid, child_valid in rows[start : start + length] if valid and not child_valid)
    assert unmasked_nulls(batch, (0, 0)) == expected


def test_ingest_refuses_before_logging_and_the_store_goes_on(tmp_path: Path) -> None:
    schema = pa.schema([REQUIRED])
    good = pa.RecordBatch.from_arrays([pa.array([1, 2])], schema=schema)
    bad = pa.RecordBatch.from_arrays([pa.array([3, None])], schema=schema)
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(RecordBundle({0: good}))  # the schema is known: the cached path checks too
        with pytest.raises(BundleError, match="slot 0: field 'x' is declared not null but holds 1 null value"):
            store.ingest(RecordBundle({0: bad}))
        with pytest.raises(BundleError, match="slot 1: field 'x' is declared not null"):
            store.ingest(RecordBundle({0: good, 1: bad}))  # a new schema key: the first-sight path
        store.ingest(RecordBundle({0: good}))
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert [b.slots[0].to_pylist() for _, _, b in store.bundles()] == [[{"x": 1}, {"x": 2}]] * 2
