"""The encoder's fused sort (dictionary columns hashed once before sorting, indices gathered) emits
exactly the bytes of the unfused pipeline: ``transport.optimize`` followed by the unsorted encoder."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig, transport
from adaptive_arrow.transform import dictionary
from otap_model import OtapBundle, PayloadType, Signal

P = PayloadType


@pytest.fixture(autouse=True, params=[1, dictionary.HASH_FIRST_MIN_ROWS], ids=["every-size", "default-size"])
def hash_first_min_rows(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run each test with the fused path on for columns of any length (small test tables), and
    with the encoder's own minimum."""
    monkeypatch.setattr(dictionary, "HASH_FIRST_MIN_ROWS", request.param)


def _unfused(signal: Signal, config: EncoderConfig) -> Encoder:
    return Encoder(signal, EncoderConfig(**{**config.__dict__, "sort": False}))


def assert_same_stream(signal: Signal, bundles: list[OtapBundle], config: EncoderConfig, *, unary: bool = False) -> None:
    fused, unfused = Encoder(signal, config), _unfused(signal, config)
    for bundle in bundles:
        if unary:
            fused, unfused = Encoder(signal, config), _unfused(signal, config)
        got = fused.encode(bundle).to_bytes()
        assert got == unfused.encode(transport.optimize(bundle, config)).to_bytes()
        assert fused.last_events == unfused.last_events


CASES = [
    (signal, profile, batch_size)
    for signal in Signal
    for profile in ("default", "high-cardinality", "sparse", *(("multivariate",) if signal is Signal.METRICS else ()))
    for batch_size in (40, 700)
]


@pytest.mark.parametrize(("signal", "profile", "batch_size"), CASES)
def test_generated_streams_are_byte_identical(signal: Signal, profile: str, batch_size: int) -> None:
    bundles = list(otap_model.generate(signal, 3 * batch_size, batch_size=batch_size, seed=5, profile=profile))
    assert_same_stream(signal, bundles, EncoderConfig())
    assert_same_stream(signal, bundles[:2], EncoderConfig(), unary=True)


@pytest.mark.parametrize(
    "config",
    [
        EncoderConfig(dictionary_max_distinct_ratio=None),  # pure Go ladder: u16 overflow and resets
        EncoderConfig(dictionary_limit=300, dictionary_reset_threshold=0.9),
        EncoderConfig(dictionary_limit=0),  # no dictionaries at all
        EncoderConfig(sort_orders={int(P.LOGS): ("body.str", "severity_text"), int(P.LOG_ATTRS): ("str", "key")}),
    ],
)
def test_dictionary_ladder_configurations_are_byte_identical(config: EncoderConfig) -> None:
    bundles = list(otap_model.generate(Signal.LOGS, 4000, batch_size=1000, seed=2, profile="high-cardinality"))
    assert_same_stream(Signal.LOGS, bundles, config)


def _attrs(keys: list[int], values: list[int], parents: int) -> pa.RecordBatch:
    """A LOG_ATTRS table whose string values (negative: null) go to ``str``."""
    schema = otap_model.reference_schema(P.LOG_ATTRS)
    n = len(keys)
    columns = {
        "parent_id": pa.array(np.arange(n) % parents, pa.uint16()),
        "key": pa.array([f"k{k}" for k in keys]),
        "type": pa.array([1] * n, pa.uint8()),
        "str": pa.array([None if v < 0 else f"value-{v}" for v in values]),
    }
    return pa.RecordBatch.from_arrays(
        [columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema
    )


def _logs(n: int) -> pa.RecordBatch:
    schema = otap_model.reference_schema(P.LOGS)
    columns = {"id": pa.array(range(n), pa.uint16())}
    return pa.RecordBatch.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(
        st.tuples(st.integers(1, 1500), st.integers(1, 40), st.integers(-1, 3000), st.integers(0, 2**32 - 1)),
        min_size=1,
        max_size=4,
    )
)
def test_drifting_attribute_cardinalities_are_byte_identical(specs: list[tuple[int, int, int, int]]) -> None:
    """Batches large and small, string cardinalities crossing 255 and the repetition rule: the
    fused encoder emits the same bytes, and the stream decodes to the input's relations."""
    bundles = []
    for n, key_card, str_card, seed in specs:
        rng = np.random.default_rng(seed)
        keys = rng.integers(0, key_card, n).tolist()
        values = rng.integers(-1, max(str_card, 0) + 1, n).tolist()
        parents = max(1, n // 4)
        bundles.append(OtapBundle(Signal.LOGS, {P.LOGS: _logs(parents), P.LOG_ATTRS: _attrs(keys, values, parents)}))
    assert_same_stream(Signal.LOGS, bundles, EncoderConfig())
    enc, dec = Encoder(Signal.LOGS), Decoder()
    for bundle in bundles:
        decoded = transport.restore(dec.decode(enc.encode(bundle).to_bytes()))
        assert decoded[P.LOG_ATTRS].num_rows == bundle[P.LOG_ATTRS].num_rows
        got = sorted(zip(decoded[P.LOG_ATTRS].column("key").to_pylist(), decoded[P.LOG_ATTRS].column("str").to_pylist()), key=str)
        want = sorted(zip(bundle[P.LOG_ATTRS].column("key").to_pylist(), bundle[P.LOG_ATTRS].column("str").to_pylist()), key=str)
        assert got == want
