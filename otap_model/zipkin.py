"""Zipkin v2 JSON -> OTAP traces, mapped as the OpenTelemetry collector's zipkin receiver does.

Mapping (collector-contrib ``pkg/translator/zipkin/zipkinv2``; the semantic-convention names are
the ones that receiver writes):

* spans are grouped by ``localEndpoint.serviceName`` and the ``otel.library.name`` tag (stable
  sort, like the receiver's): one resource per service with ``service.name``; one scope per
  library (``otel.library.name`` / ``otel.library.version`` tags become the scope and leave the
  attributes). Spans without a service name get an empty resource.
* ids: hex; a 64-bit ``traceId`` is widened to 128 bits by left-padding with zeros; ``parentId``
  equal to ``id`` means no parent.
* ``timestamp`` / ``duration`` are microseconds -> ns (end = start + duration); an absent
  timestamp gives start 0 and the attribute ``otel.zipkin.absentField.startTime = true``.
* ``kind`` CLIENT/SERVER/PRODUCER/CONSUMER -> 3/2/4/5; without kind, a ``span.kind=internal``
  tag -> INTERNAL (tag removed), else UNSPECIFIED.
* ``tags`` -> span attributes, kept as strings (the receiver's default ``ParseStringTags=false``);
  ``w3c.tracestate`` -> trace_state; ``otel.status_code`` / ``otel.status_description`` -> status;
  an ``error`` tag -> status ERROR (the tag is removed when its value is ``"true"``);
  ``otlp.link.N`` tags -> links.
* ``annotations`` -> events: time µs -> ns, name = value (an OTel-exported
  ``name|{json attributes}|dropped`` value is split back into name, attributes and count).
* ``localEndpoint`` ipv4/ipv6/port -> ``net.host.ip`` / ``net.host.port``; ``remoteEndpoint``
  serviceName/ipv4/ipv6/port -> ``peer.service`` / ``net.peer.ip`` / ``net.peer.port``.
* ``shared: true`` -> attribute ``zipkin.shared = true`` (the receiver drops the flag; it is kept
  here so no input is lost).

Deliberate difference: the receiver moves resource semantic-convention tags of a service's first
span to the resource and drops them from later spans; here every tag stays a span attribute.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from .bundle import OtapBundle
from .errors import ConversionError
from .otlp import from_otlp
from .otlp.json import load_json

KINDS = {
    "CLIENT": Span.SPAN_KIND_CLIENT,
    "SERVER": Span.SPAN_KIND_SERVER,
    "PRODUCER": Span.SPAN_KIND_PRODUCER,
    "CONSUMER": Span.SPAN_KIND_CONSUMER,
}
STATUS_CODES = {
    "STATUS_CODE_UNSET": 0,
    "STATUS_CODE_OK": 1,
    "STATUS_CODE_ERROR": 2,
    "Unset": 0,
    "Ok": 1,
    "Error": 2,
}
START_TIME_ABSENT = "otel.zipkin.absentField.startTime"
LIBRARY_NAME, LIBRARY_VERSION = "otel.library.name", "otel.library.version"
MAX_NANOS = 2**64 - 1  # OTLP times are fixed64 nanoseconds
MAX_MICROS = MAX_NANOS // 1000


def from_zipkin_json(document: str | bytes | bytearray | list[Any]) -> OtapBundle:
    """Convert a Zipkin v2 JSON span list (its text, or the list `json.loads` made of it) to an OTAP
    traces bundle."""
    spans = load_json(document, "Zipkin v2 JSON")
    if not isinstance(spans, list):
        raise ConversionError(f"Zipkin v2 JSON is a list of spans, got {type(spans).__name__}")
    for i, span in enumerate(spans):
        if not isinstance(span, dict):
            raise ConversionError(f"a span is a JSON object, got {type(span).__name__}", f"[{i}]")
    order = sorted(range(len(spans)), key=lambda i: (_service(spans[i]), _tags(spans[i], i).get(LIBRARY_NAME, "")))
    request = ExportTraceServiceRequest()
    current: tuple[str, str] | None = None
    scope_spans: Any = None
    resource_spans: Any = None
    for i in order:
        zspan = spans[i]
        tags = dict(_tags(zspan, i))
        service, library = _service(zspan), tags.get(LIBRARY_NAME, "")
        if current is None or service != current[0]:
            resource_spans = request.resource_spans.add()
            if service:
                resource_spans.resource.attributes.add(key="service.name").value.string_value = service
            current = (service, "\0")  # force a new scope
        if library != current[1]:
            scope_spans = resource_spans.scope_spans.add()
            if library:
                scope_spans.scope.name = tags.pop(LIBRARY_NAME)
                scope_spans.scope.version = tags.pop(LIBRARY_VERSION, "")
            current = (service, library)
        tags.pop(LIBRARY_NAME, None)
        _span(zspan, tags, scope_spans.spans.add(), f"[{i}]")
    return from_otlp(request)


def _service(zspan: dict[str, Any]) -> str:
    endpoint = zspan.get("localEndpoint") or {}
    return str(endpoint.get("serviceName") or "") if isinstance(endpoint, dict) else ""


def _tags(zspan: dict[str, Any], i: int) -> dict[str, str]:
    tags = zspan.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise ConversionError("tags must be an object of string values", f"[{i}].tags")
    return tags


def _id(value: Any, width: int, where: str) -> bytes:
    """A hex id of at most `width` bytes, left-padded with zeros (so 64-bit trace ids are widened)."""
    if not isinstance(value, str) or not value:
        raise ConversionError(f"expected a hex id string, got {value!r}", where)
    limit = width * 2
    if len(value) > limit:
        raise ConversionError(f"expected at most {limit} hex digits, got {len(value)}", where)
    try:
        return bytes.fromhex(value.rjust(limit, "0"))
    except ValueError:
        raise ConversionError(f"{value!r} is not a hex id", where) from None


def _micros(value: Any, where: str) -> int:
    """Microseconds -> ns; the result must fit OTLP's fixed64 nanoseconds."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:  # NaN fails too
        raise ConversionError(f"expected a non-negative number of microseconds, got {value!r}", where)
    if value > MAX_MICROS:
        raise ConversionError(
            f"{value!r} microseconds is past the largest OTLP time, {MAX_MICROS} µs (2**64 - 1 ns)", where
        )
    return int(value) * 1000


def _endpoint(zspan: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    endpoint = zspan.get(name) or {}
    if not isinstance(endpoint, dict):
        raise ConversionError(f"an endpoint is an object, got {type(endpoint).__name__}", f"{where}.{name}")
    return endpoint


def _put(attributes: Any, key: str, value: str | int | bool) -> None:
    """Insert or replace (in place) one attribute, like pdata Map.Put*."""
    kv = next((a for a in attributes if a.key == key), None) or attributes.add(key=key)
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    else:
        kv.value.string_value = value


def _span(zspan: dict[str, Any], tags: dict[str, str], span: Span, where: str) -> None:
    span.trace_id = _id(zspan.get("traceId"), 16, f"{where}.traceId")
    span.span_id = _id(zspan.get("id"), 8, f"{where}.id")
    if zspan.get("parentId") is not None:
        parent = _id(zspan["parentId"], 8, f"{where}.parentId")
        if parent != span.span_id:
            span.parent_span_id = parent
    if "w3c.tracestate" in tags:
        span.trace_state = tags.pop("w3c.tracestate")
    span.name = str(zspan.get("name") or "")
    kind = zspan.get("kind")
    if kind is not None:
        if not isinstance(kind, str) or kind not in KINDS:
            raise ConversionError(f"unknown span kind {kind!r}", f"{where}.kind")
        span.kind = KINDS[kind]
    elif "span.kind" in tags and tags.pop("span.kind") == "internal":
        span.kind = Span.SPAN_KIND_INTERNAL
    _status(tags, span)
    _links(tags, span, f"{where}.tags")
    for key, value in tags.items():
        span.attributes.add(key=key).value.string_value = value
    local, remote = (_endpoint(zspan, name, where) for name in ("localEndpoint", "remoteEndpoint"))
    for endpoint, ip_key, port_key in ((local, "net.host.ip", "net.host.port"), (remote, "net.peer.ip", "net.peer.port")):
        if endpoint is remote and endpoint.get("serviceName"):
            _put(span.attributes, "peer.service", str(endpoint["serviceName"]))
        for family in ("ipv4", "ipv6"):
            if endpoint.get(family):
                _put(span.attributes, ip_key, str(endpoint[family]))
        port = endpoint.get("port")
        if isinstance(port, int) and port > 0:
            _put(span.attributes, port_key, port)
    start = _micros(zspan.get("timestamp"), f"{where}.timestamp")
    if zspan.get("timestamp") is None:
        _put(span.attributes, START_TIME_ABSENT, True)
    span.start_time_unix_nano = start
    end = start + _micros(zspan.get("duration"), f"{where}.duration")
    if end > MAX_NANOS:
        raise ConversionError(
            f"timestamp + duration = {end} ns is past the largest OTLP time, 2**64 - 1 ns", f"{where}.duration"
        )
    span.end_time_unix_nano = end
    if zspan.get("shared") is True:
        _put(span.attributes, "zipkin.shared", True)
    for j, annotation in enumerate(zspan.get("annotations") or ()):
        at = f"{where}.annotations[{j}]"
        if not isinstance(annotation, dict) or not isinstance(annotation.get("value"), str):
            raise ConversionError("an annotation is an object with a string value", at)
        event = span.events.add(time_unix_nano=_micros(annotation.get("timestamp"), f"{at}.timestamp"))
        name, attrs, dropped = _split_encoded(annotation["value"])
        event.name = name
        _json_attributes(attrs, event.attributes)
        event.dropped_attributes_count = dropped


def _status(tags: dict[str, str], span: Span) -> None:
    if "otel.status_code" in tags:
        span.status.code = STATUS_CODES.get(tags.pop("otel.status_code"), 0)  # type: ignore[assignment]
        if "otel.status_description" in tags:
            span.status.message = tags.pop("otel.status_description")
    if "error" in tags:
        span.status.code = Status.STATUS_CODE_ERROR
        if tags["error"] == "true":
            del tags["error"]


def _split_encoded(value: str) -> tuple[str, dict[str, Any], int]:
    """``name|{json}|dropped`` as the OTel zipkin exporter writes events and links; else (value, {}, 0)."""
    parts = value.split("|")
    if len(parts) >= 3:
        try:
            attrs = json.loads("|".join(parts[1:-1]))
            dropped = int(parts[-1])
        except ValueError:
            return value, {}, 0
        if isinstance(attrs, dict) and 0 <= dropped < 2**32:
            return parts[0], attrs, dropped
    return value, {}, 0


def _json_attributes(attrs: dict[str, Any], target: Any) -> None:
    for key, value in attrs.items():
        if isinstance(value, str | bool):
            _put(target, key, value)
        elif isinstance(value, int | float):
            if float(value).is_integer() and -(2**63) <= value < 2**63:
                _put(target, key, int(value))
            else:
                target.add(key=key).value.double_value = float(value)


def _links(tags: dict[str, str], span: Span, where: str) -> None:
    for n in range(128):
        value = tags.pop(f"otlp.link.{n}", None)
        if value is None:
            return
        parts = value.split("|")
        if len(parts) < 5:
            continue
        link = span.links.add(
            trace_id=_id(parts[0], 16, f"{where}.otlp.link.{n}"),
            span_id=_id(parts[1], 8, f"{where}.otlp.link.{n}"),
            trace_state=parts[2],
        )
        _, attrs, dropped = _split_encoded("|".join(["", *parts[3:]]))
        _json_attributes(attrs, link.attributes)
        link.dropped_attributes_count = dropped
