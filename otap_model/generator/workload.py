"""The requests the simulated system serves: the endpoints of every service and the variable parts
of requests (entity ids, user names, client addresses), drawn with the skew of real traffic
(popular items and users recur) or, for the high-cardinality profile, practically unique."""

from __future__ import annotations

from dataclasses import dataclass

from .entropy import Entropy
from .profiles import Profile
from .vocabulary import FIRST_NAMES, HTTP_METHOD_WEIGHTS, KAFKA_TOPICS, LAST_NAMES, SERVICES, ServiceSpec

_UNBOUNDED = 1_000_000_000


def plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


def pascal(text: str) -> str:
    return "".join(part.capitalize() for part in text.replace("-", " ").split())


@dataclass(frozen=True)
class Endpoint:
    """One operation a service serves."""

    service: str
    protocol: str  # http, grpc, kafka
    method: str  # HTTP method, RPC method or messaging operation
    route: str  # HTTP route template, RPC service or topic
    noun: str
    has_id: bool
    median_ns: float
    sigma: float
    error_rate: float
    health: bool = False

    @property
    def name(self) -> str:
        if self.protocol == "http":
            return f"{self.method} {self.route}"
        if self.protocol == "grpc":
            return f"{self.route}/{self.method}"
        return f"{self.route} process"


def _endpoints(ent: Entropy, spec: ServiceSpec) -> list[tuple[Endpoint, float]]:
    out: list[tuple[Endpoint, float]] = []
    base = 2e6 * ent.py.lognormvariate(0.0, 0.8)  # per-service speed: 2 ms median, long-tailed across services

    def add(protocol: str, method: str, route: str, noun: str, has_id: bool, weight: float, factor: float,
            health: bool = False) -> None:
        ep = Endpoint(spec.name, protocol, method, route, noun, has_id, base * factor, 0.5 + 0.5 * ent.py.random(),
                      0.0 if health else 0.002 + 0.03 * ent.py.random() ** 3, health)
        out.append((ep, weight))

    if spec.protocol == "http":
        for noun in spec.nouns:
            collection = f"/api/v1/{plural(noun)}"
            for method, weight in HTTP_METHOD_WEIGHTS:
                if method in ("GET",):
                    add("http", method, collection, noun, False, weight * 0.4, 3.0)
                    add("http", method, collection + "/{id}", noun, True, weight, 1.0)
                elif method == "POST":
                    add("http", method, collection, noun, False, weight, 2.5)
                else:
                    add("http", method, collection + "/{id}", noun, True, weight, 1.5)
        add("http", "GET", "/healthz", "health", False, 12.0, 0.05, health=True)
    elif spec.protocol == "grpc":
        rpc_service = f"oteldemo.{pascal(spec.name.removesuffix('-service'))}Service"
        for noun in spec.nouns:
            p = pascal(noun)
            for method, weight, factor, has_id in (("Get" + p, 50.0, 1.0, True), ("List" + pascal(plural(noun)), 20.0, 3.0, False),
                                                   ("Create" + p, 10.0, 2.0, False), ("Update" + p, 5.0, 1.5, True)):
                add("grpc", method, rpc_service, noun, has_id, weight, factor)
        add("grpc", "Check", "grpc.health.v1.Health", "health", False, 8.0, 0.03, health=True)
    else:
        add("kafka", "process", KAFKA_TOPICS[spec.name], spec.nouns[0], True, 1.0, 4.0)
    return out


class Workload:
    """Endpoints per service and the draws of request variables."""

    def __init__(self, ent: Entropy, profile: Profile) -> None:
        self._ent = ent
        self._py = ent.py
        self.profile = profile
        self.endpoints: dict[str, list[Endpoint]] = {}
        self.endpoint_weights: dict[str, list[float]] = {}
        for spec in SERVICES:
            eps = _endpoints(ent, spec)
            self.endpoints[spec.name] = [e for e, _ in eps]
            cum, total = [], 0.0
            for _, w in eps:
                total += w
                cum.append(total)
            self.endpoint_weights[spec.name] = cum
        self._id_pool = profile.id_pool or _UNBOUNDED
        self._user_pool = profile.user_pool or _UNBOUNDED
        self.client_ips = [f"{ent.py.randrange(1, 223)}.{ent.py.randrange(256)}.{ent.py.randrange(256)}."
                           f"{ent.py.randrange(1, 255)}" for _ in range(800)]
        self.pod_ips = [f"10.{ent.py.randrange(0, 64)}.{ent.py.randrange(256)}.{ent.py.randrange(1, 255)}"
                        for _ in range(200)]

    def endpoint(self, service: str) -> Endpoint:
        return self.endpoints[service][self._ent.weighted_index(self.endpoint_weights[service])]

    def _skewed(self, pool: int) -> int:
        """An index into a pool where low indices are popular (heavy head, long tail)."""
        if pool == _UNBOUNDED:
            return self._py.randrange(pool)
        return int(pool * self._py.random() ** 3)

    def entity_id(self) -> str:
        return str(1_000_003 + self._skewed(self._id_pool) * 7_919 % 98_999_989)

    def user(self) -> str:
        if self._user_pool == _UNBOUNDED:
            return f"user-{self._py.randrange(_UNBOUNDED):09d}"
        k = self._skewed(self._user_pool)
        return f"{FIRST_NAMES[k % 30]}.{LAST_NAMES[(k // 30) % 20]}{k // 600 or ''}"

    def client_ip(self) -> str:
        if self.profile.user_pool == 0:
            py = self._py
            return f"{py.randrange(1, 223)}.{py.randrange(256)}.{py.randrange(256)}.{py.randrange(1, 255)}"
        return self.client_ips[int(len(self.client_ips) * self._py.random() ** 2)]

    def pod_ip(self) -> str:
        return self.pod_ips[self._py.randrange(len(self.pod_ips))]

    def path(self, ep: Endpoint) -> str:
        return ep.route.replace("{id}", self.entity_id()) if ep.has_id else ep.route
