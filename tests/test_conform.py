"""otap_model.conform: tables from pandas, polars-style Arrow layouts and loose producers reach the
reference schema with every value unchanged, or are refused with a SchemaError naming the column."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_arrow import Decoder, Encoder, EncodingError
from otap_model import (
    OtapBundle,
    PayloadType,
    SchemaError,
    Signal,
    conform,
    generate,
    reference_schema,
    to_otlp,
)
from otap_model.otlp.order import canonical_order

P = PayloadType


def _bundles() -> dict[Signal, OtapBundle]:
    return {s: next(generate(s, 120, batch_size=120, seed=11)) for s in Signal}


BUNDLES = _bundles()


def _relayout(array: pa.Array, how: str) -> pa.Array:
    """The same values in another Arrow layout a foreign producer might hand over."""
    t = array.type
    if how == "large" and (pa.types.is_string(t) or pa.types.is_binary(t)):
        return array.cast(pa.large_binary() if pa.types.is_binary(t) else pa.large_string())
    if how == "view" and pa.types.is_string(t):
        return array.cast(pa.string_view())
    if how == "view" and pa.types.is_binary(t):
        return array.cast(pa.binary_view())
    if how == "dictionary" and (pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_fixed_size_binary(t)):
        return array.dictionary_encode()
    if how == "wide" and pa.types.is_unsigned_integer(t):
        return array.cast(pa.int64())
    if how == "wide" and pa.types.is_timestamp(t):
        return array.cast(pa.int64())  # nanoseconds since the epoch
    if how == "wide" and pa.types.is_fixed_size_binary(t):
        return array.cast(pa.binary())
    if how == "wide" and pa.types.is_list(t):
        return array.cast(pa.large_list(t.value_field))
    return array


def _loosen(batch: pa.RecordBatch, hows: list[str]) -> pa.RecordBatch:
    """Other layouts per column, every field nullable and without annotations, as pandas or
    polars would hand the table over."""
    arrays = [_relayout(col, hows[i % len(hows)]) for i, col in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


LAYOUTS = st.sampled_from(["as is", "large", "view", "dictionary", "wide"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signal=st.sampled_from(list(Signal)), hows=st.lists(LAYOUTS, min_size=1, max_size=6),
       start=st.integers(0, 60), as_table=st.booleans())
def test_other_layouts_conform_to_the_identical_table(signal: Signal, hows: list[str], start: int, as_table: bool) -> None:
    for pt, table in BUNDLES[signal].tables.items():
        original = table.slice(start, 50)  # non-zero offsets too
        loose = _loosen(original, hows)
        given_ = pa.Table.from_batches([loose[:7], loose[7:]]) if as_table and loose.num_rows > 7 else loose
        got = conform(given_, pt)
        assert got.schema.equals(reference_schema(pt), check_metadata=True), pt.name
        assert got.equals(original), pt.name


@pytest.mark.parametrize("signal", list(Signal), ids=lambda s: s.value)
def test_pandas_round_trip_encodes_to_the_same_telemetry(signal: Signal) -> None:
    bundle = BUNDLES[signal]
    # to_pandas makes integer columns with nulls float64, ids bytes objects, structs dicts.
    tables = {pt: conform(t.to_pandas(), pt) for pt, t in bundle.tables.items()}
    rebuilt = OtapBundle(signal, tables)
    assert rebuilt == bundle
    decoded = Decoder().decode(Encoder(signal).encode(rebuilt).to_bytes())
    assert canonical_order(to_otlp(decoded)) == canonical_order(to_otlp(bundle))  # sorting reorders records


def test_a_conforming_batch_is_returned_as_is() -> None:
    batch = BUNDLES[Signal.LOGS][P.LOGS]
    assert conform(batch, P.LOGS) is batch


def test_a_batch_of_the_reference_schema_is_still_checked_for_nulls() -> None:
    attrs = BUNDLES[Signal.LOGS][P.LOG_ATTRS]
    keys = pa.array([None, *attrs.column("key").to_pylist()[1:]], pa.string())
    with pytest.raises(SchemaError, match=r"^LOG_ATTRS.key: 1 null value\(s\) in a not-null column \(e.g. rows \[0\]\)$"):
        conform(attrs.set_column(1, attrs.schema.field("key"), keys), P.LOG_ATTRS)
    with pytest.raises(SchemaError, match=r"^conform: 99 is not a payload type"):
        conform(attrs, 99)  # type: ignore[arg-type]


def test_absent_optional_columns_and_struct_fields_are_filled_with_nulls() -> None:
    got = conform(pa.table({
        "parent_id": pa.array([0, 1], pa.int64()),
        "key": ["http.method", "http.status_code"],
        "type": [1, 2],
        "str": ["GET", None],
        "int": [None, 200],
    }), P.LOG_ATTRS)
    assert got.schema.equals(reference_schema(P.LOG_ATTRS), check_metadata=True)
    assert got.column("int").to_pylist() == [None, 200]
    assert got.column("bytes").null_count == 2
    spans = conform(pa.table({
        "start_time_unix_nano": pa.array([1_700_000_000_000_000_000], pa.int64()),
        "duration_time_unix_nano": pa.array([1500], pa.int64()),
        "trace_id": [bytes(range(16))],
        "span_id": [bytes(range(8))],
        "name": ["GET /"],
        "status": [{"code": 2}],
    }), P.SPANS)
    assert spans.column("status").to_pylist() == [{"code": 2, "status_message": None}]
    assert spans.column("duration_time_unix_nano").to_pylist()[0].value == 1500
    assert spans.column("trace_id").type == pa.binary(16)


def test_a_null_struct_may_hide_nulls_in_its_required_children() -> None:
    body_type = reference_schema(P.LOGS).field("body").type
    raw = pa.StructArray.from_arrays(
        [pa.array([1, None], pa.uint8()), pa.array(["hello", None])], names=["type", "str"],
        mask=pa.array([False, True]),
    )
    got = conform(pa.table({"body": raw}), P.LOGS).column("body")
    assert got.type == body_type
    assert got.to_pylist()[0]["str"] == "hello"
    assert got.to_pylist()[1] is None


Bad = Callable[[], pa.Table]
BAD: list[tuple[str, Bad, str]] = [
    ("unknown column", lambda: pa.table({"parent_id": [0], "key": ["k"], "type": [1], "color": ["red"]}),
     r"^LOG_ATTRS: unknown column\(s\) \['color'\]; the reference schema has \['parent_id', 'key'"),
    ("missing required", lambda: pa.table({"parent_id": [0], "str": ["v"]}),
     r"^LOG_ATTRS: missing required \(not null\) column\(s\) \['key', 'type'\]$"),
    ("overflow", lambda: pa.table({"parent_id": [0, 70_000], "key": ["k", "k"], "type": [1, 1]}),
     r"^LOG_ATTRS.parent_id: a value does not fit uint16: Integer value 70000 not in range: 0 to 65535"),
    ("fraction", lambda: pa.table({"parent_id": [0.5], "key": ["k"], "type": [1]}),
     r"^LOG_ATTRS.parent_id: a value does not fit uint16: Float value 0.500000 was truncated"),
    ("float beyond 2**53", lambda: pa.table({"parent_id": [0], "key": ["k"], "type": [2], "int": [2.0**60]}),
     r"^LOG_ATTRS.int: float value 1.152921504606847e\+18 is beyond 2\*\*53, .*types_mapper=pandas.ArrowDtype"),
    ("nulls in a required column", lambda: pa.table({"parent_id": [0, 1], "key": ["k", None], "type": [1, 1]}),
     r"^LOG_ATTRS.key: 1 null value\(s\) in a not-null column \(e.g. rows \[1\]\)$"),
    ("bytes for text", lambda: pa.table({"parent_id": [0], "key": [b"k"], "type": [1]}),
     r"^LOG_ATTRS.key: binary cannot hold the reference type string without changing values$"),
    ("numbers for text", lambda: pa.table({"parent_id": [0], "key": ["k"], "type": [1], "str": [5]}),
     r"^LOG_ATTRS.str: int64 cannot hold the reference type string without changing values$"),
    ("a struct where a scalar goes", lambda: pa.table({"parent_id": [{"a": 1}], "key": ["k"], "type": [1]}),
     r"^LOG_ATTRS.parent_id: struct<a: int64> cannot hold the reference type uint16"),
]


@pytest.mark.parametrize(("name", "make", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_tables_raise_schema_error_naming_the_column(name: str, make: Bad, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        conform(make(), P.LOG_ATTRS)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pa.table({"trace_id": [b"short"], "span_id": [bytes(8)], "start_time_unix_nano": [1],
                   "duration_time_unix_nano": [1], "name": ["n"]}),
         r"^SPANS.trace_id: a value does not fit fixed_size_binary\[16\]"),
        (pa.table({"trace_id": [bytes(16)], "span_id": [bytes(8)], "start_time_unix_nano": [1],
                   "duration_time_unix_nano": [1], "name": ["n"], "status": [{"code": 1, "reason": "x"}]}),
         r"^SPANS.status: unknown struct field\(s\) \['reason'\]; the reference struct has \['code', 'status_message'\]$"),
        (pa.table({"trace_id": [bytes(16)], "span_id": [bytes(8)], "start_time_unix_nano": [1],
                   "duration_time_unix_nano": [1], "name": ["n"], "status": ["ok"]}),
         r"^SPANS.status: string is not a struct; the reference type is struct<code: int32"),
        (42, r"^SPANS: expected a pyarrow RecordBatch or Table, a pandas DataFrame or an object with __arrow_c_stream__, got int$"),
    ],
    ids=["id width", "unknown struct field", "scalar for struct", "not a table"],
)
def test_bad_spans_raise_schema_error(table: object, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        conform(table, P.SPANS)


def test_the_encoder_refusal_points_at_conform() -> None:
    logs = BUNDLES[Signal.LOGS]
    attrs = logs[P.LOG_ATTRS]
    loose = attrs.set_column(1, pa.field("key", pa.large_string(), nullable=False), attrs.column(1).cast(pa.large_string()))
    with pytest.raises(EncodingError, match=r"LOG_ATTRS.key: wrong type large_string .*otap_model.conform\(table, PayloadType.LOG_ATTRS\)"):
        Encoder(Signal.LOGS).encode(OtapBundle(Signal.LOGS, {**logs.tables, P.LOG_ATTRS: loose}))
    fixed = OtapBundle(Signal.LOGS, {**logs.tables, P.LOG_ATTRS: conform(loose, P.LOG_ATTRS)})
    assert canonical_order(to_otlp(Decoder().decode(Encoder(Signal.LOGS).encode(fixed)))) == canonical_order(to_otlp(logs))


def test_objects_exporting_an_arrow_stream_are_accepted() -> None:
    batch = BUNDLES[Signal.TRACES][P.SPAN_ATTRS]

    class ForeignFrame:  # what polars, DuckDB and others expose
        def __arrow_c_stream__(self, requested_schema: object = None) -> object:
            return pa.Table.from_batches([batch]).__arrow_c_stream__(requested_schema)

    assert conform(ForeignFrame(), P.SPAN_ATTRS).equals(batch)


def _donors(n: int) -> list[pa.Array]:
    """Columns of many Arrow types a foreign table might put under any reference name."""
    big = pa.array([2**64 - 1 - i for i in range(n)], pa.uint64())
    return [
        pa.array(range(n), pa.int8()), big, pa.array([float("nan")] * n), pa.array([0.5] * n, pa.float32()),
        pa.array(["x"] * n), pa.array([b"\xff"] * n), pa.array([True] * n), pa.nulls(n),
        pa.array([0] * n, pa.date32()), pa.array([1] * n, pa.decimal128(5, 2)), pa.array([1] * n, pa.timestamp("s")),
        pa.array([1] * n, pa.duration("ms")), pa.array([b"abcd"] * n, pa.binary(4)),
        pa.array([{"type": 1, "str": "s"}] * n), pa.array([["a"]] * n), pa.array([[1, 2]] * n, pa.large_list(pa.int64())),
        pa.array([[("k", 1)]] * n, pa.map_(pa.string(), pa.int64())), pa.array(["a", "b"] * (n // 2)).dictionary_encode(),
        pa.array([None] * n, pa.string()), pa.array([[1.5]] * n),
    ]


FUZZ_TABLES = {pt: t.slice(0, 4) for b in BUNDLES.values() for pt, t in b.tables.items() if t.num_rows >= 4}


@settings(max_examples=200, deadline=None)
@given(pt=st.sampled_from(sorted(FUZZ_TABLES)), swaps=st.dictionaries(st.integers(0, 25), st.integers(-1, 19), max_size=4))
def test_any_arrow_column_is_conformed_or_refused_with_schema_error(pt: PayloadType, swaps: dict[int, int]) -> None:
    """Fuzz: a real table with a few columns dropped (-1) or replaced by columns of other Arrow
    types; conform returns a valid reference table or raises SchemaError, never another exception."""
    table, donors = FUZZ_TABLES[pt], _donors(4)
    columns = {f.name: table.column(i) for i, f in enumerate(table.schema)}
    for i, pick in swaps.items():
        name = table.schema.names[i % table.num_columns]
        if pick < 0:
            columns.pop(name, None)
        else:
            columns[name] = donors[pick]
    try:
        got = conform(pa.table(columns), pt)
    except SchemaError as exc:
        assert str(exc).startswith(pt.name)
    else:
        assert got.schema.equals(reference_schema(pt), check_metadata=True)
        got.validate(full=True)
