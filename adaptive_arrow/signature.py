"""Schema signatures (the Go producer's ``SchemaToID``) and their blake3 fingerprints.

The signature decides routing: one Arrow IPC stream per (payload type, signature). Fields are
sorted by name at every level; nullability, metadata and union type codes are ignored.
"""

from __future__ import annotations

import weakref

import blake3
import pyarrow as pa
import pyarrow.types as pt

from otap_model import PayloadType

from .errors import EncodingError

_PRIMITIVES: dict[pa.DataType, str] = {
    pa.bool_(): "Bol",
    pa.uint8(): "U8",
    pa.uint16(): "U16",
    pa.uint32(): "U32",
    pa.uint64(): "U64",
    pa.int8(): "I8",
    pa.int16(): "I16",
    pa.int32(): "I32",
    pa.int64(): "I64",
    pa.float32(): "F32",
    pa.float64(): "F64",
    pa.string(): "Str",
    pa.binary(): "Bin",
}

# Related tables are keyed "<prefix>:<signature>" by the Go producer (common/arrow/related_data.go).
PAYLOAD_PREFIX: dict[PayloadType, str] = {
    PayloadType.RESOURCE_ATTRS: "resource-attrs",
    PayloadType.SCOPE_ATTRS: "scope-attrs",
    PayloadType.METRIC_ATTRS: "metric-attrs",
    PayloadType.NUMBER_DATA_POINTS: "number-dps",
    PayloadType.NUMBER_DP_ATTRS: "number-dp-attrs",
    PayloadType.NUMBER_DP_EXEMPLARS: "number-dp-exemplars",
    PayloadType.NUMBER_DP_EXEMPLAR_ATTRS: "number-dp-exemplar-attrs",
    PayloadType.SUMMARY_DATA_POINTS: "summary-dps",
    PayloadType.SUMMARY_DP_ATTRS: "summary-dp-attrs",
    PayloadType.HISTOGRAM_DATA_POINTS: "histogram-dps",
    PayloadType.HISTOGRAM_DP_ATTRS: "histogram-dp-attrs",
    PayloadType.HISTOGRAM_DP_EXEMPLARS: "histogram-dp-exemplars",
    PayloadType.HISTOGRAM_DP_EXEMPLAR_ATTRS: "histogram-dp-exemplar-attrs",
    PayloadType.EXP_HISTOGRAM_DATA_POINTS: "exp-histogram-dps",
    PayloadType.EXP_HISTOGRAM_DP_ATTRS: "exp-histogram-dp-attrs",
    PayloadType.EXP_HISTOGRAM_DP_EXEMPLARS: "exp-histogram-dp-exemplars",
    PayloadType.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS: "exp-histogram-dp-exemplar-attrs",
    PayloadType.LOG_ATTRS: "logs-attrs",
    PayloadType.SPAN_ATTRS: "span-attrs",
    PayloadType.SPAN_EVENTS: "span-event",
    PayloadType.SPAN_LINKS: "span-link",
    PayloadType.SPAN_EVENT_ATTRS: "span-event-attrs",
    PayloadType.SPAN_LINK_ATTRS: "span-link-attrs",
}


def _fields(fields: list[pa.Field]) -> str:
    return ",".join(f"{f.name}:{type_signature(f.type)}" for f in sorted(fields, key=lambda f: f.name))


def type_signature(t: pa.DataType) -> str:
    """The OTel Arrow abbreviation of one Arrow type."""
    short = _PRIMITIVES.get(t)
    if short is not None:
        return short
    if pt.is_timestamp(t):
        return "Tns"
    if pt.is_duration(t):
        return "Dur"
    if pt.is_fixed_size_binary(t):
        return f"FSB<{t.byte_width}>"
    if pt.is_dictionary(t):
        return f"Dic<{type_signature(t.index_type)},{type_signature(t.value_type)}>"
    if pt.is_struct(t):
        return "{" + _fields([t.field(i) for i in range(t.num_fields)]) + "}"
    if pt.is_map(t):
        return f"Map<{type_signature(t.key_type)},{type_signature(t.item_type)}>"
    if pt.is_list(t):
        return f"[{type_signature(t.value_type)}]"
    if pt.is_union(t):
        prefix = "DU" if t.mode == "dense" else "SU"
        return prefix + "{" + _fields([t.field(i) for i in range(t.num_fields)]) + "}"
    raise EncodingError(f"type {t} has no OTel Arrow signature (unsupported in OTAP schemas)")


def schema_signature(schema: pa.Schema, payload_type: PayloadType | int | None = None) -> str:
    """``name:TYPE`` of every field, sorted by name at every level, comma separated.

    With a related payload type, the Go producer's routing prefix is prepended
    (``resource-attrs:parent_id:U16,...``); root tables have no prefix.
    """
    sig = _fields(list(schema))
    if payload_type is not None:
        prefix = PAYLOAD_PREFIX.get(PayloadType(payload_type))
        if prefix is not None:
            return f"{prefix}:{sig}"
    return sig


_FINGERPRINTS: weakref.WeakKeyDictionary[pa.Schema, bytes] = weakref.WeakKeyDictionary()


def schema_fingerprint(schema: pa.Schema) -> bytes:
    """32-byte blake3 digest of ``schema_signature(schema)``, cached per schema object."""
    try:
        return _FINGERPRINTS[schema]
    except KeyError:
        fp = blake3.blake3(schema_signature(schema).encode()).digest()
        _FINGERPRINTS[schema] = fp
        return fp
