"""`ingest` refuses a bundle with two columns (or two fields of one struct) of the same name,
before anything is logged. Was: accepted and acknowledged, then `quiver verify` called the store's own
segment corrupt ("directory lists columns ('a',), the data has ['a', 'a']") and load_table
returned [{'a': None}]; a repeated struct field lost its values once a later segment added a field
(load_table kept one of the two) and made to_pylist, so `quiver dump`, raise ValueError."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from quiver_store import BundleError, QuiverStore, RecordBundle, StoreConfig, WalConfig

QUIET = StoreConfig(wal=WalConfig(durability="none"))


def struct(names: list[str]) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array([i]) for i in range(len(names))], names=names)


def test_a_repeated_column_name_is_refused_naming_the_slot_and_the_name() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(BundleError) as caught:
        RecordBundle({9: batch}).check_names()
    assert str(caught.value) == (
        "RecordBundle: slot 9: the column name 'a' is used more than once (columns: ['a', 'a']); "
        "the store finds columns by name, so each needs its own: rename the duplicates"
    )
    batch = pa.RecordBatch.from_arrays([pa.array([1])] * 5, names=["a", "b", "a", "c", "b"])
    with pytest.raises(BundleError, match=r"^RecordBundle: slot 0: the column names 'a', 'b' are used more than once \(columns"):
        RecordBundle({0: batch}).check_names()


def test_a_repeated_struct_field_name_is_refused_at_any_depth() -> None:
    batch = pa.RecordBatch.from_arrays([struct(["x", "x"]), pa.array([5])], names=["st", "y"])
    with pytest.raises(BundleError) as caught:
        RecordBundle({9: batch}).check_names()
    assert str(caught.value) == (
        "RecordBundle: slot 9: struct column 'st' uses the field name 'x' more than once (fields: ['x', 'x']); "
        "the store finds struct fields by name, so each needs its own: rename the duplicates"
    )
    inner = pa.StructArray.from_arrays([struct(["p", "q", "p"])], names=["inner"])
    listed = pa.ListArray.from_arrays(pa.array([0, 1]), inner)
    with pytest.raises(BundleError, match=re.escape("slot 3: struct column 'l.item.inner' uses the field name 'p' more")):
        RecordBundle({3: pa.RecordBatch.from_arrays([listed], names=["l"])}).check_names()
    values = pa.DictionaryArray.from_arrays(pa.array([0]), struct(["k", "k"]))
    with pytest.raises(BundleError, match=re.escape("slot 4: struct column 'd' uses the field name 'k' more")):
        RecordBundle({4: pa.RecordBatch.from_arrays([values], names=["d"])}).check_names()


def test_distinct_names_and_union_children_pass() -> None:
    """Union children are told apart by type code: the same name twice is harmless there."""
    union = pa.UnionArray.from_dense(
        pa.array([0, 1], pa.int8()), pa.array([0, 0], pa.int32()), [pa.array([1]), pa.array(["s"])], field_names=["v", "v"]
    )
    same_field_in_two_structs = pa.RecordBatch.from_arrays([struct(["x"]), struct(["x"]), union[:1]], names=["s", "t", "u"])
    bundle = RecordBundle({1: same_field_in_two_structs})
    bundle.check_names()
    assert bundle.slots[1] is same_field_in_two_structs


def test_nothing_is_logged_for_a_refused_bundle(tmp_path: Path) -> None:
    with QuiverStore.open(tmp_path, QUIET) as store:
        with pytest.raises(BundleError, match="the column name 'a' is used more than once"):
            store.ingest(RecordBundle({9: pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])}))
        store.ingest(RecordBundle({9: pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["a", "b"])}))
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert [b.slots[9].to_pylist() for _, _, b in store.bundles()] == [[{"a": 1, "b": 2}]]


def test_bundles_stored_before_the_check_still_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Acknowledged data is never refused on the way out: a bundle with a repeated struct field name,
    stored before ingest checked names, comes back from a replayed WAL entry and from a segment."""
    from quiver_store import bundle as bundle_module

    batch = pa.RecordBatch.from_arrays([struct(["x", "x"]), pa.array([7])], names=["st", "y"])
    with monkeypatch.context() as patched:
        patched.setattr(bundle_module, "repeated_names", lambda schema: [])  # as before the check
        store = QuiverStore.open(tmp_path, StoreConfig())
        store.ingest(RecordBundle({9: batch}))
        store._abandon()  # a crash: the bundle is only in the WAL
    with QuiverStore.open(tmp_path, StoreConfig()) as store:
        assert store.stats()["replayed_entries"] == 1 and store.stats()["corruption_reports"] == []
        store.flush()
        (held,) = [b.slots[9] for _, _, b in store.bundles()]
    assert held.equals(batch)
