"""A field the OTLP schema declares, given with another wire type, is refused, not skipped.

The export requests of the three signals share field numbers (1: resource_logs / resource_spans /
resource_metrics, and so on down), so another signal's request read with an explicit signal
differs from the expected one mostly in wire types. Skipping mistyped fields, as protobuf parsers
do, read log records as spans with all-zero ids. Unknown field numbers and both encodings of a
repeated scalar (packed or not) stay accepted.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from otap_model import ConversionError, from_otlp, generate_otlp
from otap_model.otlp.json import otlp_json_to_message
from otap_model.otlp.wire import (
    FIXED32,
    FIXED64,
    MAX_FIELD,
    REJECT,
    REP_FIXED64,
    REP_MSG,
    REP_VARINT,
    SIGNAL_LAYOUT,
    VARINT,
    T,
    messages_for,
)

from .protobuf_wire import field, varint

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"
PROTO3_WIRE_TYPES = (0, 1, 2, 5)
VALUE = {0: b"\x01", 1: bytes(8), 2: b"\x00", 5: bytes(4)}  # a well-formed value of each wire type


def _minimal_logs() -> bytes:
    """A logs request whose two records have a timestamp, a severity text and a body, nothing else:
    before the fix it converted as two spans (all-zero ids, the serialized body as the name)."""
    request = ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add().scope_logs.add()
    for i in range(2):
        record = scope_logs.log_records.add(time_unix_nano=1_700_000_000_000_000_000 + i, severity_text="INFO")
        record.body.string_value = f"hello {i}"
    return request.SerializeToString()


def _traces() -> bytes:
    return otlp_json_to_message((EXAMPLES / "trace.json").read_text(), "traces").SerializeToString()


def test_a_logs_request_read_as_traces_is_refused_saying_what_it_is() -> None:
    data = _minimal_logs()
    assert from_otlp(data).num_rows == 2  # a clean logs request
    with pytest.raises(ConversionError) as caught:
        from_otlp(data, signal="traces")
    assert caught.value.field == "resource_spans[0].scope_spans[0].spans[0].trace_id"
    assert str(caught.value) == (
        "resource_spans[0].scope_spans[0].spans[0].trace_id: protobuf wire type 1 (64-bit), but the field is "
        "declared as a string or bytes (wire type 2) (at byte 7); the bytes parse as an OTLP logs request, "
        "not a traces one"
    )
    with pytest.raises(ConversionError, match=r"^resource_metrics\[0\]\.scope_metrics\[0\]\.metrics\[0\]\.name: "
                                              r"protobuf wire type 1 \(64-bit\), .*; the bytes parse as an OTLP logs"):
        from_otlp(data, signal="metrics")


def test_logs_then_traces_joined_in_one_request_is_refused_as_traces() -> None:
    """Concatenated protobuf messages merge into one: its resource_spans are the log and the trace
    resources. That fits no request type cleanly, so it says no more than where it broke."""
    data = _minimal_logs() + _traces()
    with pytest.raises(ConversionError, match=r"^resource_spans\[0\]\.scope_spans\[0\]\.spans\[0\]\.trace_id: "
                                              r"protobuf wire type 1 \(64-bit\), but the field is declared as a "
                                              r"string or bytes \(wire type 2\) \(at byte 7\)$"):
        from_otlp(data, signal="traces")
    assert from_otlp(_traces(), signal="traces").num_rows > 0


@pytest.mark.parametrize(("source", "profile"), [(s, p) for s in SIGNAL_LAYOUT for p in ("default", "sparse", "high-cardinality")])
def test_generated_requests_of_every_profile_are_refused_as_another_signal(source: str, profile: str) -> None:
    """The sparse profile's logs (records without attributes or ids) were read as spans."""
    for request in generate_otlp(source, 40, batch_size=20, seed=5, profile=profile):
        data = request.SerializeToString()
        for wrong in set(SIGNAL_LAYOUT) - {source}:
            with pytest.raises(ConversionError, match=rf"; the bytes parse as an OTLP {source} request, not a {wrong} one$"):
                from_otlp(data, signal=wrong)


Chain = tuple[str, list[tuple[T, int]]]


def _chains() -> list[Chain]:
    """(signal, [(message type, field number), ...]) from the request down to every message type of
    every signal: the fields to nest to reach it."""
    chains = []
    for signal in SIGNAL_LAYOUT:
        table = messages_for(signal)
        todo: list[tuple[T, list[tuple[T, int]]]] = [(T.REQUEST, [])]
        seen = {T.REQUEST}
        while todo:
            t, chain = todo.pop()
            chains.append((signal, chain))
            for number, f in table[t].items():
                if f.child is not None and f.child not in seen:
                    seen.add(f.child)
                    todo.append((f.child, [*chain, (t, number)]))
    return chains


CHAINS = _chains()


def _target(signal: str, chain: list[tuple[T, int]]) -> T:
    """The message type the chain leads to."""
    if not chain:
        return T.REQUEST
    t, number = chain[-1]
    child = messages_for(signal)[t][number].child
    assert child is not None
    return child


def _nest(chain: list[tuple[T, int]], inner: bytes) -> bytes:
    for _, number in reversed(chain):
        inner = field(number, 2, inner)
    return inner


def _path(signal: str, chain: list[tuple[T, int]]) -> str:
    table = messages_for(signal)
    parts = [table[t][n].name + ("[0]" if table[t][n].kind == REP_MSG else "") for t, n in chain]
    return ".".join(parts)


def _accepts(kind: int) -> set[int]:
    """The wire types protobuf encodes a field of this kind with (messages, strings, bytes: 2)."""
    return {VARINT: {0}, FIXED64: {1}, FIXED32: {5}, REP_FIXED64: {1, 2}, REP_VARINT: {0, 2}}.get(kind, {2})


@given(st.sampled_from(CHAINS), st.data())
@settings(max_examples=400, deadline=None)
def test_any_declared_field_of_another_wire_type_is_refused_naming_it(chain_of: Chain, data: st.DataObject) -> None:
    signal, chain = chain_of
    fields = {n: f for n, f in messages_for(signal)[_target(signal, chain)].items() if f.kind != REJECT}
    number = data.draw(st.sampled_from(sorted(fields)))
    f = fields[number]
    wire_type = data.draw(st.sampled_from(sorted(set(PROTO3_WIRE_TYPES) - _accepts(f.kind))))
    mistyped = field(number, wire_type, VALUE[wire_type])
    request = _nest(chain, mistyped)
    path = ".".join(p for p in (_path(signal, chain), f.name + ("[0]" if f.kind == REP_MSG else "")) if p)
    offset = len(request) - len(mistyped) + len(varint(number << 3))  # just after the field's tag
    with pytest.raises(ConversionError) as caught:
        from_otlp(request, signal=signal)
    assert caught.value.field == path
    assert re.fullmatch(rf"{re.escape(path)}: protobuf wire type {wire_type} \([\w-]+\), but the field is declared "
                        rf"as .*wire type [0-9].* \(at byte {offset}\)(; the bytes parse as .*)?", str(caught.value))


@given(st.sampled_from(CHAINS), st.integers(1, 2**29 - 1), st.sampled_from(PROTO3_WIRE_TYPES))
@settings(max_examples=300, deadline=None)
def test_unknown_fields_of_any_wire_type_are_still_skipped(chain_of: Chain, number: int, wire_type: int) -> None:
    signal, chain = chain_of
    if number in messages_for(signal)[_target(signal, chain)]:
        number = MAX_FIELD + number  # past every declared number
    with_unknown = _nest(chain, field(number, wire_type, VALUE[wire_type]))
    assert from_otlp(with_unknown, signal=signal) == from_otlp(_nest(chain, b""), signal=signal)


@pytest.mark.parametrize("packed", [True, False])
def test_repeated_scalars_packed_or_not_still_parse(packed: bool) -> None:
    """Histogram bucket_counts / explicit_bounds (fixed64, double) and exponential-histogram bucket
    counts (varint): proto3 writes them packed, and parsers must take them unpacked too."""
    counts, bounds, exp_counts = (1, 2, 3), (0.5, 2.5), (4, 5)
    if packed:
        fixed = field(6, 2, struct.pack("<3Q", *counts)) + field(7, 2, struct.pack("<2d", *bounds))
        varints = field(2, 2, b"".join(varint(c) for c in exp_counts))
    else:
        fixed = b"".join(field(6, 1, struct.pack("<Q", c)) for c in counts)
        fixed += b"".join(field(7, 1, struct.pack("<d", b)) for b in bounds)
        varints = b"".join(field(2, 0, varint(c)) for c in exp_counts)
    time = field(3, 1, struct.pack("<Q", 10))
    histogram = field(9, 2, field(1, 2, time + fixed))
    exponential = field(10, 2, field(1, 2, time + field(8, 2, field(1, 0, b"\x02") + varints)))
    metrics = field(2, 2, field(1, 2, b"h") + histogram) + field(2, 2, field(1, 2, b"e") + exponential)
    data = field(1, 2, field(2, 2, metrics))
    bundle = from_otlp(data, signal="metrics")
    assert bundle == from_otlp(ExportMetricsServiceRequest.FromString(data))
    from otap_model import PayloadType

    points = bundle[PayloadType.HISTOGRAM_DATA_POINTS].to_pylist()
    assert (points[0]["bucket_counts"], points[0]["explicit_bounds"]) == (list(counts), list(bounds))
    exp_points = bundle[PayloadType.EXP_HISTOGRAM_DATA_POINTS].to_pylist()
    assert exp_points[0]["positive"] == {"offset": 1, "bucket_counts": list(exp_counts)}


def test_a_message_holding_a_mistyped_field_is_refused_too() -> None:
    """upb keeps a field of the wrong wire type as an unknown field and serializes it again, so a
    message parsed from such bytes fails the same way as the bytes."""
    value = field(3, 2, b"zz")  # AnyValue.int_value is a varint
    record = field(6, 2, field(1, 2, b"k") + field(2, 2, value))
    data = field(1, 2, field(2, 2, field(2, 2, record)))
    path = "resource_logs[0].scope_logs[0].log_records[0].attributes[0].value.int_value"
    message = (rf"^{re.escape(path)}: protobuf wire type 2 \(length-delimited\), but the field is declared as a varint "
               r"\(wire type 0\) \(at byte 14\)$")
    with pytest.raises(ConversionError, match=message):
        from_otlp(data, signal="logs")
    with pytest.raises(ConversionError, match=message):
        from_otlp(ExportLogsServiceRequest.FromString(data))
