"""BatchArrowRecords: our hand-written protobuf wire format against the protobuf library."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow import ArrowPayload, BatchArrowRecords, EnvelopeError
from otap_model import PayloadType

PROTO = Path(__file__).parent / "fixtures" / "arrow_service.proto"
FieldProto = descriptor_pb2.FieldDescriptorProto


def _message_classes():  # type: ignore[no-untyped-def]
    """Message classes built from a FileDescriptorProto mirroring fixtures/arrow_service.proto."""
    fd = descriptor_pb2.FileDescriptorProto(
        name="test_arrow_service.proto", package="opentelemetry.proto.experimental.arrow.v1", syntax="proto3"
    )
    enum = fd.enum_type.add(name="ArrowPayloadType")
    for pt in PayloadType:
        enum.value.add(name=pt.name, number=int(pt))
    bar = fd.message_type.add(name="BatchArrowRecords")
    bar.field.add(name="batch_id", number=1, type=FieldProto.TYPE_INT64, label=FieldProto.LABEL_OPTIONAL)
    bar.field.add(
        name="arrow_payloads", number=2, type=FieldProto.TYPE_MESSAGE, label=FieldProto.LABEL_REPEATED,
        type_name=".opentelemetry.proto.experimental.arrow.v1.ArrowPayload",
    )
    bar.field.add(name="headers", number=3, type=FieldProto.TYPE_BYTES, label=FieldProto.LABEL_OPTIONAL)
    payload = fd.message_type.add(name="ArrowPayload")
    payload.field.add(name="schema_id", number=1, type=FieldProto.TYPE_STRING, label=FieldProto.LABEL_OPTIONAL)
    payload.field.add(
        name="type", number=2, type=FieldProto.TYPE_ENUM, label=FieldProto.LABEL_OPTIONAL,
        type_name=".opentelemetry.proto.experimental.arrow.v1.ArrowPayloadType",
    )
    payload.field.add(name="record", number=3, type=FieldProto.TYPE_BYTES, label=FieldProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    classes = message_factory.GetMessages([fd], pool=pool)
    prefix = "opentelemetry.proto.experimental.arrow.v1."
    return classes[prefix + "BatchArrowRecords"], classes[prefix + "ArrowPayload"]


PbBatch, PbPayload = _message_classes()


def test_descriptor_matches_the_proto_fixture() -> None:
    text = PROTO.read_text()
    for message, cls in (("BatchArrowRecords", PbBatch), ("ArrowPayload", PbPayload)):
        body = re.search(rf"message {message} {{(.*?)}}", text, re.S)
        assert body is not None
        declared = {name: int(num) for name, num in re.findall(r"(\w+) = (\d+);", body.group(1))}
        assert declared == {f.name: f.number for f in cls.DESCRIPTOR.fields}
    enum_body = re.search(r"enum ArrowPayloadType {(.*?)}", text, re.S)
    assert enum_body is not None
    assert dict(re.findall(r"(\w+) = (\d+);", enum_body.group(1))) == {pt.name: str(int(pt)) for pt in PayloadType}


payloads = st.builds(
    ArrowPayload,
    schema_id=st.text(max_size=12),
    type=st.sampled_from([int(pt) for pt in PayloadType]),
    record=st.binary(max_size=300),
)
bars = st.builds(
    BatchArrowRecords,
    batch_id=st.integers(-(2**63), 2**63 - 1),
    payloads=st.lists(payloads, max_size=5),
    headers=st.binary(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(bars)
def test_every_field_parses_with_protobuf_and_bytes_match(bar: BatchArrowRecords) -> None:
    data = bar.to_bytes()
    msg = PbBatch.FromString(data)
    assert msg.batch_id == bar.batch_id
    assert msg.headers == bar.headers
    assert len(msg.arrow_payloads) == len(bar.payloads)
    for pb, ours in zip(msg.arrow_payloads, bar.payloads):
        assert (pb.schema_id, pb.type, pb.record) == (ours.schema_id, ours.type, ours.record)
    assert msg.SerializeToString(deterministic=True) == data
    assert BatchArrowRecords.from_bytes(data) == bar


@settings(max_examples=200, deadline=None)
@given(bars)
def test_protobuf_bytes_parse_with_from_bytes(bar: BatchArrowRecords) -> None:
    msg = PbBatch(batch_id=bar.batch_id, headers=bar.headers)
    for p in bar.payloads:
        msg.arrow_payloads.add(schema_id=p.schema_id, type=p.type, record=p.record)
    assert BatchArrowRecords.from_bytes(msg.SerializeToString()) == bar


def test_unknown_fields_are_skipped() -> None:
    bar = BatchArrowRecords(7, (ArrowPayload("3", 30, b"abc"),))
    extra = bytes([0x20, 0x05]) + bytes([0x2D, 1, 2, 3, 4]) + bytes([0x31]) + bytes(8)  # fields 4 (varint), 5 (i32), 6 (i64)
    assert BatchArrowRecords.from_bytes(bar.to_bytes() + extra) == bar


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_envelope_error_or_parse(data: bytes) -> None:
    with contextlib.suppress(EnvelopeError):  # any other exception fails the test
        BatchArrowRecords.from_bytes(data)


def test_every_truncation_of_a_real_envelope_is_handled() -> None:
    data = BatchArrowRecords(300, (ArrowPayload("12", 40, b"x" * 200), ArrowPayload("13", 41, b"y" * 5))).to_bytes()
    for cut in range(len(data)):
        try:
            BatchArrowRecords.from_bytes(data[:cut])
        except EnvelopeError as exc:
            assert "BatchArrowRecords" in str(exc)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes([0x0A]), "truncated varint"),
        (bytes([0x12, 0x05, 0x00]), "claims 5 bytes"),
        (bytes([0x0B]), "unsupported wire type 3"),
        (bytes([0x08] + [0xFF] * 11), "longer than 10 bytes"),
        (bytes([0x12, 0x03, 0x0A, 0x01, 0xFF]), "not valid UTF-8"),
        (bytes([0x0A, 0x00]), "wire type 2, expected 0"),
    ],
)
def test_malformed_bytes_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        BatchArrowRecords.from_bytes(data)


def test_non_bytes_input_is_rejected() -> None:
    with pytest.raises(EnvelopeError, match="expects bytes"):
        BatchArrowRecords.from_bytes("not bytes")  # type: ignore[arg-type]
