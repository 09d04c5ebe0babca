"""Plain OTAP tables -> OTLP export request (``to_otlp``).

Columns are converted to Python lists once, children are grouped by parent id with one pass
each, and the request message is filled top-down. Nulls become the proto3 default (the field is
left unset); for fields with presence (AnyValue oneof, data point/exemplar value oneof,
histogram sum/min/max) null means absent.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..bundle import OtapBundle
from ..errors import ConversionError
from ..payload import PayloadType, Signal
from ..schema import conforms
from . import anyvalue as av

P = PayloadType


def to_otlp(bundle: OtapBundle) -> Message:
    """The Export{Logs,Trace,Metrics}ServiceRequest holding exactly the bundle's data."""
    for pt, table in bundle.tables.items():
        conforms(table, pt)
    if bundle.signal is Signal.LOGS:
        return _logs(bundle)
    if bundle.signal is Signal.TRACES:
        return _traces(bundle)
    return _metrics(bundle)


# ---- column access ------------------------------------------------------------------------------


def _col(table: pa.RecordBatch, name: str) -> pa.Array:
    return table.column(name)


def _ints(arr: pa.Array, *, unsigned: bool = False) -> list[int]:
    """Integer-like column (ints, timestamps, durations) as Python ints, null -> 0."""
    if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
        arr = arr.view(pa.int64())
    values = arr.fill_null(0).to_numpy(zero_copy_only=False)
    if unsigned and values.dtype == np.int64:
        values = values.view(np.uint64)
    return values.tolist()  # type: ignore[no-any-return]


def _list(arr: pa.Array) -> list[Any]:
    return arr.to_pylist()  # type: ignore[no-any-return]


def _field(struct: pa.Array, name: str) -> pa.Array:
    return struct.field(name)


class _Attrs:
    """An attribute table grouped by parent id, ready to fill repeated KeyValue fields."""

    def __init__(self, table: pa.RecordBatch | None) -> None:
        self.rows: dict[int, list[int]] = defaultdict(list)
        if table is None or table.num_rows == 0:
            return
        for i, pid in enumerate(_ints(_col(table, "parent_id"))):
            self.rows[pid].append(i)
        self.key = _list(_col(table, "key"))
        self.type = _ints(_col(table, "type"))
        self.str = _list(_col(table, "str"))
        self.int = _list(_col(table, "int"))
        self.double = _list(_col(table, "double"))
        self.bool = _list(_col(table, "bool"))
        self.bytes = _list(_col(table, "bytes"))
        self.ser = _list(_col(table, "ser"))

    def fill(self, target: Any, parent: int | None, where: str) -> None:
        if parent is None:
            return
        for i in self.rows.get(parent, ()):
            kv = target.add(key=self.key[i])
            code = self.type[i]
            if code != av.EMPTY:
                set_any(kv.value, code, self.str[i], self.int[i], self.double[i], self.bool[i], self.bytes[i], self.ser[i], where)


def set_any(
    target: Any, code: int, s: Any, i: Any, d: Any, b: Any, by: Any, ser: Any, where: str
) -> None:
    """Set an AnyValue message from one row of value columns."""
    if code == av.STR:
        target.string_value = s if s is not None else ""
    elif code == av.INT:
        target.int_value = i if i is not None else 0
    elif code == av.DOUBLE:
        target.double_value = d if d is not None else 0.0
    elif code == av.BOOL:
        target.bool_value = bool(b)
    elif code == av.BYTES:
        target.bytes_value = by if by is not None else b""
    elif code in (av.MAP, av.SLICE):
        if ser is None:
            raise ConversionError(f"type {code} (Map/Slice) row has no ser value", where)
        av.fill_from_ser(target, ser, code, where)
    elif code != av.EMPTY:
        raise ConversionError(f"unknown AnyValue type code {code}", where)


def _envelopes(
    root: pa.RecordBatch,
    request: Any,
    res_field: str,
    scope_field: str,
    items_field: str,
    res_attrs: _Attrs,
    scope_attrs: _Attrs,
) -> list[Any]:
    """ResourceX / ScopeX messages for the root rows (grouped by resource.id, scope.id in order of
    first appearance); returns the repeated item container of each row's ScopeX."""
    resource, scope = _col(root, "resource"), _col(root, "scope")
    res_ids = _list(_field(resource, "id"))
    res_url = _list(_field(resource, "schema_url"))
    res_dropped = _ints(_field(resource, "dropped_attributes_count"))
    sc_ids = _list(_field(scope, "id"))
    sc_name = _list(_field(scope, "name"))
    sc_version = _list(_field(scope, "version"))
    sc_dropped = _ints(_field(scope, "dropped_attributes_count"))
    url = _list(_col(root, "schema_url"))
    res_valid = resource.is_valid().to_numpy(zero_copy_only=False).tolist()
    sc_valid = scope.is_valid().to_numpy(zero_copy_only=False).tolist()
    resources: dict[Any, Any] = {}
    scopes: dict[Any, Any] = {}
    containers: list[Any] = []
    for row in range(root.num_rows):
        rid = res_ids[row] if res_valid[row] else None
        rx = resources.get(rid)
        if rx is None:
            rx = getattr(request, res_field).add()
            resources[rid] = rx
            if res_valid[row]:
                if res_url[row]:
                    rx.schema_url = res_url[row]
                if res_dropped[row]:
                    rx.resource.dropped_attributes_count = res_dropped[row]
                res_attrs.fill(rx.resource.attributes, rid, f"{res_field}[{len(resources) - 1}].resource")
        sid = (rid, sc_ids[row] if sc_valid[row] else None)
        sx = scopes.get(sid)
        if sx is None:
            sx = getattr(rx, scope_field).add()
            scopes[sid] = sx
            if url[row]:
                sx.schema_url = url[row]
            if sc_valid[row]:
                if sc_name[row]:
                    sx.scope.name = sc_name[row]
                if sc_version[row]:
                    sx.scope.version = sc_version[row]
                if sc_dropped[row]:
                    sx.scope.dropped_attributes_count = sc_dropped[row]
                scope_attrs.fill(sx.scope.attributes, sid[1], f"{scope_field}.scope")
        containers.append(getattr(sx, items_field))
    return containers


def _children(table: pa.RecordBatch | None) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    if table is not None:
        for i, pid in enumerate(_ints(_col(table, "parent_id"))):
            rows[pid].append(i)
    return rows


# ---- logs -------------------------------------------------------------------------------------


def _logs(bundle: OtapBundle) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    root = bundle.get(P.LOGS)
    if root is None:
        return request
    containers = _envelopes(
        root, request, "resource_logs", "scope_logs", "log_records",
        _Attrs(bundle.get(P.RESOURCE_ATTRS)), _Attrs(bundle.get(P.SCOPE_ATTRS)),
    )
    attrs = _Attrs(bundle.get(P.LOG_ATTRS))
    ids = _list(_col(root, "id"))
    time = _ints(_col(root, "time_unix_nano"), unsigned=True)
    observed = _ints(_col(root, "observed_time_unix_nano"), unsigned=True)
    trace_id = _list(_col(root, "trace_id"))
    span_id = _list(_col(root, "span_id"))
    severity = _ints(_col(root, "severity_number"))
    severity_text = _list(_col(root, "severity_text"))
    body = _col(root, "body")
    body_valid = body.is_valid().to_numpy(zero_copy_only=False).tolist()
    b_type = _ints(_field(body, "type"))
    b_cols = [_list(_field(body, c)) for c in ("str", "int", "double", "bool", "bytes", "ser")]
    dropped = _ints(_col(root, "dropped_attributes_count"))
    flags = _ints(_col(root, "flags"))
    event_name = _list(_col(root, "event_name"))
    for row, container in enumerate(containers):
        lr = container.add()
        if time[row]:
            lr.time_unix_nano = time[row]
        if observed[row]:
            lr.observed_time_unix_nano = observed[row]
        if trace_id[row] is not None:
            lr.trace_id = trace_id[row]
        if span_id[row] is not None:
            lr.span_id = span_id[row]
        if severity[row]:
            lr.severity_number = severity[row]
        if severity_text[row]:
            lr.severity_text = severity_text[row]
        if body_valid[row] and b_type[row] != av.EMPTY:
            where = f"log_records[{row}].body"
            s, i, d, b, by, ser = (c[row] for c in b_cols)
            set_any(lr.body, b_type[row], s, i, d, b, by, ser, where)
        if dropped[row]:
            lr.dropped_attributes_count = dropped[row]
        if flags[row]:
            lr.flags = flags[row]
        if event_name[row]:
            lr.event_name = event_name[row]
        attrs.fill(lr.attributes, ids[row], f"log_records[{row}].attributes")
    return request


# ---- traces -----------------------------------------------------------------------------------


def _traces(bundle: OtapBundle) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    root = bundle.get(P.SPANS)
    if root is None:
        return request
    containers = _envelopes(
        root, request, "resource_spans", "scope_spans", "spans",
        _Attrs(bundle.get(P.RESOURCE_ATTRS)), _Attrs(bundle.get(P.SCOPE_ATTRS)),
    )
    attrs = _Attrs(bundle.get(P.SPAN_ATTRS))
    events, links = bundle.get(P.SPAN_EVENTS), bundle.get(P.SPAN_LINKS)
    ev_rows, ln_rows = _children(events), _children(links)
    ev_attrs, ln_attrs = _Attrs(bundle.get(P.SPAN_EVENT_ATTRS)), _Attrs(bundle.get(P.SPAN_LINK_ATTRS))
    if events is not None:
        ev_id, ev_time = _list(_col(events, "id")), _ints(_col(events, "time_unix_nano"), unsigned=True)
        ev_name, ev_dropped = _list(_col(events, "name")), _ints(_col(events, "dropped_attributes_count"))
    if links is not None:
        ln_id, ln_trace, ln_span = _list(_col(links, "id")), _list(_col(links, "trace_id")), _list(_col(links, "span_id"))
        ln_state, ln_dropped = _list(_col(links, "trace_state")), _ints(_col(links, "dropped_attributes_count"))
        ln_flags = _ints(_col(links, "flags"))

    ids = _list(_col(root, "id"))
    start = np.asarray(_col(root, "start_time_unix_nano").view(pa.int64()).to_numpy()).view(np.uint64)
    duration = np.asarray(_col(root, "duration_time_unix_nano").view(pa.int64()).to_numpy()).view(np.uint64)
    end = (start + duration).tolist()
    start_l = start.tolist()
    trace_id, span_id = _list(_col(root, "trace_id")), _list(_col(root, "span_id"))
    trace_state, parent = _list(_col(root, "trace_state")), _list(_col(root, "parent_span_id"))
    flags, name, kind = _ints(_col(root, "flags")), _list(_col(root, "name")), _ints(_col(root, "kind"))
    d_attrs = _ints(_col(root, "dropped_attributes_count"))
    d_events = _ints(_col(root, "dropped_events_count"))
    d_links = _ints(_col(root, "dropped_links_count"))
    status = _col(root, "status")
    st_valid = status.is_valid().to_numpy(zero_copy_only=False).tolist()
    st_code, st_msg = _ints(_field(status, "code")), _list(_field(status, "status_message"))
    for row, container in enumerate(containers):
        sp = container.add()
        sp.trace_id = trace_id[row]
        sp.span_id = span_id[row]
        if trace_state[row]:
            sp.trace_state = trace_state[row]
        if parent[row] is not None:
            sp.parent_span_id = parent[row]
        if flags[row]:
            sp.flags = flags[row]
        if name[row]:
            sp.name = name[row]
        if kind[row]:
            sp.kind = kind[row]
        if start_l[row]:
            sp.start_time_unix_nano = start_l[row]
        if end[row]:
            sp.end_time_unix_nano = end[row]
        span = ids[row]
        attrs.fill(sp.attributes, span, f"spans[{row}].attributes")
        if d_attrs[row]:
            sp.dropped_attributes_count = d_attrs[row]
        if d_events[row]:
            sp.dropped_events_count = d_events[row]
        if d_links[row]:
            sp.dropped_links_count = d_links[row]
        if st_valid[row]:
            if st_code[row]:
                sp.status.code = st_code[row]
            if st_msg[row]:
                sp.status.message = st_msg[row]
        if span is None:
            continue
        for i in ev_rows.get(span, ()):
            ev = sp.events.add()
            if ev_time[i]:
                ev.time_unix_nano = ev_time[i]
            if ev_name[i]:
                ev.name = ev_name[i]
            ev_attrs.fill(ev.attributes, ev_id[i], f"spans[{row}].events")
            if ev_dropped[i]:
                ev.dropped_attributes_count = ev_dropped[i]
        for i in ln_rows.get(span, ()):
            ln = sp.links.add(trace_id=ln_trace[i], span_id=ln_span[i])
            if ln_state[i]:
                ln.trace_state = ln_state[i]
            ln_attrs.fill(ln.attributes, ln_id[i], f"spans[{row}].links")
            if ln_dropped[i]:
                ln.dropped_attributes_count = ln_dropped[i]
            if ln_flags[i]:
                ln.flags = ln_flags[i]
    return request


# ---- metrics ----------------------------------------------------------------------------------

_CONTAINER = {1: "gauge", 2: "sum", 3: "histogram", 4: "exponential_histogram", 5: "summary"}
_FAMILY = {
    1: (P.NUMBER_DATA_POINTS, P.NUMBER_DP_ATTRS, P.NUMBER_DP_EXEMPLARS, P.NUMBER_DP_EXEMPLAR_ATTRS),
    2: (P.NUMBER_DATA_POINTS, P.NUMBER_DP_ATTRS, P.NUMBER_DP_EXEMPLARS, P.NUMBER_DP_EXEMPLAR_ATTRS),
    3: (P.HISTOGRAM_DATA_POINTS, P.HISTOGRAM_DP_ATTRS, P.HISTOGRAM_DP_EXEMPLARS, P.HISTOGRAM_DP_EXEMPLAR_ATTRS),
    4: (
        P.EXP_HISTOGRAM_DATA_POINTS,
        P.EXP_HISTOGRAM_DP_ATTRS,
        P.EXP_HISTOGRAM_DP_EXEMPLARS,
        P.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS,
    ),
    5: (P.SUMMARY_DATA_POINTS, P.SUMMARY_DP_ATTRS, None, None),
}


class _Points:
    """One data point family, grouped by metric id, with its attributes and exemplars."""

    def __init__(self, bundle: OtapBundle, pt: PayloadType, attrs_pt: PayloadType, ex_pt: Any, ex_attrs_pt: Any):
        self.table = bundle.get(pt)
        self.pt = pt
        self.rows = _children(self.table)
        self.attrs = _Attrs(bundle.get(attrs_pt))
        self.ex = bundle.get(ex_pt) if ex_pt is not None else None
        self.ex_rows = _children(self.ex)
        self.ex_attrs = _Attrs(bundle.get(ex_attrs_pt) if ex_attrs_pt is not None else None)
        t = self.table
        if t is None:
            return
        self.c: dict[str, list[Any]] = {}
        for f in t.schema:
            arr = _col(t, f.name)
            if f.name in ("start_time_unix_nano", "time_unix_nano"):
                self.c[f.name] = _ints(arr, unsigned=True)
            elif f.name in ("positive", "negative"):
                valid = arr.is_valid().to_numpy(zero_copy_only=False).tolist()
                off = _ints(_field(arr, "offset"))
                counts = _list(_field(arr, "bucket_counts"))
                self.c[f.name] = [(off[i], counts[i]) if valid[i] else None for i in range(len(arr))]
            else:
                self.c[f.name] = _list(arr)
        if self.ex is not None:
            self.e = {f.name: _list(_col(self.ex, f.name)) for f in self.ex.schema if f.name != "time_unix_nano"}
            self.e["time_unix_nano"] = _ints(_col(self.ex, "time_unix_nano"), unsigned=True)

    def fill(self, container: Any, metric_id: int, where: str) -> None:
        if self.table is None:
            return
        c = self.c
        for i in self.rows.get(metric_id, ()):
            dp = container.data_points.add()
            if c["start_time_unix_nano"][i]:
                dp.start_time_unix_nano = c["start_time_unix_nano"][i]
            if c["time_unix_nano"][i]:
                dp.time_unix_nano = c["time_unix_nano"][i]
            if c["flags"][i]:
                dp.flags = c["flags"][i]
            self.attrs.fill(dp.attributes, c["id"][i], f"{where}.data_points")
            if self.pt is P.NUMBER_DATA_POINTS:
                _set_number(dp, c["int_value"][i], c["double_value"][i])
            else:
                if c["count"][i]:
                    dp.count = c["count"][i]
                if c["sum"][i] is not None:
                    dp.sum = c["sum"][i]
            if self.pt is P.SUMMARY_DATA_POINTS:
                for q in c["quantile"][i] or ():
                    dp.quantile_values.add(
                        quantile=q["quantile"] if q["quantile"] is not None else 0.0,
                        value=q["value"] if q["value"] is not None else 0.0,
                    )
            elif self.pt is P.HISTOGRAM_DATA_POINTS:
                dp.bucket_counts.extend(c["bucket_counts"][i] or ())
                dp.explicit_bounds.extend(c["explicit_bounds"][i] or ())
            elif self.pt is P.EXP_HISTOGRAM_DATA_POINTS:
                if c["scale"][i]:
                    dp.scale = c["scale"][i]
                if c["zero_count"][i]:
                    dp.zero_count = c["zero_count"][i]
                if c["zero_threshold"][i] is not None:
                    dp.zero_threshold = c["zero_threshold"][i]
                for side in ("positive", "negative"):
                    b = c[side][i]
                    if b is not None:
                        buckets = getattr(dp, side)
                        buckets.SetInParent()
                        if b[0]:
                            buckets.offset = b[0]
                        buckets.bucket_counts.extend(b[1] or ())
            if self.pt in (P.HISTOGRAM_DATA_POINTS, P.EXP_HISTOGRAM_DATA_POINTS):
                if c["min"][i] is not None:
                    dp.min = c["min"][i]
                if c["max"][i] is not None:
                    dp.max = c["max"][i]
            dp_id = c["id"][i]
            if self.ex is None or dp_id is None:
                continue
            e = self.e
            for j in self.ex_rows.get(dp_id, ()):
                ex = dp.exemplars.add()
                if e["time_unix_nano"][j]:
                    ex.time_unix_nano = e["time_unix_nano"][j]
                _set_number(ex, e["int_value"][j], e["double_value"][j])
                if e["span_id"][j] is not None:
                    ex.span_id = e["span_id"][j]
                if e["trace_id"][j] is not None:
                    ex.trace_id = e["trace_id"][j]
                self.ex_attrs.fill(ex.filtered_attributes, e["id"][j], f"{where}.exemplars")


def _set_number(target: Any, int_value: Any, double_value: Any) -> None:
    if int_value is not None:
        target.as_int = int_value
    elif double_value is not None:
        target.as_double = double_value


def _metrics(bundle: OtapBundle) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    root = bundle.get(P.UNIVARIATE_METRICS)
    if root is None:
        return request
    containers = _envelopes(
        root, request, "resource_metrics", "scope_metrics", "metrics",
        _Attrs(bundle.get(P.RESOURCE_ATTRS)), _Attrs(bundle.get(P.SCOPE_ATTRS)),
    )
    meta = _Attrs(bundle.get(P.METRIC_ATTRS))
    families: dict[PayloadType, _Points] = {}
    for fam in _FAMILY.values():
        if fam[0] not in families:
            families[fam[0]] = _Points(bundle, *fam)
    ids = _list(_col(root, "id"))
    mtype = _ints(_col(root, "metric_type"))
    name, desc, unit = _list(_col(root, "name")), _list(_col(root, "description")), _list(_col(root, "unit"))
    temporality = _ints(_col(root, "aggregation_temporality"))
    monotonic = _list(_col(root, "is_monotonic"))
    for row, container in enumerate(containers):
        m = container.add()
        if name[row]:
            m.name = name[row]
        if desc[row]:
            m.description = desc[row]
        if unit[row]:
            m.unit = unit[row]
        meta.fill(m.metadata, ids[row], f"metrics[{row}].metadata")
        code = mtype[row]
        if code == 0:
            continue
        if code not in _CONTAINER:
            raise ConversionError(f"unknown metric_type {code}", f"UNIVARIATE_METRICS[{row}].metric_type")
        data = getattr(m, _CONTAINER[code])
        data.SetInParent()
        if code in (2, 3, 4) and temporality[row]:
            data.aggregation_temporality = temporality[row]
        if code == 2 and monotonic[row]:
            data.is_monotonic = True
        families[_FAMILY[code][0]].fill(data, ids[row], f"metrics[{row}].{_CONTAINER[code]}")
    return request
