"""Generator profiles: the knobs that make one run differ from another in cardinality and density,
so the adaptive encoder meets every case (small dictionaries, overflowing dictionaries, columns that
never appear, multivariate metrics)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import OtapModelError
from ..payload import Signal


class GeneratorError(OtapModelError, ValueError):
    """Invalid generator arguments: unknown profile or signal, profile/signal mismatch, bad counts."""


@dataclass(frozen=True)
class Profile:
    """How the simulated system behaves.

    ``user_pool`` / ``id_pool``: how many distinct user names and entity ids per noun the system
    sees; 0 means unbounded (every draw from a 10^9 space, i.e. practically unique).
    ``raw_name_share``: share of HTTP spans and metric series named after the raw URL path (ids
    included), the classic cardinality explosion of misconfigured instrumentation.
    ``sparse``: only the required fields and a minimal resource; optional fields stay empty.
    ``multivariate``: hosts emit many metrics sharing one attribute set and one timestamp.
    """

    name: str
    signals: frozenset[Signal]
    instances: tuple[int, int]
    hosts: int
    user_pool: int
    id_pool: int
    raw_name_share: float
    sparse: bool = False
    multivariate: bool = False


_ALL = frozenset(Signal)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("default", _ALL, instances=(1, 4), hosts=12, user_pool=5_000, id_pool=2_000, raw_name_share=0.0),
        Profile("high-cardinality", _ALL, instances=(3, 8), hosts=40, user_pool=0, id_pool=0, raw_name_share=0.5),
        Profile("sparse", _ALL, instances=(1, 3), hosts=8, user_pool=2_000, id_pool=1_000, raw_name_share=0.0,
                sparse=True),
        Profile("multivariate", frozenset({Signal.METRICS}), instances=(1, 1), hosts=40, user_pool=0, id_pool=0,
                raw_name_share=0.0, multivariate=True),
    )
}


def resolve(signal: str | Signal, profile: str) -> tuple[Signal, Profile]:
    """Validate a (signal, profile) pair and return both resolved."""
    try:
        sig = Signal(signal)
    except ValueError:
        raise GeneratorError(
            f"signal: unknown signal {signal!r}; expected one of {', '.join(s.value for s in Signal)}"
        ) from None
    prof = PROFILES.get(profile)
    if prof is None:
        raise GeneratorError(f"profile: unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    if sig not in prof.signals:
        allowed = ", ".join(sorted(s.value for s in prof.signals))
        raise GeneratorError(f"profile: {profile!r} applies to {allowed} only, not to {sig.value}")
    return sig, prof


def check_counts(count: int, batch_size: int, seed: int) -> None:
    """Reject counts, batch sizes and seeds the generator cannot honour."""
    for name, value, low in (("count", count, 0), ("batch_size", batch_size, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise GeneratorError(f"{name}: expected an integer >= {low}, got {value!r}")
