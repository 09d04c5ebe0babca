"""optimize / restore on whole bundles: relations survive, ids come back dense, unique and plain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow import BatchArrowRecords, Decoder, Encoder, EncoderConfig
from adaptive_arrow.envelope import ArrowPayload
from adaptive_arrow.errors import DecodingError
from adaptive_arrow.transport import (
    DELTA,
    ENCODING_KEY,
    QUASI_DELTA,
    REFERENCE_SORT_ORDERS,
    TransportError,
    optimize,
    resolve_sort_orders,
    restore,
)
from adaptive_arrow.transport.columns import encoded_paths, get_column
from adaptive_arrow.transport.ids import Renumbering
from adaptive_arrow.transport.optimizer import id_columns, parent_id_encoding
from otap_model import OtapBundle, PayloadType, Signal, generate, reference_schema, relations, to_otlp
from otap_model.otlp.order import canonical_order
from tests.test_transport_strategies import canon, plain_bundles, relation_view

P = PayloadType
any_bundle = st.sampled_from(list(Signal)).flatmap(lambda s: plain_bundles(s))


@dataclass(frozen=True)
class Config:
    sort_orders: dict[int, tuple[str, ...]] | None = None


@settings(max_examples=60, deadline=None)
@given(any_bundle)
def test_restore_of_optimize_keeps_every_relation(bundle: OtapBundle) -> None:
    restored = restore(optimize(bundle))
    assert relation_view(restored) == relation_view(bundle)
    for pt, table in bundle.tables.items():
        out = restored[pt]
        assert out.num_rows == table.num_rows
        assert out.schema.equals(table.schema, check_metadata=True)  # encoding metadata gone


@settings(max_examples=60, deadline=None)
@given(any_bundle)
def test_ids_are_dense_unique_and_in_sorted_order(bundle: OtapBundle) -> None:
    restored = restore(optimize(bundle))
    for pt, table in restored.tables.items():
        for path in id_columns(pt):
            ids = get_column(table, path)
            assert ids is not None
            before = get_column(bundle[pt], path)
            assert ids.null_count == before.null_count
            present = [v for v in ids.to_pylist() if v is not None]
            if path == "id":  # one per row: 0, 1, 2, ... down the sorted table
                assert present == list(range(len(present)))
            else:  # shared by the rows of one resource / scope: numbered in order of first appearance
                first_seen = list(dict.fromkeys(present))
                assert first_seen == list(range(len(first_seen)))
                assert len(first_seen) == len(set(v for v in before.to_pylist() if v is not None))


@settings(max_examples=40, deadline=None)
@given(any_bundle)
def test_optimized_tables_mark_every_id_column(bundle: OtapBundle) -> None:
    optimized = optimize(bundle)
    assert set(optimized.tables) == set(bundle.tables)
    for pt, table in optimized.tables.items():
        marked = dict(encoded_paths(table.schema))
        expected = {path: DELTA for path in id_columns(pt)}
        if (encoding := parent_id_encoding(pt)) is not None:
            expected["parent_id"] = encoding
        assert marked == expected
        # same columns and types as the reference (metadata aside)
        assert table.schema.equals(reference_schema(pt), check_metadata=False)


@settings(max_examples=40, deadline=None)
@given(any_bundle)
def test_children_follow_their_parent_in_sorted_order(bundle: OtapBundle) -> None:
    """parent_id is each child's last sort key, so within a run of equal keys parent ids ascend,
    and data points (sorted by parent_id only) are grouped by parent; the reference root orders
    start with resource.id, so resource ids climb."""
    restored = restore(optimize(bundle, Config(dict(REFERENCE_SORT_ORDERS))))
    for pt in (P.NUMBER_DATA_POINTS, P.HISTOGRAM_DATA_POINTS, P.SUMMARY_DATA_POINTS, P.EXP_HISTOGRAM_DATA_POINTS):
        if (table := restored.get(pt)) is not None:
            pids = table.column("parent_id").to_pylist()
            assert pids == sorted(pids)
    root = restored.get({Signal.LOGS: P.LOGS, Signal.TRACES: P.SPANS, Signal.METRICS: P.UNIVARIATE_METRICS}[bundle.signal])
    if root is not None:
        resource_ids = root.column("resource").field("id").to_pylist()
        assert resource_ids == sorted(resource_ids)


@settings(max_examples=40, deadline=None)
@given(any_bundle)
def test_optimize_is_idempotent_and_restore_of_plain_is_a_no_op(bundle: OtapBundle) -> None:
    """Idempotent when the root order starts with its id columns (the reference orders): the
    renumbering then keeps the order of old ids, so a second pass finds everything sorted."""
    reference = Config(dict(REFERENCE_SORT_ORDERS))
    once = optimize(bundle, reference)
    assert _same_tables(optimize(once, reference), once)
    assert _same_tables(restore(bundle), bundle)


def _same_tables(a: OtapBundle, b: OtapBundle) -> bool:
    """Equal schemas (metadata included) and cells, NaN equal to NaN (Arrow's equals says no)."""
    return set(a.tables) == set(b.tables) and all(
        a[pt].schema.equals(b[pt].schema, check_metadata=True)
        and canon(a[pt].to_pylist()) == canon(b[pt].to_pylist())
        for pt in a.tables
    )


@settings(max_examples=30, deadline=None)
@given(any_bundle, st.data())
def test_any_valid_sort_order_keeps_relations(bundle: OtapBundle, data: st.DataObject) -> None:
    """Custom orders, even ones that split resources or leave parent ids unordered within the
    quasi-delta runs, still decode to the same relations."""
    root = {Signal.LOGS: P.LOGS, Signal.TRACES: P.SPANS, Signal.METRICS: P.UNIVARIATE_METRICS}[bundle.signal]
    sortable = [f.name for f in reference_schema(root) if not pa.types.is_nested(f.type)]
    root_order = data.draw(st.lists(st.sampled_from([*sortable, "resource.id", "scope.id"]), max_size=4))
    attrs_order = data.draw(st.lists(st.sampled_from(["key", "str", "type", "int", "double"]), max_size=3, unique=True))
    orders = {int(root): tuple(root_order), int(P.LOG_ATTRS): tuple(attrs_order), int(P.SPAN_ATTRS): tuple(attrs_order)}
    restored = restore(optimize(bundle, Config(orders)))
    assert relation_view(restored) == relation_view(bundle)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(list(Signal)).flatmap(lambda s: st.lists(plain_bundles(s), min_size=1, max_size=3)))
def test_encoder_and_decoder_keep_relations_in_stream_mode(bundles: list[OtapBundle]) -> None:
    signal = bundles[0].signal
    encoder, decoder = Encoder(signal), Decoder(signal)
    for bundle in bundles:
        decoded = decoder.decode(encoder.encode(bundle).to_bytes())
        assert relation_view(decoded) == relation_view(bundle)
        assert all(not encoded_paths(t.schema) for t in decoded.tables.values())


def test_zero_row_tables_pass_through() -> None:
    logs = _batch(P.LOGS, {"id": [None, None], "resource": [{"id": 0}] * 2, "scope": [{"id": 0}] * 2})
    attrs = pa.RecordBatch.from_pylist([], schema=reference_schema(P.LOG_ATTRS))
    out = restore(optimize(OtapBundle(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs})))
    assert out[P.LOG_ATTRS].num_rows == 0
    assert out[P.LOGS].column("id").to_pylist() == [None, None]


def test_quasi_delta_runs_store_deltas_and_nested_values_stay_absolute() -> None:
    attrs = _batch(P.LOG_ATTRS, {
        "parent_id": [0, 1, 2, 0, 1, 1, 2],
        "key": ["k", "k", "k", "m", "m", "s", "s"],
        "type": [1, 1, 1, 5, 5, 0, 0],
        "str": ["v", "v", "v", None, None, None, None],
        "ser": [None, None, None, b"\xbf\xff", b"\xbf\xff", None, None],
    })
    logs = _batch(P.LOGS, {"id": [0, 1, 2], "resource": [{"id": 0}] * 3, "scope": [{"id": 0}] * 3})
    encoded = optimize(OtapBundle.of(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs}))[P.LOG_ATTRS]
    # sorted by type, key, value, parent_id: Empty (0) first, then Str, then Map (5)
    assert encoded.column("type").to_pylist() == [0, 0, 1, 1, 1, 5, 5]
    assert encoded.column("parent_id").to_pylist() == [1, 2, 0, 1, 1, 0, 1]
    assert encoded.schema.field("parent_id").metadata[ENCODING_KEY] == QUASI_DELTA.encode()


def test_delta_ids_skip_nulls_and_match_the_spec_example() -> None:
    """OTAP spec 6.4.2: delta 0,0,1,0,0,1,1 decodes to 0,0,1,1,1,2,3 (here on resource.id)."""
    ids = [0, 0, 1, 1, 1, 2, 3]
    logs = _batch(P.LOGS, {
        "id": [0, None, 1, None, 2, 3, None],
        "resource": [{"id": i} for i in ids],
        "scope": [{"id": 0}] * 7,
    })
    attrs = _batch(P.LOG_ATTRS, {"parent_id": [0, 1, 2, 3], "key": ["k"] * 4, "type": [2] * 4, "int": [1, 2, 3, 4]})
    encoded = optimize(OtapBundle.of(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs}))[P.LOGS]
    assert encoded.column("resource").field("id").to_pylist() == [0, 0, 1, 0, 0, 1, 1]
    assert encoded.column("id").to_pylist() == [0, None, 1, None, 1, 1, None]
    restored = restore(OtapBundle.of(Signal.LOGS, {P.LOGS: encoded}))[P.LOGS]
    assert restored.column("resource").field("id").to_pylist() == ids
    assert restored.column("id").to_pylist() == [0, None, 1, None, 2, 3, None]


def test_restore_accepts_plain_marked_and_dictionary_columns() -> None:
    attrs = _batch(P.SPAN_EVENT_ATTRS, {"parent_id": [3, 3, 4], "key": ["k"] * 3, "type": [2] * 3, "int": [1, 1, 1]})
    field = attrs.schema.field("parent_id")
    plain = attrs.set_column(0, field.with_metadata({ENCODING_KEY: b"plain"}), attrs.column(0))
    assert restore(OtapBundle.of(Signal.TRACES, {P.SPAN_EVENT_ATTRS: plain}))[P.SPAN_EVENT_ATTRS].column(0).to_pylist() == [3, 3, 4]
    encoded = pa.array([3, 0, 1], pa.uint32()).dictionary_encode().cast(pa.dictionary(pa.uint8(), pa.uint32()))
    quasi = attrs.set_column(0, pa.field("parent_id", encoded.type, False, {ENCODING_KEY: b"quasidelta"}), encoded)
    out = restore(OtapBundle.of(Signal.TRACES, {P.SPAN_EVENT_ATTRS: quasi}))[P.SPAN_EVENT_ATTRS]
    assert out.column(0).to_pylist() == [3, 3, 4]
    assert out.column(0).type == pa.uint32()


# ---------------------------------------------------------------------------------------------
# Errors


def _logs_bundle(attr_parent_ids: list[int | None]) -> OtapBundle:
    logs = _batch(P.LOGS, {"id": [0, 1], "resource": [{"id": 0}] * 2, "scope": [{"id": 0}] * 2})
    n = len(attr_parent_ids)
    attrs = pa.RecordBatch.from_pydict(
        {"parent_id": pa.array(attr_parent_ids, pa.uint16()), "key": ["k"] * n, "type": pa.array([1] * n, pa.uint8()),
         **{c: pa.nulls(n, reference_schema(P.LOG_ATTRS).field(c).type) for c in ("str", "int", "double", "bool", "bytes", "ser")}}
    )
    return OtapBundle.of(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs})


def test_dangling_parent_id_is_reported_with_table_row_and_value() -> None:
    with pytest.raises(TransportError, match=r"LOG_ATTRS: parent_id 7 at row 1 matches no LOGS\.id"):
        optimize(_logs_bundle([0, 7]))


def test_null_parent_id_is_reported() -> None:
    with pytest.raises(TransportError, match=r"LOG_ATTRS: parent_id is null at row 1"):
        optimize(_logs_bundle([0, None]))


def test_child_without_parent_table_is_reported() -> None:
    attrs = _logs_bundle([0])[P.LOG_ATTRS]
    with pytest.raises(TransportError, match=r"LOG_ATTRS: has 1 rows but the bundle has no LOGS table"):
        optimize(OtapBundle.of(Signal.LOGS, {P.LOG_ATTRS: attrs}))


def test_id_column_of_the_wrong_width_is_reported() -> None:
    bundle = _logs_bundle([0])
    logs = bundle[P.LOGS]
    wide = logs.set_column(0, pa.field("id", pa.int64()), pa.array([0, 1], pa.int64()))
    with pytest.raises(TransportError, match=r"LOGS\.id: id column has type int64; expected uint16 or uint32"):
        optimize(OtapBundle.of(Signal.LOGS, {P.LOGS: wide, P.LOG_ATTRS: bundle[P.LOG_ATTRS]}))


def test_parent_ids_that_outgrow_the_child_column_are_reported() -> None:
    mapping = Renumbering(lut=np.array([0, 70_000], np.int64))
    with pytest.raises(TransportError, match=r"X: P\.id ids reach 70000, beyond the uint16 parent_id column"):
        mapping.apply(pa.array([0, 1], pa.uint16()), "X", "P.id")


def test_unknown_encoding_is_reported() -> None:
    logs = _logs_bundle([0])[P.LOGS]
    bad = logs.set_column(0, logs.schema.field("id").with_metadata({ENCODING_KEY: b"zigzag"}), logs.column(0))
    with pytest.raises(TransportError, match=r"LOGS\.id: unknown encoding 'zigzag'"):
        restore(OtapBundle.of(Signal.LOGS, {P.LOGS: bad}))


def _marked(batch: pa.RecordBatch, name: str, encoding: bytes, column: pa.Array | None = None) -> pa.RecordBatch:
    i = batch.schema.get_field_index(name)
    field = batch.schema.field(i)
    column = batch.column(i) if column is None else column
    return batch.set_column(i, pa.field(name, column.type, field.nullable, {ENCODING_KEY: encoding}), column)


@pytest.mark.parametrize("encoding", [b"delta", b"quasidelta"])
def test_a_delta_encoding_on_a_column_that_holds_no_ids_is_refused(encoding: bytes) -> None:
    """Found by fuzzing the decoder: a timestamp or string column marked quasidelta had its buffer
    read as ids (TypeError / ValueError from numpy, not the project's exception)."""
    bundle = _logs_bundle([0, 1])
    attrs = _marked(bundle[P.LOG_ATTRS], "key", encoding)
    with pytest.raises(TransportError, match=rf"^LOG_ATTRS\.key: marked '{encoding.decode()}', an encoding only the id columns of LOG_ATTRS carry \(parent_id\)$"):
        restore(OtapBundle.of(Signal.LOGS, {P.LOGS: bundle[P.LOGS], P.LOG_ATTRS: attrs}))
    logs = _batch(P.LOGS, {"id": [0, 1], "resource": [{"id": 0}] * 2, "scope": [{"id": 0}] * 2, "time_unix_nano": [1, 2]})
    logs = _marked(logs, "time_unix_nano", encoding)
    with pytest.raises(TransportError, match=r"^LOGS\.time_unix_nano: marked .*only the id columns of LOGS carry \(id, resource\.id, scope\.id\)$"):
        restore(OtapBundle.of(Signal.LOGS, {P.LOGS: logs}))


def test_an_id_column_of_the_wrong_type_marked_delta_is_refused() -> None:
    logs = _marked(_logs_bundle([0])[P.LOGS], "id", b"delta", pa.array([0.5, 1.0]))
    with pytest.raises(TransportError, match=r"^LOGS\.id: marked 'delta' but has type double; ids are uint16 or uint32$"):
        restore(OtapBundle.of(Signal.LOGS, {P.LOGS: logs}))


def test_the_decoder_refuses_a_timestamp_column_marked_quasidelta() -> None:
    """The fuzzed envelope itself: valid Arrow IPC whose LOGS.time_unix_nano carries quasidelta."""
    bar = Encoder(Signal.LOGS).encode(next(generate(Signal.LOGS, 20, batch_size=20, seed=1)))
    payloads = list(bar.payloads)
    logs = pa.ipc.open_stream(payloads[0].record).read_next_batch()
    logs = _marked(logs, "time_unix_nano", b"quasidelta")
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, logs.schema).write_batch(logs)  # an OTAP payload has no end-of-stream marker
    payloads[0] = ArrowPayload(payloads[0].schema_id, payloads[0].type, sink.getvalue().to_pybytes())
    with pytest.raises(DecodingError, match=r"^batch 0: encoded ids cannot be restored: LOGS\.time_unix_nano: marked 'quasidelta'"):
        Decoder().decode(BatchArrowRecords(bar.batch_id, tuple(payloads)))


@pytest.mark.parametrize(
    ("orders", "message"),
    [
        ({int(P.LOGS): ("nope",)}, r"sort_orders\[LOGS\]: no column 'nope'"),
        ({int(P.LOGS): ("body",)}, r"sort_orders\[LOGS\]: column 'body' is struct.*cannot be a sort key"),
        ({int(P.LOG_ATTRS): ("parent_id", "key")}, r"sort_orders\[LOG_ATTRS\]: parent_id must be the last sort key"),
        ({int(P.LOG_ATTRS): "key"}, r"sort_orders\[LOG_ATTRS\]: give a sequence of column paths"),
        ({99: ("id",)}, r"sort_orders: unknown payload type id 99"),
        ({int(P.MULTIVARIATE_METRICS): ("id",)}, r"sort_orders: payload type MULTIVARIATE_METRICS has no table"),
    ],
)
def test_bad_sort_orders_are_reported(orders: dict[int, object], message: str) -> None:
    with pytest.raises(TransportError, match=message):
        optimize(_logs_bundle([0]), Config(orders))  # type: ignore[arg-type]


def test_child_order_without_parent_id_gets_it_appended() -> None:
    assert resolve_sort_orders({int(P.SPAN_EVENTS): ("name",)})[P.SPAN_EVENTS] == ("name", "parent_id")
    assert resolve_sort_orders({int(P.SPANS): ()})[P.SPANS] == ()


def test_every_relation_has_an_encoding_rule() -> None:
    for signal in Signal:
        for rel in relations(signal):
            assert parent_id_encoding(rel.child) in (DELTA, QUASI_DELTA)
            head = rel.parent_column
            assert head in id_columns(rel.parent)


def _batch(pt: PayloadType, columns: dict[str, list[object]]) -> pa.RecordBatch:
    schema = reference_schema(pt)
    n = len(next(iter(columns.values())))
    return pa.RecordBatch.from_pydict({f.name: columns.get(f.name, [None] * n) for f in schema}, schema=schema)


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("null", ["struct", "id"])
@pytest.mark.parametrize("struct", ["resource", "scope"])
@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_a_null_resource_or_scope_round_trips(signal: str, struct: str, null: str, sort: bool) -> None:
    """Found by fuzzing the encoder. A null struct: the child id column under it still holds a
    valid-looking value (pyarrow writes 0); the sort took it as an id and the renumbering as a
    null, so the rows of two scopes were renumbered into one and decoded under the wrong scope.
    A null id in a valid struct: to_otlp grouped the row by whatever its id buffer held (the
    renumbering leaves another value there), so the decoded row joined another scope."""
    bundle = next(generate(signal, 20, batch_size=20, seed=13))
    root = next(pt for pt in (P.LOGS, P.SPANS, P.UNIVARIATE_METRICS) if pt in bundle.tables)
    table = bundle[root]
    i = table.schema.get_field_index(struct)
    ids = [v["id"] for v in table.column(i).to_pylist()]
    rows = [r for r, v in enumerate(ids) if ids.count(v) > 1]  # their attributes keep a parent
    assert rows
    for row in rows:
        values = table.column(i).to_pylist()
        values[row] = None if null == "struct" else {**values[row], "id": None}
        nulled = pa.array(values, table.schema.field(i).type)
        if null == "struct":
            assert nulled.field("id")[row].is_valid  # the case: a value under the null slot
        bad = OtapBundle(bundle.signal, {**bundle.tables, root: table.set_column(i, table.schema.field(i), nulled)})
        decoded = Decoder().decode(Encoder(signal, EncoderConfig(sort=sort)).encode(bad).to_bytes())
        assert canonical_order(to_otlp(decoded)) == canonical_order(to_otlp(bad)), f"row {row}"
