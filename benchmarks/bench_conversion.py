"""OTLP protobuf <-> OTAP conversion throughput, one core.

Builds realistic, deterministic requests (logs with string bodies and five attributes, spans with
attributes, events and links, metrics with all point types) and measures:

* decode: serialized ``Export*ServiceRequest`` bytes -> ``OtapBundle`` (``otap_model.from_otlp``)
* encode: ``OtapBundle`` -> serialized request (``otap_model.to_otlp(...).SerializeToString()``)

Run:  .venv/bin/python -m benchmarks.bench_conversion [--records 5000] [--repeat 15]
Single-threaded: Arrow's thread pools are set to one thread and the numba kernels are serial.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import pyarrow as pa
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otap_model import PayloadType, Signal, from_otlp, to_otlp

SERVICES = [f"service-{i}" for i in range(8)]
ROUTES = [f"/api/v1/{r}/{{id}}" for r in ("orders", "users", "items", "carts", "payments")]
TEMPLATES = [
    "user {u} logged in from 10.0.{a}.{b}",
    "GET {r} returned {s} in {ms} ms",
    "cache miss for key order:{u}, fetching from primary",
    "retrying request {u} after timeout ({ms} ms)",
]


def _resource(request_list, service: str):  # type: ignore[no-untyped-def]
    rx = request_list.add()
    for key, value in (("service.name", service), ("host.name", f"{service}-host-1"), ("service.version", "1.4.2")):
        rx.resource.attributes.add(key=key).value.string_value = value
    return rx


def logs_request(n: int, rnd: random.Random) -> bytes:
    req = ExportLogsServiceRequest()
    per = n // len(SERVICES)
    t0 = 1_700_000_000_000_000_000
    for si, service in enumerate(SERVICES):
        sl = _resource(req.resource_logs, service).scope_logs.add()
        sl.scope.name, sl.scope.version = "app.logger", "2.0.0"
        for i in range(per if si < len(SERVICES) - 1 else n - per * (len(SERVICES) - 1)):
            lr = sl.log_records.add()
            lr.time_unix_nano = t0 + i * 1_000_003
            lr.observed_time_unix_nano = lr.time_unix_nano + 150_000
            lr.severity_number, lr.severity_text = rnd.choice([(9, "INFO"), (9, "INFO"), (13, "WARN"), (17, "ERROR")])
            lr.body.string_value = rnd.choice(TEMPLATES).format(
                u=rnd.randrange(10_000), a=rnd.randrange(256), b=rnd.randrange(256), r=rnd.choice(ROUTES),
                s=rnd.choice([200, 404, 500]), ms=rnd.randrange(900),
            )
            lr.trace_id, lr.span_id, lr.flags = rnd.randbytes(16), rnd.randbytes(8), 1
            lr.attributes.add(key="http.method").value.string_value = rnd.choice(["GET", "POST", "PUT"])
            lr.attributes.add(key="http.route").value.string_value = rnd.choice(ROUTES)
            lr.attributes.add(key="http.status_code").value.int_value = rnd.choice([200, 201, 404, 500])
            lr.attributes.add(key="duration_ms").value.double_value = rnd.random() * 100
            lr.attributes.add(key="user.id").value.string_value = f"u-{rnd.randrange(5000)}"
    return req.SerializeToString()


def traces_request(n: int, rnd: random.Random) -> bytes:
    req = ExportTraceServiceRequest()
    per = n // len(SERVICES)
    t0 = 1_700_000_000_000_000_000
    for service in SERVICES:
        ss = _resource(req.resource_spans, service).scope_spans.add()
        ss.scope.name = "io.opentelemetry.http"
        trace_id = rnd.randbytes(16)
        for i in range(per):
            if i % 10 == 0:
                trace_id = rnd.randbytes(16)
            sp = ss.spans.add(trace_id=trace_id, span_id=rnd.randbytes(8), name=rnd.choice(ROUTES))
            if i % 10:
                sp.parent_span_id = rnd.randbytes(8)
            sp.kind = rnd.choice([1, 2, 3])
            sp.start_time_unix_nano = t0 + i * 7_000_000
            sp.end_time_unix_nano = sp.start_time_unix_nano + rnd.randrange(10**8)
            sp.attributes.add(key="http.method").value.string_value = rnd.choice(["GET", "POST"])
            sp.attributes.add(key="http.route").value.string_value = rnd.choice(ROUTES)
            sp.attributes.add(key="http.status_code").value.int_value = rnd.choice([200, 404, 500])
            sp.attributes.add(key="net.peer.name").value.string_value = rnd.choice(SERVICES)
            if rnd.random() < 0.2:
                ev = sp.events.add(name="exception", time_unix_nano=sp.start_time_unix_nano + 5)
                ev.attributes.add(key="exception.type").value.string_value = "TimeoutError"
            if rnd.random() < 0.05:
                sp.links.add(trace_id=rnd.randbytes(16), span_id=rnd.randbytes(8))
            if rnd.random() < 0.1:
                sp.status.code = 2
    return req.SerializeToString()


def metrics_request(points: int, rnd: random.Random) -> bytes:
    """About `points` data points: gauges, sums, histograms, exponential histograms, summaries."""
    req = ExportMetricsServiceRequest()
    t0 = 1_700_000_000_000_000_000
    per_metric = 10
    n_metrics = max(1, points // per_metric // len(SERVICES))
    for service in SERVICES:
        sm = _resource(req.resource_metrics, service).scope_metrics.add()
        for m in range(n_metrics):
            metric = sm.metrics.add(name=f"metric.{m % 40}", unit="ms", description="a metric")
            kind = m % 5
            container = (metric.gauge, metric.sum, metric.histogram, metric.exponential_histogram, metric.summary)[kind]
            container.SetInParent()
            if kind in (1, 2, 3):
                container.aggregation_temporality = 2
            for p in range(per_metric):
                dp = container.data_points.add(start_time_unix_nano=t0, time_unix_nano=t0 + p * 10**9)
                dp.attributes.add(key="host").value.string_value = f"h{p % 4}"
                dp.attributes.add(key="region").value.string_value = rnd.choice(["eu", "us"])
                if kind < 2:
                    dp.as_double = rnd.random() * 100
                elif kind == 2:
                    dp.count, dp.sum = 50, rnd.random() * 1000
                    dp.explicit_bounds.extend([1, 5, 10, 50, 100])
                    dp.bucket_counts.extend([rnd.randrange(20) for _ in range(6)])
                elif kind == 3:
                    dp.count, dp.sum, dp.scale = 40, rnd.random() * 100, 3
                    dp.positive.offset = 2
                    dp.positive.bucket_counts.extend([rnd.randrange(9) for _ in range(8)])
                else:
                    dp.count, dp.sum = 30, rnd.random() * 300
                    for q in (0.5, 0.9, 0.99):
                        dp.quantile_values.add(quantile=q, value=rnd.random() * 10)
    return req.SerializeToString()


def _data_points(bundle) -> int:  # type: ignore[no-untyped-def]
    dps = (
        PayloadType.NUMBER_DATA_POINTS,
        PayloadType.SUMMARY_DATA_POINTS,
        PayloadType.HISTOGRAM_DATA_POINTS,
        PayloadType.EXP_HISTOGRAM_DATA_POINTS,
    )
    return sum(bundle[pt].num_rows for pt in dps if bundle.get(pt) is not None)


def _time(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(best, median) seconds of `repeat` runs after two warm-up runs.

    The best run is the cost without interference from other processes on a shared machine; the
    median shows how much that interference was."""
    fn()
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return min(samples), statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000, help="log records / spans / data points per request")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    rnd = random.Random(42)
    cases = [
        ("logs", Signal.LOGS, logs_request(args.records, rnd), "log records", lambda b: b.num_rows),
        ("traces", Signal.TRACES, traces_request(args.records, rnd), "spans", lambda b: b.num_rows),
        ("metrics", Signal.METRICS, metrics_request(args.records, rnd), "data points", _data_points),
    ]
    print(f"records/s, best (median) of {args.repeat} runs")
    print(f"{'signal':8} {'unit':12} {'records':>8} {'bytes':>9} {'decode rec/s':>22} {'encode rec/s':>22}")
    for name, signal, data, unit, count in cases:
        bundle = from_otlp(data, signal)
        n = count(bundle)
        dec = _time(lambda data=data, signal=signal: from_otlp(data, signal), args.repeat)
        enc = _time(lambda bundle=bundle: to_otlp(bundle).SerializeToString(), max(3, args.repeat // 3))
        decode = f"{n / dec[0]:,.0f} ({n / dec[1]:,.0f})"
        encode = f"{n / enc[0]:,.0f} ({n / enc[1]:,.0f})"
        print(f"{name:8} {unit:12} {n:>8} {len(data):>9} {decode:>22} {encode:>22}")


if __name__ == "__main__":
    main()
