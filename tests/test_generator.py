"""The telemetry generator: determinism, exact counts, argument errors, realistic and honest shapes
per signal and profile, conversion to OTAP bundles and the OTLP round trip of generated data."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

import otap_model
from adaptive_arrow.cli import main as cli_main
from otap_model import ROOT_PAYLOAD, PayloadType, Signal, conforms, generate, generate_otlp, to_otlp
from otap_model.generator import PROFILES, GeneratorError

SIGNAL_PROFILES = [(s, p) for p, prof in PROFILES.items() for s in ("logs", "traces", "metrics") if Signal(s) in prof.signals]


def _ser(requests: Any) -> list[bytes]:
    return [r.SerializeToString(deterministic=True) for r in requests]


@cache
def _requests(signal: str, count: int, batch_size: int, seed: int, profile: str) -> tuple[Any, ...]:
    return tuple(generate_otlp(signal, count, batch_size=batch_size, seed=seed, profile=profile))


def _logs(reqs: Any) -> list[Any]:
    return [lr for r in reqs for rl in r.resource_logs for sl in rl.scope_logs for lr in sl.log_records]


def _spans(reqs: Any) -> list[Any]:
    return [s for r in reqs for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _metrics(reqs: Any) -> list[Any]:
    return [m for r in reqs for rm in r.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]


def _points(metric: Any) -> Any:
    return getattr(metric, metric.WhichOneof("data")).data_points


def _roots(req: Any) -> int:
    if isinstance(req, ExportLogsServiceRequest):
        return len(_logs([req]))
    if isinstance(req, ExportMetricsServiceRequest):
        return sum(len(_points(m)) for m in _metrics([req]))
    return len(_spans([req]))


# -- determinism and counts -----------------------------------------------------------------------

@pytest.mark.parametrize(("signal", "profile"), SIGNAL_PROFILES)
def test_same_seed_gives_identical_bytes_and_another_seed_differs(signal: str, profile: str) -> None:
    a = _ser(generate_otlp(signal, 1200, batch_size=500, seed=11, profile=profile))
    b = _ser(generate_otlp(signal, 1200, batch_size=500, seed=11, profile=profile))
    c = _ser(generate_otlp(signal, 1200, batch_size=500, seed=12, profile=profile))
    assert a == b
    assert len(a) == len(c) == 3
    assert all(x != y for x, y in zip(a, c))


@settings(max_examples=25, deadline=None)
@given(signal=st.sampled_from(["logs", "traces", "metrics"]), count=st.integers(0, 700),
       batch_size=st.integers(1, 300))
def test_count_and_batch_size_are_exact(signal: str, count: int, batch_size: int) -> None:
    reqs = list(generate_otlp(signal, count, batch_size=batch_size, seed=3))
    sizes = [_roots(r) for r in reqs]
    assert sum(sizes) == count
    assert len(sizes) == -(-count // batch_size)
    assert all(n == batch_size for n in sizes[:-1])


def test_output_does_not_depend_on_the_process_hash_seed() -> None:
    script = ("import hashlib, sys; from otap_model import generate_otlp; h = hashlib.sha256()\n"
              "for s in ('logs', 'traces', 'metrics'):\n"
              "    for r in generate_otlp(s, 600, batch_size=300, seed=2, profile='high-cardinality'):\n"
              "        h.update(r.SerializeToString(deterministic=True))\n"
              "print(h.hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1


def test_a_longer_run_extends_a_shorter_one() -> None:
    """Batches do not depend on the total count: a run's first requests equal a shorter run's."""
    short = _ser(generate_otlp("traces", 1000, batch_size=500, seed=5))
    long = _ser(generate_otlp("traces", 2000, batch_size=500, seed=5))
    assert long[:2] == short


# -- argument errors ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"signal": "logs", "profile": "bursty"}, "profile: unknown profile 'bursty'"),
        ({"signal": "events"}, "signal: unknown signal 'events'"),
        ({"signal": "logs", "profile": "multivariate"}, "profile: 'multivariate' applies to metrics only, not to logs"),
        ({"signal": "traces", "profile": "multivariate"}, "not to traces"),
        ({"signal": "logs", "batch_size": 0}, "batch_size: expected an integer >= 1, got 0"),
        ({"signal": "logs", "count": -1}, "count: expected an integer >= 0, got -1"),
        ({"signal": "logs", "seed": -5}, "seed: expected an integer >= 0, got -5"),
        ({"signal": "logs", "count": 2.5}, "count: expected an integer >= 0, got 2.5"),
    ],
)
def test_bad_arguments_raise_generator_error_naming_the_argument(kwargs: dict[str, Any], message: str) -> None:
    args = {"count": 10, "batch_size": 5, "seed": 1, "profile": "default"} | kwargs
    signal = args.pop("signal")
    count = args.pop("count")
    for fn in (generate_otlp, generate):  # both validate eagerly, before the first batch is asked for
        with pytest.raises(GeneratorError, match=message.replace("(", r"\(")) as info:
            fn(signal, count, **args)
        assert isinstance(info.value, otap_model.OtapModelError)


# -- ids and timestamps are as random as real SDKs make them --------------------------------------

def test_ids_have_full_entropy_and_are_not_sequential() -> None:
    spans = _spans(_requests("traces", 6000, 3000, 21, "default"))
    span_ids = [s.span_id for s in spans]
    assert len(set(span_ids)) == len(span_ids)
    assert all(len(s) == 8 for s in span_ids) and all(len(s.trace_id) == 16 for s in spans)
    trace_ids = list(dict.fromkeys(s.trace_id for s in spans))
    for ids, width in ((span_ids, 8), (trace_ids, 16)):
        raw = np.frombuffer(b"".join(ids), dtype=np.uint8).reshape(-1, width)
        bits = np.unpackbits(raw, axis=1).mean(axis=0)  # every bit position is a fair coin
        assert np.all(np.abs(bits - 0.5) < 0.1), bits
        counts = np.bincount(raw.ravel(), minlength=256)
        expected = raw.size / 256
        assert counts.min() > 0.5 * expected and counts.max() < 1.6 * expected
        as_int = [int.from_bytes(i, "big") for i in ids]
        steps = np.diff(np.array(as_int[:200], dtype=object))
        assert len(set(steps.tolist())) > 190  # no constant stride anywhere


def test_log_timestamps_move_forward_with_jitter_and_nanosecond_noise() -> None:
    reqs = _requests("logs", 5000, 5000, 2, "default")
    for rl in reqs[0].resource_logs:
        for sl in rl.scope_logs:
            times = [r.time_unix_nano for r in sl.log_records]
            assert times == sorted(times)
    recs = _logs(reqs)
    times = np.array(sorted(r.time_unix_nano for r in recs), dtype=np.int64)
    gaps = np.diff(times)
    assert len(set(gaps.tolist())) > 0.85 * len(gaps)  # jittered, not constant
    assert len(set((times % 1000).tolist())) > 900  # nanosecond digits are noise (Go, Rust, Python, .NET)
    assert 0.1 < np.mean(times % 1_000_000 == 0) < 0.5  # Node.js loggers stamp milliseconds
    assert 1.0 < (times[-1] - times[0]) / 1e9 < 10.0  # ~2,500 records/s
    delays = [r.observed_time_unix_nano - r.time_unix_nano for r in recs if r.observed_time_unix_nano]
    assert delays and min(delays) > 0 and max(delays) < 1_000_000_000


# -- traces ---------------------------------------------------------------------------------------

def test_spans_form_trees_with_realistic_depth_and_long_tailed_durations() -> None:
    spans = _spans(_requests("traces", 6000, 3000, 21, "default"))
    traces: dict[bytes, list[Any]] = collections.defaultdict(list)
    for s in spans:
        traces[s.trace_id].append(s)
    depths: collections.Counter[int] = collections.Counter()
    rootless = 0
    root_durations = []
    for members in traces.values():
        by_id = {s.span_id: s for s in members}
        roots = [s for s in members if not s.parent_span_id]
        if not roots:
            rootless += 1  # only a trace cut by the end of the run (roots end, and are exported, last)
            continue
        assert len(roots) == 1
        root_durations.append(roots[0].end_time_unix_nano - roots[0].start_time_unix_nano)
        for s in members:
            assert s.end_time_unix_nano > s.start_time_unix_nano
            if s.parent_span_id:
                parent_kind = by_id[s.parent_span_id].kind
                assert s.kind != 5  # consumers start traces (and link to the producer)
                assert s.kind != 2 or parent_kind == 3  # a server span with a parent sits under a client span
                assert s.flags in (0, 0x101, 0x301)
            else:
                assert s.flags in (0, 0x101)  # no parent, so no remote parent
            depth, node = 1, s
            while node.parent_span_id:
                parent = by_id[node.parent_span_id]  # every parent link resolves inside the trace
                assert parent.start_time_unix_nano <= node.start_time_unix_nano
                assert node.end_time_unix_nano <= parent.end_time_unix_nano
                node, depth = parent, depth + 1
            depths[depth] += 1
    assert rootless <= 1
    assert set(depths) == {1, 2, 3, 4, 5, 6}
    d = np.array(root_durations, dtype=float)
    assert np.percentile(d, 99) > 5 * np.median(d)  # long tail
    assert len(set(d.tolist())) == len(d)


def test_traces_carry_semantic_attributes_events_links_and_status() -> None:
    spans = _spans(_requests("traces", 6000, 3000, 21, "default"))
    kinds = collections.Counter(s.kind for s in spans)
    assert set(kinds) == {1, 2, 3, 4, 5}
    keys = collections.Counter(kv.key for s in spans for kv in s.attributes)
    for key in ("http.request.method", "url.path", "http.response.status_code", "db.system", "rpc.method",
                "net.peer.name", "server.address"):
        assert keys[key] > 0, key
    assert len(keys) < 80  # keys repeat, as semantic conventions make them
    names = collections.Counter(s.name for s in spans)
    assert names.most_common(1)[0][1] > 100 and len(names) < 1000
    events = [e for s in spans for e in s.events]
    exc = [e for e in events if e.name == "exception"]
    assert exc and all({"exception.type", "exception.message", "exception.stacktrace"} <= {kv.key for kv in e.attributes}
                       for e in exc)
    assert any(s.links for s in spans) and any(s.trace_state for s in spans)
    errors = [s for s in spans if s.status.code == 2]
    assert 0.002 < len(errors) / len(spans) < 0.1 and any(s.status.message for s in errors)


def test_a_request_mixes_many_resources_and_scopes() -> None:
    req = _requests("traces", 6000, 3000, 21, "default")[0]
    assert len(req.resource_spans) >= 20
    services = {kv.value.string_value for rs in req.resource_spans for kv in rs.resource.attributes
                if kv.key == "service.name"}
    assert len(services) >= 15
    keys = {kv.key for kv in req.resource_spans[0].resource.attributes}
    assert {"service.name", "service.version", "service.instance.id", "host.name", "k8s.pod.name",
            "k8s.namespace.name", "cloud.region", "telemetry.sdk.language"} <= keys
    scopes = [ss.scope for rs in req.resource_spans for ss in rs.scope_spans]
    assert all(s.name for s in scopes) and any(s.version for s in scopes)


# -- logs -----------------------------------------------------------------------------------------

SEVERITY_TEXTS = {5: {"DEBUG", "debug", "Debug"}, 9: {"INFO", "info", "Information"},
                  13: {"WARN", "warn", "WARNING", "Warning"}, 17: {"ERROR", "error", "Error"},
                  21: {"FATAL", "fatal", "CRITICAL", "Critical", "ERROR"}}


def test_logs_have_a_severity_mix_templated_bodies_and_trace_context() -> None:
    recs = _logs(_requests("logs", 5000, 5000, 2, "default"))
    sev = collections.Counter(r.severity_number for r in recs)
    assert sev.most_common(1)[0][0] == 9 and {5, 9, 13, 17} <= set(sev)
    for r in recs:
        if r.severity_number:
            assert r.severity_text in SEVERITY_TEXTS[r.severity_number]
        else:
            assert r.event_name  # only events go without severity
    with_trace = [r for r in recs if r.trace_id]
    assert 0.2 < len(with_trace) / len(recs) < 0.7
    assert all(len(r.trace_id) == 16 and len(r.span_id) == 8 and r.flags == 1 for r in with_trace)
    per_trace = collections.Counter(r.trace_id for r in with_trace)
    assert max(per_trace.values()) > 1  # records of one request share its trace
    bodies = [r.body.string_value for r in recs if r.body.HasField("string_value")]
    assert len(set(bodies)) > 0.5 * len(bodies)  # variable parts make bodies differ ...
    prefixes = collections.Counter(b.split(" ")[0] for b in bodies)
    assert prefixes.most_common(1)[0][1] > 0.05 * len(bodies)  # ... but templates repeat
    assert any(r.event_name for r in recs)


def test_logs_carry_every_anyvalue_kind_rare_ones_rarely() -> None:
    recs = _logs(_requests("logs", 20000, 5000, 4, "default"))
    attr_kinds = collections.Counter(kv.value.WhichOneof("value") for r in recs for kv in r.attributes)
    body_kinds = collections.Counter(r.body.WhichOneof("value") for r in recs)
    assert {"string_value", "int_value", "double_value", "bool_value", "bytes_value", "array_value"} <= set(attr_kinds)
    assert {"string_value", "kvlist_value"} <= set(body_kinds)
    assert "kvlist_value" in attr_kinds
    total = sum(attr_kinds.values())
    assert attr_kinds["string_value"] > 0.5 * total
    assert attr_kinds["bytes_value"] + attr_kinds["array_value"] + attr_kinds["kvlist_value"] < 0.01 * total
    assert body_kinds["kvlist_value"] < 0.1 * len(recs)
    keys = {kv.key for r in recs for kv in r.attributes}
    assert {"code.filepath", "code.lineno", "thread.name", "http.request.method", "enduser.id"} <= keys


# -- metrics --------------------------------------------------------------------------------------

def test_default_metrics_cover_every_point_type_and_field() -> None:
    ms = _metrics(_requests("metrics", 10000, 5000, 8, "default"))
    kinds = collections.Counter(m.WhichOneof("data") for m in ms)
    assert set(kinds) == {"gauge", "sum", "histogram", "exponential_histogram", "summary"}
    sums = [m.sum for m in ms if m.HasField("sum")]
    assert {(s.aggregation_temporality, s.is_monotonic) for s in sums} >= {(2, True), (2, False), (1, True)}
    assert any(s.aggregation_temporality == 1 for s in [m.exponential_histogram for m in ms
                                                          if m.HasField("exponential_histogram")])
    names = {m.name for m in ms}
    assert {"http.server.request.duration", "process.cpu.time", "jvm.memory.used", "system.network.io"} <= names
    exemplars = [(m.WhichOneof("data"), e) for m in ms for p in _points(m) if m.WhichOneof("data") != "summary"
                 for e in p.exemplars]
    assert {"histogram", "sum"} <= {k for k, _ in exemplars}
    assert all(len(e.trace_id) == 16 and len(e.span_id) == 8 for _, e in exemplars)
    for m in ms:
        pts = _points(m)
        assert len({p.time_unix_nano for p in pts}) == 1  # one collection, one timestamp
        kind = m.WhichOneof("data")
        for p in pts:
            if kind == "histogram":
                assert len(p.bucket_counts) == len(p.explicit_bounds) + 1
                assert sum(p.bucket_counts) == p.count
            if kind == "exponential_histogram":
                assert sum(p.positive.bucket_counts) + sum(p.negative.bucket_counts) + p.zero_count == p.count
                assert -10 <= p.scale <= 20
            if kind == "summary":
                assert [q.quantile for q in p.quantile_values] == [0.0, 0.25, 0.5, 0.75, 1.0]
            if kind != "gauge":
                assert 0 < p.start_time_unix_nano < p.time_unix_nano
    assert any(len(p.negative.bucket_counts) for m in ms if m.HasField("exponential_histogram") for p in _points(m))
    assert any(m.metadata for m in ms if m.HasField("summary"))


def test_metric_cycles_follow_collection_intervals_with_jitter() -> None:
    reqs = _requests("metrics", 30000, 5000, 8, "default")
    times: dict[str, list[int]] = collections.defaultdict(list)
    for r in reqs:
        for rm in r.resource_metrics:
            ident = next(kv.value.string_value for kv in rm.resource.attributes if kv.key in ("service.instance.id",
                                                                                              "host.id"))
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    times[ident].append(_points(m)[0].time_unix_nano)
    steps = [b - a for ts in times.values() for a, b in zip(sorted(set(ts)), sorted(set(ts))[1:])]
    assert len(steps) > 50
    seconds = np.array(steps) / 1e9
    assert np.all((seconds > 9.9) & (seconds < 60.1))
    assert len(set(steps)) > 0.9 * len(steps)  # jitter between cycles


def test_multivariate_metrics_share_attribute_sets_and_timestamps() -> None:
    req = _requests("metrics", 5000, 5000, 1, "multivariate")[0]
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            by_cycle: dict[int, list[Any]] = collections.defaultdict(list)
            for m in sm.metrics:
                by_cycle[_points(m)[0].time_unix_nano].append(m)
            for metrics in by_cycle.values():
                attr_sets = {tuple(sorted((kv.key, kv.value.SerializeToString()) for kv in p.attributes))
                             for m in metrics for p in _points(m)}
                if len(metrics) == 50:
                    assert len(attr_sets) <= 3  # 50 metrics, the host's 1-3 shared attribute sets
    names = {m.name for m in _metrics([req])}
    assert len(names) == 50 and all(n.startswith("system.") for n in names)


# -- profiles -------------------------------------------------------------------------------------

def test_sparse_profile_leaves_optional_fields_empty() -> None:
    recs = _logs(_requests("logs", 3000, 1500, 6, "sparse"))
    assert not any(r.attributes or r.trace_id or r.observed_time_unix_nano or r.severity_text or r.event_name
                   for r in recs)
    spans = _spans(_requests("traces", 3000, 1500, 6, "sparse"))
    assert not any(s.events or s.links or s.trace_state or s.kind or s.flags or s.HasField("status") for s in spans)
    assert sum(len(s.attributes) for s in spans) < 0.5 * len(spans)
    ms = _metrics(_requests("metrics", 3000, 1500, 6, "sparse"))
    assert {m.WhichOneof("data") for m in ms} <= {"gauge", "sum"}
    assert not any(m.description or m.unit for m in ms)
    assert not any(p.attributes or p.exemplars or p.start_time_unix_nano for m in ms for p in _points(m))
    for reqs in (_requests("logs", 3000, 1500, 6, "sparse"), _requests("metrics", 3000, 1500, 6, "sparse")):
        for r in reqs:
            for rx in getattr(r, r.DESCRIPTOR.fields[0].name):
                assert [kv.key for kv in rx.resource.attributes] == ["service.name"] and not rx.schema_url


def test_high_cardinality_overflows_u16_dictionaries_in_a_long_run() -> None:
    values: set[str] = set()
    for req in generate_otlp("logs", 70_000, batch_size=10_000, seed=9, profile="high-cardinality"):
        for r in _logs([req]):
            values.update(kv.value.string_value for kv in r.attributes if kv.key == "log.record.uid")
    assert len(values) > 65_535


def test_high_cardinality_names_and_values_exceed_u8_quickly() -> None:
    hc = collections.Counter(s.name for s in _spans(_requests("traces", 3000, 1500, 9, "high-cardinality")))
    default = collections.Counter(s.name for s in _spans(_requests("traces", 3000, 1500, 9, "default")))
    assert len(hc) > 2 * len(default) and len(hc) > 1000
    users = {kv.value.string_value for m in _metrics(_requests("metrics", 3000, 1500, 9, "high-cardinality"))
             for p in _points(m) for kv in p.attributes if kv.key == "enduser.id"}
    assert len(users) > 255


# -- OTAP bundles and the OTLP round trip ---------------------------------------------------------

@pytest.mark.parametrize(("signal", "profile"), SIGNAL_PROFILES)
def test_generate_yields_conforming_bundles_that_round_trip(signal: str, profile: str) -> None:
    requests = _requests(signal, 3000, 1500, 13, profile)
    bundles = list(generate(signal, 3000, batch_size=1500, seed=13, profile=profile))
    assert len(bundles) == len(requests) == 2
    for req, bundle in zip(requests, bundles):
        assert bundle.signal is Signal(signal)
        assert bundle.tables
        for pt, table in bundle.tables.items():
            conforms(table, pt)
        if signal != "metrics":
            assert bundle.num_rows == 1500
        else:
            points = sum(bundle.tables[pt].num_rows for pt in (PayloadType.NUMBER_DATA_POINTS,
                         PayloadType.SUMMARY_DATA_POINTS, PayloadType.HISTOGRAM_DATA_POINTS,
                         PayloadType.EXP_HISTOGRAM_DATA_POINTS) if pt in bundle.tables)
            assert points == 1500 and ROOT_PAYLOAD[Signal.METRICS] in bundle.tables
        assert to_otlp(bundle) == req  # exact: generated requests need no normalisation


# -- command line ---------------------------------------------------------------------------------

def test_cli_writes_one_protobuf_file_per_batch(tmp_path: Any) -> None:
    out = tmp_path / "out"
    rc = cli_main(["generate", "--signal", "metrics", "--count", "1100", "--batch-size", "500", "--seed", "4",
                   "--profile", "multivariate", "--out", str(out), "--quiet"])
    assert rc == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["metrics-000000.pb", "metrics-000001.pb", "metrics-000002.pb"]
    expected = _ser(generate_otlp("metrics", 1100, batch_size=500, seed=4, profile="multivariate"))
    assert [(out / f).read_bytes() for f in files] == expected
    parsed = ExportMetricsServiceRequest.FromString((out / files[-1]).read_bytes())
    assert _roots(parsed) == 100


def test_cli_rejects_a_profile_signal_mismatch(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["generate", "--signal", "logs", "--count", "10", "--profile", "multivariate",
                   "--out", str(tmp_path / "x"), "--quiet"])
    assert rc == 2
    assert capsys.readouterr().err == "adaptive-arrow generate: --profile: 'multivariate' applies to metrics only, not to logs\n"
    assert not (tmp_path / "x").exists()
