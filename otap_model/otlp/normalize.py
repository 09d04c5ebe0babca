"""The normalisations under which ``to_otlp(from_otlp(x)) == x`` holds (docs/otlp-mapping.md).

Each one maps two encodings that OTLP / proto3 gives the same meaning to a single form; none of
them changes a telemetry value.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from ..errors import ConversionError
from .decode import REQUEST_TYPES

_LAYOUT = {
    "resource_logs": ("scope_logs", "log_records"),
    "resource_spans": ("scope_spans", "spans"),
    "resource_metrics": ("scope_metrics", "metrics"),
}


def normalize_otlp(msg: Message) -> Message:
    """A normalised copy of an Export*ServiceRequest (the input is left unchanged)."""
    if not isinstance(msg, tuple(REQUEST_TYPES.values())):
        raise ConversionError(
            f"expected an Export{{Logs,Trace,Metrics}}ServiceRequest message, got {type(msg).__name__}"
            + (" (parse bytes with the request type's FromString first)" if isinstance(msg, bytes | bytearray) else ""),
            "normalize_otlp(msg)",
        )
    out: Any = type(msg)()
    out.CopyFrom(msg)
    res_field = out.DESCRIPTOR.fields[0].name
    scope_field, items_field = _LAYOUT[res_field]
    resources = getattr(out, res_field)
    for i, rx in enumerate(resources):
        _legacy_scopes(rx, scope_field, f"{res_field}[{i}]")  # 8. legacy field 1000 read as ScopeX
        if items_field == "spans":
            for sx in getattr(rx, scope_field):
                for span in sx.spans:
                    _legacy_status(span)  # 9. Status.deprecated_code by the rule of its protos
    out.DiscardUnknownFields()  # 1. unknown fields have no column
    keep_res = []
    for rx in resources:
        scopes = getattr(rx, scope_field)
        kept = [sx for sx in scopes if len(getattr(sx, items_field))]  # 2. scopes without items
        if len(kept) != len(scopes):
            _replace(scopes, kept)
        if kept:
            keep_res.append(rx)
    if len(keep_res) != len(resources):  # 2. resources without items
        _replace(resources, keep_res)
    for rx in resources:
        _empty_to_absent(rx, "resource")  # 3. empty Resource == absent
        _attributes(rx.resource.attributes)
        for sx in getattr(rx, scope_field):
            _empty_to_absent(sx, "scope")  # 3. empty InstrumentationScope == absent
            _attributes(sx.scope.attributes)
            for item in getattr(sx, items_field):
                _item(item, items_field)
    return out


def _legacy_scopes(rx: Any, scope_field: str, path: str) -> None:
    """8. ResourceX field 1000 (instrumentation_library_{logs,spans,metrics} of OTLP 0.15-0.18, an
    unknown field to the current protos) holds ScopeX messages under their old name: they are the
    ScopeX when the ResourceX has none, and a duplicate copy otherwise (dropped with the unknown fields)."""
    scopes = getattr(rx, scope_field)
    if len(scopes):
        return
    legacy = [f.data for f in UnknownFieldSet(rx) if f.field_number == 1000 and f.wire_type == 2]
    for i, data in enumerate(legacy):
        try:
            scopes.add().ParseFromString(data)
        except DecodeError:
            name = "instrumentation_library_" + scope_field.removeprefix("scope_")
            raise ConversionError("not a parsable message", f"{path}.{name}[{i}]") from None


def _legacy_status(span: Any) -> None:
    """9. Status field 1 (deprecated_code of OTLP 0.6-0.11, an unknown field to the current
    protos): while `code` is STATUS_CODE_UNSET, a deprecated_code other than OK (0) means
    STATUS_CODE_ERROR, the receiver rule of those protos (the last occurrence counts, as an int32).
    The field itself is dropped with the unknown fields."""
    if not span.HasField("status") or span.status.code != Status.STATUS_CODE_UNSET:
        return
    values = [f.data for f in UnknownFieldSet(span.status) if f.field_number == 1 and f.wire_type == 0]
    if values and values[-1] & 0xFFFFFFFF:
        span.status.code = Status.STATUS_CODE_ERROR


def _replace(container: Any, keep: list[Any]) -> None:
    copies = [type(m)() for m in keep]
    for c, m in zip(copies, keep):
        c.CopyFrom(m)
    del container[:]
    container.extend(copies)


def _empty_to_absent(parent: Any, field: str) -> None:
    if parent.HasField(field) and getattr(parent, field).ByteSize() == 0:
        parent.ClearField(field)


def _attributes(kvs: Any) -> None:
    """4. an empty AnyValue is the same as an absent one (KeyValue.value), also inside maps."""
    for kv in kvs:
        _empty_to_absent(kv, "value")
        if kv.HasField("value"):
            _value(kv.value)


def _value(value: Any) -> None:
    kind = value.WhichOneof("value")
    if kind == "kvlist_value":
        _attributes(value.kvlist_value.values)
    elif kind == "array_value":
        for item in value.array_value.values:
            _value(item)


def _ids(msg: Any) -> None:
    """5. an empty (invalid) trace/span id of a span or link is the all-zero invalid id."""
    if not msg.trace_id:
        msg.trace_id = bytes(16)
    if not msg.span_id:
        msg.span_id = bytes(8)


def _item(item: Any, kind: str) -> None:
    if kind == "log_records":
        _empty_to_absent(item, "body")  # 4. empty body == no body
        if item.HasField("body"):
            _value(item.body)
        _attributes(item.attributes)
    elif kind == "spans":
        _ids(item)
        _empty_to_absent(item, "status")  # 6. empty Status == absent (code UNSET, no message)
        _attributes(item.attributes)
        for ev in item.events:
            _attributes(ev.attributes)
        for ln in item.links:
            _ids(ln)
            _attributes(ln.attributes)
    else:
        _attributes(item.metadata)
        data = item.WhichOneof("data")
        if data is None:
            return
        for dp in getattr(item, data).data_points:
            _attributes(dp.attributes)
            for ex in getattr(dp, "exemplars", ()):
                _attributes(ex.filtered_attributes)
            if data == "exponential_histogram":
                _empty_to_absent(dp, "positive")  # 7. empty Buckets == absent
                _empty_to_absent(dp, "negative")
