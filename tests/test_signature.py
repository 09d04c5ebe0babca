"""Schema signatures in the Go producer's format, and their blake3 fingerprints."""

from __future__ import annotations

import blake3
import pyarrow as pa
import pytest

from adaptive_arrow import EncodingError, schema_fingerprint, schema_signature
from otap_model import PayloadType, reference_schema


def test_every_abbreviation_and_sorting_at_every_level() -> None:
    schema = pa.schema(
        [
            pa.field("z", pa.bool_()),
            pa.field("ints", pa.struct([pa.field(n, t) for n, t in [
                ("u8", pa.uint8()), ("u16", pa.uint16()), ("u32", pa.uint32()), ("u64", pa.uint64()),
                ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
            ]])),
            pa.field("f", pa.struct([pa.field("b", pa.float64()), pa.field("a", pa.float32())])),
            pa.field("s", pa.dictionary(pa.uint16(), pa.string())),
            pa.field("bin", pa.binary()),
            pa.field("fsb", pa.binary(16)),
            pa.field("ts", pa.timestamp("ns")),
            pa.field("d", pa.duration("ns")),
            pa.field("l", pa.list_(pa.struct([pa.field("y", pa.int64()), pa.field("x", pa.string())]))),
            pa.field("m", pa.map_(pa.string(), pa.int32())),
            pa.field("du", pa.dense_union([pa.field("s", pa.string()), pa.field("i", pa.int64())])),
            pa.field("su", pa.sparse_union([pa.field("b", pa.binary())])),
        ]
    )
    assert schema_signature(schema) == (
        "bin:Bin,d:Dur,du:DU{i:I64,s:Str},f:{a:F32,b:F64},fsb:FSB<16>,"
        "ints:{i16:I16,i32:I32,i64:I64,i8:I8,u16:U16,u32:U32,u64:U64,u8:U8},"
        "l:[{x:Str,y:I64}],m:Map<Str,I32>,s:Dic<U16,Str>,su:SU{b:Bin},ts:Tns,z:Bol"
    )


def test_nullability_and_metadata_are_ignored() -> None:
    a = pa.schema([pa.field("a", pa.uint16(), nullable=False, metadata={"encoding": "delta"})])
    b = pa.schema([pa.field("a", pa.uint16())])
    assert schema_signature(a) == schema_signature(b) == "a:U16"


def test_related_tables_carry_the_go_prefix() -> None:
    schema = pa.schema([pa.field("parent_id", pa.uint16()), pa.field("key", pa.string())])
    assert schema_signature(schema, PayloadType.RESOURCE_ATTRS) == "resource-attrs:key:Str,parent_id:U16"
    assert schema_signature(schema, PayloadType.SPAN_EVENTS).startswith("span-event:")
    assert schema_signature(schema, PayloadType.LOG_ATTRS).startswith("logs-attrs:")
    assert schema_signature(schema, PayloadType.LOGS) == "key:Str,parent_id:U16"  # root tables: no prefix


def test_reference_schema_signature() -> None:
    sig = schema_signature(reference_schema(PayloadType.SPAN_LINKS), PayloadType.SPAN_LINKS)
    assert sig == (
        "span-link:dropped_attributes_count:U32,flags:U32,id:U32,parent_id:U16,span_id:FSB<8>,"
        "trace_id:FSB<16>,trace_state:Str"
    )


def test_fingerprint_is_blake3_of_the_signature_and_cached() -> None:
    schema = reference_schema(PayloadType.LOGS)
    fp = schema_fingerprint(schema)
    assert len(fp) == 32
    assert fp == blake3.blake3(schema_signature(schema).encode()).digest()
    assert schema_fingerprint(schema) is fp


def test_unsupported_type_is_named() -> None:
    with pytest.raises(EncodingError, match="date32"):
        schema_signature(pa.schema([pa.field("d", pa.date32())]))
