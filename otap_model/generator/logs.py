"""Logs: records from message templates with variable parts (ids, durations, users, paths), a
severity mix dominated by INFO with the severity text each language's loggers write, attributes the
logging bridges add (code location, thread, MDC), trace context on records emitted inside requests,
and the rarer shapes real pipelines carry (events, structured map bodies, byte and list values)."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from .anyvalue import add_attributes, set_value
from .batching import write_origins
from .entropy import Entropy
from .profiles import Profile
from .resources import Instance, Scope, build_fleet
from .timeline import Arrivals, log_timestamp, start_instant
from .vocabulary import (
    ERRORS_SHORT,
    EVENT_NAMES,
    EXCEPTIONS,
    FEATURE_FLAGS,
    JOBS,
    KAFKA_TOPICS,
    LANGUAGES,
    LOG_TEMPLATES,
    SERVICES,
    STACK_FRAMES,
    USER_AGENTS,
    VERBS,
)
from .workload import Workload, pascal, plural

_CODE_LANGS = frozenset({"python", "go", "rust"})  # bridges that record the code location


class LogRec:
    __slots__ = ("attrs", "body", "event_name", "flags", "inst", "observed", "scope", "sev", "sev_text", "span_id",
                 "time", "trace_id")

    def __init__(self, inst: Instance, scope: Scope, time: int) -> None:
        self.inst, self.scope, self.time = inst, scope, time
        self.observed = 0
        self.sev = 0
        self.sev_text = ""
        self.body: Any = None
        self.attrs: list[tuple[str, Any]] = []
        self.trace_id = self.span_id = b""
        self.flags = 0
        self.event_name = ""


class LogFactory:
    def __init__(self, ent: Entropy, profile: Profile, epoch_ns: int) -> None:
        self.ent, self.py, self.profile = ent, ent.py, profile
        self.fleet = build_fleet(ent, profile, epoch_ns)
        self.work = Workload(ent, profile)
        py = self.py
        # log volume differs by orders of magnitude between services
        volume = {spec.name: ent.py.lognormvariate(0.0, 1.0) for spec in SERVICES}
        self.fleet_cum: list[float] = []
        total = 0.0
        for inst in self.fleet:
            total += volume[inst.service.name]
            self.fleet_cum.append(total)
        self.fields = [[f for _, f, _, _ in string.Formatter().parse(t) if f] for _, t, _, _ in LOG_TEMPLATES]
        # per-service template mix, logger (scope) and code location of each template
        self.template_cum: dict[str, list[float]] = {}
        self.origin: dict[tuple[str, int], tuple[str, str, int]] = {}
        for spec in SERVICES:
            cum, total = [], 0.0
            for i, (_, _, kind, weight) in enumerate(LOG_TEMPLATES):
                w = weight * py.lognormvariate(0.0, 0.5)
                if kind == "access" and spec.protocol != "http":
                    w = 0.0
                if kind == "messaging" and spec.protocol != "kafka":
                    w *= 0.1
                total += w
                cum.append(total)
                lang = LANGUAGES[spec.language]
                logger = lang.log_scopes[py.randrange(len(lang.log_scopes))]
                ext = {"python": "py", "go": "go", "rust": "rs"}.get(lang.name, "")
                self.origin[(spec.name, i)] = (logger, f"{spec.name.replace('-', '_')}/{kind}.{ext}",
                                               py.randrange(20, 900))
            self.template_cum[spec.name] = cum
        self.contexts: dict[int, tuple[bytes, bytes, str]] = {}
        work = self.work
        self.gen: dict[str, Callable[[], Any]] = {
            "client_ip": work.client_ip, "user": work.user, "id": work.entity_id,
            "request_id": ent.uuid4,
            "bytes": lambda: int(py.lognormvariate(8.0, 1.5)),
            "duration_ms": lambda: f"{py.lognormvariate(2.5, 1.1):.1f}",
            "verb": lambda: py.choice(VERBS), "topic": lambda: py.choice(sorted(set(KAFKA_TOPICS.values()))),
            "count": lambda: int(py.lognormvariate(3.0, 1.2)) + 1, "partition": lambda: py.randrange(12),
            "offset": lambda: py.randrange(10**6, 10**8), "active": lambda: py.randrange(1, 20),
            "idle": lambda: py.randrange(0, 10), "waiting": lambda: int(py.expovariate(1.0)),
            "job": lambda: py.choice(JOBS), "hit_miss": lambda: "hit" if py.random() < 0.8 else "miss",
            "flag": lambda: py.choice(FEATURE_FLAGS), "bool": lambda: "true" if py.random() < 0.3 else "false",
            "attempt": lambda: 1 + py.randrange(3), "error_short": lambda: py.choice(ERRORS_SHORT),
            "user_agent_short": lambda: py.choice(USER_AGENTS).split(" ")[0],
            "status_5xx": lambda: py.choice((500, 502, 503, 504)),
        }

    def _values(self, inst: Instance, fields: list[str]) -> dict[str, Any]:
        py, work = self.py, self.work
        vals: dict[str, Any] = {}
        spec = inst.service
        noun = py.choice(spec.nouns)
        for f in fields:
            if f in vals:
                continue
            if f in ("method", "path", "status"):
                ep = work.endpoint(spec.name) if spec.protocol == "http" else work.endpoint("api-gateway")
                vals["method"], vals["path"] = ep.method, work.path(ep)
                vals["status"] = (404 if py.random() < 0.03 else 500 if py.random() < ep.error_rate else
                                  201 if ep.method == "POST" else 200)
            elif f == "noun":
                vals[f] = noun
            elif f == "table":
                vals[f] = plural(noun.replace("-", "_"))
            elif f in ("upstream", "upstream_url"):
                callee = py.choice(spec.calls) if spec.calls else "api-gateway"
                vals["upstream"] = callee
                vals["upstream_url"] = f"http://{callee}:8080/api/v1/{plural(noun)}/{work.entity_id()}"
            elif f == "error_message":
                etype, msg = py.choice(EXCEPTIONS[inst.language.name])
                vals[f] = msg.format(noun=noun, Noun=pascal(noun), id=work.entity_id())
                vals["_etype"] = etype
            else:
                vals[f] = self.gen[f]()
        vals.setdefault("noun", noun)
        return vals

    def _context(self, inst: Instance) -> tuple[bytes, bytes, str]:
        """Trace context of the request an instance is handling: records of one request share it."""
        ctx = self.contexts.get(inst.index)
        r = self.py.random()
        if ctx is None or r > 0.7:
            ctx = (self.ent.trace_id(), self.ent.span_id(), self.ent.uuid4())
        elif r > 0.55:
            ctx = (ctx[0], self.ent.span_id(), ctx[2])  # same request, another span
        self.contexts[inst.index] = ctx
        return ctx

    def record(self, t: int) -> LogRec:
        py, ent = self.py, self.ent
        inst = self.fleet[ent.weighted_index(self.fleet_cum)]
        spec, lang = inst.service, inst.language
        ti = ent.weighted_index(self.template_cum[spec.name])
        sev, template, kind, _ = LOG_TEMPLATES[ti]
        logger, filepath, lineno = self.origin[(spec.name, ti)]
        rec = LogRec(inst, inst.scopes["log:" + logger], log_timestamp(lang.name, t))
        vals = self._values(inst, self.fields[ti])
        text = template.format_map(vals)
        if self.profile.sparse:
            rec.sev, rec.body = sev, text
            return rec
        rec.observed = t + ent.lognormal_ns(40_000, 1.0)
        rec.sev, rec.sev_text, rec.body = sev, lang.severity_text[sev], text
        a = rec.attrs
        if lang.name in _CODE_LANGS:
            a += [("code.filepath", filepath), ("code.function", f"handle_{kind}"), ("code.lineno", lineno)]
        if lang.name in ("java", "python", "dotnet") and lang.thread_names[0]:
            a.append(("thread.name", py.choice(lang.thread_names)))
            if lang.name == "java":
                a.append(("thread.id", 20 + py.randrange(60)))
        in_request = kind not in ("plain",) and py.random() < 0.45
        if in_request:
            rec.trace_id, rec.span_id, request_id = self._context(inst)
            rec.flags = 1
            a.append(("request.id", request_id))
        if self.profile.user_pool == 0:
            a.append(("log.record.uid", ent.ulid(t)))
        self._kind_attrs(rec, kind, vals)
        if lang.name == "nodejs" and py.random() < 0.15:  # pino writes structured JSON bodies
            rec.body = {"level": 30 if sev == 9 else sev * 2 + 10, "msg": text, "pid": 1,
                        "hostname": inst.pod, "req": {"method": vals.get("method", "GET"), "id": py.randrange(10**6)}}
        if py.random() < 0.02:
            self._event(rec, vals)
        if py.random() < 0.0005:
            a.append(("log.record.original", text.encode()))
        if lang.name == "python" and py.random() < 0.01:  # `extra={"ctx": {...}}` of the logging call
            a.append(("ctx", {"tenant": f"t-{self.work.entity_id()[-3:]}", "retries": py.randrange(3),
                              "dry_run": py.random() < 0.1}))
        return rec

    def _kind_attrs(self, rec: LogRec, kind: str, vals: dict[str, Any]) -> None:
        py, a = self.py, rec.attrs
        if kind == "access":
            a += [("http.request.method", vals["method"]), ("url.path", vals["path"]),
                  ("http.response.status_code", vals["status"]), ("client.address", vals["client_ip"]),
                  ("user_agent.original", py.choice(USER_AGENTS)),
                  ("http.server.request.duration", float(vals["duration_ms"]) / 1000.0)]
            if py.random() < 0.01:
                a.append(("http.request.header.accept", ["application/json", "text/plain"]))
        elif kind == "user" and "user" in vals:
            a.append(("enduser.id", vals["user"]))
        elif kind == "messaging":
            a += [("messaging.system", "kafka"), ("messaging.destination.name", vals.get("topic", "orders"))]
            if py.random() < 0.1:
                a.append(("messaging.kafka.message.key", self.ent.span_id()))
        elif kind == "debug" and "hit_miss" in vals:
            a.append(("cache.hit", vals["hit_miss"] == "hit"))
        elif kind == "debug" and "flag" in vals:
            a += [("feature_flag.key", vals["flag"]), ("feature_flag.result.value", vals["bool"] == "true")]
        elif kind == "warn" and "attempt" in vals:
            a.append(("retry.attempt", vals["attempt"]))
        elif kind == "exception" or (kind == "error" and "_etype" in vals):
            inst = rec.inst
            etype, msg = vals.get("_etype"), vals.get("error_message")
            if etype is None:
                etype, msg = py.choice(EXCEPTIONS[inst.language.name])
                msg = msg.format(noun=vals["noun"], Noun=pascal(vals["noun"]), id=self.work.entity_id())
            fmt = {"noun": vals["noun"], "Noun": pascal(vals["noun"]), "svc": inst.service.name,
                   "line": py.randrange(20, 400), "line2": py.randrange(20, 400), "hex": self.ent.hex(6)}
            a += [("exception.type", etype), ("exception.message", msg),
                  ("exception.stacktrace", f"{etype}: {msg}\n" + STACK_FRAMES[inst.language.name].format(**fmt))]

    def _event(self, rec: LogRec, vals: dict[str, Any]) -> None:
        """Turn the record into an event (OTel Events: a name, usually no severity, a map body)."""
        py = self.py
        rec.event_name = py.choice(EVENT_NAMES)
        rec.sev, rec.sev_text = 0, ""
        if rec.event_name == "browser.page_view":
            rec.body = {"url": vals.get("path", "/"), "referrer": "https://www.example.com/",
                        "duration_ms": py.lognormvariate(6.0, 0.8)}
        elif rec.event_name == "feature_flag.evaluation":
            rec.body = None
            rec.attrs.append(("feature_flag.key", py.choice(FEATURE_FLAGS)))
        else:
            rec.body = {"id": self.work.entity_id(), "state": py.choice(VERBS), "count": py.randrange(1, 9),
                        "tags": ["web", "eu"] if py.random() < 0.5 else []}


def _write(req: ExportLogsServiceRequest, recs: list[LogRec]) -> None:
    for add, group in write_origins(req.resource_logs, "scope_logs", "log_records", recs):
        for rec in group:
            r = add()
            r.time_unix_nano = rec.time
            if rec.observed:
                r.observed_time_unix_nano = rec.observed
            if rec.sev:
                r.severity_number = rec.sev  # type: ignore[assignment]
            if rec.sev_text:
                r.severity_text = rec.sev_text
            body = rec.body
            if type(body) is str:
                r.body.string_value = body
            elif body is not None:
                set_value(r.body, body)
            if rec.attrs:
                add_attributes(r.attributes, rec.attrs)
            if rec.trace_id:
                r.trace_id = rec.trace_id
                r.span_id = rec.span_id
                r.flags = rec.flags
            if rec.event_name:
                r.event_name = rec.event_name


def generate_logs(count: int, batch_size: int, seed: int, profile: Profile) -> Iterator[ExportLogsServiceRequest]:
    """`count` log records in requests of `batch_size` records."""
    ent = Entropy(seed, "logs/" + profile.name)
    epoch = start_instant(ent)
    factory = LogFactory(ent, profile, epoch)
    arrivals = Arrivals(ent, epoch, rate_per_s=2_500.0)
    emitted = 0
    while emitted < count:
        n = min(batch_size, count - emitted)
        recs = [factory.record(arrivals.next()) for _ in range(n)]
        req = ExportLogsServiceRequest()
        _write(req, recs)
        emitted += n
        yield req
