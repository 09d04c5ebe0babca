"""Metrics: every pod and host reports its metrics once per collection cycle (10-60 s, jittered
between cycles); all points of one export share the cycle's timestamp, cumulative series keep
their start time and grow, delta series start at the previous cycle. Distributions (histogram,
exponential histogram, summary) are built from simulated observations, not drawn bucket by bucket.
A request holds the exports of many sources; an export that does not fit continues in the next."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from .anyvalue import add_attributes
from .batching import write_origins
from .entropy import Entropy
from .metric_catalogue import (
    HOST_METRICS,
    HOST_SCOPES,
    HOST_SCRAPER_VERSION,
    MULTIVARIATE_ENTITIES,
    MULTIVARIATE_METRICS,
    QUANTILES,
    Attrs,
    MetricDef,
    service_metrics,
)
from .profiles import Profile
from .resources import Scope, build_fleet, build_hosts, make_scope
from .timeline import NS_PER_S, start_instant
from .workload import Workload

_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_DELTA_LANGS = frozenset({"nodejs", "dotnet"})  # pods whose exporters are configured for delta temporality
_MAX_EXP_BUCKETS = 160  # the SDK default max_size of exponential histograms
_EXP_START_SCALE = 20


@dataclass(eq=False)
class Series:
    """One metric of one source and the state of its series between cycles."""

    mdef: MetricDef
    scope: Scope
    attrs: list[Attrs]
    base: np.ndarray  # per-series typical level or rate
    state: np.ndarray  # cumulative value / AR term
    buckets: np.ndarray | None = None  # cumulative histogram bucket counts
    extrema: np.ndarray | None = None  # cumulative (sum, min, max) of histograms and summaries
    volatile: bool = False  # high-cardinality: attributes carry ids that change every cycle


@dataclass(eq=False)
class Source:
    """A resource that exports metrics: a pod (SDK) or a host (collector agent)."""

    resource: Resource
    schema_url: str
    start_ns: int
    interval_ns: int
    series: list[Series] = field(default_factory=list)
    prev_ns: int = 0


@dataclass(eq=False)
class Chunk:
    """The points of one metric of one export (possibly a part of them)."""

    inst: Source
    scope: Scope
    mdef: MetricDef
    time: int
    start: int
    points: list[tuple[Any, ...]]
    exemplars: list[list[tuple[Any, ...]]] | None


class MetricFactory:
    def __init__(self, ent: Entropy, profile: Profile, epoch_ns: int) -> None:
        self.ent, self.py, self.rng, self.profile = ent, ent.py, ent.np, profile
        self.work = Workload(ent, profile)
        self.sources: list[Source] = []
        if profile.multivariate:
            self._multivariate_sources(epoch_ns)
        else:
            self._service_sources(epoch_ns)
            if not profile.sparse:
                self._host_sources(epoch_ns)
        self.queue: list[tuple[int, int]] = []
        for i, src in enumerate(self.sources):
            first = epoch_ns + self.py.randrange(src.interval_ns)
            src.prev_ns = first - src.interval_ns
            self.queue.append((first, i))
        heapq.heapify(self.queue)

    # -- sources --------------------------------------------------------------------------------
    def _series(self, mdef: MetricDef, scope: Scope, attrs: list[Attrs], volatile: bool = False) -> Series:
        n = len(attrs)
        base = mdef.level * self.rng.lognormal(0.0, mdef.spread if mdef.kind in ("gauge", "sum") else 0.5, n)
        s = Series(mdef, scope, attrs, base, np.zeros(n), volatile=volatile)
        if mdef.kind == "sum" and mdef.monotonic:
            s.state = base * self.rng.uniform(100, 10_000, n)  # counters that have been running a while
        if mdef.kind == "histogram":
            s.buckets = np.zeros((n, len(mdef.bounds) + 1), dtype=np.uint64)
        if mdef.kind in ("histogram", "summary"):
            s.extrema = np.tile(np.array([0.0, np.inf, -np.inf]), (n, 1))
        return s

    def _interval(self) -> int:
        return self.py.choice((10, 15, 30, 60, 60)) * NS_PER_S

    def _service_sources(self, epoch_ns: int) -> None:
        sparse = self.profile.sparse
        prom = {}
        for inst in build_fleet(self.ent, self.profile, epoch_ns):
            src = Source(inst.resource, inst.schema_url, inst.start_ns, self._interval())
            if inst.language.name == "go" and not sparse:
                prom[inst.index] = make_scope("github.com/open-telemetry/opentelemetry-collector-contrib/receiver/"
                                          "prometheusreceiver", "0.111.0", "", sparse)
            seen = set()
            for mdef, attrs in service_metrics(inst.service, self.work):
                if sparse:
                    if mdef.kind not in ("gauge", "sum") or mdef.name in seen:
                        continue
                    seen.add(mdef.name)
                    attrs = [()]
                scope = prom[inst.index] if mdef.scope == "prometheus" else inst.scopes[mdef.scope]
                if mdef.name == "app.operations" and inst.language.name in _DELTA_LANGS:
                    mdef = replace(mdef, delta=True)
                volatile = self.profile.user_pool == 0 and mdef.exemplars
                src.series.append(self._series(mdef, scope, attrs, volatile))
            self.sources.append(src)

    def _host_sources(self, epoch_ns: int) -> None:
        scopes = {k: make_scope(name, HOST_SCRAPER_VERSION, "", False) for k, name in HOST_SCOPES.items()}
        for host in build_hosts(self.ent, self.profile):
            boot = epoch_ns - self.py.randrange(3_600, 90 * 86_400) * NS_PER_S
            src = Source(host.resource, "https://opentelemetry.io/schemas/1.9.0", boot, self._interval())
            src.series = [self._series(mdef, scopes[mdef.scope], list(attrs)) for mdef, attrs in HOST_METRICS]
            self.sources.append(src)

    def _multivariate_sources(self, epoch_ns: int) -> None:
        scope = make_scope("github.com/open-telemetry/opentelemetry-collector-contrib/receiver/hostmetricsreceiver",
                       HOST_SCRAPER_VERSION, "", False)
        keys = [k for k, _ in MULTIVARIATE_ENTITIES]
        for host in build_hosts(self.ent, self.profile):
            entities: list[Attrs] = []
            cluster = f"prod-{host.region}"
            for _ in range(1 + self.py.randrange(3)):
                values = [self.py.choice(vals) for _, vals in MULTIVARIATE_ENTITIES]
                entities.append((("k8s.cluster.name", cluster), ("k8s.node.name", host.name), *zip(keys, values),
                                 ("topology.zone", host.zone), ("entity.index", len(entities))))
            boot = epoch_ns - self.py.randrange(3_600, 90 * 86_400) * NS_PER_S
            src = Source(host.resource, "https://opentelemetry.io/schemas/1.9.0", boot, 10 * NS_PER_S)
            for name, unit, is_int, monotonic, level, volatility, quantum in MULTIVARIATE_METRICS:
                mdef = MetricDef(name, unit, "", "sum" if monotonic else "gauge", "host", is_int=is_int,
                                 monotonic=monotonic, level=level, spread=0.3 if volatility else 0.0,
                                 volatility=volatility, quantum=quantum)
                src.series.append(self._series(mdef, scope, entities))
            self.sources.append(src)

    # -- one export -----------------------------------------------------------------------------
    def export(self) -> list[Chunk]:
        """The next export in time order: every metric of one source at one collection time."""
        t, i = heapq.heappop(self.queue)
        src = self.sources[i]
        jitter = int(self.rng.normal(0.0, 3e6)) + self.py.randrange(1_000)
        heapq.heappush(self.queue, (t + src.interval_ns + jitter, i))
        dt = (t - src.prev_ns) / NS_PER_S
        chunks = [c for s in src.series if (c := self._collect(src, s, t, dt)) is not None]
        src.prev_ns = t
        return chunks

    def _attrs(self, s: Series) -> list[Attrs]:
        if not s.volatile:
            return s.attrs
        work, out = self.work, []
        for a in s.attrs:
            extra: list[tuple[str, Any]] = [("enduser.id", work.user())]
            route = next((v for k, v in a if k == "http.route"), None)
            if route is not None:
                extra.append(("url.path", route.replace("{id}", work.entity_id())))
            out.append((*a, *extra))
        return out

    def _collect(self, src: Source, s: Series, t: int, dt: float) -> Chunk | None:
        m, rng = s.mdef, self.rng
        n = len(s.attrs)
        sparse = self.profile.sparse
        start = 0 if m.kind == "gauge" or sparse else src.prev_ns if m.delta else src.start_ns
        attrs = self._attrs(s)
        exemplars: list[list[tuple[Any, ...]]] | None = None
        if m.kind == "gauge" or (m.kind == "sum" and not m.monotonic):
            if m.volatility:
                s.state = 0.9 * s.state + m.volatility * rng.standard_normal(n)
            values = s.base * np.exp(s.state)
            if m.unit == "1":
                values = np.minimum(values, 1.0)
            points = list(zip(attrs, _numbers(values, m)))
        elif m.kind == "sum":
            inc = s.base * dt * (rng.lognormal(0.0, m.volatility, n) if m.volatility else 1.0)
            if m.is_int:
                inc = np.floor(inc + rng.random(n))
            before = _quantize(s.state, m)
            s.state = s.state + inc
            reported = _quantize(s.state, m)
            points = list(zip(attrs, _numbers(reported - before if m.delta else reported, m)))
            if m.exemplars and not sparse:
                exemplars = [self._exemplars(src, t, 1, 0.1) if v > 0 else [] for v in inc.tolist()]
        elif m.kind == "histogram":
            points, exemplars = self._histogram(src, s, attrs, t, dt)
        elif m.kind == "exp_histogram":
            points = self._exp_histogram(s, attrs, dt)
        else:
            points = self._summary(s, attrs, dt)
        if not points:
            return None
        return Chunk(src, s.scope, m, t, start, points, exemplars)

    def _observations(self, s: Series, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(series index, value) of every observation made during the cycle."""
        m, rng = s.mdef, self.rng
        counts = rng.poisson(s.base * dt)
        if m.kind == "summary":
            counts = np.maximum(counts, 1)  # a summary's quantiles need at least one observation
        which = np.repeat(np.arange(len(counts)), counts)
        if m.signed:
            values = rng.normal(m.median, m.spread, len(which))
        else:
            values = m.median * rng.lognormal(0.0, m.spread, len(which))
        return which, values

    def _histogram(self, src: Source, s: Series, attrs: list[Attrs], t: int, dt: float
                   ) -> tuple[list[tuple[Any, ...]], list[list[tuple[Any, ...]]] | None]:
        m = s.mdef
        assert s.buckets is not None and s.extrema is not None
        which, values = self._observations(s, dt)
        n, nb = len(attrs), len(m.bounds) + 1
        idx = np.searchsorted(np.asarray(m.bounds), values, side="left")
        s.buckets += np.bincount(which * nb + idx, minlength=n * nb).reshape(n, nb).astype(np.uint64)
        ext = s.extrema
        ext[:, 0] += np.bincount(which, weights=values, minlength=n)
        np.minimum.at(ext[:, 1], which, values)
        np.maximum.at(ext[:, 2], which, values)
        counts = s.buckets.sum(axis=1).tolist()
        buckets = s.buckets.tolist()
        sums, mins, maxs = ext[:, 0].tolist(), ext[:, 1].tolist(), ext[:, 2].tolist()
        bounds = list(m.bounds)
        points = [(attrs[i], counts[i], sums[i], buckets[i], bounds, mins[i], maxs[i]) for i in range(n)]
        exemplars = None
        if m.exemplars and not self.profile.sparse:
            recent = np.full(n, np.nan)
            recent[which] = values
            exemplars = [self._exemplars(src, t, v, 0.25) if v == v else [] for v in recent.tolist()]
        return points, exemplars

    def _exp_histogram(self, s: Series, attrs: list[Attrs], dt: float) -> list[tuple[Any, ...]]:
        which, values = self._observations(s, dt)
        points = []
        order = np.argsort(which, kind="stable")
        which, values = which[order], values[order]
        splits = np.searchsorted(which, np.arange(len(attrs) + 1))
        for i in range(len(attrs)):
            v = values[splits[i] : splits[i + 1]]
            if len(v) == 0:
                continue  # delta temporality: no measurement, no point
            points.append((attrs[i], *_exponential(v)))
        return points

    def _summary(self, s: Series, attrs: list[Attrs], dt: float) -> list[tuple[Any, ...]]:
        assert s.extrema is not None
        which, values = self._observations(s, dt)
        n = len(attrs)
        s.extrema[:, 0] += np.bincount(which, weights=values, minlength=n)
        s.state = s.state + np.bincount(which, minlength=n)
        points = []
        for i in range(n):
            q = np.quantile(values[which == i], QUANTILES).tolist()
            points.append((attrs[i], int(s.state[i]), float(s.extrema[i, 0]), list(zip(QUANTILES, q))))
        return points

    def _exemplars(self, src: Source, t: int, value: Any, share: float) -> list[tuple[Any, ...]]:
        py = self.py
        if py.random() >= share:
            return []
        when = src.prev_ns + int((t - src.prev_ns) * py.random())
        filtered: Attrs = (("client.address", self.work.client_ip()),) if py.random() < 0.3 else ()
        return [(when, value, self.ent.trace_id(), self.ent.span_id(), filtered)]


def _quantize(values: np.ndarray, m: MetricDef) -> np.ndarray:
    """Values at the resolution the source reports in (counters truncate, as tick counts do)."""
    if m.quantum >= 1:
        return np.floor(values / m.quantum) * m.quantum
    if m.quantum:
        return np.round(np.floor(values / m.quantum) * m.quantum, round(-np.log10(m.quantum)))
    return values


def _numbers(values: np.ndarray, m: MetricDef) -> list[Any]:
    if m.quantum and not m.monotonic:
        values = _quantize(values + m.quantum / 2, m)  # gauges round to the nearest step
    return np.rint(values).astype(np.int64).tolist() if m.is_int else values.tolist()


def _exponential(v: np.ndarray) -> tuple[Any, ...]:
    """Exponential histogram of observations: the largest scale (<= 20) whose bucket range fits
    160 buckets, bucket index = ceil(log2(|x|) * 2**scale) - 1, zeros counted apart."""
    pos, neg = v[v > 0], -v[v < 0]
    zero = int(len(v) - len(pos) - len(neg))
    idx_pos = np.ceil(np.log2(pos) * 2.0**_EXP_START_SCALE).astype(np.int64) - 1
    idx_neg = np.ceil(np.log2(neg) * 2.0**_EXP_START_SCALE).astype(np.int64) - 1
    shift = 0
    for idx in (idx_pos, idx_neg):
        if len(idx):
            lo, hi = int(idx.min()), int(idx.max())
            while (hi >> shift) - (lo >> shift) + 1 > _MAX_EXP_BUCKETS:
                shift += 1
    ranges = []
    for idx in (idx_pos, idx_neg):
        if len(idx):
            scaled = idx >> shift
            offset = int(scaled.min())
            ranges.append((offset, np.bincount(scaled - offset).astype(np.uint64).tolist()))
        else:
            ranges.append((0, []))
    total = float(v.sum())
    return (len(v), total, _EXP_START_SCALE - shift, zero, ranges[0], ranges[1], float(v.min()), float(v.max()))


def _write(req: ExportMetricsServiceRequest, chunks: list[Chunk], sparse: bool) -> None:
    origins = write_origins(req.resource_metrics, "scope_metrics", "metrics", chunks, resource_schema_url=not sparse)
    for add, group in origins:
        for chunk in group:
            _write_metric(add(), chunk, sparse)


def _write_metric(metric: Any, c: Chunk, sparse: bool) -> None:
    m = c.mdef
    metric.name = m.name
    if not sparse:
        if m.description:
            metric.description = m.description
        if m.unit:
            metric.unit = m.unit
    if m.scope == "prometheus":  # the Prometheus receiver keeps the scraped type as metadata
        add_attributes(metric.metadata, (("prometheus.type", m.kind),))
    t, start = c.time, c.start
    if m.kind in ("gauge", "sum"):
        if m.kind == "gauge":
            container = metric.gauge
        else:
            container = metric.sum
            container.aggregation_temporality = _DELTA if m.delta else _CUMULATIVE
            container.is_monotonic = m.monotonic
        add = container.data_points.add
        for i, (attrs, value) in enumerate(c.points):
            p = add()
            if start:
                p.start_time_unix_nano = start
            p.time_unix_nano = t
            if type(value) is int:
                p.as_int = value
            else:
                p.as_double = value
            add_attributes(p.attributes, attrs)
            if c.exemplars is not None:
                for when, _, trace_id, span_id, filtered in c.exemplars[i]:
                    ex = p.exemplars.add()
                    ex.time_unix_nano = when
                    ex.as_int = 1
                    ex.trace_id, ex.span_id = trace_id, span_id
                    add_attributes(ex.filtered_attributes, filtered)
    elif m.kind == "histogram":
        metric.histogram.aggregation_temporality = _CUMULATIVE
        add = metric.histogram.data_points.add
        for i, (attrs, count, total, buckets, bounds, lo, hi) in enumerate(c.points):
            p = add()
            p.start_time_unix_nano = start
            p.time_unix_nano = t
            add_attributes(p.attributes, attrs)
            p.count = count
            p.sum = total
            p.bucket_counts.extend(buckets)
            p.explicit_bounds.extend(bounds)
            if count:
                p.min, p.max = lo, hi
            if c.exemplars is not None:
                for when, value, trace_id, span_id, filtered in c.exemplars[i]:
                    ex = p.exemplars.add()
                    ex.time_unix_nano = when
                    ex.as_double = value
                    ex.trace_id, ex.span_id = trace_id, span_id
                    add_attributes(ex.filtered_attributes, filtered)
    elif m.kind == "exp_histogram":
        metric.exponential_histogram.aggregation_temporality = _DELTA
        add = metric.exponential_histogram.data_points.add
        for attrs, count, total, scale, zero, (pos_off, pos), (neg_off, neg), lo, hi in c.points:
            p = add()
            p.start_time_unix_nano = start
            p.time_unix_nano = t
            add_attributes(p.attributes, attrs)
            p.count, p.sum, p.scale, p.min, p.max = count, total, scale, lo, hi
            if zero:
                p.zero_count = zero
            if pos:
                p.positive.offset = pos_off
                p.positive.bucket_counts.extend(pos)
            if neg:
                p.negative.offset = neg_off
                p.negative.bucket_counts.extend(neg)
    else:
        add = metric.summary.data_points.add
        for attrs, count, total, quantiles in c.points:
            p = add()
            p.start_time_unix_nano = start
            p.time_unix_nano = t
            add_attributes(p.attributes, attrs)
            p.count, p.sum = count, total
            for q, value in quantiles:
                qv = p.quantile_values.add()
                qv.quantile, qv.value = q, value


def generate_metrics(count: int, batch_size: int, seed: int, profile: Profile
                     ) -> Iterator[ExportMetricsServiceRequest]:
    """`count` data points in requests of `batch_size` data points."""
    ent = Entropy(seed, "metrics/" + profile.name)
    factory = MetricFactory(ent, profile, start_instant(ent))
    pending: deque[Chunk] = deque()
    pending_points = emitted = 0
    while emitted < count:
        want = min(batch_size, count - emitted)
        while pending_points < want:
            for chunk in factory.export():
                pending.append(chunk)
                pending_points += len(chunk.points)
        batch: list[Chunk] = []
        taken = 0
        while taken < want:
            chunk = pending[0]
            room = want - taken
            if len(chunk.points) <= room:
                batch.append(pending.popleft())
                taken += len(chunk.points)
            else:
                head = Chunk(chunk.inst, chunk.scope, chunk.mdef, chunk.time, chunk.start, chunk.points[:room],
                             None if chunk.exemplars is None else chunk.exemplars[:room])
                chunk.points = chunk.points[room:]
                if chunk.exemplars is not None:
                    chunk.exemplars = chunk.exemplars[room:]
                batch.append(head)
                taken += room
        pending_points -= want
        req = ExportMetricsServiceRequest()
        _write(req, batch, profile.sparse)
        emitted += want
        yield req
