"""Fresh-user review 3, OTLP conversion: split singular messages merge as protobuf merges them,
nesting is refused exactly where to_otlp could no longer emit it, NaN bits survive inside
Slices/Maps, and misuse raises the packages' own errors."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import cbor2
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from adaptive_arrow import Encoder, EnvelopeError
from adaptive_arrow.cli import main
from adaptive_arrow.envelope_file import read_envelopes, write_envelopes
from otap_model import (
    ConversionError,
    OtapBundle,
    PayloadType,
    from_otlp,
    from_otlp_json,
    from_zipkin_json,
    normalize_otlp,
    to_otlp,
)
from otap_model.otlp.anyvalue import MAX_MESSAGE_DEPTH

# ---- hand-written protobuf wire format --------------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _vf(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _f64(field: int, bits: int) -> bytes:
    return _varint(field << 3 | 1) + bits.to_bytes(8, "little")


def _logs(record: bytes, resource: bytes = b"", scope: bytes = b"") -> bytes:
    scope_logs = (_ld(1, scope) if scope else b"") + _ld(2, record)
    return _ld(1, (_ld(1, resource) if resource else b"") + _ld(2, scope_logs))


def _canon(msg: ExportLogsServiceRequest) -> bytes:
    return msg.SerializeToString(deterministic=True)


# ---- A. a singular message given several times is merged ----------------------------------------

_scalar = st.one_of(
    st.text(max_size=4).map(lambda s: _ld(1, s.encode())),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: _vf(3, n)),
    st.integers(0, 2**64 - 1).map(lambda bits: _f64(4, bits)),  # every double, NaN payloads included
    st.just(b""),  # an empty AnyValue
)
_key = st.sampled_from(["a", "b", "c", "d", "e"]).map(str.encode)
_member = st.one_of(
    st.text(max_size=4).map(lambda s: _ld(1, s.encode())),
    st.booleans().map(lambda b: _vf(2, int(b))),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: _vf(3, n)),
    st.integers(0, 2**64 - 1).map(lambda bits: _f64(4, bits)),
    st.binary(max_size=4).map(lambda b: _ld(7, b)),
    st.lists(_scalar, max_size=3).map(lambda items: _ld(5, b"".join(_ld(1, v) for v in items))),
    st.lists(st.tuples(_key, _scalar), max_size=3).map(
        lambda kvs: _ld(6, b"".join(_ld(1, _ld(1, k) + _ld(2, v)) for k, v in kvs))
    ),
)
# one occurrence of an AnyValue field on the wire: oneof members in a row (the last set one wins,
# an array_value / kvlist_value following the same member merges into it)
_occurrence = st.lists(_member, max_size=3).map(b"".join)


def _has_duplicate_keys(value: AnyValue) -> bool:
    if value.WhichOneof("value") != "kvlist_value":
        return False
    keys = [kv.key for kv in value.kvlist_value.values]
    return len(keys) != len(set(keys))


@settings(max_examples=300, deadline=None)
@given(body=st.lists(_occurrence, min_size=1, max_size=3), value=st.lists(_occurrence, min_size=1, max_size=3),
       between=st.booleans())
@example(  # t30b_merge.py: LogRecord.body array split in two occurrences
    body=[_ld(5, _ld(1, _vf(3, 1))), _ld(5, _ld(1, _vf(3, 2)))], value=[b""], between=False
)
@example(  # AnyValue.array_value split inside one occurrence, and a kvlist split across KeyValue.value
    body=[_ld(5, _ld(1, _vf(3, 1))) + _ld(5, _ld(1, _vf(3, 2)))],
    value=[_ld(6, _ld(1, _ld(1, b"a"))), _ld(6, _ld(1, _ld(1, b"b") + _ld(2, _vf(3, 7))))],
    between=True,
)
@example(  # another member in between starts afresh: only the last array survives
    body=[_ld(5, _ld(1, _vf(3, 1))) + _ld(1, b"s") + _ld(5, _ld(1, _vf(3, 2)))],
    value=[_ld(5, _ld(1, _vf(3, 1))), _ld(6, b""), _ld(5, _ld(1, _vf(3, 3)))],
    between=False,
)
def test_split_singular_messages_merge_as_protobuf_parses_them(body: list[bytes], value: list[bytes], between: bool) -> None:
    gap = _f64(1, 5) if between else b""  # another LogRecord field between the occurrences
    record = gap.join(_ld(5, occ) for occ in body) + _ld(6, _ld(1, b"k") + b"".join(_ld(2, occ) for occ in value))
    raw = _logs(record)
    parsed = ExportLogsServiceRequest.FromString(raw)
    log = parsed.resource_logs[0].scope_logs[0].log_records[0]
    if _has_duplicate_keys(log.body) or _has_duplicate_keys(log.attributes[0].value):
        with pytest.raises(ConversionError, match="duplicate key"):
            from_otlp(raw, "logs")
        return
    assert _canon(to_otlp(from_otlp(raw, "logs"))) == _canon(normalize_otlp(parsed))


def test_merged_body_is_what_protobuf_gives() -> None:
    raw = _logs(_ld(5, _ld(5, _ld(1, _vf(3, 1)))) + _ld(5, _ld(5, _ld(1, _vf(3, 2)))))
    body = to_otlp(from_otlp(raw, "logs")).resource_logs[0].scope_logs[0].log_records[0].body
    assert [v.int_value for v in body.array_value.values] == [1, 2]


# ---- B. nesting: accepted exactly when to_otlp can emit it -----------------------------------------


def _nest(kinds: str, leaf: bytes) -> tuple[bytes, bytes]:
    """(raw, normalised) AnyValue contents: `kinds` outermost first ('a' ArrayValue, 'm' KeyValueList
    of one key), `leaf` the innermost AnyValue contents. An empty value inside a map is written in
    the raw form only (normalisation drops it, so it adds no level to what to_otlp writes)."""
    raw = norm = leaf
    for kind in reversed(kinds):
        if kind == "a":
            raw, norm = _ld(5, _ld(1, raw)), _ld(5, _ld(1, norm))
        else:
            raw = _ld(6, _ld(1, _ld(1, b"k") + _ld(2, raw)))
            norm = _ld(6, _ld(1, _ld(1, b"k") + (_ld(2, norm) if norm else b"")))
    return raw, norm


def _place(owner: str, value: bytes) -> bytes:
    """A logs request holding `value` as the body (level 4), a log/scope attribute (5) or a resource
    attribute (4)."""
    kv = _ld(1, b"k") + _ld(2, value)
    if owner == "body":
        return _logs(_ld(5, value))
    if owner == "log":
        return _logs(_ld(6, kv))
    if owner == "scope":
        return _logs(b"", scope=_ld(3, kv))
    return _logs(b"", resource=_ld(1, kv))


_LEAVES = {"scalar": _ld(1, b"x"), "empty": b"", "empty array": _ld(5, b""), "empty map": _ld(6, b"")}


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.sampled_from("am"), min_size=28, max_size=50).map("".join),
    leaf=st.sampled_from(sorted(_LEAVES)),
    owner=st.sampled_from(["body", "log", "scope", "resource"]),
)
@example(kinds="a" * 48, leaf="scalar", owner="body")  # leaf AnyValue at level 100: accepted
@example(kinds="a" * 49, leaf="scalar", owner="body")  # t29d_deep_to_otlp.py: level 102, refused
@example(kinds="m" * 32, leaf="scalar", owner="body")  # level 100
@example(kinds="m" * 33, leaf="scalar", owner="body")  # t29d_deep_to_otlp.py: level 103
@example(kinds="m" * 32, leaf="empty", owner="log")  # empty innermost value: the KeyValue at 100
@example(kinds="a" * 48, leaf="empty array", owner="log")  # ArrayValue at 102
def test_nesting_is_accepted_exactly_when_protobuf_parses_the_request(kinds: str, leaf: str, owner: str) -> None:
    raw_value, norm_value = _nest(kinds, _LEAVES[leaf])
    raw, norm = _place(owner, raw_value), _place(owner, norm_value)
    try:
        expected = normalize_otlp(ExportLogsServiceRequest.FromString(norm))
    except Exception:
        expected = None  # deeper than upb parses: to_otlp could not produce it either
    if expected is None:
        with pytest.raises(ConversionError, match=rf"puts a message at depth \d+.* protobuf parses at most {MAX_MESSAGE_DEPTH} levels") as err:
            from_otlp(raw, "logs")
        assert err.value.field is not None and err.value.field.startswith("resource_logs[0].")
        return
    assert _canon(to_otlp(from_otlp(raw, "logs"))) == _canon(expected)


def test_too_deep_names_depth_limit_and_field() -> None:
    raw = _place("body", _nest("a" * 49, _LEAVES["scalar"])[0])
    with pytest.raises(ConversionError) as err:
        from_otlp(raw, "logs")
    assert str(err.value) == (
        "resource_logs[0].scope_logs[0].log_records[0].body.array_value: nested Slice/Map value puts a message "
        "at depth 102 of the export request; protobuf parses at most 100 levels, so to_otlp could not emit it"
    )


def _json_body(depth: int) -> str:
    """OTLP/JSON with a body Slice nested `depth` deep (written as text: json.dumps recurses)."""
    value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"leaf"}' + "]}}" * depth
    return '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":' + value + "}]}]}]}"


def test_otlp_json_accepts_the_same_depth_as_protobuf() -> None:
    bundle = from_otlp_json(_json_body(48))  # json_format alone stops one level earlier
    assert to_otlp(bundle).resource_logs[0].scope_logs[0].log_records[0].body.HasField("array_value")
    with pytest.raises(ConversionError, match=r"body\.array_value: .*depth 102 .*at most 100 levels"):
        from_otlp_json(_json_body(49))
    for depth in (150, 600):  # json_format's and then Python's own recursion limits
        with pytest.raises(ConversionError, match="protobuf parses at most 100 message levels"):
            from_otlp_json(_json_body(depth))


def _deep_bundle(depth: int) -> OtapBundle:
    """A logs bundle whose body Slice nests `depth` lists deep (built directly: from_otlp refuses it)."""
    bundle = from_otlp(_place("body", _ld(5, _ld(1, _ld(1, b"x")))), "logs")
    logs = bundle.tables[PayloadType.LOGS]
    deep: list = ["leaf"]
    for _ in range(depth - 1):
        deep = [deep]
    body = logs.column("body")
    fields = {f.name: body.field(f.name) for f in body.type}
    fields["ser"] = pa.array([cbor2.dumps(deep)], fields["ser"].type)
    new_body = pa.StructArray.from_arrays(list(fields.values()), fields=list(body.type))
    logs = logs.set_column(logs.schema.get_field_index("body"), logs.schema.field("body"), new_body)
    return OtapBundle.of(bundle.signal, {**bundle.tables, PayloadType.LOGS: logs})


def test_to_otlp_wraps_protobuf_errors() -> None:
    with pytest.raises(ConversionError, match=r"^to_otlp: protobuf refuses the request built from this bundle: .*MaxDepth.*"
                       r"nests deeper than the 100 message levels"):
        to_otlp(_deep_bundle(60))


def test_cli_decode_of_an_unexportable_envelope_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.otap"
    with path.open("wb") as out:
        write_envelopes(out, [Encoder("logs").encode(_deep_bundle(60))])
    assert main(["decode", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"adaptive-arrow decode: {path}: message 1: to_otlp: protobuf refuses the request")


# ---- C. NaN bits inside Slices and Maps -------------------------------------------------------------

_NAN_BITS = [0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8000000000000, 0xFFFFFFFFFFFFFFFF, 0x7FF4000000000123]


@pytest.mark.parametrize("bits", _NAN_BITS, ids=hex)
def test_nan_bits_survive_inside_slices_and_maps(bits: int) -> None:
    raw = _logs(_ld(5, _ld(5, _ld(1, _f64(4, bits)))) + _ld(6, _ld(1, b"m") + _ld(2, _ld(6, _ld(1, _ld(1, b"k") + _ld(2, _f64(4, bits)))))))
    log = to_otlp(from_otlp(raw, "logs")).resource_logs[0].scope_logs[0].log_records[0]
    got = [log.body.array_value.values[0].double_value, log.attributes[0].value.kvlist_value.values[0].value.double_value]
    assert [struct.unpack("<Q", struct.pack("<d", d))[0] for d in got] == [bits, bits]


def test_old_cbor_nan_still_decodes() -> None:
    bundle = _deep_bundle(1)
    logs = bundle.tables[PayloadType.LOGS]
    body = logs.column("body")
    fields = {f.name: body.field(f.name) for f in body.type}
    fields["ser"] = pa.array([bytes.fromhex("9ff97e00ff")], fields["ser"].type)  # [NaN] as cbor2 wrote it before
    logs = logs.set_column(logs.schema.get_field_index("body"), logs.schema.field("body"),
                           pa.StructArray.from_arrays(list(fields.values()), fields=list(body.type)))
    value = to_otlp(OtapBundle.of(bundle.signal, {PayloadType.LOGS: logs})).resource_logs[0].scope_logs[0].log_records[0].body
    assert struct.pack(">d", value.array_value.values[0].double_value).hex() == "7ff8000000000000"


def test_quiet_nan_keeps_its_former_cbor() -> None:
    """Only NaNs cbor2 cannot keep change encoding, so earlier output stays byte-identical."""
    raw = _logs(_ld(5, _ld(5, _ld(1, _f64(4, 0x7FF8000000000000)))))
    ser = from_otlp(raw, "logs").tables[PayloadType.LOGS].column("body").field("ser")[0].as_py()
    assert ser.hex() == "9ff97e00ff"


# ---- D. misuse raises the packages' own errors ----------------------------------------------------


@pytest.mark.parametrize("arg,got", [(None, "NoneType"), ({}, "dict")])
def test_to_otlp_of_a_non_bundle(arg: object, got: str) -> None:
    with pytest.raises(ConversionError, match=rf"^to_otlp\(bundle\): expected an otap_model.OtapBundle .*, got {got}$"):
        to_otlp(arg)  # type: ignore[arg-type]


def test_normalize_otlp_of_bytes() -> None:
    with pytest.raises(ConversionError, match=r"^normalize_otlp\(msg\): expected an Export\{Logs,Trace,Metrics\}ServiceRequest message, got bytes"):
        normalize_otlp(b"")  # type: ignore[arg-type]


def _zipkin(**fields: object) -> str:
    return json.dumps([{"traceId": "463ac35c9f6413ad", "id": "a2fb4a1d1a96d312", **fields}])


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"timestamp": 99999999999999999999}, r"^\[0\]\.timestamp: 99999999999999999999 microseconds is past the largest OTLP time"),
        ({"timestamp": 1e300}, r"^\[0\]\.timestamp: 1e\+300 microseconds is past the largest OTLP time"),
        ({"timestamp": 18446744073709551, "duration": 1000}, r"^\[0\]\.duration: timestamp \+ duration = \d+ ns is past"),
        ({"annotations": [{"timestamp": 2**70, "value": "x"}]}, r"^\[0\]\.annotations\[0\]\.timestamp: \d+ microseconds is past"),
    ],
)
def test_zipkin_times_past_the_otlp_range(fields: dict, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        from_zipkin_json(_zipkin(**fields))


def test_zipkin_largest_time_is_accepted() -> None:
    spans = to_otlp(from_zipkin_json(_zipkin(timestamp=18446744073709551))).resource_spans[0].scope_spans[0].spans
    assert spans[0].start_time_unix_nano == spans[0].end_time_unix_nano == 18446744073709551000


class _Reader:
    """A file-like object that is no io class, whose read() gives text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self, size: int) -> str:
        chunk, self.text = self.text[:size], self.text[size:]
        return chunk


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: list(read_envelopes("x", "x")), r"^read_envelopes\(source\): expected a file opened for binary reading \('rb'\), got a str$"),
        (lambda: list(read_envelopes(io.StringIO("abcd"))), r"^read_envelopes\(source\): expected a file opened for binary reading \('rb'\), got a StringIO$"),
        (lambda: list(read_envelopes(io.TextIOWrapper(io.BytesIO(b"\x0c\x00\x00\x00\xff\xfe"), "utf-8"))),
         r"^read_envelopes\(source\): expected a file opened for binary reading \('rb'\), got a TextIOWrapper$"),
        (lambda: list(read_envelopes(_Reader("abcd"))), r"^read_envelopes\(source\): <stream>: read\(\) returned a str, not bytes"),
        (lambda: write_envelopes(None, [b""]), r"^write_envelopes\(out\): expected a file opened for binary writing \('wb'\), got None$"),  # type: ignore[arg-type]
        (lambda: write_envelopes(io.StringIO(), [b""]), r"^write_envelopes\(out\): .* got a StringIO$"),  # type: ignore[arg-type]
        (lambda: write_envelopes(io.BytesIO(), None), r"^write_envelopes\(messages\): expected an iterable .*, got None$"),  # type: ignore[arg-type]
        (lambda: write_envelopes(io.BytesIO(), [b"", "s"]), r"^write_envelopes\(messages\): message 2 is a str, expected BatchArrowRecords or bytes$"),  # type: ignore[list-item]
        (lambda: write_envelopes(io.BytesIO(), [1]), r"^write_envelopes\(messages\): message 1 is an int"),  # type: ignore[list-item]
    ],
    ids=["read str path", "read text file", "read text-mode file", "read() of str", "write None", "write text file", "write None messages", "write str", "write int"],
)
def test_envelope_file_argument_types(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EnvelopeError, match=message):
        call()
