"""Representative schemas across segments and loading whole segments as one table / dataset."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig
from quiver_store.errors import QuiverError
from quiver_store.fs import DEFAULT_FS
from quiver_store.segment import OpenSegment, SegmentReader, write_segment
from quiver_store.segment.schema_view import (
    conform_batch,
    load_dataset,
    load_table,
    representative_schema,
    slot_schema,
)
from tests.test_segment_support import dict_array, logs_l1, logs_l2, plain

U8 = pa.dictionary(pa.uint8(), pa.string())
U16 = pa.dictionary(pa.uint16(), pa.string())


def test_union_of_columns_in_first_appearance_order_with_widest_types():
    a = pa.schema([pa.field("id", pa.uint16(), False), ("sev", U8), ("body", pa.struct([("str", U8)]))])
    b = pa.schema([("id", pa.uint16()), ("trace", pa.binary(16)), ("sev", U16), ("body", pa.struct([("int", pa.int64()), ("str", pa.string())]))])
    c = pa.schema([pa.field("id", pa.uint16(), False), ("sev", U8), ("n", pa.int32())])
    rep = representative_schema([a, b, c])
    assert rep.names == ["id", "sev", "body", "trace", "n"]
    assert rep.field("sev").type == U16  # u16 dictionary beats u8
    assert rep.field("body").type == pa.struct([("str", pa.string()), ("int", pa.int64())])  # plain beats dict
    assert rep.field("id").nullable  # b's id is nullable
    assert rep.field("n").nullable and rep.field("trace").nullable  # missing somewhere
    assert representative_schema([a]).field("id").nullable is False


def test_dictionary_index_of_same_width_prefers_unsigned():
    i8 = pa.dictionary(pa.int8(), pa.string())
    rep = representative_schema([pa.schema([("k", i8)]), pa.schema([("k", U8)])])
    assert rep.field("k").type == U8
    batch = pa.record_batch({"k": pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int8()), pa.array(["a", "b"]))})
    assert conform_batch(batch, rep).column("k").to_pylist() == ["b", "a"]


def test_irreconcilable_types_raise():
    with pytest.raises(QuiverError, match="column x: types string and struct"):
        representative_schema([pa.schema([("x", pa.string())]), pa.schema([("x", pa.struct([("y", pa.int8())]))])])


def test_numeric_promotion():
    rep = representative_schema([pa.schema([("x", pa.int32())]), pa.schema([("x", pa.int64())])])
    assert rep.field("x").type == pa.int64()


def test_conform_reorders_fills_and_casts():
    rep = pa.schema([("a", pa.int64()), ("s", pa.string()), ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("z", pa.float64())])
    st = pa.StructArray.from_arrays([dict_array([0, 1], ["p", "q"])], names=["y"], mask=pa.array([False, True]))
    batch = pa.record_batch({"st": st, "s": dict_array([1, 0], ["u", "v"]), "a": pa.array([1, 2], pa.int32())})
    out = conform_batch(batch, rep)
    assert out.schema == rep
    assert out.to_pylist() == [
        {"a": 1, "s": "v", "st": {"x": None, "y": "p"}, "z": None},
        {"a": 2, "s": "u", "st": None, "z": None},
    ]


def _segment(tmp_path, name, seq, batches):
    seg = OpenSegment(SegmentConfig())
    for i, b in enumerate(batches):
        seg.append(RecordBundle({30: b}, ingestion_time_ns=seq * 100 + i))
    path = str(tmp_path / name)
    write_segment(seg, path, seq, fs=DEFAULT_FS, metadata={"signal": "logs"})
    return path


def test_load_table_and_dataset_across_segments(tmp_path):
    p1 = _segment(tmp_path, "1.qseg", 1, [logs_l1(3), logs_l1(2, 3)])
    p2 = _segment(tmp_path, "2.qseg", 2, [logs_l2(4), logs_l1(1, 9)])
    with SegmentReader.open(p1) as r1, SegmentReader.open(p2) as r2:
        rep = slot_schema([r1, r2.info], 30)
        assert rep.names == ["id", "time_unix_nano", "severity_text", "trace_id"]
        assert rep.field("severity_text").type == pa.string()
        table = load_table([r1, r2], 30)
    assert table.schema == rep
    assert table.num_rows == 10
    assert table.column("id").to_pylist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 9]  # segment then bundle order
    expected = plain(logs_l1(3)).column("severity_text").to_pylist()
    assert table.column("severity_text").to_pylist()[:3] == expected
    assert table.column("trace_id").null_count == 6
    dataset = load_dataset([p1, p2], 30)
    assert isinstance(dataset, ds.Dataset)
    assert dataset.to_table(filter=ds.field("severity_text") == "DEBUG").num_rows == 4
    with pytest.raises(QuiverError, match="slot 31 has no stream in the 2 segment"):
        load_table([p1, p2], 31)


_KINDS = {
    "int32": lambda n: pa.array(range(n), pa.int32()),
    "int64": lambda n: pa.array(range(n), pa.int64()),
    "str": lambda n: pa.array([f"s{i % 3}" for i in range(n)]),
    "dict8": lambda n: dict_array([i % 3 for i in range(n)], ["s0", "s1", "s2"]),
    "dict16": lambda n: dict_array([i % 3 for i in range(n)], ["s0", "s1", "s2"], pa.uint16()),
}
_NUMERIC = {"int32", "int64"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(sorted(_KINDS)), min_size=1), min_size=1, max_size=5), st.integers(0, 4))
def test_conforming_random_schemas_keeps_values(specs, rows):
    # one "family" per column so types stay reconcilable: numeric columns stay numeric
    family = {}
    batches = []
    for spec in specs:
        cols = {}
        for name, kind in spec.items():
            numeric = kind in _NUMERIC
            family.setdefault(name, numeric)
            if family[name] != numeric:
                kind = "int64" if family[name] else "str"
            cols[name] = _KINDS[kind](rows)
        batches.append(pa.record_batch(cols))
    rep = representative_schema([b.schema for b in batches])
    table = pa.Table.from_batches([conform_batch(b, rep) for b in batches], schema=rep)
    assert table.num_rows == rows * len(batches)
    for b, start in zip(batches, range(0, table.num_rows, max(rows, 1))):
        for name in b.schema.names:
            got = table.column(name).slice(start, rows).to_pylist()
            assert got == plain(b).column(name).to_pylist()


def _x(values, type_):  # type: ignore[no-untyped-def]
    return pa.record_batch({"x": pa.array(values, type_)})


def test_streams_of_one_segment_whose_types_cannot_be_merged_are_named(tmp_path):
    """Was: slot_schema said x: int64 (the writer keeps a conflicting column's first type in the
    segment's representative schema) and load_table then failed with "column 'x' cannot be
    conformed to int64", naming neither the segment nor the other type."""
    path = _segment(tmp_path, "0.qseg", 0, [_x([1], pa.int64()), _x(["s"], pa.string())])
    expected = (
        f"segment 0 ({path}): the streams of slot 30 disagree: stream 1 cannot be merged with stream 0: column x: "
        "types int64 and string have no common representative type"
    )
    with SegmentReader.open(path) as reader:
        assert reader.info.representative_schemas[30] == pa.schema([("x", pa.int64())])
        with pytest.raises(QuiverError) as caught:
            slot_schema([reader], 30)
        assert str(caught.value).startswith(expected)
        assert slot_schema([reader.info], 30) == pa.schema([("x", pa.int64())])  # metadata alone cannot show it
    with pytest.raises(QuiverError) as caught:
        load_table([path], 30)
    assert str(caught.value).startswith(expected)
    with pytest.raises(QuiverError, match=r"^column 'x' cannot be conformed to int64"):  # a schema given: as before
        load_table([path], 30, schema=pa.schema([("x", pa.int64())]))


def test_streams_of_one_segment_that_merge_still_load(tmp_path):
    path = _segment(tmp_path, "0.qseg", 0, [_x([1], pa.int32()), _x([2], pa.int64()), _x([3], pa.int32())])
    table = load_table([path], 30)
    assert table.schema == pa.schema([("x", pa.int64())]) and table.column("x").to_pylist() == [1, 2, 3]


def test_segments_whose_types_cannot_be_merged_are_named(tmp_path):
    p0 = _segment(tmp_path, "0.qseg", 0, [_x([1], pa.int64())])
    p1 = _segment(tmp_path, "1.qseg", 1, [_x([1], pa.int32())])
    p2 = _segment(tmp_path, "2.qseg", 2, [_x(["s"], pa.string())])
    with pytest.raises(QuiverError) as caught:
        load_table([p0, p1, p2], 30)
    assert str(caught.value).startswith(
        "slot 30: segment 2 cannot be merged with segment 0: column x: types int64 and string have no common representative type"
    )
