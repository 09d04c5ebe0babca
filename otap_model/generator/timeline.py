"""Simulated time: a start instant derived from the seed (never the wall clock) and arrivals that
move forward in jittered, exponentially distributed steps with nanosecond noise, as real clocks
stamp independent events."""

from __future__ import annotations

from .entropy import Entropy

_EPOCH_2026_01_05 = 1_767_571_200 * 1_000_000_000
NS_PER_S = 1_000_000_000


def start_instant(ent: Entropy) -> int:
    """A start time within one week after 2026-01-05T00:00Z, to the nanosecond."""
    return _EPOCH_2026_01_05 + ent.py.randrange(7 * 86_400 * NS_PER_S)


class Arrivals:
    """A Poisson arrival process: each call returns the next event time (ns)."""

    def __init__(self, ent: Entropy, start_ns: int, rate_per_s: float) -> None:
        self._py = ent.py
        self._mean_gap_ns = NS_PER_S / rate_per_s
        self.now = start_ns

    def next(self) -> int:
        self.now += int(self._py.expovariate(1.0) * self._mean_gap_ns) + 1
        return self.now
