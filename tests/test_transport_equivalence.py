"""``optimize`` gives exactly the tables of a plain reference implementation.

The fast path (packed keys sorted with ``np.sort``, numba kernels, quasi-delta runs read from the
sort keys, cached schemas) must not change a byte of the output. The reference here is written
the obvious way, with nothing shared with the fast path except the column helpers: Arrow's own
stable ``sort_indices`` (floats as order-preserving bit patterns, dictionaries decoded, nulls at
the end), dense renumbering in a Python dict, delta loops in Python, and the decoder's value-based
equality rule (``delta.equal_runs``) for quasi-delta runs. Tables are compared with their schema
metadata and as Arrow IPC bytes (values, null slots and validity bitmaps alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import otap_model
from adaptive_arrow.transport import DEFAULT_SORT_ORDERS, REFERENCE_SORT_ORDERS, optimize
from adaptive_arrow.transport.columns import get_column, replace_column
from adaptive_arrow.transport.delta import equal_runs
from adaptive_arrow.transport.optimizer import id_columns, parent_id_encoding, top_down
from otap_model import OtapBundle, PayloadType, Signal, from_otlp, from_zipkin_json
from otap_model.otlp.json import otlp_json_to_message
from tests.test_transport_strategies import plain_bundles

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@dataclass(frozen=True)
class Config:
    sort_orders: dict[int, tuple[str, ...]] | None = None


REFERENCE = Config({int(pt): order for pt, order in REFERENCE_SORT_ORDERS.items()})


def reference_optimize(bundle: OtapBundle, orders: dict[PayloadType, tuple[str, ...]]) -> OtapBundle:
    tables = dict(bundle.tables)
    numbering: dict[tuple[PayloadType, str], dict[int, int]] = {}
    out = {}
    for pt, parent in top_down(bundle.signal):
        if pt not in tables:
            continue
        table = tables[pt]
        if parent is not None:
            mapping = numbering[parent]
            parent_ids = table.column("parent_id")
            table = replace_column(table, "parent_id", pa.array([mapping[v] for v in parent_ids.to_pylist()], parent_ids.type), None)
        rows = _reference_order(table, orders[pt]).to_numpy()
        if np.any(rows != np.arange(table.num_rows)):  # a sorted table is passed on as it is
            table = table.take(rows)
        for path in id_columns(pt):
            ids = get_column(table, path)
            if ids is None:
                continue
            seen: dict[int, int] = {}
            new = [None if v is None else seen.setdefault(v, len(seen)) for v in ids.to_pylist()]
            numbering[(pt, path)] = seen
            table = replace_column(table, path, pa.array(_delta(new, ids.type), ids.type), "delta")
        encoding = parent_id_encoding(pt)
        if encoding is not None:
            values = table.column("parent_id").to_pylist()
            eq = [i > 0 for i in range(len(values))] if encoding == "delta" else equal_runs(table, pt).tolist()
            wrap = 1 << table.column("parent_id").type.bit_width
            encoded = [(v - values[i - 1]) % wrap if eq[i] else v for i, v in enumerate(values)]
            table = replace_column(table, "parent_id", pa.array(encoded, table.column("parent_id").type), encoding)
        out[pt] = table
    return OtapBundle(bundle.signal, {pt: out[pt] for pt in bundle.tables})


def _reference_order(table: pa.RecordBatch, paths: tuple[str, ...]) -> pa.Array:
    columns, keys = {}, []
    for i, path in enumerate(paths):
        column = get_column(table, path)
        if column is None:
            continue
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if pa.types.is_floating(column.type):
            bits = column.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64)
            ordered = np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))
            column = pa.array(ordered, pa.uint64(), mask=column.is_null().to_numpy(zero_copy_only=False))
        columns[f"k{i}"] = column
        keys.append((f"k{i}", "ascending", "at_end"))
    if not keys:
        return pa.array(np.arange(table.num_rows))
    return pc.sort_indices(pa.table(columns), sort_keys=keys)


def _delta(values: list[int | None], type_: pa.DataType) -> list[int | None]:
    wrap, prev, out = 1 << type_.bit_width, 0, []
    for v in values:
        if v is None:
            out.append(None)
            continue
        out.append((v - prev) % wrap)
        prev = v
    return out


def _ipc(table: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_batch(table)
    return sink.getvalue().to_pybytes()


def assert_same_as_reference(bundle: OtapBundle, config: Config | None = None) -> None:
    orders = DEFAULT_SORT_ORDERS if config is None else REFERENCE_SORT_ORDERS
    got, want = optimize(bundle, config), reference_optimize(bundle, dict(orders))
    assert list(got.tables) == list(want.tables)
    for pt, table in want.tables.items():
        assert got[pt].schema.equals(table.schema, check_metadata=True), pt.name
        assert _ipc(got[pt]) == _ipc(table), pt.name  # bytes, not equals(): NaN != NaN


def _generated() -> list[tuple[str, Signal, str, int]]:
    cases = []
    for name, profile in otap_model.generator.PROFILES.items():
        for signal in sorted(profile.signals, key=lambda s: s.value):
            cases += [(name, signal, name, 400), (name, signal, name, 7)]
    return cases


@pytest.mark.parametrize(("name", "signal", "profile", "batch_size"), _generated(), ids=lambda v: str(getattr(v, "value", v)))
def test_generated_profiles_match_the_reference(name: str, signal: Signal, profile: str, batch_size: int) -> None:
    for bundle in otap_model.generate(signal, 2 * batch_size, batch_size=batch_size, seed=3, profile=profile):
        assert_same_as_reference(bundle)
        assert_same_as_reference(bundle, REFERENCE)


@pytest.mark.parametrize("path", sorted((DATA / "otlp-examples").glob("*.json")), ids=lambda p: p.name)
def test_otlp_samples_match_the_reference(path: Path) -> None:
    bundle = from_otlp(otlp_json_to_message(path.read_text()))
    assert_same_as_reference(bundle)
    assert_same_as_reference(bundle, REFERENCE)


@pytest.mark.parametrize("path", sorted((DATA / "zipkin").glob("*.json")), ids=lambda p: p.name)
def test_zipkin_samples_match_the_reference(path: Path) -> None:
    bundle = from_zipkin_json(path.read_bytes())
    assert_same_as_reference(bundle)
    assert_same_as_reference(bundle, REFERENCE)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(Signal)).flatmap(lambda s: plain_bundles(s)), st.booleans())
def test_random_bundles_match_the_reference(bundle: OtapBundle, reference_orders: bool) -> None:
    assert_same_as_reference(bundle, REFERENCE if reference_orders else None)


def _scatter_ids(bundle: OtapBundle, parent: PayloadType, child: PayloadType, factor: int) -> OtapBundle:
    """The bundle with ``parent``'s u32 ids (and ``child``'s parent ids) multiplied by an odd
    ``factor`` modulo 2**32: still unique, but spread over the whole u32 range."""
    def spread(array: pa.Array) -> pa.Array:
        values = [None if v is None else (v * factor) % 2**32 for v in array.to_pylist()]
        return pa.array(values, pa.uint32())

    tables = dict(bundle.tables)
    tables[parent] = replace_column(tables[parent], "id", spread(tables[parent].column("id")), None)
    tables[child] = replace_column(tables[child], "parent_id", spread(tables[child].column("parent_id")), None)
    return OtapBundle(bundle.signal, tables)


def test_sparse_u32_ids_match_the_reference() -> None:
    """Ids far above the row count take the sorted-distinct lookup path instead of a direct table."""
    for bundle in otap_model.generate(Signal.TRACES, 600, batch_size=300, seed=5):
        sparse = _scatter_ids(bundle, PayloadType.SPAN_EVENTS, PayloadType.SPAN_EVENT_ATTRS, 2_654_435_761)
        assert max(v for v in sparse[PayloadType.SPAN_EVENTS].column("id").to_pylist() if v is not None) > 2**20
        assert_same_as_reference(sparse)


def test_dangling_parent_id_is_reported_with_sparse_ids() -> None:
    from adaptive_arrow.transport import TransportError

    bundle = next(iter(otap_model.generate(Signal.TRACES, 300, batch_size=300, seed=5)))
    sparse = _scatter_ids(bundle, PayloadType.SPAN_EVENTS, PayloadType.SPAN_EVENT_ATTRS, 2_654_435_761)
    attrs = sparse[PayloadType.SPAN_EVENT_ATTRS]
    parent_ids = attrs.column("parent_id").to_pylist()
    parent_ids[3] = 7  # no event has id 7 after the spread (7 is not a multiple of the factor mod 2**32)
    bad = replace_column(attrs, "parent_id", pa.array(parent_ids, pa.uint32()), None)
    tables = {**sparse.tables, PayloadType.SPAN_EVENT_ATTRS: bad}
    with pytest.raises(TransportError, match=r"SPAN_EVENT_ATTRS: parent_id 7 at row 3 matches no SPAN_EVENTS\.id"):
        optimize(OtapBundle(Signal.TRACES, tables))
