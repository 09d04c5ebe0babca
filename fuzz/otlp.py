"""OTLP protobuf and JSON to from_otlp / from_otlp_json, then encode and decode (see fuzz/__init__.py).

Input: byte 0 picks the signal (mod 4: logs, traces, metrics, or none given) and, with bit 2 set,
JSON instead of protobuf; the rest is the request."""

from __future__ import annotations

import glob
import os

import otap_model
from adaptive_arrow import Decoder, Encoder
from otap_model.errors import OtapModelError
from otap_model.otlp.order import canonical_order

from .harness import Seeds, fuzz

SIGNALS = ("logs", "traces", "metrics", None)
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


def one(data: bytes) -> None:
    if not data:
        return
    signal = SIGNALS[data[0] % 4]
    try:
        if data[0] & 4:
            bundle = otap_model.from_otlp_json(data[1:], signal)
        else:
            bundle = otap_model.from_otlp(data[1:], signal)
    except OtapModelError:
        return
    decoded = Decoder(signal=bundle.signal).decode(Encoder(bundle.signal).encode(bundle))
    assert canonical_order(otap_model.to_otlp(decoded)) == canonical_order(otap_model.to_otlp(bundle))  # sorting reorders


def seed(directory: str) -> None:
    """Generated requests of every profile as protobuf, and the OTLP/JSON samples in
    ../shared/data (as JSON and as protobuf) when that folder is there."""
    put = Seeds(directory).put
    for i, signal in enumerate(SIGNALS[:3]):
        for profile in ("default", "sparse", "high-cardinality") + (("multivariate",) if signal == "metrics" else ()):
            for bundle in otap_model.generate(signal, 12, batch_size=4, seed=2, profile=profile):
                put(bytes([i]) + otap_model.to_otlp(bundle).SerializeToString())
    for path in sorted(glob.glob(os.path.join(DATA, "**", "*.json"), recursive=True)):
        with open(path, "rb") as f:
            raw = f.read()
        if len(raw) > 60_000:
            continue
        for i, signal in enumerate(SIGNALS[:3]):
            try:
                bundle = otap_model.from_otlp_json(raw, signal)
            except OtapModelError:
                continue
            put(bytes([i | 4]) + raw)
            put(bytes([i]) + otap_model.to_otlp(bundle).SerializeToString())
            break


if __name__ == "__main__":
    fuzz(one)
