"""Canonical record order: the normalisation under which a sorted, re-encoded batch equals its
source (sorting reorders records, attributes and resources inside a batch; docs/otlp-mapping.md,
"Order")."""

from __future__ import annotations

from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def canonical_order(msg: Message) -> Message:
    """A copy of `msg` with every repeated message field sorted by the deterministic bytes of its
    (already canonicalised) elements.

    AnyValue contents are left alone: the order of a Slice is data, and maps inside values travel
    as CBOR that sorting never touches.
    """
    out = type(msg)()
    out.CopyFrom(msg)
    _canonicalise(out)
    return out


def _canonicalise(msg: Message) -> None:
    if isinstance(msg, AnyValue):
        return
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.is_repeated:
            if field.message_type.GetOptions().map_entry:
                continue
            items = list(value)
            for item in items:
                _canonicalise(item)
            ordered = sorted(items, key=lambda m: m.SerializeToString(deterministic=True))
            copies = [type(m)() for m in ordered]
            for copy, item in zip(copies, ordered):
                copy.CopyFrom(item)
            del value[:]
            value.extend(copies)
        else:
            _canonicalise(value)
