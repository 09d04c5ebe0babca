"""Annotated reference schemas: the widest shape of every OTAP payload table.

A plain OTAP table (the form ``OtapBundle`` holds) has exactly these columns, in this order, with
these types and nullability. The adaptive encoder reads the annotations kept in Arrow field
metadata to decide how far it may shrink each column:

``#optional``   ``"true"``: the column may be left out of an emitted schema when it carries
                nothing (all null or all default).
``#dictionary`` ``"8"`` or ``"16"``: the column may be dictionary encoded, starting with u8
                (growing to u16) or with u16 indices.
``#encoding``   ``"delta"`` (ids, data point parent ids) or ``"quasidelta"`` (parent ids of
                attributes, events, links, exemplars): the transport encoding of an id column.

Column sets, types and annotations follow the OTel Arrow Go producer (see
reference/otap-reference.md section 1.3); the Go annotation of every field is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

from .errors import SchemaError
from .payload import ATTRIBUTE_TABLES_16, ATTRIBUTE_TABLES_32, PayloadType

OPTIONAL = b"#optional"
DICTIONARY = b"#dictionary"
ENCODING = b"#encoding"

TIMESTAMP = pa.timestamp("ns", tz="UTC")
DURATION = pa.duration("ns")
TRACE_ID = pa.binary(16)
SPAN_ID = pa.binary(8)


@dataclass(frozen=True)
class Annotation:
    """The annotations of one field, decoded from its metadata."""

    optional: bool = False
    dictionary: int | None = None  # 8 or 16: the first dictionary index width
    encoding: str | None = None  # "delta" or "quasidelta" for id columns


def annotation(field: pa.Field) -> Annotation:
    """Decode the annotations carried in a reference-schema field's metadata."""
    md = field.metadata or {}
    dictionary = md.get(DICTIONARY)
    encoding = md.get(ENCODING)
    return Annotation(
        optional=md.get(OPTIONAL) == b"true",
        dictionary=int(dictionary) if dictionary is not None else None,
        encoding=encoding.decode() if encoding is not None else None,
    )


def _f(
    name: str,
    type_: pa.DataType,
    *,
    optional: bool = False,
    dictionary: int | None = None,
    encoding: str | None = None,
) -> pa.Field:
    """Build an annotated field: optional fields are nullable, required ones are not."""
    md: dict[bytes, bytes] = {}
    if optional:
        md[OPTIONAL] = b"true"
    if dictionary is not None:
        md[DICTIONARY] = str(dictionary).encode()
    if encoding is not None:
        md[ENCODING] = encoding.encode()
    return pa.field(name, type_, nullable=optional, metadata=md or None)


def _opt(name: str, type_: pa.DataType, dictionary: int | None = None) -> pa.Field:
    return _f(name, type_, optional=True, dictionary=dictionary)


def _resource() -> pa.Field:
    return _opt(
        "resource",
        pa.struct(
            [
                _f("id", pa.uint16(), optional=True, encoding="delta"),
                _opt("schema_url", pa.string(), 8),
                _opt("dropped_attributes_count", pa.uint32()),
            ]
        ),
    )


def _scope() -> pa.Field:
    return _opt(
        "scope",
        pa.struct(
            [
                _f("id", pa.uint16(), optional=True, encoding="delta"),
                _opt("name", pa.string(), 8),
                _opt("version", pa.string(), 8),
                _opt("dropped_attributes_count", pa.uint32()),
            ]
        ),
    )


def _any_value_columns(str_dict: int = 16) -> list[pa.Field]:
    """The typed value columns of an AnyValue (type code in ``type``)."""
    return [
        _opt("str", pa.string(), str_dict),
        _opt("int", pa.int64(), 16),
        _opt("double", pa.float64()),
        _opt("bool", pa.bool_()),
        _opt("bytes", pa.binary(), 16),
        _opt("ser", pa.binary(), 16),
    ]


def _attrs(parent_id_type: pa.DataType) -> pa.Schema:
    wide = parent_id_type == pa.uint32()
    return pa.schema(
        [
            _f("parent_id", parent_id_type, encoding="quasidelta", dictionary=8 if wide else None),
            _f("key", pa.string(), dictionary=8),
            _f("type", pa.uint8()),
            *_any_value_columns(),
        ]
    )


def _id(type_: pa.DataType, *, required: bool = False) -> pa.Field:
    return _f("id", type_, optional=not required, encoding="delta")


def _parent_id(type_: pa.DataType, encoding: str) -> pa.Field:
    return _f("parent_id", type_, encoding=encoding)


def _dp_common() -> list[pa.Field]:
    return [
        _id(pa.uint32()),
        _parent_id(pa.uint16(), "delta"),
        _opt("start_time_unix_nano", TIMESTAMP),
        _f("time_unix_nano", TIMESTAMP),
    ]


def _exemplars() -> pa.Schema:
    return pa.schema(
        [
            _id(pa.uint32()),
            _f("parent_id", pa.uint32(), encoding="quasidelta", dictionary=8),
            _f("time_unix_nano", TIMESTAMP),
            _opt("int_value", pa.int64(), 8),
            _opt("double_value", pa.float64()),
            _opt("span_id", SPAN_ID, 8),
            _opt("trace_id", TRACE_ID, 8),
        ]
    )


def _buckets() -> pa.DataType:
    return pa.struct([_opt("offset", pa.int32()), _opt("bucket_counts", pa.list_(pa.uint64()))])


def _build(pt: PayloadType) -> pa.Schema:
    P = PayloadType
    if pt in ATTRIBUTE_TABLES_16:
        return _attrs(pa.uint16())
    if pt in ATTRIBUTE_TABLES_32:
        return _attrs(pa.uint32())
    if pt is P.LOGS:
        return pa.schema(
            [
                _id(pa.uint16()),
                _resource(),
                _scope(),
                _opt("schema_url", pa.string(), 8),
                _opt("time_unix_nano", TIMESTAMP),
                _opt("observed_time_unix_nano", TIMESTAMP),
                _opt("trace_id", TRACE_ID, 8),
                _opt("span_id", SPAN_ID, 8),
                _opt("severity_number", pa.int32(), 8),
                _opt("severity_text", pa.string(), 8),
                _opt("body", pa.struct([_f("type", pa.uint8()), *_any_value_columns()])),
                _opt("dropped_attributes_count", pa.uint32()),
                _opt("flags", pa.uint32()),
                _opt("event_name", pa.string(), 8),
            ]
        )
    if pt is P.SPANS:
        return pa.schema(
            [
                _id(pa.uint16()),
                _resource(),
                _scope(),
                _opt("schema_url", pa.string(), 8),
                _f("start_time_unix_nano", TIMESTAMP),
                _f("duration_time_unix_nano", DURATION, dictionary=8),
                _f("trace_id", TRACE_ID),
                _f("span_id", SPAN_ID),
                _opt("trace_state", pa.string(), 8),
                _opt("parent_span_id", SPAN_ID),
                _opt("flags", pa.uint32()),
                _f("name", pa.string(), dictionary=8),
                _opt("kind", pa.int32(), 8),
                _opt("dropped_attributes_count", pa.uint32()),
                _opt("dropped_events_count", pa.uint32()),
                _opt("dropped_links_count", pa.uint32()),
                _opt(
                    "status",
                    pa.struct([_opt("code", pa.int32(), 8), _opt("status_message", pa.string(), 8)]),
                ),
            ]
        )
    if pt is P.SPAN_EVENTS:
        return pa.schema(
            [
                _id(pa.uint32()),
                _parent_id(pa.uint16(), "quasidelta"),
                _opt("time_unix_nano", TIMESTAMP),
                _f("name", pa.string(), dictionary=8),
                _opt("dropped_attributes_count", pa.uint32()),
            ]
        )
    if pt is P.SPAN_LINKS:
        return pa.schema(
            [
                _id(pa.uint32()),
                _parent_id(pa.uint16(), "quasidelta"),
                _f("trace_id", TRACE_ID, dictionary=8),
                _f("span_id", SPAN_ID, dictionary=8),
                _opt("trace_state", pa.string(), 8),
                _opt("dropped_attributes_count", pa.uint32()),
                _opt("flags", pa.uint32()),
            ]
        )
    if pt is P.UNIVARIATE_METRICS:
        return pa.schema(
            [
                _id(pa.uint16(), required=True),
                _resource(),
                _scope(),
                _opt("schema_url", pa.string(), 8),
                _f("metric_type", pa.uint8()),
                _f("name", pa.string(), dictionary=8),
                _opt("description", pa.string(), 8),
                _opt("unit", pa.string(), 8),
                _opt("aggregation_temporality", pa.int32(), 8),
                _opt("is_monotonic", pa.bool_()),
            ]
        )
    if pt is P.NUMBER_DATA_POINTS:
        return pa.schema(
            [
                *_dp_common(),
                _opt("int_value", pa.int64()),
                _opt("double_value", pa.float64()),
                _opt("flags", pa.uint32()),
            ]
        )
    if pt is P.SUMMARY_DATA_POINTS:
        quantile = pa.struct([_opt("quantile", pa.float64()), _opt("value", pa.float64())])
        return pa.schema(
            [
                *_dp_common(),
                _opt("count", pa.uint64()),
                _opt("sum", pa.float64()),
                _opt("quantile", pa.list_(pa.field("item", quantile))),
                _opt("flags", pa.uint32()),
            ]
        )
    if pt is P.HISTOGRAM_DATA_POINTS:
        return pa.schema(
            [
                *_dp_common(),
                _opt("count", pa.uint64()),
                _opt("sum", pa.float64()),
                _opt("bucket_counts", pa.list_(pa.uint64())),
                _opt("explicit_bounds", pa.list_(pa.float64())),
                _opt("flags", pa.uint32()),
                _opt("min", pa.float64()),
                _opt("max", pa.float64()),
            ]
        )
    if pt is P.EXP_HISTOGRAM_DATA_POINTS:
        return pa.schema(
            [
                *_dp_common(),
                _opt("count", pa.uint64()),
                _opt("sum", pa.float64()),
                _opt("scale", pa.int32()),
                _opt("zero_count", pa.uint64()),
                _opt("positive", _buckets()),
                _opt("negative", _buckets()),
                _opt("flags", pa.uint32()),
                _opt("min", pa.float64()),
                _opt("max", pa.float64()),
                _opt("zero_threshold", pa.float64()),
            ]
        )
    if pt in (P.NUMBER_DP_EXEMPLARS, P.HISTOGRAM_DP_EXEMPLARS, P.EXP_HISTOGRAM_DP_EXEMPLARS):
        return _exemplars()
    raise SchemaError(
        f"payload type {pt.name} ({int(pt)}) has no reference schema"
        + (" (MULTIVARIATE_METRICS is experimental in OTAP and not modelled)" if pt is P.MULTIVARIATE_METRICS else "")
    )


@cache
def reference_schema(pt: PayloadType | int) -> pa.Schema:
    """The annotated reference schema of a payload type (cached; schemas are immutable)."""
    try:
        payload_type = PayloadType(pt)
    except ValueError:
        raise SchemaError(f"unknown payload type id {pt}") from None
    return _build(payload_type)


def strip_annotations(type_or_field: pa.Field) -> pa.Field:
    """The field without its annotation metadata (recursively for structs and lists)."""
    return pa.field(
        type_or_field.name, _strip_type(type_or_field.type), nullable=type_or_field.nullable
    )


def _strip_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([strip_annotations(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(strip_annotations(t.value_field))
    return t


def conforms(batch: pa.RecordBatch, pt: PayloadType) -> None:
    """Raise SchemaError unless `batch` has the reference schema's names, types and nullability,
    and plain ids (no transport ``encoding`` mark other than ``plain``)."""
    ref = reference_schema(pt)
    got = batch.schema
    hint = conform_hint(pt)
    if got.names != ref.names:
        raise SchemaError(f"{pt.name}: columns {got.names} differ from the reference {ref.names}{hint}")
    for want, have in zip(ref, got):
        w, h = strip_annotations(want), strip_annotations(have)
        if not w.equals(h):
            raise SchemaError(
                f"{pt.name}.{want.name}: expected {w.type} (nullable={w.nullable}), got {h.type} (nullable={h.nullable}){hint}"
            )
        for path, field in [(have.name, have)] + [(f"{have.name}.{c.name}", c) for c in (have.type if pa.types.is_struct(have.type) else ())]:
            mark = (field.metadata or {}).get(b"encoding", b"plain")
            if mark != b"plain":
                raise SchemaError(
                    f"{pt.name}.{path}: its ids are marked {mark.decode(errors='replace')!r} (transport-encoded), "
                    "and a plain bundle holds plain ids: decode the bundle first (adaptive_arrow.Decoder or "
                    "adaptive_arrow.transport.restore)"
                )


def conform_hint(pt: PayloadType) -> str:
    """Appended to the schema errors of the encoder and `to_otlp`: where a foreign table goes first."""
    return f" (otap_model.conform(table, PayloadType.{pt.name}) converts equivalent types and fills absent optional columns)"


def fill_under_null_structs(child: pa.Array, struct: pa.Array) -> pa.Array:
    """`child` of `struct` with a zero value where the struct is null. A not-null child (the log
    body's ``type``) must hold a value in every slot, or writers that check nullability (Parquet)
    refuse the table; ``flatten()`` and foreign producers leave nulls there."""
    if not child.null_count or not struct.null_count:
        return child
    return pc.if_else(struct.is_valid(), child, _zero(child.type))


def _zero(type_: pa.DataType) -> pa.Scalar:
    if pa.types.is_binary(type_) or pa.types.is_fixed_size_binary(type_):
        return pa.scalar(bytes(getattr(type_, "byte_width", 0)), type_)
    if pa.types.is_string(type_):
        return pa.scalar("", type_)
    if pa.types.is_boolean(type_):
        return pa.scalar(False)
    return pa.scalar(0, pa.int64()).cast(type_)
