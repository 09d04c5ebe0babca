"""Fields that older OTLP senders write and the current protos mark `reserved`: read as OTLP
0.15-0.18 (and the Collector's MigrateTraces / MigrateLogs / MigrateMetrics) read them, or refused
saying what they were. Before, the scanner skipped them as unknown field numbers and json.py
ignored their keys, so their data vanished without an error:

* ResourceX field 1000, `instrumentation_library_{spans,logs,metrics}` (OTLP 0.15-0.18; Envoy
  1.23 / Istio 1.15 still send it): wire-identical to ScopeX, read as the ScopeX list when the
  ResourceX has no field 2, ignored as the duplicate copy otherwise. Converted to an empty bundle.
* Metric fields 4, 6, 8 (IntGauge, IntSum, IntHistogram; OTLP 0.8-0.11) and LogRecord field 4
  (`name`; OTLP 0.14-0.15): refused. The metric converted without points, the record without
  its name.
* The OTLP/JSON keys of the same fields (`instrumentationLibrarySpans`, `intGauge`, a log
  record's `name`, ...).

The legacy requests are built from current messages with a protobuf wire helper: legacy field
1000 entries are the serialized ScopeX messages under tag 1000.
"""

from __future__ import annotations

import copy
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otap_model import ConversionError, PayloadType, from_otlp, from_otlp_json, normalize_otlp, to_otlp
from otap_model.otlp.json import _ids_to_hex, otlp_json_to_message

from .strategies import logs_requests, metrics_requests, traces_requests

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# signal: (request type, resource field, scope field, legacy field name, JSON keys: resource, scope, legacy, items)
LAYOUT: dict[str, tuple[Any, str, str, str, tuple[str, str, str, str]]] = {
    "logs": (ExportLogsServiceRequest, "resource_logs", "scope_logs", "instrumentation_library_logs",
             ("resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords")),
    "traces": (ExportTraceServiceRequest, "resource_spans", "scope_spans", "instrumentation_library_spans",
               ("resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans")),
    "metrics": (ExportMetricsServiceRequest, "resource_metrics", "scope_metrics", "instrumentation_library_metrics",
                ("resourceMetrics", "scopeMetrics", "instrumentationLibraryMetrics", "metrics")),
}
REQUESTS = {"logs": logs_requests(), "traces": traces_requests(), "metrics": metrics_requests()}
REJECTED = "field has no OTAP column and cannot be converted without loss"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, wire_type: int, value: bytes) -> bytes:
    prefix = _varint(len(value)) if wire_type == 2 else b""
    return _varint(number << 3 | wire_type) + prefix + value


def _fixed64(number: int, value: int) -> bytes:
    return _field(number, 1, struct.pack("<Q", value))


def _resource_bytes(rx: Message, scope_field: str, legacy: list[bytes], first: bool) -> bytes:
    """One ResourceX: `rx` as it is, plus field 1000 entries `legacy` before or after its fields."""
    entries = b"".join(_field(1000, 2, e) for e in legacy)
    return entries + rx.SerializeToString() if first else rx.SerializeToString() + entries


def _legacy_request(msg: Message, signal: str, which: list[bool], first: list[bool]) -> bytes:
    """`msg` with the ScopeX lists of the resources `which` selects moved to field 1000 (the Envoy
    1.23 layout), the field 1000 entries written before (`first`) or after the other fields."""
    _, res_field, scope_field, _, _ = LAYOUT[signal]
    out = b""
    for i, rx in enumerate(getattr(msg, res_field)):
        legacy: list[bytes] = []
        if which[i % len(which)]:
            rx = copy.deepcopy(rx)
            legacy = [sx.SerializeToString() for sx in getattr(rx, scope_field)]
            rx.ClearField(scope_field)
        out += _field(1, 2, _resource_bytes(rx, scope_field, legacy, first[i % len(first)]))
    return out


# ---- protobuf: ResourceX field 1000 ------------------------------------------------------------


@pytest.mark.parametrize("signal", list(LAYOUT))
def test_an_envoy_style_request_converts_like_the_same_data_at_field_2(signal: str) -> None:
    """Before: 0 rows, no error, for every signal."""
    name = {"logs": "logs.json", "traces": "trace.json", "metrics": "metrics.json"}[signal]
    msg = otlp_json_to_message((EXAMPLES / name).read_text())
    legacy = _legacy_request(msg, signal, [True], [False])
    expected = from_otlp(msg)
    assert expected.num_rows > 0
    bundle = from_otlp(legacy, signal)
    assert bundle == expected
    assert from_otlp(legacy) == expected  # the signal is inferred from a legacy request too
    parsed = LAYOUT[signal][0].FromString(legacy)  # current protos keep field 1000 as an unknown field
    assert from_otlp(parsed) == expected
    # the round trip writes the modern layout: field 2, no field 1000
    back = to_otlp(bundle)
    assert back == normalize_otlp(msg) == normalize_otlp(parsed)
    _, res_field, scope_field, _, _ = LAYOUT[signal]
    for rx in getattr(back, res_field):
        assert len(getattr(rx, scope_field)) and not len(UnknownFieldSet(rx))


@given(st.sampled_from(list(LAYOUT)), st.data())
@FAST
def test_field_1000_is_read_as_scope_x_when_the_resource_has_no_field_2(signal: str, data: st.DataObject) -> None:
    msg = data.draw(REQUESTS[signal])
    which = data.draw(st.lists(st.booleans(), min_size=1, max_size=3))
    first = data.draw(st.lists(st.booleans(), min_size=1, max_size=3))
    legacy = _legacy_request(msg, signal, which, first)
    expected = from_otlp(msg)
    assert from_otlp(legacy, signal) == expected
    parsed = LAYOUT[signal][0].FromString(legacy)
    assert from_otlp(parsed) == expected
    assert to_otlp(expected) == normalize_otlp(parsed)
    try:
        inferred = from_otlp(msg.SerializeToString())
    except ConversionError as exc:
        with pytest.raises(ConversionError, match=re.escape(str(exc))):
            from_otlp(legacy)
    else:
        assert from_otlp(legacy) == inferred


@given(st.sampled_from(list(LAYOUT)), st.data())
@FAST
def test_field_1000_beside_field_2_is_the_ignored_duplicate(signal: str, data: st.DataObject) -> None:
    """Transition-era senders wrote the same data twice; the field-2 copy is the one read, whatever
    the field 1000 copy holds and wherever it is."""
    _, res_field, scope_field, _, _ = LAYOUT[signal]
    msg = data.draw(REQUESTS[signal])
    other = data.draw(REQUESTS[signal])
    junk = [sx.SerializeToString() for rx in getattr(other, res_field) for sx in getattr(rx, scope_field)]
    junk.append(_field(2, 2, _field(4, 2, b"removed field")))  # a record holding a refused field
    out = b""
    for rx in getattr(msg, res_field):
        legacy = junk if len(getattr(rx, scope_field)) else []
        out += _field(1, 2, _resource_bytes(rx, scope_field, legacy, data.draw(st.booleans())))
    assert from_otlp(out, signal) == from_otlp(msg)
    assert to_otlp(from_otlp(out, signal)) == normalize_otlp(LAYOUT[signal][0].FromString(out))


def test_an_empty_field_2_entry_still_makes_field_1000_the_duplicate() -> None:
    """As in the Collector (`len(rs.ScopeSpans) == 0`): one field-2 entry, even empty, is a ScopeX list."""
    span = _field(1, 2, bytes(range(1, 17))) + _field(2, 2, bytes(range(1, 9))) + _field(5, 2, b"op")
    legacy = _field(1000, 2, _field(2, 2, span))
    assert from_otlp(_field(1, 2, legacy), "traces").num_rows == 1
    assert from_otlp(_field(1, 2, _field(2, 2, b"") + legacy), "traces").num_rows == 0
    assert from_otlp(_field(1, 2, legacy + _field(2, 2, b"")), "traces").num_rows == 0


def test_errors_inside_field_1000_name_it() -> None:
    good = _field(1, 2, bytes(16)) + _field(2, 2, bytes(8)) + _field(5, 2, b"a")
    bad = _field(1, 2, bytes(5)) + _field(2, 2, bytes(8)) + _field(5, 2, b"b")
    scope = _field(2, 2, good) + _field(2, 2, bad)
    data = _field(1, 2, _field(1000, 2, b"") + _field(1000, 2, scope))
    with pytest.raises(ConversionError) as caught:
        from_otlp(data, "traces")
    assert str(caught.value) == "resource_spans[0].instrumentation_library_spans[1].spans[1].trace_id: expected 16 bytes, got 5"
    mistyped = _field(1, 2, _field(1000, 0, b"\x01"))
    with pytest.raises(ConversionError) as caught:
        from_otlp(mistyped, "logs")
    assert str(caught.value) == (
        "resource_logs[0].instrumentation_library_logs[0]: protobuf wire type 0 (varint), but the field is "
        "declared as a message (wire type 2) (at byte 4)"
    )


# ---- protobuf: removed metric types and LogRecord.name -----------------------------------------

_TIME = _fixed64(3, 1_700_000_000_000_000_000)
_LABEL = _field(1, 2, _field(1, 2, b"host") + _field(2, 2, b"a"))  # StringKeyValue labels = 1
_INT_POINT = _LABEL + _TIME + _field(4, 1, struct.pack("<q", -7))  # IntDataPoint, value sfixed64
_INT_HIST_POINT = (_LABEL + _TIME + _fixed64(4, 3) + _field(5, 1, struct.pack("<q", 12))
                   + _field(6, 2, struct.pack("<2Q", 1, 2)) + _field(7, 2, struct.pack("<d", 5.0)))
REMOVED = [
    ("metrics", 4, _field(1, 2, _INT_POINT), "int_gauge", "IntGauge (Metric field 4), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", 6, _field(1, 2, _INT_POINT) + _field(2, 0, b"\x02") + _field(3, 0, b"\x01"), "int_sum",
     "IntSum (Metric field 6), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", 8, _field(1, 2, _INT_HIST_POINT) + _field(2, 0, b"\x02"), "int_histogram",
     "IntHistogram (Metric field 8), deprecated in OTLP 0.8 and removed in 0.12"),
    ("logs", 4, b"checkout failed", "name", "LogRecord.name (field 4), deprecated in OTLP 0.14 and removed in 0.16"),
]


def _item(signal: str, number: int, payload: bytes) -> tuple[bytes, bytes]:
    """(a metric / log record holding the removed field last, that field's bytes)"""
    removed = _field(number, 2, payload)
    head = _field(1, 2, b"requests") + _field(3, 2, b"1") if signal == "metrics" else _fixed64(1, 5) + _field(3, 2, b"WARN")
    return head + removed, removed


@pytest.mark.parametrize(("signal", "number", "payload", "name", "what"), REMOVED, ids=[r[3] for r in REMOVED])
@pytest.mark.parametrize("legacy_scope", [False, True], ids=["field2", "field1000"])
def test_removed_fields_are_refused_saying_what_they_are(
    signal: str, number: int, payload: bytes, name: str, what: str, legacy_scope: bool
) -> None:
    """Before: the metric converted with no points (metric_type 0), the record without its name."""
    request_type, res_field, scope_field, legacy_field, _ = LAYOUT[signal]
    item, removed = _item(signal, number, payload)
    data = _field(1, 2, _field(1000 if legacy_scope else 2, 2, _field(2, 2, item)))
    offset = len(data) - len(removed) + 1  # the byte after the field's one-byte tag
    items = "metrics" if signal == "metrics" else "log_records"
    path = f"{res_field}[0].{legacy_field if legacy_scope else scope_field}[0].{items}[0].{name}"
    expected = f"{path}: {REJECTED}: {what} (at byte {offset})"
    with pytest.raises(ConversionError) as caught:
        from_otlp(data, signal)
    assert (str(caught.value), caught.value.field) == (expected, path)
    with pytest.raises(ConversionError) as caught:  # the message keeps it as an unknown field, written last
        from_otlp(request_type.FromString(data))
    assert str(caught.value) == expected
    with pytest.raises(ConversionError):  # without signal=: refused too (a bare metric may also fit traces)
        from_otlp(data)


def test_a_log_record_name_is_refused_without_signal_too() -> None:
    """Before: 'cannot infer the signal ...: they fit no OTLP request types'."""
    item, _ = _item("logs", 4, b"n")
    data = _field(1, 2, _field(2, 2, _field(2, 2, item)))
    with pytest.raises(ConversionError, match=r"^resource_logs\[0\]\.scope_logs\[0\]\.log_records\[0\]\.name: "
                                              r"field has no OTAP column .*: LogRecord\.name \(field 4\)"):
        from_otlp(data)


# ---- OTLP/JSON ---------------------------------------------------------------------------------


def _json_of(msg: Message) -> dict[str, Any]:
    doc = json_format.MessageToDict(msg)
    _ids_to_hex(doc)
    return doc


def _legacy_json(doc: dict[str, Any], signal: str, snake: bool, logs_key: bool) -> dict[str, Any]:
    """`doc` with every ScopeX list under the InstrumentationLibraryX key, `scope` as
    `instrumentationLibrary` (snake_case spellings when `snake`), log records under `logs` (OTLP
    before 0.12) when `logs_key`."""
    _, _, _, legacy_field, (res_key, scope_key, legacy_key, items_key) = LAYOUT[signal]
    doc = copy.deepcopy(doc)
    for rx in doc.get(res_key, []):
        entries = rx.pop(scope_key, None)
        if entries is None:
            continue
        for sx in entries:
            if "scope" in sx:
                sx["instrumentation_library" if snake else "instrumentationLibrary"] = sx.pop("scope")
            if logs_key and signal == "logs" and items_key in sx:
                sx["logs"] = sx.pop(items_key)
        rx[legacy_field if snake else legacy_key] = entries
    return doc


@pytest.mark.parametrize("signal", list(LAYOUT))
@pytest.mark.parametrize("snake", [False, True])
def test_old_json_keys_convert_like_the_current_ones(signal: str, snake: bool) -> None:
    """Before: 0 rows, no error."""
    name = {"logs": "logs.json", "traces": "trace.json", "metrics": "metrics.json"}[signal]
    doc = json.loads((EXAMPLES / name).read_text())
    expected = from_otlp_json(doc)
    assert expected.num_rows > 0
    legacy = _legacy_json(doc, signal, snake, logs_key=signal == "logs")
    assert from_otlp_json(json.dumps(legacy)) == expected
    assert otlp_json_to_message(legacy) == otlp_json_to_message(doc)


@given(st.sampled_from(list(LAYOUT)), st.booleans(), st.booleans(), st.data())
@FAST
def test_old_json_keys_of_any_request(signal: str, snake: bool, logs_key: bool, data: st.DataObject) -> None:
    doc = _json_of(data.draw(REQUESTS[signal]))
    assert from_otlp_json(_legacy_json(doc, signal, snake, logs_key), signal) == from_otlp_json(doc, signal)


@pytest.mark.parametrize("empty", [None, []])
def test_json_scope_list_beside_the_old_one_wins_unless_empty(empty: list[Any] | None) -> None:
    def spans(name: str) -> list[dict[str, Any]]:
        return [{"spans": [{"traceId": "01" * 16, "spanId": "02" * 8, "name": name}]}]

    both = {"resourceSpans": [{"scopeSpans": spans("current"), "instrumentationLibrarySpans": spans("old")}]}
    bundle = from_otlp_json(both)
    assert [r["name"] for r in bundle[PayloadType.SPANS].to_pylist()] == ["current"]
    junk = spans("old")
    junk[0]["spans"][0]["traceId"] = "not hex"  # the ignored copy is not examined, as on the wire
    junk.append({"spans": [{"name": 5}]})
    assert from_otlp_json({"resourceSpans": [{"scopeSpans": spans("current"), "instrumentationLibrarySpans": junk}]}) == bundle
    old_only = {"resourceSpans": [{"scopeSpans": empty, "instrumentationLibrarySpans": spans("old")}]}
    assert [r["name"] for r in from_otlp_json(old_only)[PayloadType.SPANS].to_pylist()] == ["old"]


JSON_REMOVED = [
    ("metrics", "intGauge", "int_gauge", "IntGauge (Metric field 4), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", "intSum", "int_sum", "IntSum (Metric field 6), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", "intHistogram", "int_histogram", "IntHistogram (Metric field 8), deprecated in OTLP 0.8 and removed in 0.12"),
    ("logs", "name", "name", "LogRecord.name (field 4), deprecated in OTLP 0.14 and removed in 0.16"),
]


@pytest.mark.parametrize(("signal", "camel", "snake", "what"), JSON_REMOVED, ids=[r[1] for r in JSON_REMOVED])
@pytest.mark.parametrize("legacy_scope", [False, True], ids=["scopeX", "instrumentationLibraryX"])
def test_json_keys_of_removed_fields_are_refused(signal: str, camel: str, snake: str, what: str, legacy_scope: bool) -> None:
    """Before: ignored as unknown keys (the metric converted without points, the record without its name)."""
    _, _, _, _, (res_key, scope_key, legacy_key, items_key) = LAYOUT[signal]
    value: Any = {"dataPoints": [{"asInt": "3", "timeUnixNano": "5"}]} if signal == "metrics" else "checkout failed"
    item = {"name": "requests"} if signal == "metrics" else {"timeUnixNano": "5"}
    s_key = legacy_key if legacy_scope else scope_key
    for key in {camel, snake}:
        doc = {res_key: [{s_key: [{items_key: [{"severityText": "x"} if signal == "logs" else {"name": "ok"},
                                               {**item, key: value}]}]}]}
        path = f"{res_key}[0].{s_key}[0].{items_key}[1].{key}"
        with pytest.raises(ConversionError) as caught:
            from_otlp_json(doc)
        assert (str(caught.value), caught.value.field) == (f"{path}: {REJECTED}: {what}", path)
        doc[res_key][0][s_key][0][items_key][1][key] = None  # null: the field is absent
        assert from_otlp_json(doc).num_rows == 2


def test_json_errors_inside_old_keys_name_them() -> None:
    doc = {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [{"traceId": "zz", "spanId": "02" * 8}]}]}]}
    with pytest.raises(ConversionError) as caught:
        from_otlp_json(doc)
    assert caught.value.field == "resourceSpans[0].instrumentationLibrarySpans[0].spans[0].traceId"
    doc = {"resourceLogs": [{"instrumentationLibraryLogs": [], "instrumentation_library_logs": []}]}
    with pytest.raises(ConversionError, match=r"^resourceLogs\[0\]: invalid OTLP/JSON: instrumentationLibraryLogs and "
                                              r"instrumentation_library_logs name the same field$"):
        from_otlp_json(doc)
    doc = {"resourceLogs": [{"instrumentationLibraryLogs": [{"logs": [], "logRecords": []}]}]}
    with pytest.raises(ConversionError, match=r"^resourceLogs\[0\]\.instrumentationLibraryLogs\[0\]: invalid OTLP/JSON: "
                                              r"logs and logRecords name the same field$"):
        from_otlp_json(doc)
    with pytest.raises(ConversionError, match=r"^resourceLogs\[0\]\.instrumentationLibraryLogs: invalid OTLP/JSON: "
                                              r"expected a list, got dict$"):
        from_otlp_json({"resourceLogs": [{"instrumentationLibraryLogs": {}}]})
