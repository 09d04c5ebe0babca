"""Optional OpenTelemetry export of the subscriber and retention metrics.

Only when `opentelemetry-api` is importable (it is not a dependency): observable counters and
gauges whose callbacks read the same snapshot `QuiverStore.stats()` returns. Labels written as
`name{key="value"}` in the snapshot become attributes.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable
from typing import Any

COUNTERS = (
    "quiver.gc.evictions_total",
    "quiver.ingest.throttle_total",
    "quiver.subscriber.dropped_bundles_total",
    "quiver.segment.dropped_total",
    "quiver.subscriber.orphaned_total",
    "quiver.ack_log.commits_total",
    "quiver.ack_log.checkpoints_total",
)
GAUGES = (
    "quiver.core.bytes",
    "quiver.core.cap_fraction",
    "quiver.ack_log.depth",
    "quiver.ack_log.bytes",
    "quiver.subscriber.count",
    "quiver.subscriber.gap_set_size",
    "quiver.subscriber.lag_bundles",
    "quiver.subscriber.lag_segments",
    "quiver.subscriber.in_flight",
    "quiver.subscriber.high_water_mark",
)
_KEY = re.compile(r"^([^{]+)(?:\{(.*)\})?$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def split_key(key: str) -> tuple[str, dict[str, str]]:
    """'quiver.gc.evictions_total{reason="size"}' -> ('quiver.gc.evictions_total', {'reason': 'size'})."""
    match = _KEY.match(key)
    if match is None:
        return key, {}
    return match.group(1), dict(_LABEL.findall(match.group(2) or ""))


def register(
    owner: Any, snapshot: Callable[[Any], dict[str, Any]], *, meter_name: str = "quiver_store"
) -> bool:
    """Register observable instruments reading `snapshot(owner)`; False when the API is absent.

    `owner` is held weakly, so a closed and collected store stops reporting instead of leaking.
    """
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import Observation
    except ImportError:
        return False
    ref = weakref.ref(owner)
    meter = metrics.get_meter(meter_name)

    def observe(base: str) -> Callable[[Any], Iterable[Any]]:
        def callback(options: Any) -> Iterable[Any]:
            target = ref()
            if target is None:
                return []
            try:
                values = snapshot(target)
            except Exception:  # a closed store: nothing to report
                return []
            out = []
            for key, value in values.items():
                name, attrs = split_key(key)
                if name == base and isinstance(value, int | float) and not isinstance(value, bool):
                    out.append(Observation(value, attrs))
            return out

        return callback

    for base in COUNTERS:
        meter.create_observable_counter(base, callbacks=[observe(base)])
    for base in GAUGES:
        meter.create_observable_gauge(base, callbacks=[observe(base)])
    return True
