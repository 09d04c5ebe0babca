"""OTLP protobuf -> plain OTAP tables (``from_otlp``).

Messages are serialized and bytes are scanned by the wire kernel (``wire.py``); tables are then
assembled column by column with numpy following the canonical rules of docs/architecture.md
("Plain OTAP tables"): proto3 defaults become null, one resource.id per ResourceX and one
scope.id per ScopeX (input order, no dedup), an id only on rows that have children, dense in row
order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, ResourceMetrics, ScopeMetrics
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status

from ..bundle import OtapBundle
from ..errors import ConversionError
from ..payload import DATA_POINT_FAMILIES, PayloadType, Signal
from ..schema import DURATION, TIMESTAMP, reference_schema
from .columns import Tokens, raise_scan_error
from .wire import MAX_FIELD, SIGNAL_LAYOUT, T, last_per_row, scan

P = PayloadType
U16_IDS = 1 << 16

REQUEST_TYPES: dict[Signal, type[Message]] = {
    Signal.LOGS: ExportLogsServiceRequest,
    Signal.TRACES: ExportTraceServiceRequest,
    Signal.METRICS: ExportMetricsServiceRequest,
}


def from_otlp(msg_or_bytes: Message | bytes | bytearray | memoryview, signal: Signal | str | None = None) -> OtapBundle:
    """Convert an Export{Logs,Trace,Metrics}ServiceRequest (message or serialized bytes) to an OtapBundle.

    For bytes, `signal` names the request type; when None it is inferred from the wire layout
    and a request that fits none or several signals is rejected.
    """
    if isinstance(msg_or_bytes, Message):
        sig = next((s for s, cls in REQUEST_TYPES.items() if isinstance(msg_or_bytes, cls)), None)
        if sig is None:
            raise ConversionError(f"{type(msg_or_bytes).__name__} is not an OTLP export request")
        if signal is not None and as_signal(signal) is not sig:
            raise ConversionError(f"signal={as_signal(signal).value} but the message is a {type(msg_or_bytes).__name__}")
        return decode(msg_or_bytes.SerializeToString(), sig)
    if not isinstance(msg_or_bytes, bytes | bytearray | memoryview):
        raise ConversionError(f"expected an OTLP export request or its bytes, got {type(msg_or_bytes).__name__}")
    if signal is None:
        return decode(msg_or_bytes, infer_signal(msg_or_bytes))
    sig = as_signal(signal)
    try:
        return decode(msg_or_bytes, sig)
    except ConversionError as exc:
        hint = _other_signal_hint(msg_or_bytes, sig)
        if not hint:
            raise
        hinted = ConversionError(f"{exc}{hint}")
        hinted.field = exc.field
        raise hinted from None


def _other_signal_hint(data: bytes | bytearray | memoryview, signal: Signal) -> str:
    """Bytes of another signal's request fail on some odd field deep inside; say what they are."""
    try:
        other = infer_signal(data)
    except ConversionError:
        return ""
    return "" if other is signal else f"; the bytes parse as an OTLP {other.value} request, not a {signal.value} one"


def as_signal(signal: Signal | str) -> Signal:
    """`signal` as a Signal; ConversionError naming the valid ones when it is none of them."""
    try:
        return Signal(signal)
    except ValueError:
        names = ", ".join(s.value for s in Signal)
        raise ConversionError(f"signal={signal!r} is not a signal; expected one of {names}") from None


# Field numbers the current protos reserve but older senders write (see wire.py), by message: their
# wire type and the message type legacy field 1000 holds, or None for a scalar or a field the decoder
# rejects naming it. A request holding them still has a signal, so that the decoder reads or refuses them.
_LEGACY_FIELDS: dict[str, dict[int, tuple[int, type[Message] | None]]] = {
    ResourceLogs.DESCRIPTOR.full_name: {1000: (2, ScopeLogs)},
    ResourceSpans.DESCRIPTOR.full_name: {1000: (2, ScopeSpans)},
    ResourceMetrics.DESCRIPTOR.full_name: {1000: (2, ScopeMetrics)},
    LogRecord.DESCRIPTOR.full_name: {4: (2, None)},
    Metric.DESCRIPTOR.full_name: {4: (2, None), 6: (2, None), 8: (2, None)},
    Status.DESCRIPTOR.full_name: {1: (0, None)},  # deprecated_code, a varint
}


def infer_signal(data: bytes | bytearray | memoryview) -> Signal:
    """The one signal whose request type parses `data` with no unknown or mistyped fields (the
    legacy fields of `_LEGACY_FIELDS` count as known, with their old wire type)."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    def clean(msg: Message, depth: int = 0) -> bool:
        legacy = _LEGACY_FIELDS.get(msg.DESCRIPTOR.full_name, {})
        for i, unknown in enumerate(UnknownFieldSet(msg)):
            if unknown.field_number not in legacy or unknown.wire_type != legacy[unknown.field_number][0]:
                return False
            holds = legacy[unknown.field_number][1]
            if holds is not None and i < 20:
                try:
                    copy = holds.FromString(unknown.data)
                except Exception:
                    return False
                if not clean(copy, depth + 1):
                    return False
        for fd, value in msg.ListFields():
            if fd.message_type is None or depth > 3:
                continue
            items = list(value) if fd.is_repeated else [value]
            if not all(clean(v, depth + 1) for v in items[:20]):
                return False
        return True

    fits = []
    for sig, cls in REQUEST_TYPES.items():
        try:
            msg = cls.FromString(bytes(data))
        except Exception:
            continue
        if clean(msg):
            fits.append(sig)
    if len(fits) == 1:
        return fits[0]
    what = "no" if not fits else "several (" + ", ".join(s.value for s in fits) + ")"
    raise ConversionError(f"cannot infer the signal of these bytes: they fit {what} OTLP request types; pass signal=")


def decode(data: bytes | bytearray | memoryview, signal: Signal) -> OtapBundle:
    """Scan serialized request bytes of `signal` and assemble its OTAP tables."""
    s = scan(data, signal.value)
    if s.error is not None:
        raise_scan_error(s, signal.value)
    tk = Tokens(s, signal.value)
    build = {Signal.LOGS: _logs, Signal.TRACES: _traces, Signal.METRICS: _metrics}[signal]
    return OtapBundle.of(signal, build(tk))


# ---- shared helpers ---------------------------------------------------------------------------


def _opt(values: np.ndarray, type_: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    """Arrow array of `values` with nulls where `null` (default: where the value bits are 0)."""
    if null is None:
        null = values.view(np.int64) == 0 if values.dtype.itemsize == 8 else values == 0
    return pa.array(values, type_, mask=null if null.any() else None)


def _timestamps(bits: np.ndarray, *, required: bool = False) -> pa.Array:
    """fixed64 nanoseconds as timestamp[ns] (bit-reinterpreted; values >= 2**63 survive as negatives)."""
    return pa.array(bits, TIMESTAMP) if required else _opt(bits, TIMESTAMP)


def _child_ids(n: int, child_parent_rows: list[np.ndarray], width: int, what: str, where: str) -> np.ndarray:
    """Dense ids (int64, -1 = null) for the rows that at least one child row points at."""
    has = np.zeros(n, np.bool_)
    for rows in child_parent_rows:
        has[rows] = True
    ids = np.cumsum(has, dtype=np.int64) - 1
    if n and ids[-1] >= width:
        raise ConversionError(
            f"{int(ids[-1]) + 1} {what} have children, more than the {width} ids OTAP allows in one batch; split the request",
            where,
        )
    return np.where(has, ids, -1)


def _id_array(ids: np.ndarray, type_: pa.DataType) -> pa.Array:
    null = ids < 0
    return pa.array(np.where(null, 0, ids), type_, mask=null if null.any() else None)


def _dense(parent_nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense id per row, the distinct parent nodes) for parent nodes given in document order."""
    if parent_nodes.size == 0:
        return np.zeros(0, np.int64), parent_nodes
    new = np.empty(parent_nodes.size, np.bool_)
    new[0] = True
    new[1:] = parent_nodes[1:] != parent_nodes[:-1]
    return np.cumsum(new, dtype=np.int64) - 1, parent_nodes[new]


def _lift(tk: Tokens, child_t: T, parent_t: T, values: np.ndarray, n_parent: int) -> np.ndarray:
    """Per-parent-row copy of a per-child-row array (singular child message; absent -> 0)."""
    out = np.zeros(n_parent, values.dtype)
    out[tk.rows_in(parent_t, tk.parents(tk.nodes(child_t)))] = values
    return out


def _attrs(tk: Tokens, pt: PayloadType, kv_t: T, any_t: T, parent_ids: np.ndarray) -> pa.RecordBatch:
    """An attribute table from the KeyValues of type kv_t; `parent_ids` per KeyValue (-1 = dropped)."""
    keep = np.flatnonzero(parent_ids >= 0)
    m = keep.size
    row_of_kv = np.full(parent_ids.size, -1, np.int64)
    row_of_kv[keep] = np.arange(m)
    starts, lens = tk.spans(kv_t, 1, parent_ids.size)
    key = tk.varbinary(starts[keep], lens[keep], None, pa.string(), lambda r: tk.field_path(kv_t, int(keep[r]), 1))
    owners = row_of_kv[tk.rows_in(kv_t, tk.parents(tk.nodes(any_t)))]
    values = tk.any_values(any_t, m, owners)
    schema = reference_schema(pt)
    pid = pa.array(parent_ids[keep], schema.field("parent_id").type)
    return pa.RecordBatch.from_arrays(
        [pid, key, *(values[c] for c in ("type", "str", "int", "double", "bool", "bytes", "ser"))], schema=schema
    )


def _envelope(tk: Tokens, item_t: T, signal: str) -> tuple[int, dict[str, pa.Array], dict[PayloadType, pa.RecordBatch]]:
    """Root columns resource, scope, schema_url and the RESOURCE/SCOPE_ATTRS tables."""
    res_name, scope_name, _, _ = SIGNAL_LAYOUT[signal]
    items = tk.nodes(item_t)
    n = items.size
    scope_x = tk.parents(items)
    res_x = tk.parents(scope_x)
    res_id, res_kept = _dense(res_x)
    scope_id, scope_kept = _dense(scope_x)
    if res_kept.size > U16_IDS:
        raise ConversionError(f"{res_kept.size} resources exceed the u16 resource.id range; split the request", res_name)
    if scope_kept.size > U16_IDS:
        raise ConversionError(f"{scope_kept.size} scopes exceed the u16 scope.id range; split the request", scope_name)

    n_res, n_scope = tk.nodes(T.RES_X).size, tk.nodes(T.SCOPE_X).size
    res_row = tk.rows_in(T.RES_X, res_x)
    scope_row = tk.rows_in(T.SCOPE_X, scope_x)
    r_starts, r_lens = tk.spans(T.RES_X, 3, n_res)
    res_dropped = _lift(tk, T.RESOURCE, T.RES_X, tk.u32(T.RESOURCE, 2, tk.nodes(T.RESOURCE).size), n_res)
    resource = pa.StructArray.from_arrays(
        [
            pa.array(res_id, pa.uint16()),
            tk.varbinary(r_starts[res_row], r_lens[res_row], r_lens[res_row] > 0, pa.string()),
            _opt(res_dropped[res_row], pa.uint32()),
        ],
        fields=list(reference_schema(P.LOGS).field("resource").type),
    )
    n_sc = tk.nodes(T.SCOPE).size
    name_s, name_l = (_lift(tk, T.SCOPE, T.SCOPE_X, a, n_scope) for a in tk.spans(T.SCOPE, 1, n_sc))
    ver_s, ver_l = (_lift(tk, T.SCOPE, T.SCOPE_X, a, n_scope) for a in tk.spans(T.SCOPE, 2, n_sc))
    sc_dropped = _lift(tk, T.SCOPE, T.SCOPE_X, tk.u32(T.SCOPE, 4, n_sc), n_scope)
    scope = pa.StructArray.from_arrays(
        [
            pa.array(scope_id, pa.uint16()),
            tk.varbinary(name_s[scope_row], name_l[scope_row], name_l[scope_row] > 0, pa.string()),
            tk.varbinary(ver_s[scope_row], ver_l[scope_row], ver_l[scope_row] > 0, pa.string()),
            _opt(sc_dropped[scope_row], pa.uint32()),
        ],
        fields=list(reference_schema(P.LOGS).field("scope").type),
    )
    u_starts, u_lens = tk.spans(T.SCOPE_X, 3, n_scope)
    schema_url = tk.varbinary(u_starts[scope_row], u_lens[scope_row], u_lens[scope_row] > 0, pa.string())

    # attribute tables: KeyValue -> Resource/Scope -> ResourceX/ScopeX -> id of a kept one (or dropped)
    res_id_of_row = np.full(n_res, -1, np.int64)
    res_id_of_row[tk.rows_in(T.RES_X, res_kept)] = np.arange(res_kept.size)
    scope_id_of_row = np.full(n_scope, -1, np.int64)
    scope_id_of_row[tk.rows_in(T.SCOPE_X, scope_kept)] = np.arange(scope_kept.size)
    kv_res = tk.parents(tk.parents(tk.nodes(T.KV_RESOURCE)))
    kv_scope = tk.parents(tk.parents(tk.nodes(T.KV_SCOPE)))
    tables = {
        P.RESOURCE_ATTRS: _attrs(
            tk, P.RESOURCE_ATTRS, T.KV_RESOURCE, T.ANY_RESOURCE, res_id_of_row[tk.rows_in(T.RES_X, kv_res)]
        ),
        P.SCOPE_ATTRS: _attrs(
            tk, P.SCOPE_ATTRS, T.KV_SCOPE, T.ANY_SCOPE, scope_id_of_row[tk.rows_in(T.SCOPE_X, kv_scope)]
        ),
    }
    return n, {"resource": resource, "scope": scope, "schema_url": schema_url}, tables


def _parent_rows(tk: Tokens, child_t: T, parent_t: T) -> np.ndarray:
    return tk.rows_in(parent_t, tk.parents(tk.nodes(child_t)))


def _batch(pt: PayloadType, columns: dict[str, Any]) -> pa.RecordBatch:
    schema = reference_schema(pt)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _struct(pt: PayloadType, column: str, children: list[pa.Array], null: np.ndarray) -> pa.StructArray:
    fields = list(reference_schema(pt).field(column).type)
    return pa.StructArray.from_arrays(children, fields=fields, mask=pa.array(null) if null.any() else None)


def _any_struct(pt: PayloadType, column: str, values: dict[str, pa.Array]) -> pa.StructArray:
    null = values["type"].to_numpy(zero_copy_only=False) == 0
    names = [f.name for f in reference_schema(pt).field(column).type]
    return _struct(pt, column, [values[name] for name in names], null)


# ---- logs --------------------------------------------------------------------------------------


def _logs(tk: Tokens) -> dict[PayloadType, pa.RecordBatch]:
    n, cols, tables = _envelope(tk, T.LOG, "logs")
    kv_rows = _parent_rows(tk, T.KV_LOG, T.LOG)
    ids = _child_ids(n, [kv_rows], U16_IDS, "log records", "resource_logs")
    body = tk.any_values(T.ANY_BODY, n, _parent_rows(tk, T.ANY_BODY, T.LOG))
    severity = tk.enum(T.LOG, 2, n, 24, "SeverityNumber")
    cols.update(
        id=_id_array(ids, pa.uint16()),
        time_unix_nano=_timestamps(tk.value(T.LOG, 1, n)),
        observed_time_unix_nano=_timestamps(tk.value(T.LOG, 11, n)),
        trace_id=tk.fixed_id(T.LOG, 9, n, 16),
        span_id=tk.fixed_id(T.LOG, 10, n, 8),
        severity_number=_opt(severity, pa.int32()),
        severity_text=tk.string(T.LOG, 3, n),
        body=_any_struct(P.LOGS, "body", body),
        dropped_attributes_count=_opt(tk.u32(T.LOG, 7, n), pa.uint32()),
        flags=_opt(tk.u32(T.LOG, 8, n), pa.uint32()),
        event_name=tk.string(T.LOG, 12, n),
    )
    tables[P.LOGS] = _batch(P.LOGS, cols)
    tables[P.LOG_ATTRS] = _attrs(tk, P.LOG_ATTRS, T.KV_LOG, T.ANY_LOG, ids[kv_rows])
    return tables


# ---- traces ------------------------------------------------------------------------------------

STATUS_CODE_ERROR = 2


def _status_code(tk: Tokens, n_status: int) -> np.ndarray:
    """Status.code per Status node, with the receiver rule of the OTLP 0.6-0.11 protos for
    `deprecated_code` (field 1, reserved since 0.12): if code is STATUS_CODE_UNSET and
    deprecated_code is not DEPRECATED_STATUS_CODE_OK (0), the status is STATUS_CODE_ERROR; a code
    other than UNSET is the sole carrier of the status. The enum is an int32 (the low 32 bits of
    the varint, as protobuf reads it); any value but 0 counts, named in that enum or not."""
    code = tk.enum(T.STATUS, 3, n_status, STATUS_CODE_ERROR, "StatusCode")
    deprecated_not_ok = tk.u32(T.STATUS, 1, n_status) != 0
    return np.where((code == 0) & deprecated_not_ok, np.int32(STATUS_CODE_ERROR), code)


def _traces(tk: Tokens) -> dict[PayloadType, pa.RecordBatch]:
    n, cols, tables = _envelope(tk, T.SPAN, "traces")
    kv_rows = _parent_rows(tk, T.KV_SPAN, T.SPAN)
    ev_rows = _parent_rows(tk, T.EVENT, T.SPAN)
    ln_rows = _parent_rows(tk, T.LINK, T.SPAN)
    ids = _child_ids(n, [kv_rows, ev_rows, ln_rows], U16_IDS, "spans", "resource_spans")
    start = tk.value(T.SPAN, 7, n)
    end = tk.value(T.SPAN, 8, n)
    n_status = tk.nodes(T.STATUS).size
    code = _lift(tk, T.STATUS, T.SPAN, _status_code(tk, n_status), n)
    msg_s, msg_l = (_lift(tk, T.STATUS, T.SPAN, a, n) for a in tk.spans(T.STATUS, 2, n_status))
    status = _struct(
        P.SPANS,
        "status",
        [_opt(code, pa.int32()), tk.varbinary(msg_s, msg_l, msg_l > 0, pa.string())],
        (code == 0) & (msg_l == 0),
    )
    cols.update(
        id=_id_array(ids, pa.uint16()),
        start_time_unix_nano=_timestamps(start, required=True),
        duration_time_unix_nano=pa.array((end.view(np.uint64) - start.view(np.uint64)).view(np.int64), DURATION),
        trace_id=tk.fixed_id(T.SPAN, 1, n, 16, required=True),
        span_id=tk.fixed_id(T.SPAN, 2, n, 8, required=True),
        trace_state=tk.string(T.SPAN, 3, n),
        parent_span_id=tk.fixed_id(T.SPAN, 4, n, 8),
        flags=_opt(tk.u32(T.SPAN, 16, n), pa.uint32()),
        name=tk.string(T.SPAN, 5, n, required=True),
        kind=_opt(tk.enum(T.SPAN, 6, n, 5, "SpanKind"), pa.int32()),
        dropped_attributes_count=_opt(tk.u32(T.SPAN, 10, n), pa.uint32()),
        dropped_events_count=_opt(tk.u32(T.SPAN, 12, n), pa.uint32()),
        dropped_links_count=_opt(tk.u32(T.SPAN, 14, n), pa.uint32()),
        status=status,
    )
    tables[P.SPANS] = _batch(P.SPANS, cols)
    tables[P.SPAN_ATTRS] = _attrs(tk, P.SPAN_ATTRS, T.KV_SPAN, T.ANY_SPAN, ids[kv_rows])

    ne = ev_rows.size
    ev_kv = _parent_rows(tk, T.KV_EVENT, T.EVENT)
    ev_ids = _child_ids(ne, [ev_kv], 1 << 32, "span events", "resource_spans")
    tables[P.SPAN_EVENTS] = _batch(
        P.SPAN_EVENTS,
        {
            "id": _id_array(ev_ids, pa.uint32()),
            "parent_id": pa.array(ids[ev_rows], pa.uint16()),
            "time_unix_nano": _timestamps(tk.value(T.EVENT, 1, ne)),
            "name": tk.string(T.EVENT, 2, ne, required=True),
            "dropped_attributes_count": _opt(tk.u32(T.EVENT, 4, ne), pa.uint32()),
        },
    )
    tables[P.SPAN_EVENT_ATTRS] = _attrs(tk, P.SPAN_EVENT_ATTRS, T.KV_EVENT, T.ANY_EVENT, ev_ids[ev_kv])

    nl = ln_rows.size
    ln_kv = _parent_rows(tk, T.KV_LINK, T.LINK)
    ln_ids = _child_ids(nl, [ln_kv], 1 << 32, "span links", "resource_spans")
    tables[P.SPAN_LINKS] = _batch(
        P.SPAN_LINKS,
        {
            "id": _id_array(ln_ids, pa.uint32()),
            "parent_id": pa.array(ids[ln_rows], pa.uint16()),
            "trace_id": tk.fixed_id(T.LINK, 1, nl, 16, required=True),
            "span_id": tk.fixed_id(T.LINK, 2, nl, 8, required=True),
            "trace_state": tk.string(T.LINK, 3, nl),
            "dropped_attributes_count": _opt(tk.u32(T.LINK, 5, nl), pa.uint32()),
            "flags": _opt(tk.u32(T.LINK, 6, nl), pa.uint32()),
        },
    )
    tables[P.SPAN_LINK_ATTRS] = _attrs(tk, P.SPAN_LINK_ATTRS, T.KV_LINK, T.ANY_LINK, ln_ids[ln_kv])
    return tables


# ---- metrics -----------------------------------------------------------------------------------

# Metric.data oneof field (gauge, sum, histogram, exponential_histogram, summary) -> metric_type code
_DATA_FIELDS = {5: 1, 7: 2, 9: 3, 10: 4, 11: 5}

# per data point family: (point type, its KeyValue, its AnyValue, exemplar type, exemplar KeyValue, exemplar AnyValue)
_FAMILIES = {
    P.NUMBER_DATA_POINTS: (T.NDP, T.KV_NDP, T.ANY_NDP, T.EX_NDP, T.KV_EX_NDP, T.ANY_EX_NDP),
    P.SUMMARY_DATA_POINTS: (T.SDP, T.KV_SDP, T.ANY_SDP, None, None, None),
    P.HISTOGRAM_DATA_POINTS: (T.HDP, T.KV_HDP, T.ANY_HDP, T.EX_HDP, T.KV_EX_HDP, T.ANY_EX_HDP),
    P.EXP_HISTOGRAM_DATA_POINTS: (T.EDP, T.KV_EDP, T.ANY_EDP, T.EX_EDP, T.KV_EX_EDP, T.ANY_EX_EDP),
}


def _metrics(tk: Tokens) -> dict[PayloadType, pa.RecordBatch]:
    s = tk.scan
    n, cols, tables = _envelope(tk, T.METRIC, "metrics")
    if n > U16_IDS:
        raise ConversionError(f"{n} metrics exceed the u16 metric id range; split the request", "resource_metrics")
    # the Metric.data oneof: the last member on the wire wins, as in protobuf
    idx = np.sort(np.concatenate([tk.toks(T.METRIC, f) for f in _DATA_FIELDS]))
    rows = tk.rows_in(T.METRIC, s.tok_node[idx])
    keep = last_per_row(rows) if rows.size else np.zeros(0, np.bool_)
    idx, rows = idx[keep], rows[keep]
    field_codes = np.zeros(MAX_FIELD, np.uint8)
    for f, code in _DATA_FIELDS.items():
        field_codes[f] = code
    metric_type = np.zeros(n, np.uint8)
    metric_type[rows] = field_codes[s.tok_key[idx] - int(T.METRIC) * MAX_FIELD]
    active = np.zeros(s.node_type.size, np.bool_)
    active[s.tok_val[idx]] = True
    metric_row_of_node = np.full(s.node_type.size, -1, np.int64)
    metric_row_of_node[s.tok_val[idx]] = rows  # container node -> metric row

    temporality = np.zeros(n, np.int32)
    monotonic = np.zeros(n, np.bool_)
    for container in (T.SUM, T.HISTOGRAM, T.EXP_HISTOGRAM):
        nodes = tk.nodes(container)
        on = active[nodes]
        t = tk.enum(container, 2, nodes.size, 2, "AggregationTemporality")
        temporality[metric_row_of_node[nodes[on]]] = t[on]
        if container is T.SUM:
            mono = tk.value(T.SUM, 3, nodes.size) != 0
            monotonic[metric_row_of_node[nodes[on]]] = mono[on]
    cols.update(
        id=pa.array(np.arange(n), pa.uint16()),
        metric_type=pa.array(metric_type),
        name=tk.string(T.METRIC, 1, n, required=True),
        description=tk.string(T.METRIC, 2, n),
        unit=tk.string(T.METRIC, 3, n),
        aggregation_temporality=_opt(temporality, pa.int32()),
        is_monotonic=pa.array(monotonic, mask=~monotonic if not monotonic.all() else None),
    )
    tables[P.UNIVARIATE_METRICS] = _batch(P.UNIVARIATE_METRICS, cols)
    tables[P.METRIC_ATTRS] = _attrs(
        tk, P.METRIC_ATTRS, T.KV_METRIC, T.ANY_METRIC, _parent_rows(tk, T.KV_METRIC, T.METRIC)
    )
    for pt, attrs_pt, exemplars_pt, exemplar_attrs_pt in DATA_POINT_FAMILIES:
        _data_points(tk, tables, pt, attrs_pt, exemplars_pt, exemplar_attrs_pt, active, metric_row_of_node)
    return tables


def _data_points(
    tk: Tokens,
    tables: dict[PayloadType, pa.RecordBatch],
    pt: PayloadType,
    attrs_pt: PayloadType,
    exemplars_pt: PayloadType | None,
    exemplar_attrs_pt: PayloadType | None,
    active: np.ndarray,
    metric_row_of_node: np.ndarray,
) -> None:
    dp_t, kv_t, any_t, ex_t, ex_kv_t, ex_any_t = _FAMILIES[pt]
    nodes = tk.nodes(dp_t)
    containers = tk.parents(nodes)
    kept = np.flatnonzero(active[containers])  # points of an inactive oneof member are discarded
    n_all, m = nodes.size, kept.size
    row_of = np.full(n_all, -1, np.int64)
    row_of[kept] = np.arange(m)
    kv_rows = row_of[_parent_rows(tk, kv_t, dp_t)]
    children = [kv_rows[kv_rows >= 0]]
    ex_rows = np.zeros(0, np.int64)
    if ex_t is not None:
        ex_rows = row_of[_parent_rows(tk, ex_t, dp_t)]
        children.append(ex_rows[ex_rows >= 0])
    ids = _child_ids(m, children, 1 << 32, "data points", "resource_metrics")

    def pick(a: np.ndarray) -> np.ndarray:
        return a[kept]

    def value(f: int) -> np.ndarray:
        return pick(tk.value(dp_t, f, n_all))

    cols: dict[str, Any] = {
        "id": _id_array(ids, pa.uint32()),
        "parent_id": pa.array(metric_row_of_node[containers[kept]], pa.uint16()),
        "start_time_unix_nano": _timestamps(value(2)),
        "time_unix_nano": _timestamps(value(3), required=True),
    }
    if dp_t is T.NDP:
        cols.update(_number_value(tk, dp_t, n_all, kept, 6, 4, "int_value", "double_value"))
        cols["flags"] = _opt(pick(tk.u32(dp_t, 8, n_all)), pa.uint32())
    elif dp_t is T.SDP:
        cols["count"] = _opt(value(4).view(np.uint64), pa.uint64())
        cols["sum"] = _opt(value(5).view(np.float64), pa.float64())
        cols["quantile"] = _quantiles(tk, n_all).take(pa.array(kept))
        cols["flags"] = _opt(pick(tk.u32(dp_t, 8, n_all)), pa.uint32())
    elif dp_t is T.HDP:
        cols["count"] = _opt(value(4).view(np.uint64), pa.uint64())
        cols["sum"] = _presence(tk, dp_t, 5, n_all, kept)
        cols["bucket_counts"] = tk.list_of(dp_t, 6, n_all, np.uint64, pa.uint64()).take(pa.array(kept))
        cols["explicit_bounds"] = tk.list_of(dp_t, 7, n_all, np.float64, pa.float64()).take(pa.array(kept))
        cols["flags"] = _opt(pick(tk.u32(dp_t, 10, n_all)), pa.uint32())
        cols["min"] = _presence(tk, dp_t, 11, n_all, kept)
        cols["max"] = _presence(tk, dp_t, 12, n_all, kept)
    else:
        cols["count"] = _opt(value(4).view(np.uint64), pa.uint64())
        cols["sum"] = _presence(tk, dp_t, 5, n_all, kept)
        cols["scale"] = _opt(pick(tk.sint32(dp_t, 6, n_all)), pa.int32())
        cols["zero_count"] = _opt(value(7).view(np.uint64), pa.uint64())
        cols["positive"] = _buckets(tk, T.BUCKETS_POS, n_all).take(pa.array(kept))
        cols["negative"] = _buckets(tk, T.BUCKETS_NEG, n_all).take(pa.array(kept))
        cols["flags"] = _opt(pick(tk.u32(dp_t, 10, n_all)), pa.uint32())
        cols["min"] = _presence(tk, dp_t, 12, n_all, kept)
        cols["max"] = _presence(tk, dp_t, 13, n_all, kept)
        cols["zero_threshold"] = _opt(value(14).view(np.float64), pa.float64())
    tables[pt] = _batch(pt, cols)
    tables[attrs_pt] = _attrs(tk, attrs_pt, kv_t, any_t, np.where(kv_rows >= 0, ids[kv_rows], -1))

    if ex_t is None or exemplars_pt is None or exemplar_attrs_pt is None or ex_kv_t is None or ex_any_t is None:
        return
    ex_nodes = tk.nodes(ex_t)
    ex_kept = np.flatnonzero(ex_rows >= 0)
    ne = ex_kept.size
    ex_row_of = np.full(ex_nodes.size, -1, np.int64)
    ex_row_of[ex_kept] = np.arange(ne)
    ex_kv_rows = ex_row_of[_parent_rows(tk, ex_kv_t, ex_t)]
    ex_ids = _child_ids(ne, [ex_kv_rows[ex_kv_rows >= 0]], 1 << 32, "exemplars", "resource_metrics")
    n_ex = ex_nodes.size
    ex_cols: dict[str, Any] = {
        "id": _id_array(ex_ids, pa.uint32()),
        "parent_id": pa.array(ids[ex_rows[ex_kept]], pa.uint32()),
        "time_unix_nano": _timestamps(tk.value(ex_t, 2, n_ex)[ex_kept], required=True),
        **_number_value(tk, ex_t, n_ex, ex_kept, 6, 3, "int_value", "double_value"),
        "span_id": tk.fixed_id(ex_t, 4, n_ex, 8).take(pa.array(ex_kept)),
        "trace_id": tk.fixed_id(ex_t, 5, n_ex, 16).take(pa.array(ex_kept)),
    }
    tables[exemplars_pt] = _batch(exemplars_pt, ex_cols)
    tables[exemplar_attrs_pt] = _attrs(
        tk, exemplar_attrs_pt, ex_kv_t, ex_any_t, np.where(ex_kv_rows >= 0, ex_ids[ex_kv_rows], -1)
    )


def _number_value(
    tk: Tokens, t: T, n: int, kept: np.ndarray, int_field: int, double_field: int, int_col: str, double_col: str
) -> dict[str, pa.Array]:
    """The as_int / as_double oneof: the last member on the wire wins; none set -> both null."""
    idx = np.sort(np.concatenate([tk.toks(t, int_field), tk.toks(t, double_field)]))
    rows = tk.rows_in(t, tk.scan.tok_node[idx])
    if rows.size:
        keep = last_per_row(rows)
        idx, rows = idx[keep], rows[keep]
    which = np.zeros(n, np.int64)
    which[rows] = tk.scan.tok_key[idx] - int(t) * MAX_FIELD
    vals = np.zeros(n, np.int64)
    vals[rows] = tk.scan.tok_val[idx]
    which, vals = which[kept], vals[kept]
    return {
        int_col: pa.array(vals, pa.int64(), mask=which != int_field),
        double_col: pa.array(vals.view(np.float64), pa.float64(), mask=which != double_field),
    }


def _presence(tk: Tokens, t: T, field: int, n: int, kept: np.ndarray) -> pa.Array:
    """An `optional double` (histogram sum/min/max): null only when absent."""
    bits, present = tk.bits(t, field, n)
    return pa.array(bits[kept].view(np.float64), pa.float64(), mask=~present[kept])


def _quantiles(tk: Tokens, n_sdp: int) -> pa.Array:
    qn = tk.nodes(T.QUANTILE)
    nq = qn.size
    q = tk.value(T.QUANTILE, 1, nq).view(np.float64)
    v = tk.value(T.QUANTILE, 2, nq).view(np.float64)
    item_type = reference_schema(P.SUMMARY_DATA_POINTS).field("quantile").type.value_type
    items = pa.StructArray.from_arrays([_opt(q, pa.float64()), _opt(v, pa.float64())], fields=list(item_type))
    rows = _parent_rows(tk, T.QUANTILE, T.SDP)
    counts = np.bincount(rows, minlength=n_sdp)
    offsets = np.zeros(n_sdp + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    list_type = reference_schema(P.SUMMARY_DATA_POINTS).field("quantile").type
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=list_type, mask=pa.array(counts == 0))


def _buckets(tk: Tokens, bt: T, n_edp: int) -> pa.Array:
    """positive / negative Buckets per data point; an empty Buckets message is null, like an absent one."""
    nb = tk.nodes(bt).size
    offset = _lift(tk, bt, T.EDP, tk.sint32(bt, 1, nb), n_edp)
    counts_list = tk.list_of(bt, 2, nb, np.uint64, pa.uint64())
    owner = _parent_rows(tk, bt, T.EDP)
    take = np.full(n_edp, -1, np.int64)
    take[owner] = np.arange(nb)
    counts = counts_list.take(pa.array(take, mask=take < 0))
    null = (offset == 0) & np.asarray(counts.is_null().to_numpy(zero_copy_only=False))
    return _struct(P.EXP_HISTOGRAM_DATA_POINTS, "positive", [_opt(offset, pa.int32()), counts], null)
