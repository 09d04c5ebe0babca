"""Protobuf wire-format scanner for OTLP export requests (the hot path of ``from_otlp``).

Walking upb message objects from Python costs several microseconds per log record, too slow for
the 300k records/s target. Instead one numba kernel scans the serialized request once and emits:

* **nodes**: every embedded message that matters, with its message type (``T``) and parent node;
* **tokens**: every scalar, string/bytes or packed element of those messages, keyed by
  ``type * 32 + field`` with its value (varint / fixed bits, or the byte offset of a string) and
  length, in document order.

``decode.py`` then turns tokens into columns with numpy. The message layout lives in ``MESSAGES``
below; every request type of all three signals is described by it, so there is one decoder per
signal and no second (upb-walking) implementation.

It also lists fields of older OTLP versions that the current protos reserve, so that none is
skipped as unknown: ResourceX field 1000 (instrumentation_library_*, OTLP 0.15-0.18) is read as
the ScopeX list unless the ResourceX holds field 2 (its field number lands in the spare slot
``HIGH_SLOT``), fields OTAP cannot hold (IntGauge & co., LogRecord.name) are REJECT with a
note saying what they were, and Status.deprecated_code (field 1, OTLP 0.6-0.11) is read for the
receiver rule of its protos (decode.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cache

import numba
import numpy as np

# Field kinds of the scanner's schema table.
IGNORE = 0  # a field number the schema does not list (unknown to this OTLP version): skipped
MSG = 1  # singular embedded message (a repeat merges into the same node, as protobuf does)
REP_MSG = 2  # repeated embedded message
VARINT = 3
FIXED64 = 4
FIXED32 = 5
LEN = 6  # string or bytes
REP_FIXED64 = 7  # repeated fixed64 / double, packed or not
REP_VARINT = 8  # repeated varint, packed or not
REJECT = 9  # a field OTAP cannot represent (some of older OTLP versions): conversion fails rather than losing it

# The wire types each kind accepts, bit w for wire type w. A listed field of another wire type is an
# error, not skipped as protobuf parsers do: that is how another signal's request (whose fields share
# these numbers) shows itself. Repeated scalars are packed (2) or not; unknown fields may have any
# proto3 wire type (groups, 3 and 4, are not read).
_PROTO3_WIRE_TYPES = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 5
_ACCEPTS = {
    IGNORE: _PROTO3_WIRE_TYPES,
    MSG: 1 << 2,
    REP_MSG: 1 << 2,
    VARINT: 1 << 0,
    FIXED64: 1 << 1,
    FIXED32: 1 << 5,
    LEN: 1 << 2,
    REP_FIXED64: 1 << 1 | 1 << 2,
    REP_VARINT: 1 << 0 | 1 << 2,
    REJECT: 0,
}
WIRE_TYPES_OF_KIND = np.array([_ACCEPTS[kind] for kind in range(len(_ACCEPTS))], np.uint8)

MAX_FIELD = 32
MAX_DEPTH = 16


class T(IntEnum):
    """Message types of the scan; attribute maps get one type per owner so tokens say whose they are."""

    REQUEST = 0
    RES_X = 1  # ResourceLogs / ResourceSpans / ResourceMetrics
    RESOURCE = 2
    KV_RESOURCE = 3
    ANY_RESOURCE = 4
    SCOPE_X = 5  # ScopeLogs / ScopeSpans / ScopeMetrics
    SCOPE = 6
    KV_SCOPE = 7
    ANY_SCOPE = 8
    LOG = 9
    KV_LOG = 10
    ANY_LOG = 11
    ANY_BODY = 12
    SPAN = 13
    KV_SPAN = 14
    ANY_SPAN = 15
    EVENT = 16
    KV_EVENT = 17
    ANY_EVENT = 18
    LINK = 19
    KV_LINK = 20
    ANY_LINK = 21
    STATUS = 22
    METRIC = 23
    KV_METRIC = 24
    ANY_METRIC = 25
    GAUGE = 26
    SUM = 27
    HISTOGRAM = 28
    EXP_HISTOGRAM = 29
    SUMMARY = 30
    NDP = 31
    KV_NDP = 32
    ANY_NDP = 33
    EX_NDP = 34
    KV_EX_NDP = 35
    ANY_EX_NDP = 36
    HDP = 37
    KV_HDP = 38
    ANY_HDP = 39
    EX_HDP = 40
    KV_EX_HDP = 41
    ANY_EX_HDP = 42
    EDP = 43
    KV_EDP = 44
    ANY_EDP = 45
    EX_EDP = 46
    KV_EX_EDP = 47
    ANY_EX_EDP = 48
    BUCKETS_POS = 49
    BUCKETS_NEG = 50
    SDP = 51
    KV_SDP = 52
    ANY_SDP = 53
    QUANTILE = 54


N_TYPES = len(T)


@dataclass(frozen=True)
class Field:
    name: str  # snake_case proto name, used in error paths
    kind: int
    child: T | None = None
    # REJECT: what the field is, appended to the error ("IntGauge (Metric field 4), deprecated in ...")
    note: str = ""
    # a field past MAX_FIELD read only when its message holds no field `unless` (0: always read); the
    # scanner looks for that field when it enters the message (of a repeated field: singular message
    # fields given twice merge, and each occurrence would be looked at alone)
    unless: int = 0


def _kv(any_type: T) -> dict[int, Field]:
    return {
        1: Field("key", LEN),
        2: Field("value", MSG, any_type),
        3: Field("key_strindex", REJECT),
    }


# AnyValue: array/kvlist payloads stay LEN leaves; decode.py turns them into CBOR via upb.
_ANY = {
    1: Field("string_value", LEN),
    2: Field("bool_value", VARINT),
    3: Field("int_value", VARINT),
    4: Field("double_value", FIXED64),
    5: Field("array_value", LEN),
    6: Field("kvlist_value", LEN),
    7: Field("bytes_value", LEN),
    8: Field("string_value_strindex", REJECT),
}


def _exemplar(kv: T) -> dict[int, Field]:
    return {
        7: Field("filtered_attributes", REP_MSG, kv),
        2: Field("time_unix_nano", FIXED64),
        3: Field("as_double", FIXED64),
        6: Field("as_int", FIXED64),
        4: Field("span_id", LEN),
        5: Field("trace_id", LEN),
    }


# Field numbers past MAX_FIELD that the scanner reads (one per message type at most) land in this
# spare column of the schema table; their tokens are keyed with it.
HIGH_SLOT = MAX_FIELD - 1


def slot(number: int) -> int:
    """The schema-table column (and token key offset) of a field number."""
    return number if number < MAX_FIELD else HIGH_SLOT


def _res_x(scope_x_name: str, legacy_name: str) -> dict[int, Field]:
    return {
        1: Field("resource", MSG, T.RESOURCE),
        2: Field(scope_x_name, REP_MSG, T.SCOPE_X),
        3: Field("schema_url", LEN),
        # instrumentation_library_{spans,logs,metrics} of OTLP 0.15-0.18 (reserved since 0.19): the
        # InstrumentationLibraryX messages are wire-identical to ScopeX. As those protos ask of
        # receivers (and the Collector's MigrateTraces/Logs/Metrics do), they are read as ScopeX
        # when the ResourceX holds no field 2, and ignored as the duplicate copy otherwise.
        1000: Field(legacy_name, REP_MSG, T.SCOPE_X, unless=2),
    }


def _removed(what: str, deprecated: str, removed: str) -> str:
    return f"{what}, deprecated in OTLP {deprecated} and removed in {removed}"


MESSAGES: dict[T, dict[int, Field]] = {
    T.RESOURCE: {
        1: Field("attributes", REP_MSG, T.KV_RESOURCE),
        2: Field("dropped_attributes_count", VARINT),
        3: Field("entity_refs", REJECT),
    },
    T.KV_RESOURCE: _kv(T.ANY_RESOURCE),
    T.SCOPE: {
        1: Field("name", LEN),
        2: Field("version", LEN),
        3: Field("attributes", REP_MSG, T.KV_SCOPE),
        4: Field("dropped_attributes_count", VARINT),
    },
    T.KV_SCOPE: _kv(T.ANY_SCOPE),
    T.LOG: {
        1: Field("time_unix_nano", FIXED64),
        11: Field("observed_time_unix_nano", FIXED64),
        2: Field("severity_number", VARINT),
        3: Field("severity_text", LEN),
        5: Field("body", MSG, T.ANY_BODY),
        6: Field("attributes", REP_MSG, T.KV_LOG),
        7: Field("dropped_attributes_count", VARINT),
        8: Field("flags", FIXED32),
        9: Field("trace_id", LEN),
        10: Field("span_id", LEN),
        12: Field("event_name", LEN),
        4: Field("name", REJECT, note=_removed("LogRecord.name (field 4)", "0.14", "0.16")),
    },
    T.KV_LOG: _kv(T.ANY_LOG),
    T.SPAN: {
        1: Field("trace_id", LEN),
        2: Field("span_id", LEN),
        3: Field("trace_state", LEN),
        4: Field("parent_span_id", LEN),
        16: Field("flags", FIXED32),
        5: Field("name", LEN),
        6: Field("kind", VARINT),
        7: Field("start_time_unix_nano", FIXED64),
        8: Field("end_time_unix_nano", FIXED64),
        9: Field("attributes", REP_MSG, T.KV_SPAN),
        10: Field("dropped_attributes_count", VARINT),
        11: Field("events", REP_MSG, T.EVENT),
        12: Field("dropped_events_count", VARINT),
        13: Field("links", REP_MSG, T.LINK),
        14: Field("dropped_links_count", VARINT),
        15: Field("status", MSG, T.STATUS),
    },
    T.KV_SPAN: _kv(T.ANY_SPAN),
    T.EVENT: {
        1: Field("time_unix_nano", FIXED64),
        2: Field("name", LEN),
        3: Field("attributes", REP_MSG, T.KV_EVENT),
        4: Field("dropped_attributes_count", VARINT),
    },
    T.KV_EVENT: _kv(T.ANY_EVENT),
    T.LINK: {
        1: Field("trace_id", LEN),
        2: Field("span_id", LEN),
        3: Field("trace_state", LEN),
        4: Field("attributes", REP_MSG, T.KV_LINK),
        5: Field("dropped_attributes_count", VARINT),
        6: Field("flags", FIXED32),
    },
    T.KV_LINK: _kv(T.ANY_LINK),
    T.STATUS: {
        2: Field("message", LEN),
        3: Field("code", VARINT),
        # OTLP 0.6-0.11 (and `code` before 0.6, the same gRPC-style enum with 0 = OK); reserved
        # since 0.12. decode.py applies the receiver rule of the 0.6-0.11 protos: while `code` is
        # UNSET, a deprecated_code other than OK means ERROR
        1: Field("deprecated_code", VARINT),
    },
    T.METRIC: {
        1: Field("name", LEN),
        2: Field("description", LEN),
        3: Field("unit", LEN),
        5: Field("gauge", MSG, T.GAUGE),
        7: Field("sum", MSG, T.SUM),
        9: Field("histogram", MSG, T.HISTOGRAM),
        10: Field("exponential_histogram", MSG, T.EXP_HISTOGRAM),
        11: Field("summary", MSG, T.SUMMARY),
        12: Field("metadata", REP_MSG, T.KV_METRIC),
        # the integer metric types OTLP 0.8 deprecated (for Gauge / Sum of as_int points and for
        # Histogram); their points differ (StringKeyValue labels, IntHistogram's integer sum), so
        # no conversion is exact
        4: Field("int_gauge", REJECT, note=_removed("IntGauge (Metric field 4)", "0.8", "0.12")),
        6: Field("int_sum", REJECT, note=_removed("IntSum (Metric field 6)", "0.8", "0.12")),
        8: Field("int_histogram", REJECT, note=_removed("IntHistogram (Metric field 8)", "0.8", "0.12")),
    },
    T.KV_METRIC: _kv(T.ANY_METRIC),
    T.GAUGE: {1: Field("data_points", REP_MSG, T.NDP)},
    T.SUM: {
        1: Field("data_points", REP_MSG, T.NDP),
        2: Field("aggregation_temporality", VARINT),
        3: Field("is_monotonic", VARINT),
    },
    T.HISTOGRAM: {1: Field("data_points", REP_MSG, T.HDP), 2: Field("aggregation_temporality", VARINT)},
    T.EXP_HISTOGRAM: {1: Field("data_points", REP_MSG, T.EDP), 2: Field("aggregation_temporality", VARINT)},
    T.SUMMARY: {1: Field("data_points", REP_MSG, T.SDP)},
    T.NDP: {
        7: Field("attributes", REP_MSG, T.KV_NDP),
        2: Field("start_time_unix_nano", FIXED64),
        3: Field("time_unix_nano", FIXED64),
        4: Field("as_double", FIXED64),
        6: Field("as_int", FIXED64),
        5: Field("exemplars", REP_MSG, T.EX_NDP),
        8: Field("flags", VARINT),
    },
    T.KV_NDP: _kv(T.ANY_NDP),
    T.EX_NDP: _exemplar(T.KV_EX_NDP),
    T.KV_EX_NDP: _kv(T.ANY_EX_NDP),
    T.HDP: {
        9: Field("attributes", REP_MSG, T.KV_HDP),
        2: Field("start_time_unix_nano", FIXED64),
        3: Field("time_unix_nano", FIXED64),
        4: Field("count", FIXED64),
        5: Field("sum", FIXED64),
        6: Field("bucket_counts", REP_FIXED64),
        7: Field("explicit_bounds", REP_FIXED64),
        8: Field("exemplars", REP_MSG, T.EX_HDP),
        10: Field("flags", VARINT),
        11: Field("min", FIXED64),
        12: Field("max", FIXED64),
    },
    T.KV_HDP: _kv(T.ANY_HDP),
    T.EX_HDP: _exemplar(T.KV_EX_HDP),
    T.KV_EX_HDP: _kv(T.ANY_EX_HDP),
    T.EDP: {
        1: Field("attributes", REP_MSG, T.KV_EDP),
        2: Field("start_time_unix_nano", FIXED64),
        3: Field("time_unix_nano", FIXED64),
        4: Field("count", FIXED64),
        5: Field("sum", FIXED64),
        6: Field("scale", VARINT),
        7: Field("zero_count", FIXED64),
        8: Field("positive", MSG, T.BUCKETS_POS),
        9: Field("negative", MSG, T.BUCKETS_NEG),
        10: Field("flags", VARINT),
        11: Field("exemplars", REP_MSG, T.EX_EDP),
        12: Field("min", FIXED64),
        13: Field("max", FIXED64),
        14: Field("zero_threshold", FIXED64),
    },
    T.KV_EDP: _kv(T.ANY_EDP),
    T.EX_EDP: _exemplar(T.KV_EX_EDP),
    T.KV_EX_EDP: _kv(T.ANY_EX_EDP),
    T.BUCKETS_POS: {1: Field("offset", VARINT), 2: Field("bucket_counts", REP_VARINT)},
    T.BUCKETS_NEG: {1: Field("offset", VARINT), 2: Field("bucket_counts", REP_VARINT)},
    T.SDP: {
        7: Field("attributes", REP_MSG, T.KV_SDP),
        2: Field("start_time_unix_nano", FIXED64),
        3: Field("time_unix_nano", FIXED64),
        4: Field("count", FIXED64),
        5: Field("sum", FIXED64),
        6: Field("quantile_values", REP_MSG, T.QUANTILE),
        8: Field("flags", VARINT),
    },
    T.KV_SDP: _kv(T.ANY_SDP),
    T.QUANTILE: {1: Field("quantile", FIXED64), 2: Field("value", FIXED64)},
}
for _t in T:
    if _t.name.startswith("ANY_"):
        MESSAGES[_t] = _ANY

# Request / ResourceX / ScopeX layouts differ per signal only in their field names and item type.
SIGNAL_LAYOUT = {
    "logs": ("resource_logs", "scope_logs", "log_records", T.LOG),
    "traces": ("resource_spans", "scope_spans", "spans", T.SPAN),
    "metrics": ("resource_metrics", "scope_metrics", "metrics", T.METRIC),
}
# ResourceX field 1000 of OTLP 0.15-0.18
LEGACY_SCOPE_X = {
    "logs": "instrumentation_library_logs",
    "traces": "instrumentation_library_spans",
    "metrics": "instrumentation_library_metrics",
}


def messages_for(signal: str) -> dict[T, dict[int, Field]]:
    """The full message table of one signal's export request."""
    res_name, scope_name, items_name, item_type = SIGNAL_LAYOUT[signal]
    table = dict(MESSAGES)
    table[T.REQUEST] = {1: Field(res_name, REP_MSG, T.RES_X)}
    table[T.RES_X] = _res_x(scope_name, LEGACY_SCOPE_X[signal])
    table[T.SCOPE_X] = {
        1: Field("scope", MSG, T.SCOPE),
        2: Field(items_name, REP_MSG, item_type),
        3: Field("schema_url", LEN),
    }
    return table


@cache
def message_depths(signal: str) -> dict[T, int]:
    """Nesting depth of every message type in one signal's request (the request itself is 0).

    Each type has one owner, so its depth is fixed; protobuf's depth limit is counted the same way.
    """
    table = messages_for(signal)
    depths = {T.REQUEST: 0}
    todo = [T.REQUEST]
    while todo:
        t = todo.pop()
        for f in table[t].values():
            if f.child is not None and f.child not in depths:
                depths[f.child] = depths[t] + 1
                todo.append(f.child)
    return depths


@dataclass(frozen=True)
class Schema:
    """The scanner's view of one signal's message table."""

    kinds: np.ndarray  # int8 (N_TYPES, MAX_FIELD): field kind per message type and slot
    children: np.ndarray  # int8 (N_TYPES, MAX_FIELD): child message type, -1 for none
    high: np.ndarray  # int64 (N_TYPES,): the field number read into HIGH_SLOT, 0 for none
    unless: np.ndarray  # int64 (N_TYPES,): the HIGH_SLOT field is skipped when the message holds this one (0: never)


def schema_arrays(signal: str) -> Schema:
    """The scanner's arrays of one signal's message table."""
    kinds = np.zeros((N_TYPES, MAX_FIELD), np.int8)
    children = np.full((N_TYPES, MAX_FIELD), -1, np.int8)
    high = np.zeros(N_TYPES, np.int64)
    unless = np.zeros(N_TYPES, np.int64)
    for t, fields in messages_for(signal).items():
        for number, f in fields.items():
            column = slot(number)
            assert kinds[t, column] == IGNORE, f"{t.name} field {number}: its slot is taken"
            assert f.unless == 0 or number >= MAX_FIELD, "only a high field may be conditional"
            kinds[t, column] = f.kind
            if f.child is not None:
                children[t, column] = f.child
            if number >= MAX_FIELD:
                high[t], unless[t] = number, f.unless
    return Schema(kinds, children, high, unless)


# Scanner error codes (err[0]); err[1] = byte offset, err[2] = node, err[3] = field number,
# err[4] = wire type (ERR_MISTYPED).
ERR_TRUNCATED = 1
ERR_LENGTH = 2
ERR_WIRE_TYPE = 3
ERR_FIELD_ZERO = 4
ERR_DEPTH = 5
ERR_PACKED = 6
ERR_REJECTED = 7
ERR_VARINT = 8
ERR_MISTYPED = 9

ERROR_TEXT = {
    ERR_TRUNCATED: "truncated protobuf: a value runs past the end of its message",
    ERR_LENGTH: "truncated protobuf: a length-delimited field runs past the end of its message",
    ERR_WIRE_TYPE: "invalid protobuf wire type",
    ERR_FIELD_ZERO: "invalid protobuf field number 0",
    ERR_DEPTH: "message nesting too deep",
    ERR_PACKED: "packed fixed64 field length is not a multiple of 8",
    ERR_REJECTED: "field has no OTAP column and cannot be converted without loss",
    ERR_VARINT: "malformed varint (more than 10 bytes)",
    ERR_MISTYPED: "protobuf wire type {wire_type}, but the field is declared as {declared}",
}

WIRE_TYPE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}
DECLARED = {
    MSG: "a message (wire type 2)",
    REP_MSG: "a message (wire type 2)",
    VARINT: "a varint (wire type 0)",
    FIXED64: "a fixed64 or double (wire type 1)",
    FIXED32: "a fixed32 (wire type 5)",
    LEN: "a string or bytes (wire type 2)",
    REP_FIXED64: "a repeated fixed64 or double (wire type 1, or 2 when packed)",
    REP_VARINT: "a repeated varint (wire type 0, or 2 when packed)",
}


def _jit(fn):  # type: ignore[no-untyped-def]
    """njit with an on-disk cache when some cache directory is writable, without one otherwise."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return numba.njit(cache=False, nogil=True)(fn)


@_jit
def _varint_at(data, pos, end):  # type: ignore[no-untyped-def]
    """The varint at data[pos:end] and the position after it; pos -1 when it is malformed or cut."""
    value = np.uint64(0)
    shift = 0
    while pos < end and shift < 70:
        b = data[pos]
        pos += 1
        value |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            return value, pos
        shift += 7
    return value, -1


@_jit
def _holds_field(data, pos, end, wanted):  # type: ignore[no-untyped-def]
    """Whether the message in data[pos:end] holds field `wanted` at its top level: a walk over its
    tags that skips every value. It stops (False) at anything malformed, which the scan then meets
    and reports on its own walk over the same tags."""
    while pos < end:
        tag, pos = _varint_at(data, pos, end)
        if pos < 0:
            return False
        if np.int64(tag >> np.uint64(3)) == wanted:
            return True
        wt = np.int64(tag & np.uint64(7))
        if wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
        elif wt == 0 or wt == 2:
            value, pos = _varint_at(data, pos, end)
            if pos < 0:
                return False
            if wt == 2:
                if value > np.uint64(end - pos):
                    return False
                pos += np.int64(value)
        else:
            return False
    return False


# The varint and fixed-width reads stay inline in the loop below: factoring them into njit helpers
# (tried, even with inline='always') made a scan of a 5,000-log request 40-150% slower.
@_jit
def _scan(data, kinds, children, high, unless, node_type, node_parent, node_rank, tok_key, tok_node, tok_val, tok_len, err):  # type: ignore[no-untyped-def]
    n = data.shape[0]
    type_count = np.zeros(kinds.shape[0], np.int32)
    st_end = np.empty(MAX_DEPTH, np.int64)
    st_node = np.empty(MAX_DEPTH, np.int32)
    # per depth: the message there holds its `unless` field, so its high field is a skipped copy
    skip_high = np.zeros(MAX_DEPTH, np.bool_)
    last_child = np.full((MAX_DEPTH, MAX_FIELD), -1, np.int32)
    depth = 0
    st_end[0] = n
    st_node[0] = 0
    node_type[0] = 0
    node_parent[0] = -1
    node_rank[0] = 0
    type_count[0] = 1
    nn = 1
    nt = 0
    pos = 0
    while True:
        while depth > 0 and pos == st_end[depth]:
            depth -= 1
        end = st_end[depth]
        if pos >= end:
            break
        node = st_node[depth]
        t = node_type[node]
        # tag
        tag = np.uint64(0)
        shift = 0
        while True:
            if pos >= end:
                err[0] = ERR_TRUNCATED
                err[1] = pos
                err[2] = node
                return nn, nt
            b = data[pos]
            pos += 1
            tag |= np.uint64(b & 0x7F) << np.uint64(shift)
            if b < 0x80:
                break
            shift += 7
            if shift >= 70:
                err[0] = ERR_VARINT
                err[1] = pos
                err[2] = node
                return nn, nt
        field = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if field == 0:
            err[0] = ERR_FIELD_ZERO
            err[1] = pos
            err[2] = node
            return nn, nt
        column = field  # the field's slot in the schema table and its token key
        if field < MAX_FIELD:
            kind = kinds[t, field]
        elif field == high[t]:
            column = HIGH_SLOT
            kind = kinds[t, HIGH_SLOT]
            if wt == 2 and skip_high[depth]:
                kind = IGNORE
        else:
            kind = IGNORE
        if not (WIRE_TYPES_OF_KIND[kind] >> wt) & 1:
            if kind == REJECT:
                err[0] = ERR_REJECTED
            elif kind == IGNORE or not (_PROTO3_WIRE_TYPES >> wt) & 1:
                err[0] = ERR_WIRE_TYPE
            else:
                err[0] = ERR_MISTYPED
                err[4] = wt
            err[1] = pos
            err[2] = node
            err[3] = field
            return nn, nt
        value = np.uint64(0)
        length = 0
        if wt == 0 or wt == 2:
            shift = 0
            while True:
                if pos >= end:
                    err[0] = ERR_TRUNCATED
                    err[1] = pos
                    err[2] = node
                    err[3] = field
                    return nn, nt
                b = data[pos]
                pos += 1
                value |= np.uint64(b & 0x7F) << np.uint64(shift)
                if b < 0x80:
                    break
                shift += 7
                if shift >= 70:
                    err[0] = ERR_VARINT
                    err[1] = pos
                    err[2] = node
                    err[3] = field
                    return nn, nt
            if wt == 2:
                if value > np.uint64(end - pos):
                    err[0] = ERR_LENGTH
                    err[1] = pos
                    err[2] = node
                    err[3] = field
                    return nn, nt
                length = np.int64(value)
        else:  # 1 or 5, the wire types the check above leaves
            width = 8 if wt == 1 else 4
            if pos + width > end:
                err[0] = ERR_TRUNCATED
                err[1] = pos
                err[2] = node
                err[3] = field
                return nn, nt
            for i in range(width):
                value |= np.uint64(data[pos + i]) << np.uint64(8 * i)
            pos += width
        key = t * MAX_FIELD + column
        if kind in (MSG, REP_MSG):  # wire type 2, checked above
            child = -1
            if kind == MSG:
                child = last_child[depth, column]
            if child < 0:
                child = nn
                nn += 1
                ct = children[t, column]
                node_type[child] = ct
                node_parent[child] = node
                node_rank[child] = type_count[ct]
                type_count[ct] += 1
                if kind == MSG:
                    last_child[depth, column] = child
            tok_key[nt] = key
            tok_node[nt] = node
            tok_val[nt] = child
            tok_len[nt] = -1
            nt += 1
            if depth + 1 >= MAX_DEPTH:
                err[0] = ERR_DEPTH
                err[1] = pos
                err[2] = node
                err[3] = field
                return nn, nt
            depth += 1
            st_end[depth] = pos + length
            st_node[depth] = child
            for i in range(MAX_FIELD):
                last_child[depth, i] = -1
            if high[node_type[child]] != 0:
                u = unless[node_type[child]]
                skip_high[depth] = u != 0 and _holds_field(data, pos, pos + length, u)
            continue
        if wt != 2:
            if kind != IGNORE:  # a varint or fixed scalar, or one unpacked element of a repeated one
                tok_key[nt] = key
                tok_node[nt] = node
                tok_val[nt] = np.int64(value)
                tok_len[nt] = -1
                nt += 1
        elif kind == LEN:
            tok_key[nt] = key
            tok_node[nt] = node
            tok_val[nt] = pos
            tok_len[nt] = length
            nt += 1
            pos += length
        elif kind == REP_FIXED64:
            if length % 8 != 0:
                err[0] = ERR_PACKED
                err[1] = pos
                err[2] = node
                err[3] = field
                return nn, nt
            stop = pos + length
            while pos < stop:
                v = np.uint64(0)
                for i in range(8):
                    v |= np.uint64(data[pos + i]) << np.uint64(8 * i)
                tok_key[nt] = key
                tok_node[nt] = node
                tok_val[nt] = np.int64(v)
                tok_len[nt] = -1
                nt += 1
                pos += 8
        elif kind == REP_VARINT:
            stop = pos + length
            while pos < stop:
                v = np.uint64(0)
                shift = 0
                while True:
                    if pos >= stop:
                        err[0] = ERR_TRUNCATED
                        err[1] = pos
                        err[2] = node
                        err[3] = field
                        return nn, nt
                    b = data[pos]
                    pos += 1
                    v |= np.uint64(b & 0x7F) << np.uint64(shift)
                    if b < 0x80:
                        break
                    shift += 7
                    if shift >= 70:
                        err[0] = ERR_VARINT
                        err[1] = pos
                        err[2] = node
                        err[3] = field
                        return nn, nt
                tok_key[nt] = key
                tok_node[nt] = node
                tok_val[nt] = np.int64(v)
                tok_len[nt] = -1
                nt += 1
        else:
            pos += length  # an unknown field
    return nn, nt


@dataclass
class Scan:
    """The scanner's output over one serialized request."""

    data: np.ndarray  # uint8 view of the request bytes
    node_type: np.ndarray  # int8 per node
    node_parent: np.ndarray  # int32 per node
    node_rank: np.ndarray  # int32 per node: its index among the nodes of its type (document order)
    tok_key: np.ndarray  # int16: type * 32 + field
    tok_node: np.ndarray  # int32
    tok_val: np.ndarray  # int64: value bits, child node, or byte offset
    tok_len: np.ndarray  # int32: byte length of LEN tokens, -1 otherwise
    error: tuple[int, int, int, int, int] | None


def scan(data: bytes | bytearray | memoryview, signal: str) -> Scan:
    """Scan one serialized export request of `signal`."""
    buf = np.frombuffer(data, np.uint8)
    n = buf.shape[0]
    schema = _SCHEMAS[signal]
    node_type = np.empty(n // 2 + 2, np.int8)
    node_parent = np.empty(n // 2 + 2, np.int32)
    node_rank = np.empty(n // 2 + 2, np.int32)
    tok_key = np.empty(n + 1, np.int16)
    tok_node = np.empty(n + 1, np.int32)
    tok_val = np.empty(n + 1, np.int64)
    tok_len = np.empty(n + 1, np.int32)
    err = np.zeros(5, np.int64)
    nn, nt = _scan(
        buf, schema.kinds, schema.children, schema.high, schema.unless,
        node_type, node_parent, node_rank, tok_key, tok_node, tok_val, tok_len, err,
    )
    return Scan(
        buf,
        node_type[:nn],
        node_parent[:nn],
        node_rank[:nn],
        tok_key[:nt],
        tok_node[:nt],
        tok_val[:nt],
        tok_len[:nt],
        (int(err[0]), int(err[1]), int(err[2]), int(err[3]), int(err[4])) if err[0] else None,
    )


_SCHEMAS = {signal: schema_arrays(signal) for signal in SIGNAL_LAYOUT}


@_jit
def gather(data, starts, lengths, offsets, out):  # type: ignore[no-untyped-def]
    """Copy data[starts[i]:starts[i]+lengths[i]] to out[offsets[i]:] for every i."""
    for i in range(starts.shape[0]):
        s = starts[i]
        o = offsets[i]
        for j in range(lengths[i]):
            out[o + j] = data[s + j]


@_jit
def group_by_key(keys, n_keys):  # type: ignore[no-untyped-def]
    """Counting sort of token keys: (token order grouped by key, stable; start offset of each key)."""
    bounds = np.zeros(n_keys + 1, np.int64)
    for k in keys:
        bounds[k + 1] += 1
    for k in range(n_keys):
        bounds[k + 1] += bounds[k]
    fill = bounds[:-1].copy()
    order = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[fill[k]] = i
        fill[k] += 1
    return order, bounds


@_jit
def last_per_row(rows):  # type: ignore[no-untyped-def]
    """Mask keeping the last occurrence of each row number (rows in any order)."""
    n = rows.shape[0]
    keep = np.zeros(n, np.bool_)
    if n == 0:
        return keep
    top = rows.max() + 1
    seen = np.zeros(top, np.bool_)
    for i in range(n - 1, -1, -1):
        r = rows[i]
        if not seen[r]:
            seen[r] = True
            keep[i] = True
    return keep
