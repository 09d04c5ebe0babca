"""Plain bundles with mutated tables to Encoder.encode, then Decoder.decode (see fuzz/__init__.py)."""

from __future__ import annotations

import atheris

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from adaptive_arrow.errors import AdaptiveArrowError
from otap_model import OtapBundle, PayloadType
from otap_model.errors import OtapModelError
from otap_model.otlp.order import canonical_order

from .harness import fuzz
from .mutate import mutate

SIGNALS = ("logs", "traces", "metrics")
BUNDLES = {s: tuple(otap_model.generate(s, 40, batch_size=20, seed=13)) for s in SIGNALS}


def _otlp(bundle: OtapBundle) -> object | None:
    try:
        return canonical_order(otap_model.to_otlp(bundle))
    except OtapModelError:
        return None  # an input to_otlp refuses: nothing to compare the round trip with


def _one_description_per_id(bundle: OtapBundle) -> bool:
    """Whether the root rows sharing a resource id (a scope id) agree on the resource (scope):
    otherwise to_otlp describes the group by its first row, which sorting changes."""
    root = next(t for pt, t in bundle.tables.items() if pt in (PayloadType.LOGS, PayloadType.SPANS, PayloadType.UNIVARIATE_METRICS))
    scope_urls = root.column("schema_url").to_pylist()  # the ScopeX's schema_url is a root column
    for name in ("resource", "scope"):
        seen: dict[object, object] = {}
        for i, row in enumerate(root.column(name).to_pylist()):
            key = None if row is None else row["id"]  # rows without an id form one group too
            description = (row, scope_urls[i]) if name == "scope" else row
            if seen.setdefault(key, description) != description:
                return False
    return True


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    signal = fdp.PickValueInList(list(SIGNALS))
    first, clean = BUNDLES[signal]
    sort = fdp.ConsumeBool()
    tables = dict(first.tables)
    for _ in range(fdp.ConsumeIntInRange(1, 2)):
        pt = fdp.PickValueInList(sorted(tables))
        tables[pt] = mutate(tables[pt], fdp)
    try:
        bundle = OtapBundle(first.signal, tables)
    except (OtapModelError, ValueError):
        return
    encoder, decoder = Encoder(signal, EncoderConfig(sort=sort)), Decoder()
    try:
        bar = encoder.encode(bundle)
    except AdaptiveArrowError:
        bar = None
    if bar is not None:
        want = _otlp(bundle) if _one_description_per_id(bundle) else None
        got = decoder.decode(bar.to_bytes())  # what the encoder wrote, the decoder reads
        assert want is None or _otlp(got) == want, "decoded bundle differs from the encoded one"
    assert _otlp(decoder.decode(encoder.encode(clean).to_bytes())) == _otlp(clean), "the stream broke"


def seed(directory: str) -> None:
    """libFuzzer grows this target's inputs from nothing (they only steer the mutations)."""


if __name__ == "__main__":
    fuzz(one)
