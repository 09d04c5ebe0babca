"""The transformation tree on schemas beyond OTAP's: lists, maps, unions, nested dictionaries."""

from __future__ import annotations

import pyarrow as pa
import pytest

from adaptive_arrow.events import EventKind
from adaptive_arrow.restore import restore_table
from adaptive_arrow.signature import schema_signature
from adaptive_arrow.table_encoder import TableEncoder
from adaptive_arrow.transform import (
    DictionaryTransform,
    Identity,
    NoField,
    UnionVariants,
    build_tree,
    index_ladder,
)
from otap_model import PayloadType, reference_schema

OPT = {b"#optional": b"true"}
D8 = {b"#dictionary": b"8"}
OPT_D8 = {**OPT, **D8}

SCHEMA = pa.schema(
    [
        pa.field("id", pa.uint32(), nullable=False),
        pa.field("tags", pa.list_(pa.field("item", pa.string(), metadata=D8)), metadata=OPT),
        pa.field("labels", pa.map_(pa.field("key", pa.string(), nullable=False, metadata=D8), pa.field("value", pa.int64())), metadata=OPT),
        pa.field(
            "value",
            pa.dense_union([pa.field("s", pa.string(), metadata=D8), pa.field("i", pa.int64()), pa.field("f", pa.float64())], type_codes=[3, 5, 7]),
            metadata=OPT,
        ),
        pa.field("sparse", pa.sparse_union([pa.field("a", pa.int32()), pa.field("b", pa.string())], type_codes=[1, 2]), metadata=OPT),
        pa.field("s", pa.struct([pa.field("x", pa.string(), metadata=OPT_D8), pa.field("y", pa.int8(), metadata=OPT)]), metadata=OPT),
    ]
)


def _encoder() -> TableEncoder:
    return TableEncoder(PayloadType.LOGS, SCHEMA, dictionary_limit=65535, reset_threshold=0.3)


def _batch(n_tags: int, union_codes: list[int], with_struct: bool) -> pa.RecordBatch:
    n = len(union_codes)
    tags = pa.array([[f"t{i % max(n_tags, 1)}", None] if n_tags else None for i in range(n)], SCHEMA.field("tags").type)
    labels = pa.array([[("a", 1), ("b", None)], None] * (n // 2) + [[]] * (n % 2), SCHEMA.field("labels").type)
    codes = pa.array(union_codes, pa.int8())
    counts = {c: 0 for c in (3, 5, 7)}
    offsets = []
    for c in union_codes:
        offsets.append(counts[c])
        counts[c] += 1
    value = pa.UnionArray.from_dense(
        codes, pa.array(offsets, pa.int32()),
        [pa.array(["s"] * counts[3], pa.string()), pa.array(range(counts[5]), pa.int64()), pa.array([0.5] * counts[7], pa.float64())],
        ["s", "i", "f"], [3, 5, 7],
    )
    sparse = pa.UnionArray.from_sparse(pa.array([1] * n, pa.int8()), [pa.array(range(n), pa.int32()), pa.nulls(n, pa.string())], ["a", "b"], [1, 2])
    x = pa.array(["p", "q"] * (n // 2) + ["p"] * (n % 2)) if with_struct else pa.nulls(n, pa.string())
    s = pa.StructArray.from_arrays([x, pa.nulls(n, pa.int8())], fields=list(SCHEMA.field("s").type))
    return pa.RecordBatch.from_arrays([pa.array(range(n), pa.uint32()), tags, labels, value, sparse, s], schema=SCHEMA)


def test_tree_mirrors_the_schema() -> None:
    roots = build_tree(SCHEMA)
    by = {r.name: r for r in roots}
    assert isinstance(by["id"].transforms[0], Identity)
    assert [type(t) for t in by["tags"].transforms] == [NoField]
    assert [type(t) for t in by["tags"].children[0].transforms] == [DictionaryTransform]  # elements cannot be dropped
    assert [c.path for c in by["labels"].children] == ["labels.key", "labels.item"]
    assert [type(t) for t in by["value"].transforms] == [NoField, UnionVariants]
    assert [c.path for c in by["value"].children] == ["value.s", "value.i", "value.f"]
    assert [type(t) for t in by["s"].children[0].transforms] == [NoField, DictionaryTransform]


def test_index_ladder() -> None:
    assert index_ladder(8, 65535) == ((pa.uint8(), 255), (pa.uint16(), 65535))
    assert index_ladder(16, 65535) == ((pa.uint16(), 65535),)
    assert index_ladder(8, 1000) == ((pa.uint8(), 255), (pa.uint16(), 1000))
    assert index_ladder(16, 200) == ((pa.uint8(), 200),)
    assert index_ladder(8, 0) == ()
    assert index_ladder(8, 100_000) == ((pa.uint8(), 255), (pa.uint16(), 65535), (pa.uint32(), 100_000))


def _encode(enc: TableEncoder, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[tuple[str, str]]]:
    plan = enc.plan(batch)
    record = enc.build(plan)
    enc.commit(plan)
    return record, [(e.kind.value, e.path) for e in plan.events]


def test_union_variants_are_pruned_with_original_codes_and_grow() -> None:
    enc = _encoder()
    b1 = _batch(0, [5, 5, 5], with_struct=False)
    r1, ev1 = _encode(enc, b1)
    assert ("union_variant_added", "value") in ev1
    assert r1.schema.field("value").type.type_codes == [5]
    assert schema_signature(r1.schema) == "id:U32,labels:Map<Dic<U8,Str>,I64>,s:{},sparse:SU{a:I32},value:DU{i:I64}"
    assert restore_table(r1, SCHEMA, "t").equals(b1)
    b2 = _batch(3, [3, 7, 5, 3], with_struct=True)
    r2, ev2 = _encode(enc, b2)
    assert sorted(ev2) == [
        ("field_added", "s.x"), ("field_added", "tags"),
        ("union_variant_added", "value"), ("union_variant_added", "value"),
    ]
    assert r2.schema.field("value").type.type_codes == [3, 5, 7]
    assert r2.schema.field("tags").type.value_type == pa.dictionary(pa.uint8(), pa.string())
    assert restore_table(r2, SCHEMA, "t").equals(b2)
    # the schema never shrinks: a batch without tags keeps the column (all null)
    b3 = _batch(0, [5], with_struct=False)
    r3, ev3 = _encode(enc, b3)
    assert ev3 == []
    assert r3.schema.names == r2.schema.names
    assert restore_table(r3, SCHEMA, "t").equals(b3)


def test_nested_dictionary_in_a_list_grows_past_u8() -> None:
    enc = _encoder()
    b = _batch(300, [5] * 600, with_struct=False)
    r, ev = _encode(enc, b)
    assert ("dictionary_upgrade", "tags.item") in ev
    assert r.schema.field("tags").type.value_type == pa.dictionary(pa.uint16(), pa.string())
    assert restore_table(r, SCHEMA, "t").equals(b)


def test_sliced_input_round_trips() -> None:
    b = _batch(4, [3, 5, 7, 5, 3, 3], with_struct=True).slice(1, 4)
    r, _ = _encode(_encoder(), b)
    assert restore_table(r, SCHEMA, "t").equals(b)


@pytest.mark.parametrize("limit", [0, 3])
def test_dictionary_limit(limit: int) -> None:
    ref = reference_schema(PayloadType.LOG_ATTRS)
    enc = TableEncoder(PayloadType.LOG_ATTRS, ref, dictionary_limit=limit, reset_threshold=0.3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([0, 0, 0, 0], pa.uint16()), pa.array(["a", "b", "c", "d"]), pa.array([1] * 4, pa.uint8())]
        + [pa.nulls(4, f.type) for f in list(ref)[3:]],
        schema=ref,
    )
    r, ev = _encode(enc, batch)
    assert r.schema.field("key").type == pa.string()  # 4 distinct > limit 3, or no dictionaries at all
    assert ev == ([("dictionary_overflow", "key")] if limit else [])
    assert restore_table(r, ref, "t").equals(batch)


def test_events_are_typed() -> None:
    assert {k.value for k in EventKind} >= {"field_added", "dictionary_upgrade", "dictionary_overflow", "dictionary_reset"}
