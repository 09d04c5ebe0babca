"""The OTAP data model: payload ids, relations and annotated reference schemas."""

import pyarrow as pa
import pytest

import otap_model as m
from otap_model import PayloadType as P
from otap_model import Signal


def test_payload_type_ids_match_the_otap_protocol():
    expected = {
        "RESOURCE_ATTRS": 1, "SCOPE_ATTRS": 2, "UNIVARIATE_METRICS": 10, "NUMBER_DATA_POINTS": 11,
        "SUMMARY_DATA_POINTS": 12, "HISTOGRAM_DATA_POINTS": 13, "EXP_HISTOGRAM_DATA_POINTS": 14,
        "NUMBER_DP_ATTRS": 15, "SUMMARY_DP_ATTRS": 16, "HISTOGRAM_DP_ATTRS": 17, "EXP_HISTOGRAM_DP_ATTRS": 18,
        "NUMBER_DP_EXEMPLARS": 19, "HISTOGRAM_DP_EXEMPLARS": 20, "EXP_HISTOGRAM_DP_EXEMPLARS": 21,
        "NUMBER_DP_EXEMPLAR_ATTRS": 22, "HISTOGRAM_DP_EXEMPLAR_ATTRS": 23,
        "EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS": 24, "MULTIVARIATE_METRICS": 25, "METRIC_ATTRS": 26,
        "LOGS": 30, "LOG_ATTRS": 31, "SPANS": 40, "SPAN_ATTRS": 41, "SPAN_EVENTS": 42, "SPAN_LINKS": 43,
        "SPAN_EVENT_ATTRS": 44, "SPAN_LINK_ATTRS": 45,
    }
    assert {pt.name: int(pt) for pt in P if pt is not P.UNKNOWN} == expected


@pytest.mark.parametrize("signal", list(Signal))
def test_every_payload_of_a_signal_has_a_schema_and_relations_point_at_real_columns(signal):
    payloads = m.SIGNAL_PAYLOADS[signal]
    assert payloads[0] is m.ROOT_PAYLOAD[signal]
    children = {rel.child for rel in m.relations(signal)}
    assert children == set(payloads) - {m.ROOT_PAYLOAD[signal]}
    for rel in m.relations(signal):
        parent = m.reference_schema(rel.parent)
        column = parent.field(rel.parent_column.split(".")[0])
        if "." in rel.parent_column:
            column = column.type.field(rel.parent_column.split(".")[1])
        assert column.type == rel.parent_id_type, rel
        child_parent_id = m.reference_schema(rel.child).field("parent_id")
        assert child_parent_id.type == rel.parent_id_type
        assert not child_parent_id.nullable
        # parents come before children in the signal's table order
        assert payloads.index(rel.parent) < payloads.index(rel.child)


def test_id_widths_follow_the_reference():
    assert m.reference_schema(P.LOGS).field("id").type == pa.uint16()
    assert m.reference_schema(P.SPAN_EVENTS).field("id").type == pa.uint32()
    assert m.reference_schema(P.NUMBER_DATA_POINTS).field("parent_id").type == pa.uint16()
    assert m.reference_schema(P.SPAN_EVENT_ATTRS).field("parent_id").type == pa.uint32()
    metric_id = m.reference_schema(P.UNIVARIATE_METRICS).field("id")
    assert not metric_id.nullable and not m.annotation(metric_id).optional


def test_annotations_are_decoded_from_field_metadata():
    logs = m.reference_schema(P.LOGS)
    assert m.annotation(logs.field("severity_text")) == m.Annotation(optional=True, dictionary=8)
    assert m.annotation(logs.field("id")) == m.Annotation(optional=True, encoding="delta")
    body_str = logs.field("body").type.field("str")
    assert m.annotation(body_str) == m.Annotation(optional=True, dictionary=16)
    attrs = m.reference_schema(P.SPAN_EVENT_ATTRS)
    assert m.annotation(attrs.field("parent_id")) == m.Annotation(dictionary=8, encoding="quasidelta")
    assert m.annotation(attrs.field("key")) == m.Annotation(dictionary=8)


def test_optional_means_nullable_everywhere():
    def walk(fields):
        for f in fields:
            assert f.nullable == m.annotation(f).optional, f
            if pa.types.is_struct(f.type):
                walk(list(f.type))
    for pt in P:
        if pt in (P.UNKNOWN, P.MULTIVARIATE_METRICS):
            continue
        walk(list(m.reference_schema(pt)))


def test_unknown_and_unmodelled_payload_types_are_rejected_clearly():
    with pytest.raises(m.SchemaError, match="unknown payload type id 99"):
        m.reference_schema(99)
    with pytest.raises(m.SchemaError, match="MULTIVARIATE_METRICS"):
        m.reference_schema(P.MULTIVARIATE_METRICS)


def test_conforms_names_the_offending_column():
    schema = m.reference_schema(P.LOG_ATTRS)
    good = pa.RecordBatch.from_pylist(
        [{"parent_id": 0, "key": "k", "type": 1, "str": "v"}], schema=schema
    )
    m.conforms(good, P.LOG_ATTRS)
    bad = good.set_column(1, pa.field("key", pa.binary(), nullable=False), pa.array([b"k"]))
    with pytest.raises(m.SchemaError, match=r"LOG_ATTRS\.key: expected string"):
        m.conforms(bad, P.LOG_ATTRS)
    with pytest.raises(m.SchemaError, match="differ from the reference"):
        m.conforms(good.drop_columns(["str"]), P.LOG_ATTRS)


def test_conforms_refuses_transport_encoded_ids():
    """Found by fuzzing the encoder: to_otlp read quasidelta-marked parent ids as plain ones, so
    the same table meant one thing to to_otlp and another to the encoder and decoder."""
    schema = m.reference_schema(P.LOG_ATTRS)
    good = pa.RecordBatch.from_pylist([{"parent_id": 0, "key": "k", "type": 1, "str": "v"}], schema=schema)
    plain = good.set_column(0, schema.field(0).with_metadata({b"encoding": b"plain"}), good.column(0))
    m.conforms(plain, P.LOG_ATTRS)
    marked = good.set_column(0, schema.field(0).with_metadata({b"encoding": b"quasidelta"}), good.column(0))
    with pytest.raises(m.SchemaError, match=r"^LOG_ATTRS\.parent_id: its ids are marked 'quasidelta' \(transport-encoded\), and a plain bundle holds plain ids: decode the bundle first"):
        m.conforms(marked, P.LOG_ATTRS)
    logs = m.reference_schema(P.LOGS)
    scope = logs.field("scope")
    delta_id = pa.struct([c.with_metadata({b"encoding": b"delta"}) if c.name == "id" else c for c in scope.type])
    batch = pa.RecordBatch.from_pylist([{"id": 0, "scope": {"id": 0}}], schema=logs.set(logs.get_field_index("scope"), scope.with_type(delta_id)))
    with pytest.raises(m.SchemaError, match=r"^LOGS\.scope\.id: its ids are marked 'delta'"):
        m.conforms(batch, P.LOGS)


def test_bundle_equality_treats_missing_and_empty_tables_alike():
    schema = m.reference_schema(P.LOG_ATTRS)
    empty = schema.empty_table().to_batches()
    empty_batch = empty[0] if empty else pa.RecordBatch.from_pylist([], schema=schema)
    a = m.OtapBundle(Signal.LOGS, {})
    b = m.OtapBundle(Signal.LOGS, {P.LOG_ATTRS: empty_batch})
    assert a == b
    with pytest.raises(ValueError, match="does not belong to signal logs"):
        m.OtapBundle(Signal.LOGS, {P.SPANS: empty_batch})
