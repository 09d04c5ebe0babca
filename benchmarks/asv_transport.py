"""asv benchmarks of transport optimisation: sort + dense ids + delta encoding, its inverse, and the
plain ``pyarrow.ipc`` stream write of the same tables it is compared with."""

from __future__ import annotations

import pyarrow as pa

import otap_model
from adaptive_arrow.transport import optimize, restore
from otap_model import OtapBundle, Signal

ROWS, BATCH = 10_000, 5_000
_PLAIN: dict[Signal, list[OtapBundle]] = {}
_OPTIMIZED: dict[Signal, list[OtapBundle]] = {}


def setup() -> None:
    for signal in Signal:
        if signal not in _PLAIN:
            _PLAIN[signal] = list(otap_model.generate(signal, ROWS, batch_size=BATCH, seed=1))
            _OPTIMIZED[signal] = [optimize(b) for b in _PLAIN[signal]]


def _ipc_write(signal: Signal) -> None:
    for bundle in _PLAIN[signal]:
        for table in bundle.tables.values():
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_batch(table)


def time_optimize_logs() -> None:
    for bundle in _PLAIN[Signal.LOGS]:
        optimize(bundle)


def time_optimize_traces() -> None:
    for bundle in _PLAIN[Signal.TRACES]:
        optimize(bundle)


def time_optimize_metrics() -> None:
    for bundle in _PLAIN[Signal.METRICS]:
        optimize(bundle)


def time_restore_logs() -> None:
    for bundle in _OPTIMIZED[Signal.LOGS]:
        restore(bundle)


def time_restore_traces() -> None:
    for bundle in _OPTIMIZED[Signal.TRACES]:
        restore(bundle)


def time_restore_metrics() -> None:
    for bundle in _OPTIMIZED[Signal.METRICS]:
        restore(bundle)


def time_plain_ipc_write_logs() -> None:
    _ipc_write(Signal.LOGS)


def time_plain_ipc_write_traces() -> None:
    _ipc_write(Signal.TRACES)


def time_plain_ipc_write_metrics() -> None:
    _ipc_write(Signal.METRICS)
