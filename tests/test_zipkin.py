"""Zipkin v2 JSON -> OTAP: every sample file, checked span by span against the JSON."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from otap_model import ConversionError, PayloadType, from_zipkin_json, to_otlp

from .relations import check_relations

ZIPKIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "zipkin"
FILES = sorted(ZIPKIN.glob("*.json"))
P = PayloadType
KIND = {None: None, "CLIENT": 3, "SERVER": 2, "PRODUCER": 4, "CONSUMER": 5}
MAPPED_TAGS = {"otel.library.name", "otel.library.version", "w3c.tracestate", "otel.status_code", "otel.status_description"}


def _attr_value(row: dict[str, Any]) -> Any:
    return {1: row["str"], 2: row["int"], 4: row["bool"]}[row["type"]]


def _expected(zspan: dict[str, Any]) -> tuple[Any, ...]:
    """What one Zipkin span must become: ids, timing, kind, attributes, events, service."""
    tags = dict(zspan.get("tags", {}))
    attrs: dict[str, Any] = {k: v for k, v in tags.items() if k not in MAPPED_TAGS and not (k == "error" and v == "true")}
    local, remote = zspan.get("localEndpoint", {}), zspan.get("remoteEndpoint", {})
    for endpoint, ip, port in ((local, "net.host.ip", "net.host.port"), (remote, "net.peer.ip", "net.peer.port")):
        if endpoint is remote and endpoint.get("serviceName"):
            attrs["peer.service"] = endpoint["serviceName"]
        for family in ("ipv4", "ipv6"):
            if endpoint.get(family):
                attrs[ip] = endpoint[family]
        if endpoint.get("port"):
            attrs[port] = endpoint["port"]
    if "timestamp" not in zspan:
        attrs["otel.zipkin.absentField.startTime"] = True
    if zspan.get("shared"):
        attrs["zipkin.shared"] = True
    start = zspan.get("timestamp", 0) * 1000
    parent = zspan.get("parentId")
    return (
        zspan["traceId"].rjust(32, "0"),
        zspan["id"].rjust(16, "0"),
        None if parent is None or parent == zspan["id"] else parent.rjust(16, "0"),
        start,
        zspan.get("duration", 0) * 1000,
        zspan.get("name", ""),
        KIND[zspan.get("kind")],
        2 if "error" in tags else None,
        tuple(sorted(attrs.items())),
        tuple((a["timestamp"] * 1000, a["value"]) for a in zspan.get("annotations", [])),
        local.get("serviceName"),
    )


def _actual(bundle: Any) -> list[tuple[Any, ...]]:
    table = bundle[P.SPANS]
    start = table.column("start_time_unix_nano").view("int64").to_pylist()
    duration = table.column("duration_time_unix_nano").view("int64").to_pylist()
    spans = table.drop_columns(["start_time_unix_nano", "duration_time_unix_nano"]).to_pylist()
    attrs: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for row in bundle[P.SPAN_ATTRS].to_pylist():
        attrs[row["parent_id"]].append((row["key"], _attr_value(row)))
    events: dict[int, list[tuple[int, str]]] = defaultdict(list)
    if bundle.get(P.SPAN_EVENTS) is not None:
        ev = bundle[P.SPAN_EVENTS]
        times = ev.column("time_unix_nano").view("int64").to_pylist()
        for t, pid, name in zip(times, ev.column("parent_id").to_pylist(), ev.column("name").to_pylist()):
            events[pid].append((t, name))
    services = {}
    if bundle.get(P.RESOURCE_ATTRS) is not None:
        services = {r["parent_id"]: r["str"] for r in bundle[P.RESOURCE_ATTRS].to_pylist() if r["key"] == "service.name"}
    out = []
    for s, st, du in zip(spans, start, duration):
        out.append(
            (
                s["trace_id"].hex(),
                s["span_id"].hex(),
                None if s["parent_span_id"] is None else s["parent_span_id"].hex(),
                st,
                du,
                s["name"],
                s["kind"],
                None if s["status"] is None else s["status"]["code"],
                tuple(sorted(attrs.get(s["id"], []))),
                tuple(events.get(s["id"], [])),
                services.get(s["resource"]["id"]),
            )
        )
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_zipkin_file(path: Path) -> None:
    zspans = json.loads(path.read_text())
    bundle = from_zipkin_json(path.read_bytes())
    check_relations(bundle)
    assert bundle.num_rows == len(zspans)
    assert Counter(_actual(bundle)) == Counter(_expected(z) for z in zspans)
    # one resource per distinct local service
    services = {z.get("localEndpoint", {}).get("serviceName") for z in zspans}
    assert len(set(bundle[P.SPANS].column("resource").field("id").to_pylist())) == len(services)
    # and the OTLP view holds the same spans
    assert sum(len(ss.spans) for rs in to_otlp(bundle).resource_spans for ss in rs.scope_spans) == len(zspans)


def test_zipkin_samples_present() -> None:
    assert len(FILES) >= 10


def test_mapped_tags_and_links() -> None:
    span = {
        "traceId": "1", "id": "a", "parentId": "a", "name": "op",
        "localEndpoint": {"serviceName": "svc", "ipv6": "::1", "port": 80},
        "tags": {
            "otel.library.name": "lib", "otel.library.version": "1.2", "w3c.tracestate": "k=v",
            "otel.status_code": "STATUS_CODE_OK", "otel.status_description": "fine", "span.kind": "internal",
            "otlp.link.0": "0000000000000000000000000000000b|000000000000000c|x=y|{\"n\":3,\"f\":1.5}|2",
        },
        "annotations": [{"timestamp": 7, "value": "evt|{\"a\":\"b\"}|1"}],
    }
    msg = to_otlp(from_zipkin_json(json.dumps([span])))
    rs = msg.resource_spans[0]
    assert rs.resource.attributes[0].value.string_value == "svc"
    ss = rs.scope_spans[0]
    assert (ss.scope.name, ss.scope.version) == ("lib", "1.2")
    s = ss.spans[0]
    assert s.trace_id == bytes(15) + b"\x01" and s.span_id == bytes(7) + b"\x0a" and s.parent_span_id == b""
    assert (s.trace_state, s.kind, s.status.code, s.status.message) == ("k=v", 1, 1, "fine")
    assert {a.key for a in s.attributes} == {"net.host.ip", "net.host.port", "otel.zipkin.absentField.startTime"}
    link = s.links[0]
    assert link.span_id == bytes(7) + b"\x0c" and link.trace_state == "x=y" and link.dropped_attributes_count == 2
    assert {(a.key, a.value.WhichOneof("value")) for a in link.attributes} == {("n", "int_value"), ("f", "double_value")}
    ev = s.events[0]
    assert (ev.time_unix_nano, ev.name, ev.dropped_attributes_count) == (7000, "evt", 1)
    assert ev.attributes[0].value.string_value == "b"


def test_error_tag_sets_status() -> None:
    spans = [
        {"traceId": "1", "id": "1", "tags": {"error": "true"}},
        {"traceId": "1", "id": "2", "tags": {"error": "timeout"}},
    ]
    msg = to_otlp(from_zipkin_json(json.dumps(spans)))
    a, b = msg.resource_spans[0].scope_spans[0].spans
    assert a.status.code == b.status.code == 2
    assert "error" not in {kv.key for kv in a.attributes}
    assert ("error", "timeout") in {(kv.key, kv.value.string_value) for kv in b.attributes}


@pytest.mark.parametrize(
    "text,field,message",
    [
        ("[{", None, "invalid JSON"),
        ('{"traceId": "1"}', None, "a list of spans"),
        ("[1]", "[0]", "a span is a JSON object"),
        ('[{"id": "1"}]', "[0].traceId", "expected a hex id string"),
        ('[{"traceId": "1", "id": "xyz"}]', "[0].id", "'xyz' is not a hex id"),
        ('[{"traceId": "1", "id": "12345678901234567"}]', "[0].id", "expected at most 16 hex digits, got 17"),
        ('[{"traceId": "1", "id": "1", "kind": "SIDEWAYS"}]', "[0].kind", "unknown span kind 'SIDEWAYS'"),
        ('[{"traceId": "1", "id": "1", "kind": ["SERVER"]}]', "[0].kind", r"unknown span kind \['SERVER'\]"),
        ('[{"traceId": "1", "id": "1", "localEndpoint": "frontend"}]', "[0].localEndpoint", "an endpoint is an object, got str"),
        ('[{"traceId": "1", "id": "1", "remoteEndpoint": [1]}]', "[0].remoteEndpoint", "an endpoint is an object, got list"),
        ('[{"traceId": "1", "id": "1", "tags": {"a": 1}}]', "[0].tags", "string values"),
        ('[{"traceId": "1", "id": "1", "timestamp": -5}]', "[0].timestamp", "non-negative"),
    ],
)
def test_bad_zipkin(text: str, field: str | None, message: str) -> None:
    with pytest.raises(ConversionError, match=message) as info:
        from_zipkin_json(text)
    assert info.value.field == field
