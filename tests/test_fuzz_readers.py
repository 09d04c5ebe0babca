"""Random bytes to every reader the other test files do not already fuzz: each returns a result or
raises the project's own exception (never another exception, a crash or a hang; hypothesis's
deadline catches the hang). Protobuf OTLP, envelopes, decoded IPC records and segment files are
fuzzed in test_otlp_errors, test_envelope, test_decoder and test_segment_corruption."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_arrow import Decoder
from adaptive_arrow.envelope_file import read_envelopes
from adaptive_arrow.errors import AdaptiveArrowError
from otap_model import from_otlp_json, from_zipkin_json
from otap_model.errors import OtapModelError
from quiver_store import QuiverError, QuiverStore, SegmentConfig, StoreConfig
from quiver_store.subscriber import ack_log
from quiver_store.wal import sidecar

FUZZ = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))

# JSON-shaped noise reaches deeper than random bytes: valid JSON with the wrong shapes and types
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
otlp_keys = st.sampled_from(["resourceLogs", "resourceSpans", "resourceMetrics", "scopeLogs", "scopeSpans",
                             "logRecords", "spans", "metrics", "attributes", "body", "traceId", "spanId",
                             "timeUnixNano", "gauge", "sum", "histogram", "dataPoints", "value", "kind"])
otlp_shaped = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(otlp_keys, inner, max_size=4),
    max_leaves=30,
)


@FUZZ
@given(st.one_of(st.binary(max_size=300), otlp_shaped.map(json.dumps)), st.sampled_from(["logs", "traces", "metrics", None]))
def test_otlp_json(data, signal):
    with contextlib.suppress(OtapModelError):
        from_otlp_json(data, signal)


zipkin_keys = st.sampled_from(["traceId", "id", "parentId", "name", "kind", "timestamp", "duration",
                               "localEndpoint", "remoteEndpoint", "serviceName", "tags", "annotations", "shared"])
zipkin_shaped = st.lists(
    st.dictionaries(zipkin_keys, json_values | st.text(alphabet="0123456789abcdef", min_size=16, max_size=32)),
    max_size=4,
)


@FUZZ
@given(st.one_of(st.binary(max_size=300), zipkin_shaped.map(json.dumps)))
def test_zipkin_json(data):
    with contextlib.suppress(OtapModelError):
        from_zipkin_json(data)


@FUZZ
@given(st.binary(max_size=400))
def test_decoder_on_raw_bytes(data):
    with contextlib.suppress(AdaptiveArrowError):
        Decoder().decode(data)
    with contextlib.suppress(AdaptiveArrowError):
        Decoder().read_records(data)


@FUZZ
@given(st.binary(max_size=200))
def test_envelope_file(data):
    try:
        for message in read_envelopes(io.BytesIO(data), "fuzz.otap"):
            assert isinstance(message, bytes)
    except AdaptiveArrowError:
        pass


@FUZZ
@given(st.binary(max_size=80))
def test_wal_sidecar(data):
    point, problem = sidecar.decode(data)
    assert point is None or problem is None  # a usable point, or why there is none (or no file)


@FUZZ
@given(st.binary(max_size=120))
def test_ack_checkpoint(data):
    with contextlib.suppress(QuiverError):
        ack_log.decode_checkpoint(data, "ack.checkpoint")


@pytest.mark.parametrize("where", ["wal/quiver.wal", "wal/truncate.offset", "segments/next.seq", "ack.log", "ack.checkpoint"])
@settings(FUZZ, max_examples=60)
@given(data=st.binary(max_size=300), keep_header=st.booleans())
def test_store_open_with_a_random_file(tmp_path_factory, where, data, keep_header, caplog):
    """A store whose WAL, sidecar, floor, ack log or checkpoint is replaced by random bytes (or, with
    keep_header, by the real file's first 30 bytes followed by random bytes) opens or refuses with a
    QuiverError; it never raises anything else."""
    caplog.set_level(logging.CRITICAL)
    path = tmp_path_factory.mktemp("store")
    with QuiverStore.open(path, QUIET) as store:
        store.subscribe("s")
    target = os.path.join(path, where)
    if keep_header and os.path.exists(target):
        with open(target, "rb") as f:
            data = f.read(30) + data
    with open(target, "wb") as f:
        f.write(data)
    try:
        with QuiverStore.open(path, QUIET) as store:
            assert store.segments() == []
    except QuiverError:
        pass
