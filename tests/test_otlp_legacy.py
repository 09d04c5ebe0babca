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
* Status field 1, `deprecated_code` (OTLP 0.6-0.11): read for the receiver rule of those protos
  (code UNSET and deprecated_code not OK -> ERROR). An old sender's error span converted as UNSET.
* The OTLP/JSON keys of the same fields (`instrumentationLibrarySpans`, `intGauge`, a log
  record's `name`, a status's `deprecatedCode`, ...).

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

from .protobuf_wire import field, varint
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


def _fixed64(number: int, value: int) -> bytes:
    return field(number, 1, struct.pack("<Q", value))


def _resource_bytes(rx: Message, scope_field: str, legacy: list[bytes], first: bool) -> bytes:
    """One ResourceX: `rx` as it is, plus field 1000 entries `legacy` before or after its fields."""
    entries = b"".join(field(1000, 2, e) for e in legacy)
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
        out += field(1, 2, _resource_bytes(rx, scope_field, legacy, first[i % len(first)]))
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
    junk.append(field(2, 2, field(4, 2, b"removed field")))  # a record holding a refused field
    out = b""
    for rx in getattr(msg, res_field):
        legacy = junk if len(getattr(rx, scope_field)) else []
        out += field(1, 2, _resource_bytes(rx, scope_field, legacy, data.draw(st.booleans())))
    assert from_otlp(out, signal) == from_otlp(msg)
    assert to_otlp(from_otlp(out, signal)) == normalize_otlp(LAYOUT[signal][0].FromString(out))


def test_an_empty_field_2_entry_still_makes_field_1000_the_duplicate() -> None:
    """As in the Collector (`len(rs.ScopeSpans) == 0`): one field-2 entry, even empty, is a ScopeX list."""
    span = field(1, 2, bytes(range(1, 17))) + field(2, 2, bytes(range(1, 9))) + field(5, 2, b"op")
    legacy = field(1000, 2, field(2, 2, span))
    assert from_otlp(field(1, 2, legacy), "traces").num_rows == 1
    assert from_otlp(field(1, 2, field(2, 2, b"") + legacy), "traces").num_rows == 0
    assert from_otlp(field(1, 2, legacy + field(2, 2, b"")), "traces").num_rows == 0


def test_errors_inside_field_1000_name_it() -> None:
    good = field(1, 2, bytes(16)) + field(2, 2, bytes(8)) + field(5, 2, b"a")
    bad = field(1, 2, bytes(5)) + field(2, 2, bytes(8)) + field(5, 2, b"b")
    scope = field(2, 2, good) + field(2, 2, bad)
    data = field(1, 2, field(1000, 2, b"") + field(1000, 2, scope))
    with pytest.raises(ConversionError) as caught:
        from_otlp(data, "traces")
    assert str(caught.value) == "resource_spans[0].instrumentation_library_spans[1].spans[1].trace_id: expected 16 bytes, got 5"
    mistyped = field(1, 2, field(1000, 0, b"\x01"))
    with pytest.raises(ConversionError) as caught:
        from_otlp(mistyped, "logs")
    assert str(caught.value) == (
        "resource_logs[0].instrumentation_library_logs[0]: protobuf wire type 0 (varint), but the field is "
        "declared as a message (wire type 2) (at byte 4)"
    )


# ---- protobuf: removed metric types and LogRecord.name -----------------------------------------

_TIME = _fixed64(3, 1_700_000_000_000_000_000)
_LABEL = field(1, 2, field(1, 2, b"host") + field(2, 2, b"a"))  # StringKeyValue labels = 1
_INT_POINT = _LABEL + _TIME + field(4, 1, struct.pack("<q", -7))  # IntDataPoint, value sfixed64
_INT_HIST_POINT = (_LABEL + _TIME + _fixed64(4, 3) + field(5, 1, struct.pack("<q", 12))
                   + field(6, 2, struct.pack("<2Q", 1, 2)) + field(7, 2, struct.pack("<d", 5.0)))
REMOVED = [
    ("metrics", 4, field(1, 2, _INT_POINT), "int_gauge", "IntGauge (Metric field 4), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", 6, field(1, 2, _INT_POINT) + field(2, 0, b"\x02") + field(3, 0, b"\x01"), "int_sum",
     "IntSum (Metric field 6), deprecated in OTLP 0.8 and removed in 0.12"),
    ("metrics", 8, field(1, 2, _INT_HIST_POINT) + field(2, 0, b"\x02"), "int_histogram",
     "IntHistogram (Metric field 8), deprecated in OTLP 0.8 and removed in 0.12"),
    ("logs", 4, b"checkout failed", "name", "LogRecord.name (field 4), deprecated in OTLP 0.14 and removed in 0.16"),
]


def _item(signal: str, number: int, payload: bytes) -> tuple[bytes, bytes]:
    """(a metric / log record holding the removed field last, that field's bytes)"""
    removed = field(number, 2, payload)
    head = field(1, 2, b"requests") + field(3, 2, b"1") if signal == "metrics" else _fixed64(1, 5) + field(3, 2, b"WARN")
    return head + removed, removed


@pytest.mark.parametrize(("signal", "number", "payload", "name", "what"), REMOVED, ids=[r[3] for r in REMOVED])
@pytest.mark.parametrize("legacy_scope", [False, True], ids=["field2", "field1000"])
def test_removed_fields_are_refused_saying_what_they_are(
    signal: str, number: int, payload: bytes, name: str, what: str, legacy_scope: bool
) -> None:
    """Before: the metric converted with no points (metric_type 0), the record without its name."""
    request_type, res_field, scope_field, legacy_field, _ = LAYOUT[signal]
    item, removed = _item(signal, number, payload)
    data = field(1, 2, field(1000 if legacy_scope else 2, 2, field(2, 2, item)))
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
    data = field(1, 2, field(2, 2, field(2, 2, item)))
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


# ---- Status.deprecated_code (field 1, OTLP 0.6-0.11) ---------------------------------------------
#
# The receiver rule of the 0.6-0.11 trace.proto: "If code==STATUS_CODE_UNSET then the value of
# `deprecated_code` is the carrier of the overall status": OK -> UNSET, anything else -> ERROR; "If
# code!=STATUS_CODE_UNSET then the value of `deprecated_code` MUST be ignored". Before, field 1 was
# skipped as unknown, so an old sender's error span converted as UNSET.

UNSET, OK, ERROR = 0, 1, 2
_SPAN = field(1, 2, bytes(range(1, 17))) + field(2, 2, bytes(range(1, 9))) + field(5, 2, b"GET /")


def _status(deprecated: list[int], code: int | None = None, message: bytes = b"", code_first: bool = False) -> bytes:
    """Status bytes: field 1 once per `deprecated` value (int32, negatives as 10-byte varints)."""
    old = b"".join(field(1, 0, varint(v & (1 << 64) - 1)) for v in deprecated)
    new = (field(2, 2, message) if message else b"") + (b"" if code is None else field(3, 0, varint(code)))
    return new + old if code_first else old + new


def _span_request(*statuses: bytes, legacy_scope: bool = False) -> bytes:
    """A traces request of one span whose field 15 is given once per `statuses` (they merge)."""
    span = _SPAN + b"".join(field(15, 2, s) for s in statuses)
    return field(1, 2, field(1000 if legacy_scope else 2, 2, field(2, 2, span)))


def _status_of(data: bytes | dict[str, Any]) -> dict[str, Any] | None:
    bundle = from_otlp_json(data) if isinstance(data, dict) else from_otlp(data, "traces")
    status: dict[str, Any] | None = bundle[PayloadType.SPANS].column("status").to_pylist()[0]
    return status


DEPRECATED_CASES = [
    # (deprecated_code values in order, code, expected code)
    ([2], None, ERROR),  # DEPRECATED_STATUS_CODE_UNKNOWN_ERROR, the one new senders wrote for ERROR
    ([1], None, ERROR),  # CANCELLED
    ([16], None, ERROR),  # UNAUTHENTICATED, the last named one
    ([99], None, ERROR),  # not named in the enum, still not OK
    ([-1], None, ERROR),
    ([2], UNSET, ERROR),  # code written as 0 is UNSET too
    ([0], None, UNSET),  # OK -> UNSET
    ([1 << 32], None, UNSET),  # an int32 keeps the low 32 bits: 0, OK
    ([0], OK, OK),
    ([2], OK, OK),  # code set: deprecated_code is ignored
    ([0], ERROR, ERROR),
    ([13], ERROR, ERROR),
    ([2, 0], None, UNSET),  # the last occurrence counts, as protobuf reads a singular field
    ([0, 2], None, ERROR),
]


@pytest.mark.parametrize(("deprecated", "code", "expected"), DEPRECATED_CASES)
@pytest.mark.parametrize("code_first", [False, True])
def test_deprecated_status_code_by_the_rule_of_the_old_protos(
    deprecated: list[int], code: int | None, expected: int, code_first: bool
) -> None:
    data = _span_request(_status(deprecated, code, b"upstream reset", code_first))
    want = {"code": expected or None, "status_message": "upstream reset"}  # the message stays as it is
    assert _status_of(data) == want
    assert _status_of(_span_request(_status(deprecated, code, b"upstream reset", code_first), legacy_scope=True)) == want
    bundle = from_otlp(data)  # the signal is inferred: field 1 of Status counts as known
    assert bundle == from_otlp(data, "traces")
    parsed = ExportTraceServiceRequest.FromString(data)  # field 1 is an unknown field of the current Status
    assert from_otlp(parsed) == bundle
    assert to_otlp(bundle) == normalize_otlp(parsed)  # normalisation 9 applies the same rule
    assert normalize_otlp(parsed).resource_spans[0].scope_spans[0].spans[0].status.code == expected


def test_a_deprecated_ok_status_alone_is_the_default_status() -> None:
    data = _span_request(_status([0]))
    assert _status_of(data) is None
    assert to_otlp(from_otlp(data)) == normalize_otlp(ExportTraceServiceRequest.FromString(data))


def test_status_given_twice_merges_before_the_rule() -> None:
    """A singular message field given twice is merged by protobuf: field 1 of one occurrence and field 3
    of the other belong to one Status."""
    assert _status_of(_span_request(_status([2]), _status([], OK))) == {"code": OK, "status_message": None}
    assert _status_of(_span_request(_status([], OK), _status([2]))) == {"code": OK, "status_message": None}
    assert _status_of(_span_request(_status([], UNSET), _status([2]))) == {"code": ERROR, "status_message": None}
    assert _status_of(_span_request(_status([2]), _status([0]))) is None


@pytest.mark.parametrize("wire_type", [1, 2, 5])
def test_a_mistyped_deprecated_code_is_refused(wire_type: int) -> None:
    value = {1: bytes(8), 2: b"\x02", 5: bytes(4)}[wire_type]
    data = _span_request(field(1, wire_type, value))
    with pytest.raises(ConversionError) as caught:
        from_otlp(data, "traces")
    path = "resource_spans[0].scope_spans[0].spans[0].status.deprecated_code"
    assert caught.value.field == path
    assert re.match(rf"{re.escape(path)}: protobuf wire type {wire_type} .*declared as a varint", str(caught.value))


@given(st.data())
@FAST
def test_deprecated_code_added_to_any_traces_request(data: st.DataObject) -> None:
    """Every span of a generated request gets a Status field 1 (or none); the result is the request
    with each code set by the rule."""
    msg = data.draw(traces_requests())
    expected = copy.deepcopy(msg)
    out = b""
    for rx, rx_exp in zip(msg.resource_spans, expected.resource_spans):
        body = copy.deepcopy(rx)
        body.ClearField("scope_spans")
        scopes = b""
        for sx, sx_exp in zip(rx.scope_spans, rx_exp.scope_spans):
            head = copy.deepcopy(sx)
            head.ClearField("spans")
            spans = b""
            for span, span_exp in zip(sx.spans, sx_exp.spans):
                deprecated = data.draw(st.lists(st.integers(-(1 << 31), (1 << 31) - 1) | st.sampled_from([0, 2]), max_size=2))
                spans += field(2, 2, span.SerializeToString() + field(15, 2, _status(deprecated)))
                if deprecated and deprecated[-1] != 0 and span.status.code == UNSET:
                    span_exp.status.code = ERROR
            scopes += field(2, 2, head.SerializeToString() + spans)
        out += field(1, 2, body.SerializeToString() + scopes)
    assert from_otlp(out, "traces") == from_otlp(expected)


# ---- OTLP/JSON: deprecatedCode ---------------------------------------------------------------------


def _span_json(status: dict[str, Any], legacy_scope: bool = False) -> dict[str, Any]:
    span = {"traceId": "01" * 16, "spanId": "02" * 8, "name": "GET /", "status": status}
    return {"resourceSpans": [{"instrumentationLibrarySpans" if legacy_scope else "scopeSpans": [{"spans": [span]}]}]}


@pytest.mark.parametrize(("deprecated", "code", "expected"), [c for c in DEPRECATED_CASES if len(c[0]) == 1 and c[0][0] < 1 << 31])
@pytest.mark.parametrize("snake", [False, True])
def test_json_deprecated_code_by_the_same_rule(deprecated: list[int], code: int | None, expected: int, snake: bool) -> None:
    key = "deprecated_code" if snake else "deprecatedCode"
    status: dict[str, Any] = {key: deprecated[0], "message": "upstream reset"}
    if code is not None:
        status["code"] = code
    want = {"code": expected or None, "status_message": "upstream reset"}
    assert _status_of(_span_json(status)) == want
    assert _status_of(_span_json(status, legacy_scope=True)) == want
    assert _status_of(_span_json({**status, key: float(deprecated[0])})) == want  # an integral JSON number


@pytest.mark.parametrize(
    ("deprecated", "code", "expected"),
    [
        ("DEPRECATED_STATUS_CODE_UNKNOWN_ERROR", None, ERROR),
        ("DEPRECATED_STATUS_CODE_NOT_FOUND", "STATUS_CODE_UNSET", ERROR),
        ("DEPRECATED_STATUS_CODE_OK", None, UNSET),
        ("DEPRECATED_STATUS_CODE_INTERNAL_ERROR", "STATUS_CODE_OK", OK),
        ("DEPRECATED_STATUS_CODE_OK", "STATUS_CODE_ERROR", ERROR),
        (None, None, UNSET),  # null is absent
    ],
)
def test_json_deprecated_code_by_name(deprecated: str | None, code: str | None, expected: int) -> None:
    status: dict[str, Any] = {"deprecatedCode": deprecated, "message": "m"}
    if code is not None:
        status["code"] = code
    assert _status_of(_span_json(status)) == {"code": expected or None, "status_message": "m"}


@pytest.mark.parametrize("value", ["STATUS_CODE_ERROR", "BOGUS", "2", 1.5, True, [], {}, 1 << 31, -(1 << 31) - 1])
def test_json_deprecated_code_that_is_no_enum_value_is_refused(value: Any) -> None:
    with pytest.raises(ConversionError) as caught:
        from_otlp_json(_span_json({"deprecatedCode": value, "code": 1}))
    assert caught.value.field == "resourceSpans[0].scopeSpans[0].spans[0].status.deprecatedCode"
    assert str(caught.value).endswith(f"unknown enum value {value!r}")


def test_json_deprecated_code_under_both_spellings_is_refused() -> None:
    with pytest.raises(ConversionError, match="deprecatedCode and deprecated_code name the same field"):
        from_otlp_json(_span_json({"deprecatedCode": 2, "deprecated_code": 2}))


@given(st.data())
@FAST
def test_json_deprecated_code_of_any_traces_request(data: st.DataObject) -> None:
    """JSON of a generated request with a deprecatedCode added to some statuses reads as the
    protobuf bytes with the same field 1 do."""
    msg = data.draw(traces_requests())
    doc = _json_of(msg)
    expected = copy.deepcopy(msg)
    for rx_doc, rx in zip(doc.get("resourceSpans", []), expected.resource_spans):
        for sx_doc, sx in zip(rx_doc.get("scopeSpans", []), rx.scope_spans):
            for span_doc, span in zip(sx_doc.get("spans", []), sx.spans):
                deprecated = data.draw(st.none() | st.integers(-(1 << 31), (1 << 31) - 1) | st.sampled_from([0, 2]))
                if deprecated is None:
                    continue
                span_doc.setdefault("status", {})["deprecatedCode"] = deprecated
                if deprecated != 0 and span.status.code == UNSET:
                    span.status.code = ERROR
    assert from_otlp_json(doc, "traces") == from_otlp(expected)
