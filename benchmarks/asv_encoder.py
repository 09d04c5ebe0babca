"""asv benchmarks of the adaptive encoder and decoder (one OTAP stream of generated bundles).

``time_plain_ipc_write_*`` is the baseline the encoder is compared with: a plain ``pyarrow.ipc``
stream write of the same plain tables.
"""

from __future__ import annotations

import io

import pyarrow as pa

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from otap_model import OtapBundle, Signal

ROWS, BATCH = 10_000, 5_000
_DATA: dict[Signal, list[OtapBundle]] = {}
_ENCODED: dict[Signal, list[bytes]] = {}


def setup() -> None:
    for signal in Signal:
        if signal not in _DATA:
            _DATA[signal] = list(otap_model.generate(signal, ROWS, batch_size=BATCH, seed=1))
            enc = Encoder(signal, EncoderConfig(sort=False))
            _ENCODED[signal] = [enc.encode(b).to_bytes() for b in _DATA[signal]]


def _encode(signal: Signal, config: EncoderConfig) -> None:
    enc = Encoder(signal, config)
    for bundle in _DATA[signal]:
        enc.encode(bundle).to_bytes()


def _decode(signal: Signal) -> None:
    dec = Decoder()
    for message in _ENCODED[signal]:
        dec.decode(message)


def _plain_write(signal: Signal) -> None:
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    sink = io.BytesIO()
    for bundle in _DATA[signal]:
        for pt, batch in bundle.tables.items():
            if pt not in writers:
                writers[pt] = pa.ipc.new_stream(sink, batch.schema)
            writers[pt].write_batch(batch)


_ADAPTIVE = EncoderConfig(sort=False)
_SORTED = EncoderConfig(sort=True)


def time_encode_logs() -> None:
    _encode(Signal.LOGS, _ADAPTIVE)


def time_encode_traces() -> None:
    _encode(Signal.TRACES, _ADAPTIVE)


def time_encode_metrics() -> None:
    _encode(Signal.METRICS, _ADAPTIVE)


def time_encode_sorted_logs() -> None:
    _encode(Signal.LOGS, _SORTED)


def time_encode_sorted_traces() -> None:
    _encode(Signal.TRACES, _SORTED)


def time_encode_sorted_metrics() -> None:
    _encode(Signal.METRICS, _SORTED)


def time_decode_logs() -> None:
    _decode(Signal.LOGS)


def time_decode_traces() -> None:
    _decode(Signal.TRACES)


def time_decode_metrics() -> None:
    _decode(Signal.METRICS)


def time_plain_ipc_write_logs() -> None:
    _plain_write(Signal.LOGS)


def time_plain_ipc_write_traces() -> None:
    _plain_write(Signal.TRACES)


def time_plain_ipc_write_metrics() -> None:
    _plain_write(Signal.METRICS)
