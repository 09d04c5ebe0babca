"""Valid Arrow IPC with wrong contents to Decoder.decode (see fuzz/__init__.py)."""

from __future__ import annotations

import contextlib

import atheris
import pyarrow as pa

import otap_model
from adaptive_arrow import BatchArrowRecords, Decoder, Encoder, EncoderConfig
from adaptive_arrow.envelope import ArrowPayload
from adaptive_arrow.errors import AdaptiveArrowError
from otap_model.errors import OtapModelError

from .harness import fuzz
from .mutate import mutate

ENVELOPES = [
    Encoder(s, EncoderConfig(sort=sort)).encode(next(otap_model.generate(s, 30, batch_size=30, seed=11)))
    for s in ("logs", "traces", "metrics")
    for sort in (True, False)
]


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    bar = fdp.PickValueInList(ENVELOPES)
    payloads = list(bar.payloads)
    k = fdp.ConsumeIntInRange(0, len(payloads) - 1)
    batch = mutate(pa.ipc.open_stream(payloads[k].record).read_next_batch(), fdp)
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, batch.schema).write_batch(batch)  # no end-of-stream marker, as in OTAP
    payloads[k] = ArrowPayload(payloads[k].schema_id, payloads[k].type, sink.getvalue().to_pybytes())
    try:
        out = Decoder().decode(BatchArrowRecords(bar.batch_id, tuple(payloads)).to_bytes())
    except AdaptiveArrowError:
        return
    with contextlib.suppress(OtapModelError):  # what the decoder accepts converts, or says what is wrong
        otap_model.to_otlp(out)


def seed(directory: str) -> None:
    """libFuzzer grows this target's inputs from nothing (they only steer the mutations)."""


if __name__ == "__main__":
    fuzz(one)
