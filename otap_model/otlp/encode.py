"""Plain OTAP tables -> OTLP export request (``to_otlp``).

The request is serialized column by column with the wire writer (``writer.py``) and parsed once
by upb. Nulls become the proto3 default (the field is not written); for fields with presence
(AnyValue oneof, data point / exemplar value oneof, histogram sum/min/max) null means absent.
Root rows are grouped into ResourceX by ``resource.id`` and ScopeX by ``scope.id`` in order of
first appearance, so rows reordered by the encoder still convert.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ..bundle import OtapBundle
from ..errors import ConversionError
from ..payload import DATA_POINT_FAMILIES, PayloadType, Signal, relations
from ..schema import conforms
from . import anyvalue as av
from . import writer as w
from .decode import REQUEST_TYPES
from .writer import Blob

P = PayloadType
_PARENT_KEY = {(signal, rel.child): f"{rel.parent.name}.{rel.parent_column}" for signal in Signal for rel in relations(signal)}


def to_otlp(bundle: OtapBundle) -> Message:
    """The Export{Logs,Trace,Metrics}ServiceRequest holding exactly the bundle's data."""
    data = to_otlp_bytes(bundle)
    try:
        return REQUEST_TYPES[bundle.signal].FromString(data)
    except DecodeError as exc:  # upb's own checks (nesting depth, UTF-8) on what the writer produced
        hint = (
            f"; a Slice/Map value (ser column) nests deeper than the {av.MAX_MESSAGE_DEPTH} message levels "
            "protobuf parses"
            if "MaxDepth" in str(exc)
            else ""
        )
        raise ConversionError(f"protobuf refuses the request built from this bundle: {exc}{hint}", "to_otlp") from None


def to_otlp_bytes(bundle: OtapBundle) -> bytes:
    """The serialized Export*ServiceRequest of a bundle."""
    if not isinstance(bundle, OtapBundle):
        raise ConversionError(
            f"expected an otap_model.OtapBundle (from from_otlp or Decoder.decode), got {type(bundle).__name__}",
            "to_otlp(bundle)",
        )
    for pt, table in bundle.tables.items():
        conforms(table, pt)
    build = {Signal.LOGS: (P.LOGS, _log_records), Signal.TRACES: (P.SPANS, _spans), Signal.METRICS: (P.UNIVARIATE_METRICS, _metrics)}
    root_pt, items = build[bundle.signal]
    root = bundle.get(root_pt)
    if root is None or root.num_rows == 0:
        return b""
    return _envelope(bundle, root, items(bundle, root))


# ---- helpers ----------------------------------------------------------------------------------


def _nonzero(values: np.ndarray) -> np.ndarray:
    return values.view(np.int64) != 0 if values.dtype.itemsize == 8 else values != 0


def _num(table: pa.RecordBatch | pa.StructArray, name: str) -> np.ndarray:
    col = table.column(name) if isinstance(table, pa.RecordBatch) else table.field(name)
    return w.numbers(col)


def _opt_varint(table: pa.RecordBatch, name: str, field: int) -> Blob:
    v = _num(table, name)
    return w.varint(v, _nonzero(v), field)


def _opt_fixed64(table: pa.RecordBatch, name: str, field: int) -> Blob:
    v = _num(table, name)
    return w.fixed64(v, _nonzero(v), field)


def _opt_fixed32(table: pa.RecordBatch, name: str, field: int) -> Blob:
    v = _num(table, name)
    return w.fixed32(v, _nonzero(v), field)


def _presence_fixed64(col: pa.Array, field: int) -> Blob:
    """A field with presence: written whenever the column is non-null (a present 0 too)."""
    return w.fixed64(w.numbers(col), w.valid(col), field)


def _text(col: pa.Array, field: int, *, always: bool = False) -> Blob:
    """A string/bytes field; null, and "" unless `always`, are not written."""
    blob = w.binary(col)
    present = w.valid(col) if always else np.diff(blob[0]) > 0
    return w.length(blob, present & w.valid(col), field)


def _parent_rows(child: pa.RecordBatch, child_pt: PayloadType, ids: pa.Array, parent: str) -> np.ndarray:
    """Row of each child's parent among `ids` (the parent key column `parent`, nulls = rows without
    children). A child whose parent_id no row has, or ids that repeat, would make the request lose
    or misplace rows, so both are refused, as the encoder refuses them."""
    valid = w.valid(ids)
    rows = np.flatnonzero(valid)
    values = w.numbers(ids).astype(np.int64)[rows]
    order = np.argsort(values, kind="stable")
    keys, rows = values[order], rows[order]
    repeated = np.flatnonzero(keys[1:] == keys[:-1])
    if repeated.size:
        i = int(repeated[0])
        raise ConversionError(
            f"value {int(keys[i])} is the id of rows {int(rows[i])} and {int(rows[i + 1])}; an id must be unique "
            f"within its table for {child_pt.name} rows to find their parent", parent)
    pid_col = child.column("parent_id")
    if pid_col.null_count:
        row = int(np.flatnonzero(~w.valid(pid_col))[0])
        raise ConversionError("null; every child row needs its parent's id", f"{child_pt.name}[{row}].parent_id")
    pid = w.numbers(pid_col).astype(np.int64)
    at = np.minimum(np.searchsorted(keys, pid), max(keys.size - 1, 0))
    found = keys[at] == pid if keys.size else np.zeros(pid.size, np.bool_)
    if not found.all():
        row = int(np.flatnonzero(~found)[0])
        raise ConversionError(
            f"{int(pid[row])} is the id of no {parent} row ({int((~found).sum())} orphan row(s)); "
            "the request would drop them", f"{child_pt.name}[{row}].parent_id")
    return rows[at]


def _children(bundle: OtapBundle, pt: PayloadType, parent_ids: pa.Array, n_parent: int, field: int, content) -> Blob:  # type: ignore[no-untyped-def]
    """The `pt` rows of each parent as a repeated message field (`content(table)` builds each row)."""
    table = bundle.get(pt)
    if table is None or table.num_rows == 0:
        return w.empty(n_parent)
    parent = _PARENT_KEY[(Signal(bundle.signal), pt)]
    return w.group(content(bundle, table), _parent_rows(table, pt, parent_ids, parent), n_parent, field)


def _attributes(bundle: OtapBundle, pt: PayloadType, parent_ids: pa.Array, n_parent: int, field: int) -> Blob:
    return _children(bundle, pt, parent_ids, n_parent, field, lambda _b, t: _key_values(t, pt.name))


def any_value(table: pa.RecordBatch | pa.StructArray, where: str) -> tuple[Blob, np.ndarray]:
    """(AnyValue message contents, whether the value is non-empty) per row of value columns."""
    col = (lambda c: table.column(c)) if isinstance(table, pa.RecordBatch) else (lambda c: table.field(c))
    code = w.numbers(col("type")).astype(np.int64)
    n = code.size
    bad = np.flatnonzero(code > av.BYTES)
    if bad.size:
        raise ConversionError(f"unknown AnyValue type code {int(code[bad[0]])}", f"{where}[{int(bad[0])}].type")
    nested = np.flatnonzero((code == av.MAP) | (code == av.SLICE))
    ser_rows: list[bytes | None] = [None] * n
    if nested.size:
        ser = col("ser").to_pylist()
        for i in nested.tolist():
            if ser[i] is None:
                raise ConversionError(f"type {int(code[i])} (Map/Slice) row has no ser value", f"{where}[{i}].ser")
            value = AnyValue()
            av.fill_from_ser(value, ser[i], int(code[i]), f"{where}[{i}].ser")
            ser_rows[i] = value.SerializeToString()
    nested_blob = w.binary(pa.array(ser_rows, pa.binary()))
    blob = w.concat(
        w.length(w.binary(col("str")), code == av.STR, 1),
        w.varint(w.numbers(col("bool")), code == av.BOOL, 2),
        w.varint(w.numbers(col("int")), code == av.INT, 3),
        w.fixed64(w.numbers(col("double")), code == av.DOUBLE, 4),
        w.length(w.binary(col("bytes")), code == av.BYTES, 7),
        (nested_blob[0], nested_blob[1]),
    )
    return blob, code != av.EMPTY


def _key_values(table: pa.RecordBatch, where: str) -> Blob:
    value, non_empty = any_value(table, where)
    return w.concat(_text(table.column("key"), 1), w.length(value, non_empty, 2))


# ---- envelope ---------------------------------------------------------------------------------


def _first_appearance(keys: np.ndarray) -> np.ndarray:
    """Dense group number per row, groups numbered in order of first appearance."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def _envelope(bundle: OtapBundle, root: pa.RecordBatch, items: Blob) -> bytes:
    resource, scope = root.column("resource"), root.column("scope")
    # A row without an id (its struct null, or the id in it) shares the group of the resource's
    # other rows without one, whatever value the id's buffer holds under the null.
    res_valid = w.valid(resource) & w.valid(resource.field("id"))
    sc_valid = w.valid(scope) & w.valid(scope.field("id"))
    rid = np.where(res_valid, w.numbers(resource.field("id")).astype(np.int64), -1)
    sid = np.where(sc_valid, w.numbers(scope.field("id")).astype(np.int64), -1)
    res_group = _first_appearance(rid)
    scope_group = _first_appearance(res_group * (1 << 20) + (sid + 1))
    n_res, n_scope = int(res_group.max()) + 1, int(scope_group.max()) + 1
    res_first = np.unique(res_group, return_index=True)[1]  # first row of each group
    sc_first = np.unique(scope_group, return_index=True)[1]

    # Resource message per resource group (attributes by resource.id)
    res_rows = root.take(pa.array(res_first))
    r = res_rows.column("resource")
    res_ids = pa.array(rid[res_first], pa.int64(), mask=~res_valid[res_first])
    resource_msg = w.concat(
        _attributes(bundle, P.RESOURCE_ATTRS, res_ids, n_res, 1),
        w.varint(_num(r, "dropped_attributes_count"), _nonzero(_num(r, "dropped_attributes_count")), 2),
    )
    # Scope message per scope group
    sc_rows = root.take(pa.array(sc_first))
    s = sc_rows.column("scope")
    sc_ids = pa.array(sid[sc_first], pa.int64(), mask=~sc_valid[sc_first])
    scope_msg = w.concat(
        _text(s.field("name"), 1),
        _text(s.field("version"), 2),
        _attributes(bundle, P.SCOPE_ATTRS, sc_ids, n_scope, 3),
        w.varint(_num(s, "dropped_attributes_count"), _nonzero(_num(s, "dropped_attributes_count")), 4),
    )
    scope_x = w.concat(
        w.length(scope_msg, np.diff(scope_msg[0]) > 0, 1),
        w.group(items, scope_group, n_scope, 2),
        _text(sc_rows.column("schema_url"), 3),
    )
    resource_x = w.concat(
        w.length(resource_msg, np.diff(resource_msg[0]) > 0, 1),
        w.group(scope_x, res_group[sc_first], n_res, 2),
        _text(r.field("schema_url"), 3),
    )
    return w.data(w.group(resource_x, np.zeros(n_res, np.int64), 1, 1))


# ---- logs -------------------------------------------------------------------------------------


def _log_records(bundle: OtapBundle, logs: pa.RecordBatch) -> Blob:
    n = logs.num_rows
    body = logs.column("body")
    body_value, body_non_empty = any_value(body, "LOGS.body")
    sev = _num(logs, "severity_number")
    return w.concat(
        _opt_fixed64(logs, "time_unix_nano", 1),
        _opt_fixed64(logs, "observed_time_unix_nano", 11),
        w.varint(sev, sev != 0, 2),
        _text(logs.column("severity_text"), 3),
        w.length(body_value, body_non_empty & w.valid(body), 5),
        _attributes(bundle, P.LOG_ATTRS, logs.column("id"), n, 6),
        _opt_varint(logs, "dropped_attributes_count", 7),
        _opt_fixed32(logs, "flags", 8),
        _text(logs.column("trace_id"), 9, always=True),
        _text(logs.column("span_id"), 10, always=True),
        _text(logs.column("event_name"), 12),
    )


# ---- traces -----------------------------------------------------------------------------------


def _events(bundle: OtapBundle, events: pa.RecordBatch) -> Blob:
    return w.concat(
        _opt_fixed64(events, "time_unix_nano", 1),
        _text(events.column("name"), 2),
        _attributes(bundle, P.SPAN_EVENT_ATTRS, events.column("id"), events.num_rows, 3),
        _opt_varint(events, "dropped_attributes_count", 4),
    )


def _links(bundle: OtapBundle, links: pa.RecordBatch) -> Blob:
    return w.concat(
        _text(links.column("trace_id"), 1, always=True),
        _text(links.column("span_id"), 2, always=True),
        _text(links.column("trace_state"), 3),
        _attributes(bundle, P.SPAN_LINK_ATTRS, links.column("id"), links.num_rows, 4),
        _opt_varint(links, "dropped_attributes_count", 5),
        _opt_fixed32(links, "flags", 6),
    )


def _spans(bundle: OtapBundle, spans: pa.RecordBatch) -> Blob:
    n = spans.num_rows
    ids = spans.column("id")
    start = _num(spans, "start_time_unix_nano").view(np.uint64)
    end = start + _num(spans, "duration_time_unix_nano").view(np.uint64)
    status = spans.column("status")
    code = w.numbers(status.field("code"))
    status_msg = w.concat(_text(status.field("status_message"), 2), w.varint(code, code != 0, 3))
    kind = _num(spans, "kind")
    return w.concat(
        _text(spans.column("trace_id"), 1, always=True),
        _text(spans.column("span_id"), 2, always=True),
        _text(spans.column("trace_state"), 3),
        _text(spans.column("parent_span_id"), 4, always=True),
        _opt_fixed32(spans, "flags", 16),
        _text(spans.column("name"), 5),
        w.varint(kind, kind != 0, 6),
        w.fixed64(start, start != 0, 7),
        w.fixed64(end, end != 0, 8),
        _attributes(bundle, P.SPAN_ATTRS, ids, n, 9),
        _opt_varint(spans, "dropped_attributes_count", 10),
        _children(bundle, P.SPAN_EVENTS, ids, n, 11, _events),
        _opt_varint(spans, "dropped_events_count", 12),
        _children(bundle, P.SPAN_LINKS, ids, n, 13, _links),
        _opt_varint(spans, "dropped_links_count", 14),
        w.length(status_msg, w.valid(status) & (np.diff(status_msg[0]) > 0), 15),
    )


# ---- metrics ----------------------------------------------------------------------------------

_CONTAINER_FIELD = {1: 5, 2: 7, 3: 9, 4: 10, 5: 11}


def _exemplars(attrs_pt: PayloadType):  # type: ignore[no-untyped-def]
    def build(bundle: OtapBundle, ex: pa.RecordBatch) -> Blob:
        return w.concat(
            _attributes(bundle, attrs_pt, ex.column("id"), ex.num_rows, 7),
            _opt_fixed64(ex, "time_unix_nano", 2),
            *_number_value(ex, 6, 3),
            _text(ex.column("span_id"), 4, always=True),
            _text(ex.column("trace_id"), 5, always=True),
        )

    return build


def _number_value(table: pa.RecordBatch, int_field: int, double_field: int) -> tuple[Blob, Blob]:
    as_int, as_double = table.column("int_value"), table.column("double_value")
    has_int = w.valid(as_int)
    return (
        w.fixed64(w.numbers(as_int), has_int, int_field),
        w.fixed64(w.numbers(as_double), w.valid(as_double) & ~has_int, double_field),
    )


def _list_field(col: pa.Array, field: int, width: int) -> Blob:
    offsets, values = w.list_values(col)
    return w.packed(offsets, w.numbers(values), field, width)


def _buckets(col: pa.Array, field: int) -> Blob:
    offset = w.numbers(col.field("offset")).astype(np.int64)
    zigzag = ((offset << 1) ^ (offset >> 31)) & 0xFFFFFFFF
    content = w.concat(w.varint(zigzag, offset != 0, 1), _list_field(col.field("bucket_counts"), 2, 0))
    return w.length(content, w.valid(col), field)


_FAMILY = {dp: (attrs, ex, ex_attrs) for dp, attrs, ex, ex_attrs in DATA_POINT_FAMILIES}


def _points(pt: PayloadType) -> object:
    attrs_pt, ex_pt, ex_attrs_pt = _FAMILY[pt]

    def build(bundle: OtapBundle, dp: pa.RecordBatch) -> Blob:
        n, ids = dp.num_rows, dp.column("id")
        attrs_field = {P.NUMBER_DATA_POINTS: 7, P.HISTOGRAM_DATA_POINTS: 9, P.EXP_HISTOGRAM_DATA_POINTS: 1}.get(pt, 7)
        parts = [
            _attributes(bundle, attrs_pt, ids, n, attrs_field),
            _opt_fixed64(dp, "start_time_unix_nano", 2),
            _opt_fixed64(dp, "time_unix_nano", 3),
        ]
        if ex_pt is not None and ex_attrs_pt is not None:
            ex_field = {P.NUMBER_DATA_POINTS: 5, P.HISTOGRAM_DATA_POINTS: 8, P.EXP_HISTOGRAM_DATA_POINTS: 11}[pt]
            parts.append(_children(bundle, ex_pt, ids, n, ex_field, _exemplars(ex_attrs_pt)))
        if pt is P.NUMBER_DATA_POINTS:
            parts += [*_number_value(dp, 6, 4), _opt_varint(dp, "flags", 8)]
        elif pt is P.SUMMARY_DATA_POINTS:
            quantiles = dp.column("quantile")
            offsets, items = w.list_values(quantiles)
            item = w.concat(
                _presence_fixed64(items.field("quantile"), 1), _presence_fixed64(items.field("value"), 2)
            )
            owner = np.repeat(np.arange(n), np.diff(offsets))
            parts += [
                _opt_fixed64(dp, "count", 4),
                _presence_fixed64(dp.column("sum"), 5),
                w.group(item, owner, n, 6),
                _opt_varint(dp, "flags", 8),
            ]
        elif pt is P.HISTOGRAM_DATA_POINTS:
            parts += [
                _opt_fixed64(dp, "count", 4),
                _presence_fixed64(dp.column("sum"), 5),
                _list_field(dp.column("bucket_counts"), 6, 8),
                _list_field(dp.column("explicit_bounds"), 7, 8),
                _opt_varint(dp, "flags", 10),
                _presence_fixed64(dp.column("min"), 11),
                _presence_fixed64(dp.column("max"), 12),
            ]
        else:
            scale = _num(dp, "scale").astype(np.int64)
            parts += [
                _opt_fixed64(dp, "count", 4),
                _presence_fixed64(dp.column("sum"), 5),
                w.varint(((scale << 1) ^ (scale >> 31)) & 0xFFFFFFFF, scale != 0, 6),
                _opt_fixed64(dp, "zero_count", 7),
                _buckets(dp.column("positive"), 8),
                _buckets(dp.column("negative"), 9),
                _opt_varint(dp, "flags", 10),
                _presence_fixed64(dp.column("min"), 12),
                _presence_fixed64(dp.column("max"), 13),
                _presence_fixed64(dp.column("zero_threshold"), 14),
            ]
        return w.concat(*parts)

    return build


def _metrics(bundle: OtapBundle, metrics: pa.RecordBatch) -> Blob:
    n, ids = metrics.num_rows, metrics.column("id")
    mtype = _num(metrics, "metric_type").astype(np.int64)
    bad = np.flatnonzero(mtype > 5)
    if bad.size:
        raise ConversionError(f"unknown metric_type {int(mtype[bad[0]])}", f"UNIVARIATE_METRICS[{int(bad[0])}].metric_type")
    temporality = _num(metrics, "aggregation_temporality")
    monotonic = _num(metrics, "is_monotonic")
    number = _children(bundle, P.NUMBER_DATA_POINTS, ids, n, 1, _points(P.NUMBER_DATA_POINTS))
    hist = _children(bundle, P.HISTOGRAM_DATA_POINTS, ids, n, 1, _points(P.HISTOGRAM_DATA_POINTS))
    exp = _children(bundle, P.EXP_HISTOGRAM_DATA_POINTS, ids, n, 1, _points(P.EXP_HISTOGRAM_DATA_POINTS))
    summary = _children(bundle, P.SUMMARY_DATA_POINTS, ids, n, 1, _points(P.SUMMARY_DATA_POINTS))
    temp = w.varint(temporality, temporality != 0, 2)
    content = {
        1: number,
        2: w.concat(number, temp, w.varint(monotonic, monotonic != 0, 3)),
        3: w.concat(hist, temp),
        4: w.concat(exp, temp),
        5: summary,
    }
    return w.concat(
        _text(metrics.column("name"), 1),
        _text(metrics.column("description"), 2),
        _text(metrics.column("unit"), 3),
        *(w.length(content[code], mtype == code, field) for code, field in _CONTAINER_FIELD.items()),
        _attributes(bundle, P.METRIC_ATTRS, ids, n, 12),
    )
