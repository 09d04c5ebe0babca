"""Random plain OTAP bundles for the transport tests, and the relation view they are compared by.

Bundles are built straight from the reference schemas: hypothesis draws the shape (how many
resources, scopes, root rows, and the fan-out of every child table, zero included) and a seed; the
seed drives the values, drawn from small pools so that keys, values, names and trace ids repeat
across parents (quasi-delta runs), with nulls, NaN, -0.0, empty strings and CBOR maps / slices.

``relation_view(bundle)`` is what "the same relations" means: every root row as its own values
(ids left out) joined with its resource, its scope and, recursively, the multiset of its children,
each child joined the same way. Two bundles with the same view hold the same telemetry whatever
their row order and id numbering.
"""

from __future__ import annotations

import math
import struct
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from otap_model import ROOT_PAYLOAD, OtapBundle, PayloadType, Signal, reference_schema, relations

P = PayloadType

KEYS = ["a", "b", "service.name", "http.method", ""]
VALUES: dict[int, list[Any]] = {
    1: ["", "x", "y", "GET", "ünï"],
    2: [0, 1, -1, 2**62],
    3: [0.0, -0.0, 1.5, math.nan, -2.25],
    4: [True, False],
    5: [b"\xbf\xff", b"\xbfaa\x01\xff"],  # CBOR indefinite maps
    6: [b"\x9f\xff", b"\x9f\x01\x02\xff"],  # CBOR indefinite arrays
    7: [b"", b"\x00", b"ab"],
}
VALUE_COLUMN = {1: "str", 2: "int", 3: "double", 4: "bool", 5: "ser", 6: "ser", 7: "bytes"}
TRACE_IDS = [bytes([i]) * 16 for i in range(3)]
SPAN_IDS = [bytes([i]) * 8 for i in range(3)]
NAMES = ["GET /", "db.query", "handler"]


class _Builder:
    """Rows of every table of one bundle, appended parent first."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.rows: dict[PayloadType, list[dict[str, Any]]] = defaultdict(list)

    def pick(self, pool: list[Any], null: float = 0.0) -> Any:
        if null and self.rng.random() < null:
            return None
        return pool[int(self.rng.integers(len(pool)))]

    def any_value(self) -> dict[str, Any]:
        code = int(self.rng.integers(8))
        value: dict[str, Any] = {"type": code, "str": None, "int": None, "double": None, "bool": None,
                                 "bytes": None, "ser": None}
        if code and self.rng.random() > 0.05:  # sometimes the active column is null
            value[VALUE_COLUMN[code]] = self.pick(VALUES[code])
        return value

    def attrs(self, pt: PayloadType, parent_id: int, count: int) -> None:
        for _ in range(count):
            self.rows[pt].append({"parent_id": parent_id, "key": self.pick(KEYS), **self.any_value()})

    def generic(self, pt: PayloadType, **fixed: Any) -> dict[str, Any]:
        """A row with every column of ``pt`` filled at random (nullable ones sometimes null)."""
        row = {f.name: _random_value(self, f) for f in reference_schema(pt) if f.name not in fixed}
        row.update(fixed)
        self.rows[pt].append(row)
        return row

    def bundle(self, signal: Signal) -> OtapBundle:
        tables = {}
        for pt, rows in self.rows.items():
            schema = reference_schema(pt)
            columns = {f.name: [r[f.name] for r in rows] for f in schema}
            tables[pt] = pa.RecordBatch.from_pydict(columns, schema=schema)
        return OtapBundle.of(signal, tables)


def _random_value(b: _Builder, field: pa.Field) -> Any:
    if field.nullable and b.rng.random() < 0.2:
        return None
    t = field.type
    if pa.types.is_struct(t):
        return {f.name: _random_value(b, f) for f in t}
    if pa.types.is_list(t):
        return [_random_value(b, t.value_field) for _ in range(int(b.rng.integers(3)))]
    if pa.types.is_string(t):
        return b.pick(NAMES)
    if pa.types.is_fixed_size_binary(t):
        return b.pick(TRACE_IDS if t.byte_width == 16 else SPAN_IDS)
    if pa.types.is_binary(t):
        return b.pick(VALUES[7])
    if pa.types.is_boolean(t):
        return b.pick([True, False])
    if pa.types.is_floating(t):
        return b.pick([0.5, 1.0, -3.0])
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return 1_700_000_000_000_000_000 + int(b.rng.integers(3)) * 1000
    if pa.types.is_integer(t):
        return int(b.rng.integers(3))
    raise AssertionError(f"no random value for {t}")


def _dense(ids: list[int | None]) -> None:
    """Number the non-null entries 0, 1, ... in row order (in place)."""
    n = 0
    for i, v in enumerate(ids):
        if v is not None:
            ids[i] = n
            n += 1


fanout = st.integers(0, 3)


@st.composite
def plain_bundles(draw: st.DrawFn, signal: Signal) -> OtapBundle:
    """A plain bundle of ``signal`` with random fan-out at every level."""
    b = _Builder(np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    root = ROOT_PAYLOAD[signal]
    n_resources = draw(st.integers(1, 3))
    scope_id = 0
    for resource_id in range(n_resources):
        resource = {"id": resource_id, "schema_url": b.pick(["", "https://s/1"], 0.5),
                    "dropped_attributes_count": b.pick([1, 2], 0.7)}
        b.attrs(P.RESOURCE_ATTRS, resource_id, draw(fanout))
        for _ in range(draw(st.integers(1, 2))):
            scope = {"id": scope_id, "name": b.pick(["lib", "io"], 0.3), "version": b.pick(["1"], 0.5),
                     "dropped_attributes_count": None}
            b.attrs(P.SCOPE_ATTRS, scope_id, draw(fanout))
            for _ in range(draw(st.integers(1, 4))):  # a scope exists through its rows
                _root_row(draw, b, signal, root, resource, scope)
            scope_id += 1
    return b.bundle(signal)


def _root_row(draw: st.DrawFn, b: _Builder, signal: Signal, root: PayloadType,
              resource: dict[str, Any], scope: dict[str, Any]) -> None:
    fixed: dict[str, Any] = {"resource": dict(resource), "scope": dict(scope)}
    if signal is Signal.LOGS:
        body = b.any_value() if b.rng.random() < 0.8 else None
        row = b.generic(root, id=None, body=body, **fixed)
        _with_id(b, row, [lambda i: b.attrs(P.LOG_ATTRS, i, draw(fanout))])
    elif signal is Signal.TRACES:
        row = b.generic(root, id=None, **fixed)
        _with_id(b, row, [
            lambda i: b.attrs(P.SPAN_ATTRS, i, draw(fanout)),
            lambda i: _children(draw, b, P.SPAN_EVENTS, i, P.SPAN_EVENT_ATTRS),
            lambda i: _children(draw, b, P.SPAN_LINKS, i, P.SPAN_LINK_ATTRS),
        ])
    else:
        metric_type = int(b.rng.integers(1, 6))
        metric_id = len(b.rows[root])
        b.generic(root, id=metric_id, metric_type=metric_type, **fixed)
        b.attrs(P.METRIC_ATTRS, metric_id, draw(st.integers(0, 1)))
        dp, attrs, exemplars, exemplar_attrs = {
            1: (P.NUMBER_DATA_POINTS, P.NUMBER_DP_ATTRS, P.NUMBER_DP_EXEMPLARS, P.NUMBER_DP_EXEMPLAR_ATTRS),
            2: (P.NUMBER_DATA_POINTS, P.NUMBER_DP_ATTRS, P.NUMBER_DP_EXEMPLARS, P.NUMBER_DP_EXEMPLAR_ATTRS),
            3: (P.HISTOGRAM_DATA_POINTS, P.HISTOGRAM_DP_ATTRS, P.HISTOGRAM_DP_EXEMPLARS,
                P.HISTOGRAM_DP_EXEMPLAR_ATTRS),
            4: (P.EXP_HISTOGRAM_DATA_POINTS, P.EXP_HISTOGRAM_DP_ATTRS, P.EXP_HISTOGRAM_DP_EXEMPLARS,
                P.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS),
            5: (P.SUMMARY_DATA_POINTS, P.SUMMARY_DP_ATTRS, None, None),
        }[metric_type]
        for _ in range(draw(fanout)):
            point = b.generic(dp, id=None, parent_id=metric_id)
            grand = [lambda i, attrs=attrs: b.attrs(attrs, i, draw(st.integers(0, 2)))]
            if exemplars is not None:
                grand.append(lambda i, e=exemplars, a=exemplar_attrs: _exemplars(draw, b, e, i, a))
            _with_id(b, point, grand)


def _with_id(b: _Builder, row: dict[str, Any], add_children: list[Any]) -> None:
    """Give ``row`` the next id of its table if adding its children added any row."""
    before = sum(len(v) for v in b.rows.values())
    candidate = _next_id(b, row)
    for add in add_children:
        add(candidate)
    if sum(len(v) for v in b.rows.values()) > before:
        row["id"] = candidate


def _next_id(b: _Builder, row: dict[str, Any]) -> int:
    table = next(rows for rows in b.rows.values() if rows and rows[-1] is row)
    return sum(1 for r in table if r["id"] is not None)


def _children(draw: st.DrawFn, b: _Builder, pt: PayloadType, parent: int, attrs_pt: PayloadType) -> None:
    for _ in range(draw(st.integers(0, 2))):
        row = b.generic(pt, id=None, parent_id=parent)
        _with_id(b, row, [lambda i: b.attrs(attrs_pt, i, draw(st.integers(0, 2)))])


def _exemplars(draw: st.DrawFn, b: _Builder, pt: PayloadType, parent: int, attrs_pt: PayloadType) -> None:
    for _ in range(draw(st.integers(0, 2))):
        kind = int(b.rng.integers(3))  # int, double or neither
        row = b.generic(pt, id=None, parent_id=parent,
                        int_value=b.pick([0, 7]) if kind == 0 else None,
                        double_value=b.pick([0.0, 2.5, math.nan]) if kind == 1 else None)
        _with_id(b, row, [lambda i: b.attrs(attrs_pt, i, draw(st.integers(0, 1)))])


# ---------------------------------------------------------------------------------------------
# Relation view


def canon(value: Any) -> Any:
    """A comparable, order-independent form of a cell: floats by their bits (NaN, -0.0 exact)."""
    if isinstance(value, float):
        return ("f", struct.pack("<d", value).hex())
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(canon(v) for v in value)
    return value


_ID_FIELDS = {"id", "parent_id"}


def relation_view(bundle: OtapBundle) -> list[str]:
    """Every root row joined with its resource, scope and all its descendants, as sorted strings."""
    rels = relations(bundle.signal)
    rows = {pt: t.to_pylist() for pt, t in bundle.tables.items()}

    def children_of(pt: PayloadType) -> list[Any]:
        return [r for r in rels if r.parent is pt and r.parent_column == "id"]

    def joined(pt: PayloadType) -> dict[int, list[str]]:
        """parent_id -> sorted list of the child rows (with their own descendants) of table pt."""
        by_parent: dict[int, list[str]] = defaultdict(list)
        grand = {r.child: joined(r.child) for r in children_of(pt)}
        for row in rows.get(pt, []):
            by_parent[row["parent_id"]].append(repr(_row_view(row, grand)))
        return {k: sorted(v) for k, v in by_parent.items()}

    root = ROOT_PAYLOAD[bundle.signal]
    resource_attrs, scope_attrs = joined(P.RESOURCE_ATTRS), joined(P.SCOPE_ATTRS)
    grand = {r.child: joined(r.child) for r in children_of(root)}
    out = []
    for row in rows.get(root, []):
        view = _row_view(row, grand)
        view["resource"] = (canon({k: v for k, v in (row["resource"] or {}).items() if k != "id"}),
                            resource_attrs.get((row["resource"] or {}).get("id"), []))
        view["scope"] = (canon({k: v for k, v in (row["scope"] or {}).items() if k != "id"}),
                         scope_attrs.get((row["scope"] or {}).get("id"), []))
        out.append(repr(sorted(view.items())))
    return sorted(out)


def _row_view(row: dict[str, Any], grand: dict[PayloadType, dict[int, list[str]]]) -> dict[str, Any]:
    view: dict[str, Any] = {k: canon(v) for k, v in row.items() if k not in _ID_FIELDS}
    for child, by_parent in grand.items():
        view[child.name] = by_parent.get(row["id"], []) if row["id"] is not None else []
    return view


# ---------------------------------------------------------------------------------------------
# The strategy's own guarantees


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(list(Signal)).flatmap(lambda s: plain_bundles(s)))
def test_generated_bundles_keep_the_plain_contract(bundle: OtapBundle) -> None:
    """Ids are dense in row order, non-null only with children; every parent_id resolves."""
    for rel in relations(bundle.signal):
        child = bundle.get(rel.child)
        parent = bundle.get(rel.parent)
        if child is None:
            continue
        assert parent is not None
        head, _, tail = rel.parent_column.partition(".")
        ids = parent.column(head)
        ids = ids.field(tail) if tail else ids
        assert set(child.column("parent_id").to_pylist()) <= set(ids.to_pylist())
    for table in bundle.tables.values():
        if "id" in table.schema.names:
            present = [v for v in table.column("id").to_pylist() if v is not None]
            assert present == list(range(len(present)))
