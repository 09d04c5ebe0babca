"""OTLP/JSON -> OTAP -> OTLP (and back to OTLP/JSON) for the official examples and generated requests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings

from otap_model import from_otlp, from_otlp_json, normalize_otlp, to_otlp, to_otlp_json
from otap_model.otlp.json import otlp_json_to_message

from .relations import check_relations
from .strategies import otlp_requests

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))


def _snake(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): _snake(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_snake(v) for v in doc]
    return doc


def _rewrite(doc: Any, fn: Any) -> Any:
    if isinstance(doc, dict):
        return {k: fn(k, _rewrite(v, fn)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_rewrite(v, fn) for v in doc]
    return doc


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_roundtrip(path: Path) -> None:
    text = path.read_text()
    bundle = from_otlp_json(text)
    check_relations(bundle)
    expected = normalize_otlp(otlp_json_to_message(text))
    assert to_otlp(bundle) == expected
    # back to OTLP/JSON: the same content once parsed into messages
    again = to_otlp_json(bundle)
    assert otlp_json_to_message(again) == expected
    assert json_format.MessageToDict(otlp_json_to_message(again)) == json_format.MessageToDict(expected)
    assert from_otlp_json(again) == bundle
    # ids are written as hex, as OTLP/JSON requires
    original_ids = set(re.findall(r'"(?:traceId|spanId|parentSpanId)":\s*"([0-9A-Fa-f]*)"', text))
    written_ids = set(re.findall(r'"(?:traceId|spanId|parentSpanId)":\s*"([0-9A-Fa-f]*)"', again))
    assert {i.lower() for i in original_ids} == written_ids


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_spellings_are_equivalent(path: Path) -> None:
    """snake_case keys, int64 as JSON numbers, enum names and lowercase hex give the same bundle."""
    text = path.read_text()
    bundle = from_otlp_json(text)
    doc = json.loads(text)
    assert from_otlp_json(json.dumps(_snake(doc))) == bundle
    enum_names = {"kind": {2: "SPAN_KIND_SERVER", 1: "SPAN_KIND_INTERNAL", 3: "SPAN_KIND_CLIENT"},
                  "severityNumber": {10: "SEVERITY_NUMBER_INFO2", 9: "SEVERITY_NUMBER_INFO"},
                  "aggregationTemporality": {1: "AGGREGATION_TEMPORALITY_DELTA", 2: "AGGREGATION_TEMPORALITY_CUMULATIVE"}}

    def respell(key: str, value: Any) -> Any:
        if key.endswith("UnixNano") and isinstance(value, str):
            return int(value)
        if key in enum_names and value in enum_names[key]:
            return enum_names[key][value]
        if key in ("traceId", "spanId", "parentSpanId"):
            return value.lower()
        return value

    assert from_otlp_json(json.dumps(_rewrite(doc, respell)).encode()) == bundle


@given(otlp_requests)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_json_roundtrip(msg: Any) -> None:
    bundle = from_otlp(msg)
    text = to_otlp_json(bundle)
    assert from_otlp_json(text, bundle.signal) == bundle
    assert otlp_json_to_message(text, bundle.signal) == normalize_otlp(msg)
