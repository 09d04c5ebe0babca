"""Bad OTLP input raises ConversionError naming the offending field."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from otap_model import ConversionError, OtapBundle, from_otlp, from_otlp_json
from otap_model.otlp.json import otlp_json_to_message

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"
ZIPKIN = EXAMPLES.parent / "zipkin"


def _msg(name: str):  # type: ignore[no-untyped-def]
    return otlp_json_to_message((EXAMPLES / name).read_text())


def _len_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (payloads here are < 2**21 bytes)."""
    n, out = len(payload), bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            break
    return bytes([number << 3 | 2]) + bytes(out) + payload


def _logs_request(records: bytes, resources: int = 1) -> bytes:
    """ExportLogsServiceRequest bytes: `resources` ResourceLogs, each one ScopeLogs of `records`."""
    return _len_field(1, _len_field(2, records)) * resources


def test_truncated_protobuf_names_the_field() -> None:
    data = _msg("logs.json").SerializeToString()
    with pytest.raises(ConversionError, match=r"^resource_logs\[0\]: truncated protobuf"):
        from_otlp(data[: len(data) // 2], "logs")


def test_truncation_inside_a_record_names_the_record() -> None:
    record = LogRecord(time_unix_nano=5).SerializeToString()
    data = _logs_request(_len_field(2, record))
    broken = _logs_request(_len_field(2, record[:-2]))  # the fixed64 time loses two bytes
    with pytest.raises(ConversionError, match=r"log_records\[0\]\.time_unix_nano: truncated protobuf"):
        from_otlp(broken, "logs")
    assert from_otlp(data, "logs").num_rows == 1


@pytest.mark.parametrize("name,signal", [("logs.json", "logs"), ("trace.json", "traces"), ("metrics.json", "metrics")])
def test_every_truncation_raises_or_is_a_shorter_request(name: str, signal: str) -> None:
    data = _msg(name).SerializeToString()
    for cut in range(len(data)):
        try:
            bundle = from_otlp(data[:cut], signal)
        except ConversionError as exc:
            assert exc.field is None or exc.field.startswith("resource_")
        else:
            assert isinstance(bundle, OtapBundle)


@given(st.binary(max_size=200), st.sampled_from(["logs", "traces", "metrics"]))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_crash(data: bytes, signal: str) -> None:
    with contextlib.suppress(ConversionError):
        from_otlp(data, signal)


@pytest.mark.parametrize(
    "mutate,path,message",
    [
        (lambda m: setattr(m.resource_logs[0].scope_logs[0].log_records[0], "trace_id", b"12345"),
         "resource_logs[0].scope_logs[0].log_records[0].trace_id", "expected 16 bytes, got 5"),
        (lambda m: setattr(m.resource_logs[0].scope_logs[0].log_records[0], "span_id", b"123456789"),
         "resource_logs[0].scope_logs[0].log_records[0].span_id", "expected 8 bytes, got 9"),
        (lambda m: setattr(m.resource_logs[0].scope_logs[0].log_records[0], "severity_number", 25),
         "resource_logs[0].scope_logs[0].log_records[0].severity_number", "unknown SeverityNumber value 25"),
    ],
)
def test_bad_log_fields(mutate, path: str, message: str) -> None:  # type: ignore[no-untyped-def]
    msg = _msg("logs.json")
    mutate(msg)
    with pytest.raises(ConversionError, match=message) as info:
        from_otlp(msg)
    assert info.value.field == path
    with pytest.raises(ConversionError, match=message):
        from_otlp(msg.SerializeToString(), "logs")


def test_bad_span_fields() -> None:
    msg = _msg("trace.json")
    span = msg.resource_spans[0].scope_spans[0].spans[0]
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 7)
    with pytest.raises(ConversionError, match="expected 8 bytes, got 7") as info:
        from_otlp(msg)
    assert info.value.field == "resource_spans[0].scope_spans[0].spans[0].links[0].span_id"
    del span.links[:]
    span.status.code = 7
    with pytest.raises(ConversionError, match="unknown StatusCode value 7") as info:
        from_otlp(msg)
    assert info.value.field == "resource_spans[0].scope_spans[0].spans[0].status.code"
    span.status.code = 0
    span.kind = 6
    with pytest.raises(ConversionError, match=r"spans\[0\]\.kind: unknown SpanKind value 6"):
        from_otlp(msg)


def test_bad_metric_fields() -> None:
    msg = _msg("metrics.json")
    metric = next(m for m in msg.resource_metrics[0].scope_metrics[0].metrics if m.HasField("sum"))
    metric.sum.aggregation_temporality = 3
    with pytest.raises(ConversionError, match=r"metrics\[\d\]\.sum\.aggregation_temporality: unknown AggregationTemporality value 3"):
        from_otlp(msg)
    metric.sum.aggregation_temporality = 1
    metric.sum.data_points[0].exemplars.add(trace_id=b"\x01" * 15)
    with pytest.raises(ConversionError, match=r"sum\.data_points\[0\]\.exemplars\[0\]\.trace_id: expected 16 bytes, got 15"):
        from_otlp(msg)


def test_fields_without_a_column_are_rejected() -> None:
    msg = _msg("logs.json")
    msg.resource_logs[0].resource.entity_refs.add(type="service")
    with pytest.raises(ConversionError, match=r"resource_logs\[0\]\.resource\.entity_refs: field has no OTAP column"):
        from_otlp(msg)
    msg = _msg("logs.json")
    msg.resource_logs[0].scope_logs[0].log_records[0].attributes[0].key_strindex = 3
    with pytest.raises(ConversionError, match=r"log_records\[0\]\.attributes\[0\]\.key_strindex"):
        from_otlp(msg)


def test_nested_values_without_a_column_or_with_duplicate_keys_are_rejected() -> None:
    msg = _msg("logs.json")
    body = msg.resource_logs[0].scope_logs[0].log_records[0].body
    body.kvlist_value.values.add(key="a").value.array_value.values.add(string_value_strindex=2)
    with pytest.raises(ConversionError, match="string_value_strindex is only meaningful in profiles") as info:
        from_otlp(msg)
    assert info.value.field == "resource_logs[0].scope_logs[0].log_records[0].body.kvlist_value.values[0].value.array_value.values[0]"
    body.kvlist_value.Clear()
    body.kvlist_value.values.add(key="", key_strindex=4)
    with pytest.raises(ConversionError, match=r"body\.kvlist_value\.values\[0\]: key_strindex"):
        from_otlp(msg)
    body.kvlist_value.Clear()
    body.kvlist_value.values.add(key="dup")
    body.kvlist_value.values.add(key="dup")
    with pytest.raises(ConversionError, match=r"body\.kvlist_value\.values\[1\]: duplicate key 'dup'"):
        from_otlp(msg)


def test_invalid_utf8_names_the_field() -> None:
    record = _len_field(3, b"\xff\xfe")  # severity_text
    with pytest.raises(ConversionError, match="not valid UTF-8") as info:
        from_otlp(_logs_request(_len_field(2, record)), "logs")
    assert info.value.field == "resource_logs[0].scope_logs[0].log_records[0].severity_text"


def test_u16_log_id_limit() -> None:
    record = LogRecord(attributes=[{"key": "k"}]).SerializeToString()
    data = _logs_request(_len_field(2, record) * (2**16 + 1))
    with pytest.raises(ConversionError, match=r"65537 log records have children, more than the 65536 ids"):
        from_otlp(data, "logs")
    assert from_otlp(_logs_request(_len_field(2, record) * 2**16), "logs").num_rows == 2**16


def test_u16_resource_id_limit() -> None:
    data = _logs_request(_len_field(2, b""), resources=2**16 + 1)
    with pytest.raises(ConversionError, match=r"65537 resources exceed the u16 resource\.id range") as info:
        from_otlp(data, "logs")
    assert info.value.field == "resource_logs"


def test_signal_inference() -> None:
    assert from_otlp(_msg("trace.json").SerializeToString()).signal.value == "traces"
    with pytest.raises(ConversionError, match="cannot infer the signal"):
        from_otlp(ExportLogsServiceRequest().SerializeToString())
    with pytest.raises(ConversionError, match="not an OTLP export request"):
        from_otlp(LogRecord())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"resourceSpans": [', r"^invalid JSON: Expecting value: line 1 column 20"),
        ("[1, 2]", "an OTLP/JSON request is a JSON object, got list"),
        ('{"foo": []}', "cannot infer the signal"),
        ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_FOO"}]}]}]}',
         r"^resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.kind: unknown enum value 'SPAN_KIND_FOO'"),
        ('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"SEVERITY_NUMBER_LOUD"}]}]}]}',
         r"logRecords\[0\]\.severityNumber: unknown enum value"),
        ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
         r"spans\[0\]\.traceId: 'zz' is not a hex-encoded id"),
        ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102"}]}]}]}',
         r"^resource_spans\[0\]\.scope_spans\[0\]\.spans\[0\]\.trace_id: expected 16 bytes, got 2"),
        ('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":77}]}]}]}',
         r"log_records\[0\]\.severity_number: unknown SeverityNumber value 77"),
        ('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"abc"}]}]}]}',
         r"invalid OTLP/JSON: .*timeUnixNano"),
    ],
)
def test_bad_json(text: str, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        from_otlp_json(text)


def test_to_otlp_rejects_bad_tables() -> None:
    import pyarrow as pa

    from otap_model import PayloadType, to_otlp

    bundle = from_otlp(_msg("logs.json"))
    attrs = bundle[PayloadType.LOG_ATTRS]
    bad_type = attrs.set_column(2, attrs.schema.field("type"), pa.array([9] + [1] * (attrs.num_rows - 1), pa.uint8()))
    bundle.tables[PayloadType.LOG_ATTRS] = bad_type
    with pytest.raises(ConversionError, match=r"^LOG_ATTRS\[0\]\.type: unknown AnyValue type code 9"):
        to_otlp(bundle)
    bundle.tables[PayloadType.LOG_ATTRS] = attrs.set_column(
        2, attrs.schema.field("type"), pa.array([5] * attrs.num_rows, pa.uint8())
    )
    with pytest.raises(ConversionError, match=r"^LOG_ATTRS\[0\]\.ser: type 5 \(Map/Slice\) row has no ser value"):
        to_otlp(bundle)
    metrics = from_otlp(_msg("metrics.json"))
    root = metrics[PayloadType.UNIVARIATE_METRICS]
    column = root.schema.get_field_index("metric_type")
    metrics.tables[PayloadType.UNIVARIATE_METRICS] = root.set_column(
        column, root.schema.field(column), pa.array([7] * root.num_rows, pa.uint8())
    )
    with pytest.raises(ConversionError, match=r"UNIVARIATE_METRICS\[0\]\.metric_type: unknown metric_type 7"):
        to_otlp(metrics)


@pytest.mark.parametrize(
    "name,signal,holds",
    [("logs.json", "traces", "resourceLogs (logs)"), ("trace.json", "metrics", "resourceSpans (traces)"),
     ("metrics.json", "logs", "resourceMetrics (metrics)")],
)
def test_json_of_another_signal_is_refused_not_dropped(name: str, signal: str, holds: str) -> None:
    text = (EXAMPLES / name).read_text()
    with pytest.raises(ConversionError, match=rf"^signal={signal} but the request holds {re.escape(holds)}; its data would be dropped"):
        from_otlp_json(text, signal=signal)
    with pytest.raises(ConversionError, match=rf"^signal={signal} but the request holds"):
        otlp_json_to_message(text, signal)
    assert from_otlp_json(text, signal=name.split(".")[0].replace("trace", "traces")).num_rows > 0


def test_an_unknown_signal_name_is_a_conversion_error() -> None:
    text = (EXAMPLES / "logs.json").read_text()
    for convert, data in ((from_otlp_json, text), (from_otlp, _msg("logs.json").SerializeToString())):
        with pytest.raises(ConversionError, match=r"^signal='span' is not a signal; expected one of logs, traces, metrics$"):
            convert(data, signal="span")


def test_otlp_json_to_message_rejects_what_is_not_json() -> None:
    with pytest.raises(ConversionError, match=r"^invalid JSON: "):
        otlp_json_to_message(b"\x08\x01 protobuf bytes")


def _with_column(bundle: OtapBundle, pt, name: str, values: list[int]) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    table = bundle[pt]
    index = table.schema.get_field_index(name)
    field = table.schema.field(index)
    bundle.tables[pt] = table.set_column(index, field, pa.array(values, field.type))


def test_to_otlp_refuses_orphan_children_and_repeated_ids_instead_of_dropping_rows() -> None:
    """A request built from such a bundle would silently lose the orphans or give one parent the
    children of both: the encoder refuses these bundles, and so does to_otlp."""
    from otap_model import PayloadType as P
    from otap_model import Signal, to_otlp
    from otap_model.generator import generate_otlp

    def fresh() -> OtapBundle:
        return from_otlp(next(iter(generate_otlp(Signal.TRACES, 40, batch_size=40, seed=3))))

    bundle = fresh()
    spans, attrs = bundle[P.SPANS], bundle[P.SPAN_ATTRS]
    missing = max(spans.column("id").to_pylist(), key=lambda v: v or 0) + 7
    _with_column(bundle, P.SPAN_ATTRS, "parent_id", [missing, missing, *attrs.column("parent_id").to_pylist()[2:]])
    with pytest.raises(ConversionError, match=rf"^SPAN_ATTRS\[0\]\.parent_id: {missing} is the id of no SPANS\.id row \(2 orphan row\(s\)\); the request would drop them$"):
        to_otlp(bundle)

    bundle = fresh()
    ids = bundle[P.SPANS].column("id").to_pylist()
    first, second = [i for i, v in enumerate(ids) if v is not None][:2]
    ids[second] = ids[first]
    _with_column(bundle, P.SPANS, "id", ids)
    with pytest.raises(ConversionError, match=rf"^SPANS\.id: value {ids[first]} is the id of rows {first} and {second}; an id must be unique"):
        to_otlp(bundle)

    bundle = fresh()
    resource_attrs = bundle[P.RESOURCE_ATTRS]
    _with_column(bundle, P.RESOURCE_ATTRS, "parent_id", [999, *resource_attrs.column("parent_id").to_pylist()[1:]])
    with pytest.raises(ConversionError, match=r"^RESOURCE_ATTRS\[0\]\.parent_id: 999 is the id of no SPANS\.resource\.id row"):
        to_otlp(bundle)


def test_json_converters_take_a_parsed_document_and_refuse_other_types_with_their_own_error() -> None:
    import json

    from otap_model import from_zipkin_json

    text = (EXAMPLES / "logs.json").read_text()
    document = json.loads(text)
    before = json.dumps(document)
    parsed, from_text = from_otlp_json(document), from_otlp_json(text)
    assert parsed.tables.keys() == from_text.tables.keys()
    assert all(parsed.tables[pt].equals(from_text.tables[pt]) for pt in parsed.tables)
    assert json.dumps(document) == before  # the caller's object is not rewritten (hex ids stay hex)
    zipkin = (ZIPKIN / "yelp.json").read_text()
    parsed_spans = json.loads(zipkin)
    spans, expected = from_zipkin_json(parsed_spans), from_zipkin_json(zipkin)
    assert all(spans.tables[pt].equals(expected.tables[pt]) for pt in expected.tables)
    assert parsed_spans == json.loads(zipkin)  # read, not copied, and not changed
    cases = [
        (from_otlp_json, None, r"^expected OTLP/JSON as str or bytes \(or the object json\.loads made of it\), got NoneType$"),
        (from_otlp_json, 3.5, r"^expected OTLP/JSON as str or bytes .*, got float$"),
        (from_otlp_json, [document], r"^an OTLP/JSON request is a JSON object, got list$"),
        (from_otlp_json, "[" * 100_000, r"^invalid OTLP/JSON: messages nest deeper than .*protobuf parses at most 100 message levels"),
        (from_zipkin_json, None, r"^expected Zipkin v2 JSON as str or bytes .*, got NoneType$"),
        (from_zipkin_json, document, r"^Zipkin v2 JSON is a list of spans, got dict$"),
        (from_zipkin_json, "[" * 100_000, r"^invalid Zipkin v2 JSON: nested deeper than Python's JSON parser goes$"),
    ]
    for convert, value, message in cases:
        with pytest.raises(ConversionError, match=message):
            convert(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["logs", "traces", "metrics"])
def test_bytes_of_another_signal_say_which_signal_they_hold(source: str) -> None:
    """Another signal's request fails on some field deep inside; the message says what the bytes are."""
    from otap_model import Signal
    from otap_model.generator import generate_otlp

    data = next(iter(generate_otlp(Signal(source), 20, batch_size=20, seed=1))).SerializeToString()
    for wrong in {"logs", "traces", "metrics"} - {source}:
        with pytest.raises(ConversionError) as caught:
            from_otlp(data, signal=wrong)
        message = str(caught.value)
        assert message.endswith(f"; the bytes parse as an OTLP {source} request, not a {wrong} one")
        assert caught.value.field is not None and message.startswith(f"{caught.value.field}: ")
    truncated = data[:40]
    with pytest.raises(ConversionError, match=r"truncated") as caught:
        from_otlp(truncated, signal=source)
    assert "parse as" not in str(caught.value)


def test_json_of_several_signals_or_none_says_which() -> None:
    """Was 'cannot infer the signal: expected exactly one of ...' for both, even when the request
    named two signals, which no signal= could fix."""
    with pytest.raises(ConversionError, match=r"^the request holds several signals \(resourceSpans, resource_logs\); "
                                              r"an OTLP request holds one$"):
        from_otlp_json('{"resourceSpans": [], "resource_logs": []}')
    with pytest.raises(ConversionError, match=r"^the request holds several signals"):
        from_otlp_json('{"resourceSpans": [], "resourceLogs": []}', signal="traces")
    with pytest.raises(ConversionError, match=r"^cannot infer the signal: the request names none \(no resourceLogs, "
                                              r"resourceSpans or resourceMetrics\); pass signal=$"):
        from_otlp_json('{"foo": []}')


@pytest.mark.parametrize("name", ["from_otlp_json", "from_zipkin_json"])
def test_a_file_path_given_for_the_document_says_to_pass_its_contents(tmp_path: Path, name: str) -> None:
    import otap_model

    convert = getattr(otap_model, name)
    path = tmp_path / "input.json"
    path.write_text('{"resourceLogs": []}')
    with pytest.raises(ConversionError, match=r"^invalid JSON: Expecting value: line 1 column 1 \(char 0\); the str names "
                                              rf"a file: pass its contents \(pathlib\.Path\({re.escape(repr(str(path)))}\)"
                                              r"\.read_bytes\(\)\)$"):
        convert(str(path))
    with pytest.raises(ConversionError, match=r"got PosixPath, a path: pass the file's contents \(path\.read_bytes\(\)\)$"):
        convert(path)
    with pytest.raises(ConversionError, match=r"^invalid JSON: Expecting value: line 1 column 1 \(char 0\)$"):
        convert("no-such-file.json")  # not a file: nothing to add
