"""Traces: whole request trees across services (server span, internal work, database calls, calls
to other services whose server spans nest under the client span), batched as SDK exporters and
collectors batch them: spans in end order, a request holding many traces, a trace that does not fit
continuing in the next request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from .anyvalue import Attrs, add_attributes
from .batching import write_origins
from .entropy import Entropy
from .profiles import Profile
from .resources import Instance, Scope, build_fleet
from .timeline import Arrivals, start_instant
from .vocabulary import (
    DB_OPERATIONS,
    DB_PEERS,
    ERRORS_SHORT,
    EXCEPTIONS,
    INTERNAL_OPERATIONS,
    KAFKA_TOPICS,
    STACK_FRAMES,
    USER_AGENTS,
)
from .workload import Endpoint, Workload, pascal, plural

MAX_DEPTH = 6
SERVER, CLIENT, INTERNAL, PRODUCER, CONSUMER = (
    Span.SPAN_KIND_SERVER, Span.SPAN_KIND_CLIENT, Span.SPAN_KIND_INTERNAL, Span.SPAN_KIND_PRODUCER,
    Span.SPAN_KIND_CONSUMER,
)
_TRACE_STATES = ("ot=th:8;rv:3a9f1c0e2b4d57", "congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
                 "dd=s:1;o:rum;t.dm:-1")
_FLAGS_LANGS = frozenset({"java", "go", "dotnet"})  # SDKs that report the parent-is-remote flag bits
_OLD_SEMCONV = frozenset({"java", "go"})  # instrumentations still on db.statement / net.peer.name


class SpanRec:
    """A span before it is written into a request (kept light: built by the thousand)."""

    __slots__ = ("attrs", "dropped", "end", "events", "flags", "inst", "kind", "links", "name", "parent",
                 "scope", "span_id", "start", "status", "trace_id", "trace_state")

    def __init__(self, inst: Instance, scope: Scope, trace_id: bytes, span_id: bytes, parent: bytes, name: str,
                 kind: int, start: int, end: int, trace_state: str, flags: int) -> None:
        self.inst, self.scope, self.trace_id, self.span_id, self.parent = inst, scope, trace_id, span_id, parent
        self.name, self.kind, self.start, self.end = name, kind, start, end
        self.trace_state, self.flags = trace_state, flags
        self.attrs: list[tuple[str, Any]] = []
        self.events: list[tuple[int, str, Attrs]] = []
        self.links: list[tuple[bytes, bytes, str, Attrs]] = []
        self.status: tuple[int, str] | None = None
        self.dropped = 0


class TraceFactory:
    """Builds one trace at a time."""

    def __init__(self, ent: Entropy, profile: Profile, epoch_ns: int) -> None:
        self.ent, self.py, self.profile = ent, ent.py, profile
        self.fleet = build_fleet(ent, profile, epoch_ns)
        self.work = Workload(ent, profile)
        self.by_service: dict[str, list[Instance]] = {}
        for inst in self.fleet:
            self.by_service.setdefault(inst.service.name, []).append(inst)
        self.sparse = profile.sparse

    # -- helpers --------------------------------------------------------------------------------
    def _pick(self, service: str) -> Instance:
        pods = self.by_service[service]
        return pods[self.py.randrange(len(pods))]

    def _flags(self, inst: Instance, remote: bool) -> int:
        if self.sparse or inst.language.name not in _FLAGS_LANGS:
            return 0
        return 0x301 if remote else 0x101

    def _new(self, inst: Instance, scope: Scope, ctx: tuple[bytes, str], parent: bytes, name: str, kind: int,
             start: int, dur: int, remote: bool, out: list[SpanRec]) -> SpanRec:
        span = SpanRec(inst, scope, ctx[0], self.ent.span_id(), parent, name, 0 if self.sparse else kind, start,
                       start + dur, "" if self.sparse else ctx[1], self._flags(inst, remote and bool(parent)))
        out.append(span)
        return span

    def _exception(self, span: SpanRec, ep_noun: str) -> None:
        inst = span.inst
        etype, msg = self.py.choice(EXCEPTIONS[inst.language.name])
        fmt = {"noun": ep_noun, "Noun": pascal(ep_noun), "id": self.work.entity_id(), "svc": inst.service.name,
               "line": self.py.randrange(20, 400), "line2": self.py.randrange(20, 400), "hex": self.ent.hex(6)}
        msg = msg.format(**fmt)
        trace = f"{etype}: {msg}\n" + STACK_FRAMES[inst.language.name].format(**fmt)
        when = span.start + int((span.end - span.start) * (0.5 + 0.5 * self.py.random()))
        attrs: list[tuple[str, Any]] = [("exception.type", etype), ("exception.message", msg),
                                        ("exception.stacktrace", trace)]
        if inst.language.name == "python":
            attrs.append(("exception.escaped", "False"))
        span.events.append((when, "exception", attrs))
        span.status = (Status.STATUS_CODE_ERROR, msg if span.kind != SERVER or inst.language.name != "java" else "")

    def _layout(self, start: int, dur: int, n: int) -> list[tuple[int, int]]:
        """Sequential child windows inside a parent window, with gaps and a long-tailed split."""
        if n == 0:
            return []
        py = self.py
        weights = [py.lognormvariate(0.0, 0.7) for _ in range(n)]
        usable = dur * (0.55 + 0.4 * py.random())
        total = sum(weights)
        gap = (dur - usable) / (n + 1)
        out, t, end = [], start + gap, start + dur
        for w in weights:
            child_start = min(int(t) + py.randrange(1_000), end - 1)
            d = int(usable * w / total * (0.75 + 0.2 * py.random()))
            out.append((child_start, max(1, min(d, end - child_start))))
            t += usable * w / total + gap
        return out

    # -- spans ----------------------------------------------------------------------------------
    def _server(self, inst: Instance, ep: Endpoint, ctx: tuple[bytes, str], parent: bytes, start: int, dur: int,
                depth: int, remote: bool, entry: bool, out: list[SpanRec]) -> bool:
        """A server span and its subtree; returns whether it failed."""
        py, work = self.py, self.work
        path = work.path(ep)
        name = ep.name
        if ep.protocol == "http" and ep.has_id and py.random() < self.profile.raw_name_share:
            name = f"{ep.method} {path}"
        kind = CONSUMER if ep.protocol == "kafka" else SERVER
        scope = inst.scopes["messaging" if ep.protocol == "kafka" else "server"]
        span = self._new(inst, scope, ctx, parent, name, kind, start, dur, remote, out)
        failed = py.random() < ep.error_rate
        # children
        plan: list[str] = []
        if not ep.health:
            if depth + 2 <= MAX_DEPTH:
                fanout = 0.45 if depth == 1 else 0.25
                plan += ["call:" + callee for callee in inst.service.calls if py.random() < fanout]
            if inst.service.db and depth + 1 <= MAX_DEPTH:
                n_db = 12 + py.randrange(20) if py.random() < 0.03 else int(py.expovariate(0.8))
                plan += ["db"] * n_db
            if depth + 1 <= MAX_DEPTH and py.random() < 0.3:
                plan.insert(py.randrange(len(plan) + 1), "internal")
            writes = ep.method == "POST" if ep.protocol == "http" else ep.method.startswith("Create")
            if writes and depth + 1 <= MAX_DEPTH and py.random() < 0.3:
                plan.append("produce")
        child_failed = False
        for step, (cstart, cdur) in zip(plan, self._layout(start, dur, len(plan))):
            if step == "db":
                child_failed |= self._db(inst, ctx, span.span_id, cstart, cdur, out)
            elif step == "internal":
                self._internal(inst, ep, ctx, span.span_id, cstart, cdur, depth + 1, out)
            elif step == "produce":
                self._produce(inst, ctx, span.span_id, cstart, cdur, out)
            else:
                child_failed |= self._call(inst, step[5:], ctx, span.span_id, cstart, cdur, depth + 1, out)
        failed = failed or (child_failed and py.random() < 0.4)
        if not self.sparse:
            self._server_attrs(span, inst, ep, path, failed, entry)
            if failed and py.random() < 0.8:
                self._exception(span, ep.noun)
            elif failed:
                span.status = (Status.STATUS_CODE_ERROR, "" if ep.protocol == "http" else py.choice(ERRORS_SHORT))
            if ep.protocol == "grpc" and inst.language.name == "go":
                rx = py.randrange(40, 4_000)
                span.events.append((start + 20_000 + py.randrange(50_000), "message",
                                    (("message.type", "RECEIVED"), ("message.id", 1), ("message.uncompressed_size", rx))))
                span.events.append((span.end - 20_000 - py.randrange(10_000), "message",
                                    (("message.type", "SENT"), ("message.id", 1),
                                     ("message.uncompressed_size", py.randrange(20, 20_000)))))
            if ep.protocol == "kafka":
                for _ in range(1 if py.random() < 0.9 else py.randrange(2, 6)):
                    attrs: Attrs = (("messaging.kafka.message.offset", py.randrange(10**6, 10**8)),) \
                        if py.random() < 0.3 else ()
                    span.links.append((self.ent.trace_id(), self.ent.span_id(), "", attrs))
            if py.random() < 0.001:
                span.dropped = 1 + py.randrange(16)
        elif ep.protocol == "http":
            span.attrs.append(("http.route", ep.route))
        return failed

    def _server_attrs(self, span: SpanRec, inst: Instance, ep: Endpoint, path: str, failed: bool, entry: bool) -> None:
        py, work = self.py, self.work
        a = span.attrs
        if ep.protocol == "http":
            status = (500 if py.random() < 0.7 else 503) if failed else (
                404 if py.random() < 0.02 else 201 if ep.method == "POST" else 200)
            a += [("http.request.method", ep.method), ("url.path", path), ("url.scheme", "http"),
                  ("http.route", ep.route), ("http.response.status_code", status),
                  ("server.address", inst.service.name), ("server.port", 8080),
                  ("network.protocol.version", "1.1"), ("client.address", work.client_ip() if entry else work.pod_ip()),
                  ("user_agent.original", py.choice(USER_AGENTS) if entry else USER_AGENTS[4 + py.randrange(3)])]
            if entry and py.random() < 0.6:
                a.append(("enduser.id", work.user()))
        elif ep.protocol == "grpc":
            a += [("rpc.system", "grpc"), ("rpc.service", ep.route), ("rpc.method", ep.method),
                  ("rpc.grpc.status_code", (14 if py.random() < 0.5 else 2) if failed else 0),
                  ("network.peer.address", work.pod_ip())]
        else:
            a += [("messaging.system", "kafka"), ("messaging.operation.type", "process"),
                  ("messaging.destination.name", ep.route),
                  ("messaging.consumer.group.name", inst.service.name),
                  ("messaging.destination.partition.id", str(py.randrange(12))),
                  ("messaging.kafka.message.offset", py.randrange(10**6, 10**8))]
        if inst.language.name == "java":
            a.append(("thread.name", py.choice(inst.language.thread_names)))

    def _call(self, inst: Instance, callee_name: str, ctx: tuple[bytes, str], parent: bytes, start: int, dur: int,
              depth: int, out: list[SpanRec]) -> bool:
        """A client span and the callee's server span under it."""
        py, work = self.py, self.work
        callee = self._pick(callee_name)
        ep = work.endpoint(callee_name)
        while ep.health:
            ep = work.endpoint(callee_name)
        proto = "grpc" if ep.protocol == "grpc" else "http"
        scope = inst.scopes["rpc" if proto == "grpc" else "http_client"]
        name = ep.name if proto == "grpc" else ep.method
        path = self.work.path(ep)
        if proto == "http" and ep.has_id and py.random() < self.profile.raw_name_share:
            name = f"{ep.method} {path}"
        span = self._new(inst, scope, ctx, parent, name, CLIENT, start, dur, False, out)
        net = min(dur // 4, 80_000 + int(py.lognormvariate(11.5, 0.5)))
        failed = self._server(callee, ep, ctx, span.span_id, start + net, max(1, dur - 2 * net), depth + 1,
                              True, False, out)
        if self.sparse:
            return failed
        old = inst.language.name in _OLD_SEMCONV
        if proto == "http":
            port = 8080
            span.attrs += [("http.request.method", ep.method),
                           ("url.full", f"http://{callee_name}:{port}{path}"),
                           ("http.response.status_code", 500 if failed else 200)]
        else:
            port = 50051
            span.attrs += [("rpc.system", "grpc"), ("rpc.service", ep.route), ("rpc.method", ep.method),
                           ("rpc.grpc.status_code", 14 if failed else 0)]
        span.attrs += [("net.peer.name", callee_name), ("net.peer.port", port)] if old else \
            [("server.address", callee_name), ("server.port", port)]
        if failed:
            span.status = (Status.STATUS_CODE_ERROR, "" if proto == "http" else py.choice(ERRORS_SHORT))
        return failed

    def _db(self, inst: Instance, ctx: tuple[bytes, str], parent: bytes, start: int, dur: int,
            out: list[SpanRec]) -> bool:
        py = self.py
        assert inst.service.db is not None
        system, dbname = inst.service.db
        op, statement = py.choice(DB_OPERATIONS[system])
        table = plural(py.choice(inst.service.nouns).replace("-", "_"))
        statement = statement.format(table=table)
        name = f"{op} {dbname}.{table}" if system in ("postgresql", "mongodb") else op
        if self.profile.raw_name_share and py.random() < self.profile.raw_name_share:
            # unsanitised statements with literal ids, used as the span name by some instrumentations
            statement = statement.replace("$1", self.work.entity_id()).replace("?", self.work.entity_id(), 1)
            name = statement
        dur = min(dur, self.ent.lognormal_ns(400_000, 0.9))
        span = self._new(inst, inst.scopes["db"], ctx, parent, name, CLIENT, start, dur, False, out)
        failed = py.random() < 0.004
        if self.sparse:
            return failed
        host, port = DB_PEERS[system]
        if inst.language.name in _OLD_SEMCONV:
            span.attrs += [("db.system", system), ("db.name", dbname), ("db.statement", statement),
                           ("db.operation", op), ("net.peer.name", host), ("net.peer.port", port)]
        else:
            span.attrs += [("db.system", system), ("db.namespace", dbname), ("db.query.text", statement),
                           ("db.operation.name", op), ("server.address", host), ("server.port", port)]
        if failed:
            self._exception(span, table)
        return failed

    def _internal(self, inst: Instance, ep: Endpoint, ctx: tuple[bytes, str], parent: bytes, start: int,
                  dur: int, depth: int, out: list[SpanRec]) -> None:
        py = self.py
        name = py.choice(INTERNAL_OPERATIONS).format(Noun=pascal(ep.noun))
        span = self._new(inst, inst.scopes["app"], ctx, parent, name, INTERNAL, start, dur, False, out)
        if self.sparse:
            return
        span.attrs.append(("code.function", name))
        if py.random() < 0.5:
            span.attrs.append(("code.namespace", inst.scopes["app"].msg.name))
        if py.random() < 0.05:
            span.events.append((start + dur // 3, "cache miss", (("cache.key", f"{ep.noun}:{self.work.entity_id()}"),)))
        elif py.random() < 0.03:
            span.events.append((start + dur // 2, "retry", (("retry.attempt", 1 + py.randrange(3)),
                                                            ("retry.backoff_ms", float(py.randrange(10, 500))))))
        if py.random() < 0.3:
            span.status = (Status.STATUS_CODE_OK, "")
        if inst.service.db and depth + 1 <= MAX_DEPTH and py.random() < 0.4:
            for cstart, cdur in self._layout(start, dur, 1 + int(py.expovariate(1.0))):
                self._db(inst, ctx, span.span_id, cstart, cdur, out)

    def _produce(self, inst: Instance, ctx: tuple[bytes, str], parent: bytes, start: int, dur: int,
                 out: list[SpanRec]) -> None:
        py = self.py
        topic = py.choice(sorted(set(KAFKA_TOPICS.values())))
        span = self._new(inst, inst.scopes["messaging"], ctx, parent, f"{topic} publish", PRODUCER, start,
                         min(dur, self.ent.lognormal_ns(900_000, 0.6)), False, out)
        if not self.sparse:
            span.attrs += [("messaging.system", "kafka"), ("messaging.operation.type", "publish"),
                           ("messaging.destination.name", topic),
                           ("messaging.destination.partition.id", str(py.randrange(12)))]

    # -- traces ---------------------------------------------------------------------------------
    def trace(self, start: int) -> list[SpanRec]:
        """One whole trace beginning at `start`, spans in the order they end (SDK export order)."""
        py = self.py
        r = py.random()
        if r < 0.55:
            root = "frontend" if py.random() < 0.6 else "api-gateway"
        elif r < 0.65:
            root = py.choice(sorted(KAFKA_TOPICS))
        else:
            root = self.fleet[py.randrange(len(self.fleet))].service.name
        ep = self.work.endpoint(root)
        trace_state = py.choice(_TRACE_STATES) if py.random() < 0.03 else ""
        ctx = (self.ent.trace_id(), trace_state)
        depth_factor = 1.0 + 2.5 * (root in ("frontend", "api-gateway"))
        dur = self.ent.lognormal_ns(ep.median_ns * depth_factor, ep.sigma)
        out: list[SpanRec] = []
        remote = ep.protocol == "kafka" or root not in ("frontend", "api-gateway")
        self._server(self._pick(root), ep, ctx, b"", start, dur, 1, remote, True, out)
        out.sort(key=lambda s: s.end)
        return out


def _write(req: ExportTraceServiceRequest, spans: list[SpanRec]) -> None:
    for add, recs in write_origins(req.resource_spans, "scope_spans", "spans", spans):
        for rec in recs:
            s = add()
            s.trace_id = rec.trace_id
            s.span_id = rec.span_id
            if rec.parent:
                s.parent_span_id = rec.parent
            if rec.trace_state:
                s.trace_state = rec.trace_state
            if rec.flags:
                s.flags = rec.flags
            s.name = rec.name
            if rec.kind:
                s.kind = rec.kind  # type: ignore[assignment]
            s.start_time_unix_nano = rec.start
            s.end_time_unix_nano = rec.end
            if rec.attrs:
                add_attributes(s.attributes, rec.attrs)
            if rec.dropped:
                s.dropped_attributes_count = rec.dropped
            for when, name, attrs in rec.events:
                ev = s.events.add()
                ev.time_unix_nano = when
                ev.name = name
                add_attributes(ev.attributes, attrs)
            for trace_id, span_id, trace_state, attrs in rec.links:
                ln = s.links.add()
                ln.trace_id = trace_id
                ln.span_id = span_id
                if trace_state:
                    ln.trace_state = trace_state
                add_attributes(ln.attributes, attrs)
            if rec.status is not None:
                s.status.code = rec.status[0]  # type: ignore[assignment]
                if rec.status[1]:
                    s.status.message = rec.status[1]


def generate_traces(count: int, batch_size: int, seed: int, profile: Profile) -> Iterator[ExportTraceServiceRequest]:
    """`count` spans in requests of `batch_size` spans."""
    ent = Entropy(seed, "traces/" + profile.name)
    epoch = start_instant(ent)
    factory = TraceFactory(ent, profile, epoch)
    arrivals = Arrivals(ent, epoch, rate_per_s=150.0)
    pending: list[SpanRec] = []
    emitted = 0
    while emitted < count:
        want = min(batch_size, count - emitted)
        while len(pending) < want:
            pending.extend(factory.trace(arrivals.next()))
        batch, pending = pending[:want], pending[want:]
        req = ExportTraceServiceRequest()
        _write(req, batch)
        emitted += want
        yield req
