"""Hypothesis strategies for OTLP export requests covering every field the OTAP model carries.

Every AnyValue kind (empty, string, bool, int, double, bytes, nested maps and lists, empty
containers, empty strings/bytes), present and absent optional fields, proto3 defaults next to
non-default values, the full uint64 range of timestamps, all five metric types with exemplars,
buckets and quantiles. Importable by other test modules:

    from tests.strategies import logs_requests, traces_requests, metrics_requests, otlp_requests

Not generated: fields OTAP has no column for and that ``from_otlp`` rejects (``entity_refs``,
``key_strindex``, ``string_value_strindex``), NaN doubles (NaN != NaN defeats message equality),
fields of older OTLP versions that the current protos reserve (tests/test_otlp_legacy.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.metrics.v1 import metrics_pb2 as mp
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from .relations import check_relations

__all__ = [
    "any_values",
    "check_relations",
    "key_values",
    "logs_requests",
    "metrics_requests",
    "otlp_requests",
    "traces_requests",
]

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
small_u32 = st.one_of(st.just(0), u32)
times = st.one_of(st.just(0), st.integers(1_600_000_000 * 10**9, 1_900_000_000 * 10**9), u64)
doubles = st.floats(allow_nan=False)
words = st.sampled_from(["", "a", "svc", "GET /api", "déjà vu", "x" * 40, "日本語"])
texts = st.one_of(words, st.text(max_size=12))
maybe_text = st.one_of(st.just(""), texts)
blobs = st.binary(max_size=12)


def _scalar_value() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        st.just(AnyValue()),
        texts.map(lambda v: AnyValue(string_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        i64.map(lambda v: AnyValue(int_value=v)),
        doubles.map(lambda v: AnyValue(double_value=v)),
        blobs.map(lambda v: AnyValue(bytes_value=v)),
    )


def _kvlist(children: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
    """A map with unique keys (OTLP requires it); some entries have no value at all."""
    entries = st.dictionaries(texts, st.one_of(st.none(), children), max_size=4)
    return entries.map(
        lambda d: AnyValue(
            kvlist_value=KeyValueList(
                values=[KeyValue(key=k) if v is None else KeyValue(key=k, value=v) for k, v in d.items()]
            )
        )
    )


def _array(children: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
    return st.lists(children, max_size=4).map(lambda vs: AnyValue(array_value=ArrayValue(values=vs)))


any_values: st.SearchStrategy[AnyValue] = st.recursive(
    _scalar_value(), lambda children: st.one_of(_kvlist(children), _array(children)), max_leaves=8
)


def _key_value(key: str, value: AnyValue | None) -> KeyValue:
    return KeyValue(key=key) if value is None else KeyValue(key=key, value=value)


# attribute lists may repeat keys and hold absent values: OTAP keeps one row per KeyValue
key_values = st.lists(
    st.builds(_key_value, texts, st.one_of(st.none(), any_values, _scalar_value())), max_size=4
)
ids16 = st.one_of(st.binary(min_size=16, max_size=16), st.just(bytes(16)))
ids8 = st.binary(min_size=8, max_size=8)
opt_id16 = st.one_of(st.just(b""), ids16)
opt_id8 = st.one_of(st.just(b""), ids8)


@st.composite
def resources(draw: Any) -> Resource | None:
    if draw(st.booleans()):
        return None
    return Resource(attributes=draw(key_values), dropped_attributes_count=draw(small_u32))


@st.composite
def scopes(draw: Any) -> InstrumentationScope | None:
    if draw(st.integers(0, 3)) == 0:
        return None
    return InstrumentationScope(
        name=draw(maybe_text),
        version=draw(maybe_text),
        attributes=draw(key_values),
        dropped_attributes_count=draw(small_u32),
    )


def _envelope(draw: Any, res_cls: Any, scope_cls: Any, scope_field: str, items_field: str, items: Any) -> Any:
    res_kwargs: dict[str, Any] = {"schema_url": draw(maybe_text)}
    resource = draw(resources())
    if resource is not None:
        res_kwargs["resource"] = resource
    scope_list = []
    for _ in range(draw(st.integers(0, 2))):
        kwargs: dict[str, Any] = {"schema_url": draw(maybe_text), items_field: draw(st.lists(items, max_size=4))}
        scope = draw(scopes())
        if scope is not None:
            kwargs["scope"] = scope
        scope_list.append(scope_cls(**kwargs))
    return res_cls(**res_kwargs, **{scope_field: scope_list})


# ---- logs ------------------------------------------------------------------------------------


@st.composite
def log_records(draw: Any) -> LogRecord:
    lr = LogRecord(
        time_unix_nano=draw(times),
        observed_time_unix_nano=draw(times),
        severity_number=draw(st.integers(0, 24)),
        severity_text=draw(maybe_text),
        attributes=draw(key_values),
        dropped_attributes_count=draw(small_u32),
        flags=draw(st.sampled_from([0, 1, 0x101, 2**32 - 1])),
        trace_id=draw(opt_id16),
        span_id=draw(opt_id8),
        event_name=draw(maybe_text),
    )
    body = draw(st.one_of(st.none(), any_values))
    if body is not None:
        lr.body.CopyFrom(body)
    return lr


@st.composite
def logs_requests(draw: Any) -> ExportLogsServiceRequest:
    """ExportLogsServiceRequest with 0-3 resources, 0-2 scopes each, 0-4 records each."""
    n = draw(st.integers(0, 3))
    return ExportLogsServiceRequest(
        resource_logs=[
            _envelope(draw, ResourceLogs, ScopeLogs, "scope_logs", "log_records", log_records()) for _ in range(n)
        ]
    )


# ---- traces ----------------------------------------------------------------------------------


@st.composite
def spans(draw: Any) -> Span:
    start = draw(times)
    span = Span(
        trace_id=draw(ids16),
        span_id=draw(ids8),
        trace_state=draw(st.sampled_from(["", "rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"])),
        parent_span_id=draw(opt_id8),
        flags=draw(st.sampled_from([0, 1, 0x100, 0x301])),
        name=draw(maybe_text),
        kind=draw(st.integers(0, 5)),
        start_time_unix_nano=start,
        end_time_unix_nano=draw(st.one_of(st.just(0), times, st.integers(0, 10**10).map(lambda d: (start + d) % 2**64))),
        attributes=draw(key_values),
        dropped_attributes_count=draw(small_u32),
        dropped_events_count=draw(small_u32),
        dropped_links_count=draw(small_u32),
    )
    for _ in range(draw(st.integers(0, 2))):
        span.events.add(
            time_unix_nano=draw(times),
            name=draw(maybe_text),
            attributes=draw(key_values),
            dropped_attributes_count=draw(small_u32),
        )
    for _ in range(draw(st.integers(0, 2))):
        span.links.add(
            trace_id=draw(ids16),
            span_id=draw(ids8),
            trace_state=draw(st.sampled_from(["", "a=b"])),
            attributes=draw(key_values),
            dropped_attributes_count=draw(small_u32),
            flags=draw(st.sampled_from([0, 1, 0x300])),
        )
    if draw(st.booleans()):
        span.status.CopyFrom(Status(code=draw(st.integers(0, 2)), message=draw(maybe_text)))
    return span


@st.composite
def traces_requests(draw: Any) -> ExportTraceServiceRequest:
    """ExportTraceServiceRequest with spans carrying events, links, status and attributes."""
    n = draw(st.integers(0, 3))
    return ExportTraceServiceRequest(
        resource_spans=[_envelope(draw, ResourceSpans, ScopeSpans, "scope_spans", "spans", spans()) for _ in range(n)]
    )


# ---- metrics ---------------------------------------------------------------------------------


@st.composite
def exemplars(draw: Any) -> mp.Exemplar:
    ex = mp.Exemplar(
        time_unix_nano=draw(times),
        filtered_attributes=draw(key_values),
        span_id=draw(opt_id8),
        trace_id=draw(opt_id16),
    )
    value = draw(st.sampled_from(["none", "int", "double"]))
    if value == "int":
        ex.as_int = draw(i64)
    elif value == "double":
        ex.as_double = draw(doubles)
    return ex


def _common_point(draw: Any, cls: Any, with_exemplars: bool = True) -> Any:
    dp = cls(
        start_time_unix_nano=draw(times),
        time_unix_nano=draw(times),
        attributes=draw(key_values),
        flags=draw(st.sampled_from([0, 1])),
    )
    if with_exemplars:
        dp.exemplars.extend(draw(st.lists(exemplars(), max_size=2)))
    return dp


@st.composite
def number_points(draw: Any) -> mp.NumberDataPoint:
    dp = _common_point(draw, mp.NumberDataPoint)
    value = draw(st.sampled_from(["none", "int", "double"]))
    if value == "int":
        dp.as_int = draw(i64)
    elif value == "double":
        dp.as_double = draw(doubles)
    return dp


def _optional_doubles(draw: Any, dp: Any, names: tuple[str, ...]) -> None:
    for name in names:
        if draw(st.booleans()):
            setattr(dp, name, draw(st.one_of(st.just(0.0), doubles)))


@st.composite
def histogram_points(draw: Any) -> mp.HistogramDataPoint:
    dp = _common_point(draw, mp.HistogramDataPoint)
    dp.count = draw(st.one_of(st.just(0), u64))
    bounds = draw(st.lists(doubles, max_size=4))
    dp.explicit_bounds.extend(bounds)
    dp.bucket_counts.extend(draw(st.lists(u64, max_size=5)))
    _optional_doubles(draw, dp, ("sum", "min", "max"))
    return dp


@st.composite
def buckets(draw: Any) -> mp.ExponentialHistogramDataPoint.Buckets:
    return mp.ExponentialHistogramDataPoint.Buckets(
        offset=draw(st.integers(-(2**31), 2**31 - 1)), bucket_counts=draw(st.lists(u64, max_size=4))
    )


@st.composite
def exp_histogram_points(draw: Any) -> mp.ExponentialHistogramDataPoint:
    dp = _common_point(draw, mp.ExponentialHistogramDataPoint)
    dp.count = draw(st.one_of(st.just(0), u64))
    dp.scale = draw(st.integers(-(2**31), 2**31 - 1))
    dp.zero_count = draw(st.one_of(st.just(0), u64))
    dp.zero_threshold = draw(st.one_of(st.just(0.0), doubles))
    for side in ("positive", "negative"):
        if draw(st.booleans()):
            getattr(dp, side).CopyFrom(draw(buckets()))
    _optional_doubles(draw, dp, ("sum", "min", "max"))
    return dp


@st.composite
def summary_points(draw: Any) -> mp.SummaryDataPoint:
    dp = _common_point(draw, mp.SummaryDataPoint, with_exemplars=False)
    dp.count = draw(st.one_of(st.just(0), u64))
    dp.sum = draw(st.one_of(st.just(0.0), doubles))
    for q, v in draw(st.lists(st.tuples(st.one_of(st.just(0.0), doubles), doubles), max_size=3)):
        dp.quantile_values.add(quantile=q, value=v)
    return dp


@st.composite
def metrics(draw: Any) -> mp.Metric:
    m = mp.Metric(name=draw(texts), description=draw(maybe_text), unit=draw(maybe_text), metadata=draw(key_values))
    kind = draw(st.sampled_from(["empty", "gauge", "sum", "histogram", "exponential_histogram", "summary"]))
    temporality = st.integers(0, 2)
    if kind == "gauge":
        m.gauge.SetInParent()
        m.gauge.data_points.extend(draw(st.lists(number_points(), max_size=3)))
    elif kind == "sum":
        m.sum.SetInParent()
        m.sum.data_points.extend(draw(st.lists(number_points(), max_size=3)))
        m.sum.aggregation_temporality = draw(temporality)
        m.sum.is_monotonic = draw(st.booleans())
    elif kind == "histogram":
        m.histogram.SetInParent()
        m.histogram.data_points.extend(draw(st.lists(histogram_points(), max_size=3)))
        m.histogram.aggregation_temporality = draw(temporality)
    elif kind == "exponential_histogram":
        m.exponential_histogram.SetInParent()
        m.exponential_histogram.data_points.extend(draw(st.lists(exp_histogram_points(), max_size=3)))
        m.exponential_histogram.aggregation_temporality = draw(temporality)
    elif kind == "summary":
        m.summary.SetInParent()
        m.summary.data_points.extend(draw(st.lists(summary_points(), max_size=3)))
    return m


@st.composite
def metrics_requests(draw: Any) -> ExportMetricsServiceRequest:
    """ExportMetricsServiceRequest with every metric type (and metrics with no data)."""
    n = draw(st.integers(0, 3))
    return ExportMetricsServiceRequest(
        resource_metrics=[
            _envelope(draw, mp.ResourceMetrics, mp.ScopeMetrics, "scope_metrics", "metrics", metrics())
            for _ in range(n)
        ]
    )


otlp_requests = st.one_of(logs_requests(), traces_requests(), metrics_requests())
