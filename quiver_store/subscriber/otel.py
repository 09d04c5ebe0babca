"""Optional OpenTelemetry export of the subscriber and retention metrics.

Only when `opentelemetry-api` is importable (it is not a dependency): observable counters and
gauges whose callbacks read the same snapshot `QuiverStore.stats()` returns. Labels written as
`name{key="value"}` in the snapshot become attributes, and each observation carries the store's
directory as `store`, so two stores open in one process report two series, not one (an SDK keeps
one value per attribute set, so two stores without it overwrote each other's figures).
"""

from __future__ import annotations

import re
import threading
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


class _Exported:
    """The instruments of one `opentelemetry.metrics` module, created once, and the owners they read.

    A meter keeps every instrument created on it (the API's proxy meter in a list, with no way to
    remove one), and the SDK drops the callbacks of a second instrument of the same name: one set
    of instruments per store open piled up 17 instruments per reopen in the first case, and left
    only the first store's metrics exported in the second. So each instrument is created once per
    process and reads every live owner.
    """

    def __init__(self, api: Any, observation: Any, meter_name: str) -> None:
        self.api = api
        self._owners: weakref.WeakKeyDictionary[Any, tuple[Callable[[Any], dict[str, Any]], dict[str, str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # stores open on other threads while a reader collects
        self._observation = observation
        meter = api.get_meter(meter_name)
        for base in COUNTERS:
            meter.create_observable_counter(base, callbacks=[self._observe(base)])
        for base in GAUGES:
            meter.create_observable_gauge(base, callbacks=[self._observe(base)])

    def add(self, owner: Any, snapshot: Callable[[Any], dict[str, Any]], attributes: dict[str, str]) -> None:
        with self._lock:
            self._owners[owner] = (snapshot, attributes)

    def _observe(self, base: str) -> Callable[[Any], Iterable[Any]]:
        def callback(options: Any) -> Iterable[Any]:
            with self._lock:
                owners = list(self._owners.items())
            out = []
            for owner, (snapshot, common) in owners:
                try:
                    values = snapshot(owner)
                except Exception:  # a closed store: nothing to report
                    continue
                for key, value in values.items():
                    name, attrs = split_key(key)
                    if name == base and isinstance(value, int | float) and not isinstance(value, bool):
                        out.append(self._observation(value, {**common, **attrs}))
            return out

        return callback


_EXPORTED: dict[str, _Exported] = {}  # meter name -> its instruments, on the imported API
_EXPORTED_LOCK = threading.Lock()


def register(
    owner: Any, snapshot: Callable[[Any], dict[str, Any]], store: str, *, meter_name: str = "quiver_store"
) -> bool:
    """Report `snapshot(owner)` through the process's observable instruments, each observation with
    the attribute `store` (the store's directory); False when the API is absent.

    `owner` is held weakly, so a closed and collected store stops reporting instead of leaking.
    """
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import Observation
    except ImportError:
        return False
    with _EXPORTED_LOCK:
        exported = _EXPORTED.get(meter_name)
        if exported is None or exported.api is not metrics:  # first store, or another API imported since
            exported = _EXPORTED[meter_name] = _Exported(metrics, Observation, meter_name)
    exported.add(owner, snapshot, {"store": store})
    return True
