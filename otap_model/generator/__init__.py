"""Seeded generator of realistic telemetry (OTLP requests, or OTAP bundles through ``from_otlp``).

Same arguments give byte-identical requests. ``count`` is the number of root records (log
records, spans, metric data points) over the whole run and ``batch_size`` the number per request;
the last request holds the remainder. Profiles: ``default``, ``high-cardinality``, ``sparse`` and
(metrics only) ``multivariate``; see profiles.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from google.protobuf.message import Message

from ..payload import Signal
from .logs import generate_logs
from .metrics import generate_metrics
from .profiles import PROFILES, GeneratorError, Profile, check_counts, resolve
from .traces import generate_traces

if TYPE_CHECKING:
    from ..bundle import OtapBundle

_BY_SIGNAL = {Signal.LOGS: generate_logs, Signal.TRACES: generate_traces, Signal.METRICS: generate_metrics}


def generate_otlp(
    signal: Signal | str, count: int, *, batch_size: int, seed: int, profile: str = "default"
) -> Iterator[Message]:
    """Export{Logs,Trace,Metrics}ServiceRequest messages holding `count` root records in all."""
    sig, prof = resolve(signal, profile)
    check_counts(count, batch_size, seed)
    return _BY_SIGNAL[sig](count, batch_size, seed, prof)


def generate(
    signal: Signal | str, count: int, *, batch_size: int, seed: int, profile: str = "default"
) -> Iterator[OtapBundle]:
    """The generated requests converted to OTAP bundles (``from_otlp`` of each)."""
    from ..otlp import from_otlp

    requests = generate_otlp(signal, count, batch_size=batch_size, seed=seed, profile=profile)
    return (from_otlp(request) for request in requests)


__all__ = ["PROFILES", "GeneratorError", "Profile", "generate", "generate_otlp"]
