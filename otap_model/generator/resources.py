"""The simulated fleet: services deployed as pods on hosts, each pod one OTLP resource with its
instrumentation scopes. Resource and scope messages are built once and copied into requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from .anyvalue import add_attributes
from .entropy import Entropy
from .profiles import Profile
from .vocabulary import LANGUAGES, REGIONS, SCHEMA_URLS, SERVICES, Language, ServiceSpec

_LANGUAGE_SCHEMA = {"java": 0, "go": 1, "python": 2, "nodejs": 1, "dotnet": 2, "rust": 1}


@dataclass(frozen=True)
class Scope:
    """An instrumentation scope: its message (built once) and the ScopeX schema_url."""

    msg: InstrumentationScope
    schema_url: str


@dataclass(frozen=True)
class Host:
    name: str
    region: str
    zone: str
    resource: Resource = field(compare=False)


@dataclass
class Instance:
    """One running process of a service (a pod): one OTLP resource."""

    index: int
    service: ServiceSpec
    language: Language
    host: Host
    pod: str
    resource: Resource
    schema_url: str
    start_ns: int  # process start, the start_time of its cumulative metrics
    scopes: dict[str, Scope]  # role -> scope: server, http_client, rpc, db, messaging, app, log:<name>, runtime


def make_scope(name: str, version: str, schema_url: str, sparse: bool, attrs: tuple[tuple[str, Any], ...] = ()) -> Scope:
    msg = InstrumentationScope(name=name)
    if not sparse:
        if version:
            msg.version = version
        add_attributes(msg.attributes, attrs)
    return Scope(msg, "" if sparse else schema_url)


def _host(ent: Entropy, i: int, profile: Profile) -> Host:
    region = REGIONS[i % len(REGIONS)]
    zone = region + "abc"[ent.py.randrange(3)]
    octets = (ent.py.randrange(0, 64), ent.py.randrange(1, 255), ent.py.randrange(1, 255))
    name = f"ip-10-{octets[0]}-{octets[1]}-{octets[2]}.{region}.compute.internal"
    res = Resource()
    attrs: list[tuple[str, Any]] = [("host.name", name)]
    if not profile.sparse:
        attrs += [
            ("host.id", "i-0" + ent.hex(16)),
            ("host.arch", "amd64" if i % 5 else "arm64"),
            ("host.type", ("m6i.2xlarge", "m7g.xlarge", "c6i.4xlarge")[i % 3]),
            ("os.type", "linux"),
            ("os.description", "Linux 6.1.112-124.190.amzn2023.x86_64"),
            ("cloud.provider", "aws"),
            ("cloud.platform", "aws_ec2"),
            ("cloud.region", region),
            ("cloud.availability_zone", zone),
            ("cloud.account.id", "123456789012"),
        ]
    add_attributes(res.attributes, attrs)
    return Host(name, region, zone, res)


def build_hosts(ent: Entropy, profile: Profile) -> list[Host]:
    return [_host(ent, i, profile) for i in range(profile.hosts)]


def build_fleet(ent: Entropy, profile: Profile, epoch_ns: int) -> list[Instance]:
    """Every pod of every service, in a fixed order (service, replica)."""
    hosts = build_hosts(ent, profile)
    instances: list[Instance] = []
    for spec in SERVICES:
        lang = LANGUAGES[spec.language]
        version = f"{ent.py.randrange(1, 4)}.{ent.py.randrange(0, 30)}.{ent.py.randrange(0, 12)}"
        replicaset = ent.k8s_suffix(10)
        for _ in range(ent.py.randint(*profile.instances)):
            host = hosts[ent.py.randrange(len(hosts))]
            pod = f"{spec.name}-{replicaset}-{ent.k8s_suffix(5)}"
            instances.append(_instance(ent, profile, len(instances), spec, lang, version, host, pod, epoch_ns))
    return instances


def _instance(
    ent: Entropy, profile: Profile, index: int, spec: ServiceSpec, lang: Language, version: str, host: Host,
    pod: str, epoch_ns: int,
) -> Instance:
    res = Resource()
    attrs: list[tuple[str, Any]] = [("service.name", spec.name)]
    if not profile.sparse:
        attrs += [
            ("service.namespace", spec.namespace),
            ("service.version", version),
            ("service.instance.id", ent.uuid4()),
            ("deployment.environment.name", "production"),
            ("host.name", host.name),
            ("host.arch", "amd64"),
            ("os.type", "linux"),
            ("k8s.namespace.name", spec.namespace),
            ("k8s.deployment.name", spec.name),
            ("k8s.pod.name", pod),
            ("k8s.node.name", host.name),
            ("container.name", spec.name),
            ("cloud.provider", "aws"),
            ("cloud.region", host.region),
            ("cloud.availability_zone", host.zone),
            ("telemetry.sdk.name", "opentelemetry"),
            ("telemetry.sdk.language", lang.name),
            ("telemetry.sdk.version", lang.sdk_version),
        ]
        if lang.name == "java":
            attrs += [("process.runtime.name", "OpenJDK Runtime Environment"), ("process.runtime.version", "21.0.5+11-LTS"),
                      ("process.pid", 1)]
    add_attributes(res.attributes, attrs)
    schema_url = SCHEMA_URLS[_LANGUAGE_SCHEMA[lang.name]]
    sparse = profile.sparse
    app_name = f"com.example.{spec.name.replace('-', '')}" if lang.name in ("java", "dotnet") else spec.name
    app_attrs: tuple[tuple[str, Any], ...] = (("code.namespace", app_name),) if lang.name == "java" else ()
    scopes = {
        "server": make_scope(*lang.server_scope, schema_url, sparse),
        "http_client": make_scope(*lang.http_client_scope, schema_url, sparse),
        "rpc": make_scope(*lang.rpc_scope, schema_url, sparse),
        "db": make_scope(*lang.db_scope, "", sparse),
        "messaging": make_scope(*lang.messaging_scope, "", sparse),
        "app": make_scope(app_name, version, "", sparse, app_attrs),
        "runtime": make_scope(*lang.runtime_meter, schema_url, sparse),
    }
    for name in lang.log_scopes:
        scopes["log:" + name] = make_scope(name, "", "", sparse)
    start = epoch_ns - ent.py.randrange(600, 86_400 * 7) * 1_000_000_000 - ent.py.randrange(1_000_000_000)
    return Instance(index, spec, lang, host, pod, res, "" if sparse else schema_url, start, scopes)
