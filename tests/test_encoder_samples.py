"""The encoder on generated telemetry and on the real samples in /work/shared/data.

Every batch must decode back to the input exactly (sorting off) or to the same rows (sorting
on), and every emitted schema must be a subset of its reference schema: the same columns or
fewer, each either its reference type or a dictionary of it, with fewer columns over all.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from otap_model import OtapBundle, PayloadType, Signal, reference_schema
from otap_model.schema import strip_annotations

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _is_subtype(got: pa.DataType, ref: pa.DataType) -> bool:
    if pa.types.is_dictionary(got):
        return got.value_type.equals(ref)
    if pa.types.is_struct(ref):
        if not pa.types.is_struct(got):
            return False
        names = [ref.field(i).name for i in range(ref.num_fields)]
        return all(
            f.name in names and _is_subtype(f.type, ref.field(f.name).type) for f in got
        ) and [f.name for f in got] == [n for n in names if got.get_field_index(n) >= 0]
    if pa.types.is_list(ref):
        return pa.types.is_list(got) and _is_subtype(got.value_type, ref.value_type)
    return strip_annotations(pa.field("x", got)).type.equals(strip_annotations(pa.field("x", ref)).type)


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    return 1


def check_subsets(enc: Encoder, bundle: OtapBundle) -> tuple[int, int]:
    """Assert every emitted schema is a subset of its reference; returns (emitted, reference) leaf columns."""
    emitted = reference = 0
    for pt in bundle.tables:
        schema = enc.schema_of(pt)
        ref = reference_schema(pt)
        assert schema is not None
        assert [f.name for f in schema] == [n for n in ref.names if n in schema.names]
        for f in schema:
            assert _is_subtype(f.type, ref.field(f.name).type), (pt.name, f)
        emitted += sum(_leaf_count(f.type) for f in schema)
        reference += sum(_leaf_count(f.type) for f in ref)
    return emitted, reference


def round_trip(signal: Signal, bundles: list[OtapBundle]) -> None:
    exact, exact_dec = Encoder(signal, EncoderConfig(sort=False)), Decoder()
    sorted_enc, sorted_dec = Encoder(signal, EncoderConfig(ipc_compression="zstd")), Decoder()
    emitted = reference = 0
    for bundle in bundles:
        assert exact_dec.decode(exact.encode(bundle).to_bytes()) == bundle
        out = sorted_dec.decode(sorted_enc.encode(bundle).to_bytes())
        assert {pt: t.num_rows for pt, t in out.tables.items()} == {pt: t.num_rows for pt, t in bundle.tables.items()}
        e, r = check_subsets(exact, bundle)
        emitted, reference = emitted + e, reference + r
    assert emitted < reference  # strictly fewer columns than the full reference schemas


@pytest.mark.parametrize("signal", list(Signal))
@pytest.mark.parametrize("profile", ["default", "sparse", "high-cardinality"])
def test_generated_data(signal: Signal, profile: str) -> None:
    round_trip(signal, list(otap_model.generate(signal, 3000, batch_size=1000, seed=7, profile=profile)))


def test_generated_multivariate_metrics() -> None:
    round_trip(Signal.METRICS, list(otap_model.generate(Signal.METRICS, 2000, batch_size=1000, seed=7, profile="multivariate")))


@pytest.mark.parametrize("name", ["logs.json", "trace.json", "metrics.json", "events.json"])
def test_otlp_json_samples(name: str) -> None:
    bundle = otap_model.from_otlp_json((DATA / "otlp-examples" / name).read_bytes())
    round_trip(Signal(bundle.signal), [bundle, bundle])


@pytest.mark.parametrize("path", sorted((DATA / "zipkin").glob("*.json")), ids=lambda p: p.name)
def test_zipkin_samples(path: Path) -> None:
    bundle = otap_model.from_zipkin_json(path.read_bytes())
    round_trip(Signal.TRACES, [bundle])


def test_unused_payload_columns_are_absent() -> None:
    bundle = next(otap_model.generate(Signal.LOGS, 500, batch_size=500, seed=1))
    enc = Encoder(Signal.LOGS, EncoderConfig(sort=False))
    enc.encode(bundle)
    schema = enc.schema_of(PayloadType.LOGS)
    assert schema is not None
    logs = bundle[PayloadType.LOGS]
    for name in logs.schema.names:
        column = logs.column(name)
        assert (name in schema.names) == (column.null_count < len(column)), name
