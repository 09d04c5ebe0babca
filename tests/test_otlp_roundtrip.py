"""OTLP protobuf -> OTAP -> OTLP round trips: examples, and hypothesis requests of all signals."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import otap_model
from otap_model import PayloadType, Signal, from_otlp, normalize_otlp, to_otlp
from otap_model.otlp.json import otlp_json_to_message

from .relations import check_relations
from .strategies import logs_requests, metrics_requests, traces_requests

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _roundtrip(msg) -> otap_model.OtapBundle:  # type: ignore[no-untyped-def]
    bundle = from_otlp(msg)
    check_relations(bundle)
    assert to_otlp(bundle) == normalize_otlp(msg)
    data = msg.SerializeToString()
    assert from_otlp(data, bundle.signal) == bundle
    return bundle


def test_examples_present() -> None:
    assert {p.name for p in EXAMPLE_FILES} >= {"logs.json", "metrics.json", "trace.json", "events.json"}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_protobuf_roundtrip(path: Path) -> None:
    msg = otlp_json_to_message(path.read_text())
    bundle = _roundtrip(msg)
    assert bundle.num_rows > 0
    # bytes without a signal: inferred from the wire layout
    assert from_otlp(msg.SerializeToString()) == bundle


@given(logs_requests())
@FAST
def test_logs_roundtrip(msg) -> None:  # type: ignore[no-untyped-def]
    _roundtrip(msg)


@given(traces_requests())
@FAST
def test_traces_roundtrip(msg) -> None:  # type: ignore[no-untyped-def]
    _roundtrip(msg)


@given(metrics_requests())
@FAST
def test_metrics_roundtrip(msg) -> None:  # type: ignore[no-untyped-def]
    _roundtrip(msg)


def test_canonical_values_and_ids() -> None:
    """Defaults are null, ids only on rows with children, one resource/scope id per message."""
    text = (EXAMPLES / "logs.json").read_text()
    msg = otlp_json_to_message(text)
    # a second, identical ResourceLogs keeps its own resource.id (no dedup)
    msg.resource_logs.add().CopyFrom(msg.resource_logs[0])
    rec = msg.resource_logs[1].scope_logs[0].log_records.add()  # no attributes, all defaults
    rec.body.SetInParent()  # empty body == no body
    bundle = from_otlp(msg)
    logs = bundle[PayloadType.LOGS]
    assert logs.column("resource").field("id").to_pylist() == [0, 1, 1]
    assert logs.column("scope").field("id").to_pylist() == [0, 1, 1]
    assert logs.column("id").to_pylist() == [0, 1, None]
    last = logs.slice(2).to_pylist()[0]
    assert last["body"] is None and last["severity_number"] is None and last["time_unix_nano"] is None
    assert bundle[PayloadType.RESOURCE_ATTRS].column("parent_id").to_pylist() == [0, 1]
    assert to_otlp(bundle) == normalize_otlp(msg)


def test_message_signal_mismatch_is_rejected() -> None:
    msg = otlp_json_to_message((EXAMPLES / "logs.json").read_text())
    with pytest.raises(otap_model.ConversionError, match="signal=traces"):
        from_otlp(msg, Signal.TRACES)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    if wire == 2:
        return bytes([number << 3 | 2, len(payload)]) + payload
    return bytes([number << 3 | wire]) + payload


@pytest.mark.parametrize(
    "record",
    [
        # AnyValue body: string then int on the wire -> the last oneof member (int) wins
        _field(5, 2, _field(1, 2, b"text") + _field(3, 0, b"\x07")),
        # body given twice: the two messages merge, the later oneof member wins
        _field(5, 2, _field(3, 0, b"\x07")) + _field(2, 0, b"\x09") + _field(5, 2, _field(1, 2, b"x")),
        # a scalar repeated: the last value wins
        _field(2, 0, b"\x09") + _field(2, 0, b"\x0d") + _field(3, 2, b"A") + _field(3, 2, b"B"),
        # an attribute value with an unknown field, skipped (a known one of the wrong wire type is refused:
        # test_otlp_wire_types.py)
        _field(6, 2, _field(1, 2, b"k") + _field(2, 2, _field(15, 0, b"\x01") + _field(1, 2, b"v"))),
    ],
)
def test_wire_semantics_match_upb(record: bytes) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    data = _field(1, 2, _field(2, 2, _field(2, 2, record)))
    via_upb = from_otlp(ExportLogsServiceRequest.FromString(data))
    assert from_otlp(data, "logs") == via_upb


def test_unpacked_repeated_and_oneof_override_match_upb() -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    bounds = b"".join(_field(7, 1, struct.pack("<d", b)) for b in (1.0, 2.5))  # unpacked doubles
    counts = _field(6, 2, struct.pack("<QQQ", 1, 2, 3))  # packed fixed64
    point = _field(3, 1, struct.pack("<Q", 10)) + bounds + counts + _field(5, 1, struct.pack("<d", 0.0))
    histogram = _field(9, 2, _field(1, 2, point))
    gauge = _field(5, 2, _field(1, 2, _field(4, 1, struct.pack("<d", 1.5))))
    for metric in (_field(1, 2, b"m") + gauge + histogram, _field(1, 2, b"m") + histogram + gauge):
        data = _field(1, 2, _field(2, 2, _field(2, 2, metric)))
        via_upb = from_otlp(ExportMetricsServiceRequest.FromString(data))
        assert from_otlp(data, "metrics") == via_upb
        check_relations(via_upb)


def test_documented_normalisations() -> None:
    """Each normalisation of docs/otlp-mapping.md, on a request that needs it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg = ExportTraceServiceRequest()
    msg.resource_spans.add().resource.attributes.add(key="orphan")  # 2. a resource without spans
    rs = msg.resource_spans.add()
    rs.resource.SetInParent()  # 3. empty resource
    rs.scope_spans.add()  # 2. a scope without spans
    ss = rs.scope_spans.add()
    ss.scope.SetInParent()  # 3. empty scope
    span = ss.spans.add(name="s")  # 5. empty trace and span ids
    span.status.SetInParent()  # 6. empty status
    span.attributes.add(key="empty").value.SetInParent()  # 4. empty AnyValue
    span.links.add()  # 5. link with empty ids
    bundle = from_otlp(msg)
    check_relations(bundle)
    back = to_otlp(bundle)
    assert back == normalize_otlp(msg)
    assert len(back.resource_spans) == 1 and len(back.resource_spans[0].scope_spans) == 1
    out = back.resource_spans[0].scope_spans[0].spans[0]
    assert (out.trace_id, out.span_id, out.links[0].span_id) == (bytes(16), bytes(8), bytes(8))
    assert not out.HasField("status") and not out.attributes[0].HasField("value")
    assert not back.resource_spans[0].HasField("resource")
