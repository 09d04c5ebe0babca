"""Envelope bytes and IPC payload bytes to Decoder.decode (see fuzz/__init__.py).

Input: byte 0 picks the mode (mod 3): 0 the rest is an envelope; 1 byte 1 picks a payload
type and the rest is its IPC bytes in a fresh decoder; 2 byte 1 picks a signal and payload, a
valid envelope opens the stream and the rest continues it under that payload's schema id."""

from __future__ import annotations

import otap_model
from adaptive_arrow import BatchArrowRecords, Decoder, Encoder, EncoderConfig
from adaptive_arrow.envelope import ArrowPayload
from adaptive_arrow.errors import AdaptiveArrowError
from otap_model import PayloadType

from .harness import Seeds, fuzz

TYPES = sorted(int(pt) for pt in PayloadType)
SIGNALS = ("logs", "traces", "metrics")
OPENERS = {s: Encoder(s).encode(next(otap_model.generate(s, 40, batch_size=40, seed=3))) for s in SIGNALS}


def one(data: bytes) -> None:
    if len(data) < 2:
        return
    mode, pick, rest = data[0] % 3, data[1], data[2:]
    decoder = Decoder()
    try:
        if mode == 0:
            decoder.decode(data[1:])
            return
        schema_id, pt = "0", TYPES[pick % len(TYPES)]
        if mode == 2:
            opener = OPENERS[SIGNALS[pick % 3]]
            decoder.decode(opener)
            payload = opener.payloads[(pick // 3) % len(opener.payloads)]
            schema_id, pt = payload.schema_id, payload.type
        decoder.decode(BatchArrowRecords(7, (ArrowPayload(schema_id, pt, rest),)).to_bytes())
    except AdaptiveArrowError:
        pass


def seed(directory: str) -> None:
    """Envelopes of every signal (sorted, unsorted, zstd), each payload alone, and the next
    envelope's payloads of a stream the openers started."""
    put = Seeds(directory).put
    for s in SIGNALS:
        for config in (EncoderConfig(), EncoderConfig(sort=False), EncoderConfig(ipc_compression="zstd")):
            encoder = Encoder(s, config)
            for bundle in otap_model.generate(s, 60, batch_size=20, seed=5):
                bar = encoder.encode(bundle)
                put(b"\x00" + bar.to_bytes())
                for p in bar.payloads:
                    put(bytes([1, TYPES.index(p.type)]) + p.record)
        encoder = Encoder(s)
        encoder.encode(next(otap_model.generate(s, 40, batch_size=40, seed=3)))
        following = encoder.encode(next(otap_model.generate(s, 40, batch_size=40, seed=9)))
        for i, p in enumerate(OPENERS[s].payloads):
            for q in following.payloads:
                if q.type == p.type and i * 3 + SIGNALS.index(s) < 256:
                    put(bytes([2, i * 3 + SIGNALS.index(s)]) + q.record)


if __name__ == "__main__":
    fuzz(one)
