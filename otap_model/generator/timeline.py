"""Simulated time: a start instant derived from the seed (never the wall clock) and arrivals that
move forward in jittered, exponentially distributed steps with nanosecond noise, as real clocks
stamp independent events."""

from __future__ import annotations

from .entropy import Entropy

_EPOCH_2026_01_05 = 1_767_571_200 * 1_000_000_000
NS_PER_S = 1_000_000_000


# Resolution of the event timestamp each language's logging framework records (observed
# timestamps come from the SDK's nanosecond clock): logback/log4j on Linux give microseconds,
# JavaScript's Date.now() milliseconds, .NET DateTime 100 ns ticks, Go and Rust nanoseconds.
_LOG_CLOCK_NS = {"java": 1_000, "nodejs": 1_000_000, "dotnet": 100, "go": 1, "rust": 1}


def log_timestamp(language: str, t_ns: int) -> int:
    """The event time `t_ns` as the language's logging framework stamps it."""
    if language == "python":
        return int((t_ns / 1e9) * 1e9)  # LogRecord.created is float seconds, converted by the SDK
    resolution = _LOG_CLOCK_NS[language]
    return t_ns - t_ns % resolution


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
