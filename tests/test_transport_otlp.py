"""Acceptance: sorting and delta ids change nothing OTLP can see, except record order.

``to_otlp(restore(optimize(from_otlp(x))))`` equals ``to_otlp(from_otlp(x))`` once both go
through ``canonical_order`` (docs/otlp-mapping.md, "Order"), directly and through the encoder /
decoder pair in unary and stream mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_arrow import Decoder, Encoder
from adaptive_arrow.transport import optimize, restore
from otap_model import Signal, from_otlp, from_zipkin_json, to_otlp
from otap_model.otlp.json import otlp_json_to_message
from otap_model.otlp.order import canonical_order

from .strategies import logs_requests, metrics_requests, traces_requests

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_same(msg: Message) -> None:
    bundle = from_otlp(msg)
    expected = canonical_order(to_otlp(bundle))
    assert canonical_order(to_otlp(restore(optimize(bundle)))) == expected
    encoded = Encoder(bundle.signal).encode(bundle).to_bytes()
    assert canonical_order(to_otlp(Decoder(bundle.signal).decode(encoded))) == expected


@given(logs_requests())
@SETTINGS
def test_logs_survive_sorting_and_delta_ids(msg: Message) -> None:
    _assert_same(msg)


@given(traces_requests())
@SETTINGS
def test_traces_survive_sorting_and_delta_ids(msg: Message) -> None:
    _assert_same(msg)


@given(metrics_requests())
@SETTINGS
def test_metrics_survive_sorting_and_delta_ids(msg: Message) -> None:
    _assert_same(msg)


@given(st.lists(st.one_of(traces_requests()), min_size=2, max_size=4))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_stream_mode_keeps_every_batch(requests: list[Message]) -> None:
    """One encoder and one decoder across batches: encoder state never leaks ids between batches."""
    encoder, decoder = Encoder(Signal.TRACES), Decoder(Signal.TRACES)
    for msg in requests:
        bundle = from_otlp(msg)
        got = to_otlp(decoder.decode(encoder.encode(bundle).to_bytes()))
        assert canonical_order(got) == canonical_order(to_otlp(bundle))


@pytest.mark.parametrize("path", sorted((DATA / "otlp-examples").glob("*.json")), ids=lambda p: p.name)
def test_otlp_examples(path: Path) -> None:
    _assert_same(otlp_json_to_message(path.read_text()))


@pytest.mark.parametrize("path", sorted((DATA / "zipkin").glob("*.json")), ids=lambda p: p.name)
def test_zipkin_samples(path: Path) -> None:
    bundle = from_zipkin_json(path.read_bytes())
    assert canonical_order(to_otlp(restore(optimize(bundle)))) == canonical_order(to_otlp(bundle))
    decoded = Decoder(Signal.TRACES).decode(Encoder(Signal.TRACES).encode(bundle).to_bytes())
    assert canonical_order(to_otlp(decoded)) == canonical_order(to_otlp(bundle))


def test_canonical_order_sorts_records_but_not_slices() -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    a = ExportLogsServiceRequest()
    scope = a.resource_logs.add().scope_logs.add()
    for body in ("b", "a"):
        scope.log_records.add().body.string_value = body
    values = scope.log_records[0].attributes.add(key="k").value.array_value.values
    values.add().int_value = 2
    values.add().int_value = 1
    out = canonical_order(a)
    records = out.resource_logs[0].scope_logs[0].log_records
    assert [r.body.string_value for r in records] == ["a", "b"]
    assert [v.int_value for v in records[1].attributes[0].value.array_value.values] == [2, 1]
