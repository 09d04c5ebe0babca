"""Encoder misuse found by the second API review: duplicate parent ids, tables of another signal,
nulls in not-null columns, unknown AnyValue type codes, sort_orders checked at construction; and
id encoding marks the decoder cannot undo (found by fuzzing).
Each rejection is the package's exception naming the table and column, and the encoder still
encodes the next valid bundle as if the bad one never came."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otap_model
from adaptive_arrow import ConfigError, Decoder, Encoder, EncoderConfig, EncodingError
from otap_model import OtapBundle, PayloadType
from otap_model.otlp.order import canonical_order

P = PayloadType
LOGS_GEN = list(otap_model.generate("logs", 200, batch_size=100, seed=1))
TRACES = next(otap_model.generate("traces", 40, batch_size=40, seed=1))
METRICS = next(otap_model.generate("metrics", 40, batch_size=40, seed=1))


def _canon(bundle: OtapBundle) -> object:
    return canonical_order(otap_model.to_otlp(bundle))


def _set(batch: pa.RecordBatch, name: str, array: pa.Array) -> pa.RecordBatch:
    i = batch.schema.get_field_index(name)
    return batch.set_column(i, batch.schema.field(i), array)


def _with(bundle: OtapBundle, pt: PayloadType, batch: pa.RecordBatch) -> OtapBundle:
    return OtapBundle(bundle.signal, {**bundle.tables, pt: batch})


def _rejects_then_round_trips(signal: str, bad: OtapBundle, good: OtapBundle, message: str, sort: bool) -> None:
    enc, dec = Encoder(signal, EncoderConfig(sort=sort)), Decoder()
    first = next(otap_model.generate(signal, 50, batch_size=50, seed=3))
    assert _canon(dec.decode(enc.encode(first).to_bytes())) == _canon(first)
    stats = enc.stats.as_dict()
    with pytest.raises(EncodingError, match=message):
        enc.encode(bad)
    with pytest.raises(EncodingError, match=message):
        enc.encode_records(bad)
    assert enc.stats.as_dict() == stats
    assert _canon(dec.decode(enc.encode(good).to_bytes())) == _canon(good)


def _duplicate_log_id() -> OtapBundle:
    """A log record without attributes given the id of one that has some (every id still exists)."""
    base = LOGS_GEN[0]
    ids = base[P.LOGS]["id"].to_pylist()
    referenced = set(base[P.LOG_ATTRS]["parent_id"].to_pylist())
    lonely = next(i for i, v in enumerate(ids) if v not in referenced)
    ids[lonely] = next(iter(referenced))
    return _with(base, P.LOGS, _set(base[P.LOGS], "id", pa.array(ids, pa.uint16())))


@pytest.mark.parametrize("sort", [False, True])
def test_duplicate_log_ids_are_rejected(sort: bool) -> None:
    _rejects_then_round_trips("logs", _duplicate_log_id(), LOGS_GEN[1], r"LOGS\.id: value \d+ is duplicated \(2 rows", sort)


@pytest.mark.parametrize(
    ("signal", "bundle", "pt"),
    [("traces", TRACES, P.SPANS), ("traces", TRACES, P.SPAN_EVENTS), ("metrics", METRICS, P.UNIVARIATE_METRICS),
     ("metrics", METRICS, P.NUMBER_DATA_POINTS)],
)
def test_duplicate_parent_ids_of_other_tables_are_rejected(signal: str, bundle: OtapBundle, pt: PayloadType) -> None:
    table = bundle[pt]
    ids = table["id"].to_pylist()
    first = next(i for i, v in enumerate(ids) if v is not None)
    ids[first + 1] = ids[first]
    bad = _with(bundle, pt, _set(table, "id", pa.array(ids, table.schema.field("id").type)))
    good = next(otap_model.generate(signal, 40, batch_size=40, seed=5))
    _rejects_then_round_trips(signal, bad, good, rf"{pt.name}\.id: value {ids[first]} is duplicated", True)


def test_repeated_resource_and_scope_ids_are_fine() -> None:
    base = LOGS_GEN[0]
    assert len(set(base[P.LOGS]["resource"].field("id").to_pylist())) < base.num_rows
    assert _canon(Decoder().decode(Encoder("logs").encode(base).to_bytes())) == _canon(base)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 70000), min_size=2, max_size=60), st.booleans())
def test_uniqueness_check_matches_python(ids: list[int], with_null: bool) -> None:
    n = len(ids)
    column = pa.array([None if with_null and i == 0 else v % 65536 for i, v in enumerate(ids)], pa.uint16())
    ref = otap_model.reference_schema(P.LOGS)
    batch = pa.RecordBatch.from_arrays([column if f.name == "id" else pa.nulls(n, f.type) for f in ref], schema=ref)
    values = [v for v in column.to_pylist() if v is not None]
    bundle = OtapBundle("logs", {P.LOGS: batch})
    if len(set(values)) == len(values):
        Encoder("logs").encode(bundle)
    else:
        with pytest.raises(EncodingError, match=r"LOGS\.id: value \d+ is duplicated"):
            Encoder("logs").encode(bundle)


def _foreign_tables() -> list[tuple[str, OtapBundle, str]]:
    base = LOGS_GEN[0]
    spans = OtapBundle("logs", dict(base.tables))
    spans.tables[P.SPANS] = TRACES[P.SPANS]  # type: ignore[index]  # bypasses OtapBundle's own check
    metric_attrs = OtapBundle("logs", dict(base.tables))
    metric_attrs.tables[P.METRIC_ATTRS] = base[P.LOG_ATTRS]
    unknown = OtapBundle("logs", dict(base.tables))
    unknown.tables[999] = base[P.LOGS]  # type: ignore[index]
    bogus = OtapBundle("logs", dict(base.tables))
    bogus.signal = "bogus"  # type: ignore[assignment]
    return [
        ("SPANS", spans, r"logs bundle: payload type SPANS \(40\) does not belong to signal logs"),
        ("METRIC_ATTRS", metric_attrs, r"logs bundle: payload type METRIC_ATTRS \(26\) does not belong to signal logs"),
        ("key 999", unknown, r"logs bundle: table key 999 is not a payload type id"),
        ("signal bogus", bogus, r"bundle.signal 'bogus' is not a signal"),
    ]


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize(("name", "bad", "message"), _foreign_tables(), ids=[c[0] for c in _foreign_tables()])
def test_tables_of_another_signal_are_rejected(name: str, bad: OtapBundle, message: str, sort: bool) -> None:
    _rejects_then_round_trips("logs", bad, LOGS_GEN[1], message, sort)


def _nulled(name: str) -> OtapBundle:
    attrs = LOGS_GEN[0][P.LOG_ATTRS]
    values = attrs[name].to_pylist()
    values[3] = None
    return _with(LOGS_GEN[0], P.LOG_ATTRS, _set(attrs, name, pa.array(values, attrs.schema.field(name).type)))


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("column", ["key", "type"])
def test_nulls_in_not_null_columns_are_rejected(column: str, sort: bool) -> None:
    message = rf"LOG_ATTRS\.{column}: 1 null value\(s\) in a not-null column \(e\.g\. rows \[3\]\)"
    _rejects_then_round_trips("logs", _nulled(column), LOGS_GEN[1], message, sort)


@pytest.mark.parametrize("sort", [False, True])
def test_unknown_anyvalue_type_codes_are_rejected(sort: bool) -> None:
    attrs = LOGS_GEN[0][P.LOG_ATTRS]
    codes = attrs["type"].to_numpy(zero_copy_only=False).copy()
    codes[5] = 99
    bad = _with(LOGS_GEN[0], P.LOG_ATTRS, _set(attrs, "type", pa.array(codes, pa.uint8())))
    message = r"LOG_ATTRS\.type: unknown AnyValue type code 99 at row 5; defined codes are 0 \(empty\) to 7 \(bytes\)"
    _rejects_then_round_trips("logs", bad, LOGS_GEN[1], message, sort)


def _marked(pt: PayloadType, name: str, encoding: bytes) -> OtapBundle:
    batch = LOGS_GEN[0][pt]
    i = batch.schema.get_field_index(name)
    field = batch.schema.field(i)
    return _with(LOGS_GEN[0], pt, batch.set_column(i, field.with_metadata({b"encoding": encoding}), batch.column(i)))


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize(
    ("pt", "column", "encoding", "message"),
    [
        (P.RESOURCE_ATTRS, "parent_id", b"zz", r"^RESOURCE_ATTRS\.parent_id: unknown encoding 'zz' \(expected 'plain', 'delta' or 'quasidelta'\)$"),
        (P.LOG_ATTRS, "key", b"quasidelta", r"^LOG_ATTRS\.key: marked 'quasidelta', an encoding only the id columns of LOG_ATTRS carry \(parent_id\)$"),
        (P.LOGS, "time_unix_nano", b"delta", r"^LOGS\.time_unix_nano: marked 'delta', an encoding only the id columns of LOGS carry \(id, resource\.id, scope\.id\)$"),
        (P.LOGS, "id", b"quasidelta", r"^LOGS\.id: marked 'quasidelta', which is defined only for the parent_id of attribute, span event, span link and exemplar tables$"),
    ],
)
def test_id_encodings_the_decoder_cannot_undo_are_rejected(pt: PayloadType, column: str, encoding: bytes, message: str, sort: bool) -> None:
    """Found by fuzzing: unsorted, the encoder passed an unknown mark through to an envelope no
    decoder reads."""
    _rejects_then_round_trips("logs", _marked(pt, column, encoding), LOGS_GEN[1], message, sort)


@pytest.mark.parametrize(
    ("orders", "message"),
    [
        ({30: ["nope"]}, r"EncoderConfig\.sort_orders\[LOGS\]: no column 'nope'"),
        ({999: ["id"]}, r"EncoderConfig\.sort_orders: unknown payload type id 999"),
        ({1: ["parent_id", "key"]}, r"EncoderConfig\.sort_orders\[RESOURCE_ATTRS\]: parent_id must be the last sort key"),
    ],
)
def test_sort_orders_are_checked_when_the_config_is_built(orders: dict[int, list[str]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EncoderConfig(sort_orders=orders)


def test_valid_sort_orders_still_build() -> None:
    config = EncoderConfig(sort_orders={30: ["severity_number", "time_unix_nano"]})
    assert config.sort_orders is not None and config.sort_orders[30] == ("severity_number", "time_unix_nano")
    assert _canon(Decoder().decode(Encoder("logs", config).encode(LOGS_GEN[0]).to_bytes())) == _canon(LOGS_GEN[0])


def test_what_is_no_bundle_is_refused_saying_how_to_make_one() -> None:
    request = next(otap_model.generate_otlp("logs", 10, batch_size=10, seed=1))
    table = otap_model.from_otlp(request)[PayloadType.LOGS]
    for value, hint in ((request, "ExportLogsServiceRequest: convert OTLP with otap_model.from_otlp first"),
                        (request.SerializeToString(), "bytes: convert OTLP with otap_model.from_otlp first"),
                        (table, "RecordBatch: wrap tables as OtapBundle(signal, {PayloadType: table})")):
        for encode in (Encoder("logs").encode, Encoder("logs").encode_records):
            with pytest.raises(EncodingError, match=rf"^expected an otap_model\.OtapBundle, got {re.escape(hint)}$"):
                encode(value)
