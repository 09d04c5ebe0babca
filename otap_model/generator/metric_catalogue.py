"""Metric definitions from the OpenTelemetry semantic conventions (HTTP, RPC, DB, JVM, Go, .NET,
process, system) and the attribute sets (series) each source reports for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import Any

from .vocabulary import LANGUAGES, ServiceSpec
from .workload import Workload, plural

Attrs = tuple[tuple[str, Any], ...]

HTTP_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
RPC_BOUNDS_MS = (0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2500.0, 5000.0, 7500.0, 10000.0)
GC_BOUNDS = (0.01, 0.1, 1.0, 10.0)
QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class MetricDef:
    """One metric. ``level``: typical value (gauges, non-monotonic sums) or rate per second
    (monotonic sums, request counts of histograms); ``spread``: log-normal sigma of the level
    across series, or of observations (histograms, summaries); ``median``: the median observation
    of distributions; ``volatility``: relative change per cycle (gauges, non-monotonic sums) or
    relative noise of counter increments, 0 for constants; ``quantum``: the resolution the source
    reports in (4096 for page-sized bytes, 0.01 for clock ticks), 0 for full precision."""

    name: str
    unit: str
    description: str
    kind: str  # gauge | sum | histogram | exp_histogram | summary
    scope: str  # source scope role
    is_int: bool = False
    monotonic: bool = False
    delta: bool = False
    level: float = 1.0
    spread: float = 0.5
    median: float = 1.0
    bounds: tuple[float, ...] = ()
    exemplars: bool = False
    signed: bool = False  # observations of both signs (exponential histogram negative buckets)
    volatility: float = 0.15
    quantum: float = 0.0


def _cart(*dims: tuple[str, tuple[Any, ...]]) -> list[Attrs]:
    keys = [k for k, _ in dims]
    return [tuple(zip(keys, values)) for values in product(*(v for _, v in dims))]


SeriesFn = Callable[[ServiceSpec, Workload], list[Attrs]]


def _http_server(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    out: list[Attrs] = []
    for ep in work.endpoints[spec.name]:
        codes = (201,) if ep.method == "POST" else (200, 404) if ep.has_id else (200,)
        for code in (*codes, 500) if ep.error_rate > 0.01 else codes:
            out.append((("http.request.method", ep.method), ("http.route", ep.route),
                        ("http.response.status_code", code), ("url.scheme", "http"),
                        ("network.protocol.version", "1.1")))
    return out


def _rpc_server(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    return [(("rpc.system", "grpc"), ("rpc.service", ep.route), ("rpc.method", ep.method),
             ("rpc.grpc.status_code", code))
            for ep in work.endpoints[spec.name] for code in ((0, 14) if ep.error_rate > 0.01 else (0,))]


def _http_client(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    return [(("http.request.method", m), ("server.address", callee), ("server.port", 8080),
             ("http.response.status_code", 200)) for callee in spec.calls for m in ("GET", "POST")]


def _db_ops(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    assert spec.db is not None
    system = spec.db[0]
    ops = {"postgresql": ("SELECT", "INSERT", "UPDATE"), "redis": ("GET", "SET"), "mongodb": ("find", "insert"),
           "elasticsearch": ("search", "index")}[system]
    return _cart(("db.system", (system,)), ("db.operation.name", ops),
                 ("db.collection.name", tuple(plural(n.replace("-", "_")) for n in spec.nouns)))


def _const(*dims: tuple[str, tuple[Any, ...]]) -> SeriesFn:
    sets = _cart(*dims)
    return lambda spec, work: sets


def _app_ops(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    return _cart(("operation", ("create", "read", "update", "delete")), ("entity", spec.nouns))


_JVM_POOLS = (("heap", "G1 Eden Space"), ("heap", "G1 Old Gen"), ("heap", "G1 Survivor Space"),
              ("non_heap", "Metaspace"), ("non_heap", "CodeCache"), ("non_heap", "Compressed Class Space"))


def _jvm_pools(spec: ServiceSpec, work: Workload) -> list[Attrs]:
    return [(("jvm.memory.type", t), ("jvm.memory.pool.name", p)) for t, p in _JVM_POOLS]


M = MetricDef
# (definition, series function, languages or None for every language, needs: "http"/"grpc"/"db"/"calls"/None)
SERVICE_METRICS: tuple[tuple[MetricDef, SeriesFn, frozenset[str] | None, str | None], ...] = (
    (M("http.server.request.duration", "s", "Duration of HTTP server requests.", "histogram", "server",
       level=2.0, spread=0.9, median=0.02, bounds=HTTP_BOUNDS, exemplars=True), _http_server, None, "http"),
    (M("http.server.active_requests", "{request}", "Number of active HTTP server requests.", "sum", "server",
       is_int=True, level=4.0, spread=0.6, volatility=0.4), _const(("http.request.method", ("GET", "POST")), ("url.scheme", ("http",))),
     None, "http"),
    (M("rpc.server.duration", "ms", "Measures the duration of inbound RPC.", "histogram", "rpc",
       level=3.0, spread=0.8, median=8.0, bounds=RPC_BOUNDS_MS, exemplars=True), _rpc_server, None, "grpc"),
    (M("http.client.request.duration", "s", "Duration of HTTP client requests.", "histogram", "http_client",
       level=1.5, spread=0.8, median=0.015, bounds=HTTP_BOUNDS), _http_client, None, "calls"),
    (M("db.client.operation.duration", "s", "Duration of database client operations.", "exp_histogram", "db",
       delta=True, level=5.0, spread=1.0, median=0.0008), _db_ops, None, "db"),
    (M("db.client.connection.count", "{connection}", "The number of connections that are currently in state "
       "described by the state attribute.", "sum", "db", is_int=True, level=8.0, spread=0.5, volatility=0.2),
     _const(("db.client.connection.state", ("idle", "used")), ("db.client.connection.pool.name", ("default",))),
     None, "db"),
    (M("process.cpu.time", "s", "Total CPU seconds broken down by different CPU modes.", "sum", "runtime",
       monotonic=True, level=0.4, spread=0.5, volatility=0.3), _const(("cpu.mode", ("user", "system"))), None, None),
    (M("process.memory.usage", "By", "The amount of physical memory in use.", "sum", "runtime", is_int=True,
       level=4e8, spread=0.6, volatility=0.01, quantum=4096), _const(), None, None),
    (M("process.cpu.utilization", "1", "Difference in process.cpu.time since the last measurement, divided by the "
       "elapsed time and number of CPUs available to the process.", "gauge", "runtime", level=0.15, spread=0.8, volatility=0.2),
     _const(), None, None),
    (M("jvm.memory.used", "By", "Measure of memory used.", "sum", "runtime", is_int=True, level=1.2e8, spread=1.0, volatility=0.1),
     _jvm_pools, frozenset({"java"}), None),
    (M("jvm.memory.committed", "By", "Measure of memory committed.", "sum", "runtime", is_int=True, level=2e8,
       spread=1.0, volatility=0.002, quantum=4096), _jvm_pools, frozenset({"java"}), None),
    (M("jvm.gc.duration", "s", "Duration of JVM garbage collection actions.", "histogram", "runtime", level=0.3,
       spread=0.7, median=0.012, bounds=GC_BOUNDS),
     _const(("jvm.gc.name", ("G1 Young Generation",)), ("jvm.gc.action", ("end of minor GC",))),
     frozenset({"java"}), None),
    (M("jvm.thread.count", "{thread}", "Number of executing platform threads.", "sum", "runtime", is_int=True,
       level=30.0, spread=0.5, volatility=0.03),
     _const(("jvm.thread.daemon", (True, False)), ("jvm.thread.state", ("runnable", "waiting", "timed_waiting"))),
     frozenset({"java"}), None),
    (M("jvm.class.loaded", "{class}", "Number of classes loaded since JVM start.", "sum", "runtime", is_int=True,
       monotonic=True, level=0.5, volatility=1.0), _const(), frozenset({"java"}), None),
    (M("jvm.cpu.recent_utilization", "1", "Recent CPU utilization for the process as reported by the JVM.", "gauge",
       "runtime", level=0.1, spread=0.8), _const(), frozenset({"java"}), None),
    (M("go.memory.used", "By", "Memory used by the Go runtime.", "sum", "runtime", is_int=True, level=3e7,
       spread=0.8, volatility=0.05, quantum=8192), _const(("go.memory.type", ("stack", "other"))), frozenset({"go"}), None),
    (M("go.goroutine.count", "{goroutine}", "Count of live goroutines.", "sum", "runtime", is_int=True,
       level=60.0, spread=0.6, volatility=0.1), _const(), frozenset({"go"}), None),
    (M("go.memory.gc.goal", "By", "Heap size target for the end of the GC cycle.", "sum", "runtime", is_int=True,
       level=4e7, spread=0.4, volatility=0.05), _const(), frozenset({"go"}), None),
    (M("go_gc_duration_seconds", "", "A summary of the wall-time pause (stop-the-world) duration in garbage "
       "collection cycles.", "summary", "prometheus", level=0.5, spread=0.6, median=0.0002), _const(),
     frozenset({"go"}), None),
    (M("ntp.offset", "s", "Offset between the local clock and the NTP reference.", "exp_histogram", "runtime",
       delta=True, level=1.0, spread=0.002, median=0.0, signed=True), _const(), frozenset({"go", "rust"}), None),
    (M("dotnet.gc.collections", "{collection}", "The number of garbage collections since the process started.",
       "sum", "runtime", is_int=True, monotonic=True, level=0.2),
     _const(("dotnet.gc.heap.generation", ("gen0", "gen1", "gen2"))), frozenset({"dotnet"}), None),
    (M("v8js.memory.heap.used", "By", "Heap Memory size allocated.", "gauge", "runtime", is_int=True, level=5e7,
       spread=0.6, volatility=0.05), _const(("v8js.heap.space.name", ("new_space", "old_space", "code_space", "large_object_space"))),
     frozenset({"nodejs"}), None),
    (M("process.runtime.cpython.gc_count", "{count}", "Number of times the garbage collector was called.", "sum",
       "runtime", is_int=True, monotonic=True, level=0.8), _const(("generation", ("0", "1", "2"))),
     frozenset({"python"}), None),
    (M("app.operations", "{operation}", "Business operations handled, by entity.", "sum", "app", is_int=True,
       monotonic=True, level=1.5, spread=1.0, exemplars=True), _app_ops, None, None),
)

HOST_SCRAPER_VERSION = "0.111.0"
_HM = "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/hostmetricsreceiver/internal/scraper/"
HOST_SCOPES = {k: _HM + k + "scraper" for k in ("cpu", "memory", "network", "disk", "filesystem", "load")}

HOST_METRICS: tuple[tuple[MetricDef, list[Attrs]], ...] = (
    (M("system.cpu.time", "s", "Total seconds each logical CPU spent on each mode.", "sum", "cpu", monotonic=True,
       level=0.2, spread=0.8, quantum=0.01),
     _cart(("cpu", tuple(f"cpu{i}" for i in range(4))), ("state", ("user", "system", "idle", "iowait")))),
    (M("system.cpu.utilization", "1", "Difference in system.cpu.time since the last measurement per logical CPU, "
       "divided by the elapsed time (value in interval [0,1]).", "gauge", "cpu", level=0.2, spread=0.9, volatility=0.2),
     _cart(("cpu", tuple(f"cpu{i}" for i in range(4))), ("state", ("user", "system", "idle")))),
    (M("system.memory.usage", "By", "Bytes of memory in use.", "sum", "memory", is_int=True, level=4e9, spread=0.7, volatility=0.005, quantum=4096),
     _cart(("state", ("used", "free", "buffered", "cached")))),
    (M("system.network.io", "By", "The number of bytes transmitted and received.", "sum", "network", is_int=True,
       monotonic=True, level=2e6, spread=1.0),
     _cart(("device", ("eth0", "lo")), ("direction", ("receive", "transmit")))),
    (M("system.network.errors", "{errors}", "The number of errors encountered.", "sum", "network", is_int=True,
       monotonic=True, level=0.01), _cart(("device", ("eth0",)), ("direction", ("receive", "transmit")))),
    (M("system.disk.io", "By", "Disk bytes transferred.", "sum", "disk", is_int=True, monotonic=True, level=5e5,
       spread=1.2, quantum=512), _cart(("device", ("nvme0n1", "nvme1n1")), ("direction", ("read", "write")))),
    (M("system.filesystem.utilization", "1", "Fraction of filesystem bytes used.", "gauge", "filesystem",
       level=0.45, spread=0.3, volatility=0.0005),
     _cart(("device", ("/dev/nvme0n1p1",)), ("mountpoint", ("/", "/var/lib/kubelet")), ("type", ("xfs",)))),
    (M("system.cpu.load_average.1m", "{thread}", "Average CPU Load over 1 minute.", "gauge", "load", level=1.5,
       spread=0.6, volatility=0.1, quantum=0.01), [()]),
)

# Multivariate: what a host agent reports per cycle, every metric one point per entity, all sharing
# the entity's attribute set and the cycle's timestamp.
# (name, unit, is_int, monotonic, level, volatility, quantum): see MetricDef.
MULTIVARIATE_METRICS: tuple[tuple[str, str, bool, bool, float, float, float], ...] = (
    ("system.cpu.utilization.user", "1", False, False, 0.2, 0.2, 0.0),
    ("system.cpu.utilization.system", "1", False, False, 0.05, 0.2, 0.0),
    ("system.cpu.utilization.idle", "1", False, False, 0.7, 0.05, 0.0),
    ("system.cpu.utilization.iowait", "1", False, False, 0.01, 0.4, 0.0),
    ("system.cpu.utilization.steal", "1", False, False, 0.002, 0.4, 0.0),
    ("system.cpu.utilization.irq", "1", False, False, 0.001, 0.4, 0.0),
    ("system.cpu.load_average.1m", "{thread}", False, False, 1.5, 0.1, 0.01),
    ("system.cpu.load_average.5m", "{thread}", False, False, 1.4, 0.03, 0.01),
    ("system.cpu.load_average.15m", "{thread}", False, False, 1.3, 0.01, 0.01),
    ("system.cpu.frequency", "Hz", True, False, 2.9e9, 0.02, 1e6),
    ("system.cpu.physical.count", "{cpu}", True, False, 8, 0.0, 0.0),
    ("system.cpu.logical.count", "{cpu}", True, False, 16, 0.0, 0.0),
    ("system.memory.usage.used", "By", True, False, 6e9, 0.005, 4096),
    ("system.memory.usage.free", "By", True, False, 2e9, 0.01, 4096),
    ("system.memory.usage.cached", "By", True, False, 4e9, 0.002, 4096),
    ("system.memory.usage.buffered", "By", True, False, 3e8, 0.002, 4096),
    ("system.memory.utilization", "1", False, False, 0.55, 0.005, 0.0),
    ("system.memory.limit", "By", True, False, 1.6e10, 0.0, 4096),
    ("system.paging.usage", "By", True, False, 1e8, 0.001, 4096),
    ("system.paging.faults", "{fault}", True, True, 200.0, 0.3, 0.0),
    ("system.paging.operations", "{operation}", True, True, 50.0, 0.3, 0.0),
    ("system.disk.io.read", "By", True, True, 3e5, 0.5, 512),
    ("system.disk.io.write", "By", True, True, 9e5, 0.5, 512),
    ("system.disk.operations.read", "{operation}", True, True, 40.0, 0.5, 0.0),
    ("system.disk.operations.write", "{operation}", True, True, 120.0, 0.5, 0.0),
    ("system.disk.io_time", "s", False, True, 0.05, 0.5, 0.001),
    ("system.disk.operation_time", "s", False, True, 0.08, 0.5, 0.001),
    ("system.disk.merged", "{operation}", True, True, 10.0, 0.5, 0.0),
    ("system.disk.pending_operations", "{operation}", True, False, 2, 0.3, 0.0),
    ("system.filesystem.usage.used", "By", True, False, 4e10, 0.0005, 4096),
    ("system.filesystem.usage.free", "By", True, False, 6e10, 0.0003, 4096),
    ("system.filesystem.utilization", "1", False, False, 0.4, 0.0005, 0.0),
    ("system.filesystem.inodes.usage", "{inode}", True, False, 3e5, 0.0005, 0.0),
    ("system.network.io.receive", "By", True, True, 2e6, 0.4, 0.0),
    ("system.network.io.transmit", "By", True, True, 1.5e6, 0.4, 0.0),
    ("system.network.packets.receive", "{packet}", True, True, 3e3, 0.4, 0.0),
    ("system.network.packets.transmit", "{packet}", True, True, 2.5e3, 0.4, 0.0),
    ("system.network.errors.receive", "{error}", True, True, 0.01, 1.0, 0.0),
    ("system.network.errors.transmit", "{error}", True, True, 0.01, 1.0, 0.0),
    ("system.network.dropped.receive", "{packet}", True, True, 0.1, 1.0, 0.0),
    ("system.network.dropped.transmit", "{packet}", True, True, 0.05, 1.0, 0.0),
    ("system.network.connections.tcp", "{connection}", True, False, 300, 0.05, 0.0),
    ("system.network.connections.udp", "{connection}", True, False, 20, 0.05, 0.0),
    ("system.processes.count.running", "{process}", True, False, 4, 0.3, 0.0),
    ("system.processes.count.sleeping", "{process}", True, False, 250, 0.02, 0.0),
    ("system.processes.created", "{process}", True, True, 5.0, 0.5, 0.0),
    ("system.uptime", "s", False, True, 1.0, 0.0, 0.0),
    ("system.thread.count", "{thread}", True, False, 1800, 0.02, 0.0),
    ("system.linux.memory.available", "By", True, False, 8e9, 0.005, 4096),
    ("system.entropy.available", "{bit}", True, False, 3500, 0.05, 0.0),
)

MULTIVARIATE_ENTITIES: tuple[tuple[str, Any], ...] = (
    ("host.role", ("worker", "ingest", "storage", "control-plane")),
    ("node.pool", ("general", "memory-optimized", "compute", "spot")),
)


def service_metrics(spec: ServiceSpec, work: Workload) -> list[tuple[MetricDef, list[Attrs]]]:
    """The metrics (and their series) a pod of `spec` reports."""
    lang = LANGUAGES[spec.language].name
    out = []
    for mdef, series, langs, needs in SERVICE_METRICS:
        if langs is not None and lang not in langs:
            continue
        if needs in ("http", "grpc") and spec.protocol != needs:
            continue
        if (needs == "db" and spec.db is None) or (needs == "calls" and not spec.calls):
            continue
        out.append((mdef, series(spec, work)))
    return out
