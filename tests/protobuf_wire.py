"""Protobuf wire encoding by hand, for tests that need bytes no generated message class writes:
fields of older OTLP versions, a declared field with another wire type."""

from __future__ import annotations


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(number: int, wire_type: int, value: bytes) -> bytes:
    """One field: its tag, the length when it is length-delimited (wire type 2), the value bytes."""
    prefix = varint(len(value)) if wire_type == 2 else b""
    return varint(number << 3 | wire_type) + prefix + value
