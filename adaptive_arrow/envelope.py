"""The OTAP envelope: ``BatchArrowRecords`` in the OTel Arrow protocol's protobuf wire format.

Field numbers follow ``opentelemetry/proto/experimental/arrow/v1/arrow_service.proto``::

    message BatchArrowRecords { int64 batch_id = 1; repeated ArrowPayload arrow_payloads = 2; bytes headers = 3; }
    message ArrowPayload { string schema_id = 1; ArrowPayloadType type = 2; bytes record = 3; }

The wire encoding is written by hand (varints and length-delimited fields, proto3 defaults
omitted, so the bytes equal the protobuf library's serialisation); parsing skips unknown fields
and raises EnvelopeError on anything malformed.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from .errors import EnvelopeError

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


def _integer(value: Any, where: str, bits: int) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise EnvelopeError(f"{where} must be an integer, got {type(value).__name__}") from None
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise EnvelopeError(f"{where} {number} does not fit an int{bits}")
    return number


def _bytes(value: object, where: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise EnvelopeError(f"{where} must be bytes, got {type(value).__name__}")


def _varint(value: int) -> bytes:
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _read_varint(buf: memoryview, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise EnvelopeError(f"{where}: truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise EnvelopeError(f"{where}: varint longer than 10 bytes at byte {pos}")


def _fields(buf: memoryview, where: str):  # type: ignore[no-untyped-def]
    """Yield (field number, wire type, value) where value is an int or a memoryview."""
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        key, pos = _read_varint(buf, pos, where)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise EnvelopeError(f"{where}: field number 0 at byte {start}")
        if wire_type == _VARINT:
            value, pos = _read_varint(buf, pos, where)
            yield number, wire_type, value
        elif wire_type == _LEN:
            length, pos = _read_varint(buf, pos, where)
            if length > end - pos:
                raise EnvelopeError(f"{where}: field {number} claims {length} bytes at byte {pos}, only {end - pos} left")
            yield number, wire_type, buf[pos : pos + length]
            pos += length
        elif wire_type in (_I64, _I32):
            size = 8 if wire_type == _I64 else 4
            if size > end - pos:
                raise EnvelopeError(f"{where}: truncated fixed-width field {number} at byte {pos}")
            yield number, wire_type, int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        else:
            raise EnvelopeError(f"{where}: unsupported wire type {wire_type} for field {number} at byte {start}")


def _expect(wire_type: int, want: int, where: str, number: int) -> None:
    if wire_type != want:
        raise EnvelopeError(f"{where}: field {number} has wire type {wire_type}, expected {want}")


@dataclass(frozen=True)
class ArrowPayload:
    """One table's Arrow IPC stream messages for one batch (``record``) and its stream id."""

    schema_id: str
    type: int
    record: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.schema_id, str):
            raise EnvelopeError(f"ArrowPayload.schema_id must be a str, got {type(self.schema_id).__name__}")
        object.__setattr__(self, "type", _integer(self.type, "ArrowPayload.type (payload type id)", 32))
        object.__setattr__(self, "record", _bytes(self.record, "ArrowPayload.record"))

    def _parts(self) -> list[bytes]:
        """The serialised fields, as pieces to join (the record is never copied here)."""
        parts: list[bytes] = []
        if self.schema_id:
            parts.append(_len_field(1, self.schema_id.encode()))
        if self.type:
            parts.append(_key(2, _VARINT) + _varint(int(self.type)))
        if self.record:
            parts += (_key(3, _LEN), _varint(len(self.record)), self.record)
        return parts

    def to_bytes(self) -> bytes:
        return b"".join(self._parts())

    @classmethod
    def _parse(cls, buf: memoryview, where: str) -> ArrowPayload:
        schema_id, type_, record = "", 0, b""
        for number, wire_type, value in _fields(buf, where):
            if number == 1:
                _expect(wire_type, _LEN, where, number)
                try:
                    schema_id = bytes(value).decode()  # type: ignore[arg-type]
                except UnicodeDecodeError:
                    raise EnvelopeError(f"{where}.schema_id: not valid UTF-8") from None
            elif number == 2:
                _expect(wire_type, _VARINT, where, number)
                type_ = value if value < 2**63 else value - 2**64  # type: ignore[operator]
                if not -(2**31) <= type_ < 2**31:
                    raise EnvelopeError(f"{where}.type: payload type {type_} does not fit the int32 ArrowPayloadType enum")
            elif number == 3:
                _expect(wire_type, _LEN, where, number)
                record = bytes(value)  # type: ignore[arg-type]
        return cls(schema_id, type_, record)


@dataclass(frozen=True)
class BatchArrowRecords:
    """One OTAP message: a batch id and the payloads of every non-empty table, root first."""

    batch_id: int
    payloads: tuple[ArrowPayload, ...] = field(default_factory=tuple)
    headers: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_id", _integer(self.batch_id, "BatchArrowRecords.batch_id", 64))
        try:
            payloads = tuple(self.payloads)
        except TypeError:
            raise EnvelopeError(
                f"BatchArrowRecords.payloads must be a sequence of ArrowPayload, got {type(self.payloads).__name__}"
            ) from None
        for i, payload in enumerate(payloads):
            if not isinstance(payload, ArrowPayload):
                raise EnvelopeError(f"BatchArrowRecords.payloads[{i}] must be an ArrowPayload, got {type(payload).__name__}")
        object.__setattr__(self, "payloads", payloads)
        object.__setattr__(self, "headers", _bytes(self.headers, "BatchArrowRecords.headers"))

    def to_bytes(self) -> bytes:
        """Serialise with one copy of the record bytes (pieces joined once, no nested buffers)."""
        parts: list[bytes] = []
        if self.batch_id:
            parts.append(_key(1, _VARINT) + _varint(int(self.batch_id)))
        for payload in self.payloads:
            inner = payload._parts()
            parts += (_key(2, _LEN), _varint(sum(len(p) for p in inner)))
            parts += inner
        if self.headers:
            parts.append(_len_field(3, bytes(self.headers)))
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BatchArrowRecords:
        """Parse protobuf bytes; raises EnvelopeError (never anything else) when malformed."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise EnvelopeError(f"BatchArrowRecords.from_bytes expects bytes, got {type(data).__name__}")
        buf = memoryview(data).cast("B")
        batch_id, headers = 0, b""
        payloads: list[ArrowPayload] = []
        for number, wire_type, value in _fields(buf, "BatchArrowRecords"):
            if number == 1:
                _expect(wire_type, _VARINT, "BatchArrowRecords", number)
                batch_id = value if value < 2**63 else value - 2**64  # type: ignore[operator]
            elif number == 2:
                _expect(wire_type, _LEN, "BatchArrowRecords", number)
                where = f"BatchArrowRecords.arrow_payloads[{len(payloads)}]"
                payloads.append(ArrowPayload._parse(value, where))  # type: ignore[arg-type]
            elif number == 3:
                _expect(wire_type, _LEN, "BatchArrowRecords", number)
                headers = bytes(value)  # type: ignore[arg-type]
        return cls(batch_id, tuple(payloads), headers)
