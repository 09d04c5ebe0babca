"""What the toolkit hands out writes to Parquet, whose writer refuses a not-null column holding
nulls. The log body's not-null ``type`` child used to be null under null bodies in encoded records,
in decoded bundles and in tables read from a store, so none of them could be written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptive_arrow import Decoder, Encoder, EncoderConfig
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import OtapBundle, PayloadType, Signal, generate
from quiver_store import QuiverStore, RecordBundle, load_table

P = PayloadType


def required_nulls(batch: pa.RecordBatch | pa.Table) -> list[str]:
    """Not-null fields (struct children too, raw, also under null structs) that hold nulls."""
    found: list[str] = []

    def visit(field: pa.Field, array: pa.Array, path: str) -> None:
        if not field.nullable and array.null_count:
            found.append(path)
        if pa.types.is_struct(field.type):
            for i in range(field.type.num_fields):
                visit(field.type.field(i), array.field(i), f"{path}.{field.type.field(i).name}")

    for field, column in zip(batch.schema, batch.columns):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for chunk in chunks:
            visit(field, chunk, field.name)
    return found


def _logs_with_null_bodies() -> list[OtapBundle]:
    bundles = list(generate(Signal.LOGS, 3000, batch_size=1000, seed=5))
    assert any(b[P.LOGS].column("body").null_count for b in bundles)  # the case this file is about
    return bundles


@pytest.mark.parametrize("sort", [True, False], ids=["sorted", "unsorted"])
def test_encoded_records_and_decoded_bundles_hold_no_nulls_in_required_fields(sort: bool, tmp_path: Path) -> None:
    encoder, decoder = Encoder(Signal.LOGS, EncoderConfig(sort=sort)), Decoder()
    for bundle in _logs_with_null_bodies():
        records = encoder.encode_records(bundle)
        for slot, batch in records.slots.items():
            assert required_nulls(batch) == [], P(slot).name
        decoded = decoder.decode_records(records)
        for pt, table in decoded.tables.items():
            assert required_nulls(table) == [], pt.name
            pq.write_table(pa.Table.from_batches([table]), tmp_path / f"{pt.name}.parquet")
            assert pq.read_table(tmp_path / f"{pt.name}.parquet").equals(pa.Table.from_batches([table]))


def test_records_from_another_producer_with_null_required_children_decode_to_writable_tables(tmp_path: Path) -> None:
    """A producer that leaves the body's ``type`` null under null bodies (as this encoder did):
    the decoder fills those slots, so the plain table is valid and writes to Parquet."""
    bundle = _logs_with_null_bodies()[1]
    records = Encoder(Signal.LOGS, EncoderConfig(sort=False)).encode_records(bundle)
    logs = records.slots[P.LOGS]
    body = logs.column("body")
    flat = body.flatten()  # children with the struct's nulls applied: type becomes null there
    loose = pa.StructArray.from_arrays(flat, fields=list(body.type), mask=body.is_null())
    assert loose.field(0).null_count == body.null_count > 0
    slots = dict(records.slots)
    slots[P.LOGS] = logs.set_column(logs.schema.get_field_index("body"), logs.schema.field("body"), loose)
    decoded = Decoder().decode_records(RecordBundle(slots, records.fingerprints))
    assert decoded == bundle
    assert required_nulls(decoded[P.LOGS]) == []
    pq.write_table(pa.Table.from_batches([decoded[P.LOGS]]), tmp_path / "logs.parquet")


def test_tables_loaded_from_a_store_write_to_parquet(tmp_path: Path) -> None:
    encoder = Encoder(Signal.LOGS)
    with QuiverStore.open(tmp_path / "store", layout=OTAP_LAYOUT) as store:
        for bundle in _logs_with_null_bodies():
            store.ingest(encoder.encode_records(bundle))
        store.flush()
        segments = [s.path for s in store.segments()]
    table = load_table(segments, P.LOGS)
    assert table.num_rows == 3000 and table.column("body").null_count > 0
    assert required_nulls(table) == []
    pq.write_table(table, tmp_path / "stored.parquet")
    assert pq.read_table(tmp_path / "stored.parquet").num_rows == 3000


PROFILES = [(s, p) for s in Signal for p in ("default", "high-cardinality", "sparse")] + [(Signal.METRICS, "multivariate")]


@pytest.mark.parametrize(("signal", "profile"), PROFILES, ids=[f"{s.value}-{p}" for s, p in PROFILES])
def test_every_generated_table_and_its_records_write_to_parquet(signal: Signal, profile: str, tmp_path: Path) -> None:
    encoder, decoder = Encoder(signal), Decoder()
    for bundle in generate(signal, 2000, batch_size=1000, seed=3, profile=profile):
        records = encoder.encode_records(bundle)
        decoded = decoder.decode_records(records)
        tables = [(f"records-{P(s).name}", b) for s, b in records.slots.items()]
        tables += [(f"decoded-{pt.name}", t) for pt, t in decoded.tables.items()]
        for name, table in tables:
            assert required_nulls(table) == [], name
            pq.write_table(pa.Table.from_batches([table]), tmp_path / f"{name}.parquet")
