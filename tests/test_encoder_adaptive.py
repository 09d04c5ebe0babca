"""Property tests of the adaptive encoder over sequences of batches whose shape drifts.

Plain tables are built directly from the reference schemas. An independent model of the Go
dictionary ladder (u8 -> u16 -> plain, reset below the distinct/total threshold, cardinality
cumulative over an IPC stream and restarted with each new stream) predicts the events and
index types; every batch must decode back to the input exactly. The Go-exact tests run with the
repetition rule off; the same model with the rule on (a batch of enough non-null values, more
than a ratio of them new to the dictionary: plain for the rest of the stream) checks the
repetition-aware fallback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import hypothesis
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptive_arrow import Decoder, Encoder, EncoderConfig, EventKind, schema_signature
from otap_model import OtapBundle, PayloadType, Signal, reference_schema

P = PayloadType
LOGS_REF = reference_schema(P.LOGS)
ATTRS_REF = reference_schema(P.LOG_ATTRS)
N_LOGS = 64
POOL_SIZE = 400_000
POOL = pa.array([f"v{i:07d}" for i in range(POOL_SIZE)])
CONFIG = EncoderConfig(sort=False, dictionary_max_distinct_ratio=None)  # pure Go ladder
DICT_KINDS = {
    EventKind.DICTIONARY_UPGRADE,
    EventKind.DICTIONARY_OVERFLOW,
    EventKind.DICTIONARY_RESET,
    EventKind.DICTIONARY_FALLBACK,
}
LADDERS = {"key": (255, 65535), "str": (65535,)}  # #dictionary=8 and #dictionary=16 with the default limit
INDEX_TYPES = {255: pa.uint8(), 65535: pa.uint16()}


# -- plain LOGS tables whose optional columns come and go -------------------------------------
def _leaf(t: pa.DataType, n: int, rng: np.random.Generator) -> pa.Array:
    mask = rng.random(n) < 0.2
    mask[0] = False  # at least one value
    if pa.types.is_string(t):
        return pa.array(np.asarray(POOL.take(pa.array(rng.integers(0, 20, n))).to_pylist(), dtype=object), t, mask=mask)
    if pa.types.is_fixed_size_binary(t):
        return pa.array([rng.bytes(t.byte_width) for _ in range(n)], t, mask=mask)
    if pa.types.is_binary(t):
        return pa.array([rng.bytes(3) for _ in range(n)], t, mask=mask)
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, t, mask=mask)
    if pa.types.is_floating(t):
        return pa.array(rng.random(n), t, mask=mask)
    if pa.types.is_timestamp(t):
        return pa.array(rng.integers(1, 2**62, n), pa.int64(), mask=mask).cast(t)
    return pa.array(rng.integers(1, 100, n), t, mask=mask)


def _column(f: pa.Field, on: bool, n: int, rng: np.random.Generator, children_on: frozenset[str]) -> pa.Array:
    if not on:
        return pa.nulls(n, f.type)
    if pa.types.is_struct(f.type):
        kids = []
        for i in range(f.type.num_fields):
            child = f.type.field(i)
            if not child.nullable:  # the body's AnyValue type code: required, 0 (empty) to 7 (bytes)
                kids.append(pa.array(rng.integers(0, 8, n), child.type))
                continue
            kids.append(_column(child, child.name in children_on, n, rng, frozenset()))
        return pa.StructArray.from_arrays(kids, fields=list(f.type), mask=pa.array(rng.random(n) < 0.2))
    return _leaf(f.type, n, rng)


def logs_table(on: frozenset[str], seed: int) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    cols = []
    for f in LOGS_REF:
        if f.name == "id":
            cols.append(pa.array(np.arange(N_LOGS), pa.uint16()))
        else:
            cols.append(_column(f, f.name in on, N_LOGS, rng, on))
    return pa.RecordBatch.from_arrays(cols, schema=LOGS_REF)


# -- LOG_ATTRS tables with controlled cardinality ------------------------------------------------
@dataclass
class ColumnSpec:
    fresh: int  # values never seen in this column before
    repeat: int  # extra rows re-using values already seen (or this batch's)


def _values(spec: ColumnSpec | None, n: int, next_id: int, seen: list[int], rng: np.random.Generator) -> tuple[np.ndarray | None, int]:
    """Ids of a column's n values (None = all null): `fresh` new ids, the rest re-used; next free id."""
    if spec is None:
        return None, next_id
    fresh = np.arange(next_id, next_id + max(spec.fresh, 0 if seen else 1))  # a first batch needs a value
    pool = np.concatenate([np.asarray(seen[-1000:], dtype=np.int64), fresh])
    pad = pool[rng.integers(0, len(pool), n - len(fresh))]
    return np.concatenate([fresh, pad]).astype(np.int64), next_id + len(fresh)


def attrs_table(key_ids: np.ndarray, str_ids: np.ndarray | None, str_nulls: np.ndarray | None) -> pa.RecordBatch:
    n = len(key_ids)
    str_col = pa.nulls(n, pa.string())
    if str_ids is not None:
        str_col = POOL.take(pa.array(str_ids + 200_000, mask=str_nulls))
    cols = [
        pa.array(np.arange(n) % N_LOGS, pa.uint16()),
        POOL.take(pa.array(key_ids)),
        pa.array(np.ones(n), pa.uint8()),
        str_col,
    ] + [pa.nulls(n, f.type) for f in list(ATTRS_REF)[4:]]
    return pa.RecordBatch.from_arrays(cols, schema=ATTRS_REF)


# -- the independent model ------------------------------------------------------------------------
@dataclass
class ColumnModel:
    ladder: tuple[int, ...]
    rule: tuple[float, int] | None = None  # (max distinct ratio, min values) or pure Go
    level: int | None = 0
    seen: set[int] = field(default_factory=set)
    total: int = 0

    def feed(self, ids: np.ndarray | None, n: int, threshold: float = 0.3) -> tuple[str | None, set[int], int]:
        """(event, seen after, total after) before any stream restart; `ids` are the non-null values."""
        distinct = set() if ids is None else set(np.unique(ids).tolist())
        if self.level is None:
            return None, set(), 0
        seen = self.seen | distinct
        total = self.total + n
        level = self.level
        while level < len(self.ladder) and len(seen) > self.ladder[level]:
            level += 1
        if level < len(self.ladder):
            values = 0 if ids is None else len(ids)
            if self.rule is not None and values >= self.rule[1] and len(distinct - self.seen) > self.rule[0] * values:
                self._next = None
                return "dictionary_fallback", set(), 0
            self._next = level
            return ("dictionary_upgrade" if level > self.level else None), seen, total
        if len(seen) / total < threshold and len(distinct) <= self.ladder[-1]:
            self._next = len(self.ladder) - 1
            return "dictionary_reset", distinct, n
        self._next = None
        return "dictionary_overflow", set(), 0

    def index_type(self) -> pa.DataType | None:
        return None if self.level is None else INDEX_TYPES[self.ladder[self.level]]


OPTIONAL_LOGS = [f.name for f in LOGS_REF if f.nullable] + ["schema_url", "dropped_attributes_count", "name", "version", "str"]
Sequence = list[tuple[frozenset[str], ColumnSpec, ColumnSpec | None, int]]


@st.composite
def drifting_sequences(draw: st.DrawFn, big: bool) -> Sequence:
    """1-4 batches: optional LOGS columns on/off, LOG_ATTRS key/str cardinalities around 255/256
    (and 65,535/65,536 with `big`)."""
    sizes = [0, 1, 3, 100, 154, 155, 254, 255, 256, 300]
    if big:
        sizes += [65_279, 65_280, 65_535, 65_536]
    repeats = [0, 5, 500] + ([250_000] if big else [])
    batches = []
    for _ in range(draw(st.integers(1, 4 if not big else 3))):
        on = frozenset(draw(st.sets(st.sampled_from(OPTIONAL_LOGS), max_size=8)))
        key = ColumnSpec(draw(st.sampled_from(sizes)), draw(st.sampled_from(repeats)))
        s = draw(st.one_of(st.none(), st.builds(ColumnSpec, st.sampled_from(sizes), st.sampled_from(repeats))))
        batches.append((on, key, s, draw(st.integers(0, 2**16))))
    return batches


@st.composite
def threshold_sequences(draw: st.DrawFn) -> Sequence:
    """~65,000 distinct keys, then a batch pushing the cumulative count around 65,535 with enough
    repetition to put distinct/total on either side of the 0.3 reset threshold."""
    first = ColumnSpec(draw(st.integers(65_000, 65_535)), draw(st.sampled_from([0, 100])))
    second = ColumnSpec(draw(st.integers(1, 600)), draw(st.integers(140_000, 260_000)))
    batches = [(frozenset(), first, None, 1), (frozenset({"severity_text"}), second, None, 2)]
    if draw(st.booleans()):
        batches.append((frozenset(), ColumnSpec(draw(st.sampled_from([1, 300])), 0), ColumnSpec(3, 0), 3))
    return batches


def _columns(batch: pa.RecordBatch) -> dict[str, bool]:
    """Every emitted column path (struct children included) -> whether it holds a non-null value."""
    out: dict[str, bool] = {}

    def walk(name: str, arr: pa.Array) -> None:
        out[name] = arr.null_count < len(arr)
        if isinstance(arr, pa.StructArray):
            for f, child in zip(arr.type, arr.flatten()):
                walk(f"{name}.{f.name}", child)

    for f, col in zip(batch.schema, batch.columns):
        walk(f.name, col)
    return out


def run_sequence(batches, *, unary_check: bool, config: EncoderConfig = CONFIG) -> None:  # type: ignore[no-untyped-def]
    enc, dec = Encoder(Signal.LOGS, config), Decoder()
    records = Encoder(Signal.LOGS, config)  # the same stream through the Quiver path
    carried: dict[PayloadType, set[str]] = {P.LOGS: set(), P.LOG_ATTRS: set()}
    rule = config.repetition_rule
    models = {
        name: ColumnModel(ladder, None if rule is None else (rule.max_distinct_ratio, rule.min_values))
        for name, ladder in LADDERS.items()
    }
    str_present = False
    logs_seen: set[str] = set()
    next_ids = {"key": 0, "str": 0}
    seen_ids: dict[str, list[int]] = {"key": [], "str": []}
    prev_shape = None
    signatures: list[str] = []
    for on, key_spec, str_spec, seed in batches:
        rng = np.random.default_rng(seed)
        n = max(1, key_spec.fresh + key_spec.repeat, (str_spec.fresh + str_spec.repeat) if str_spec else 0)
        key_ids, next_ids["key"] = _values(key_spec, n, next_ids["key"], seen_ids["key"], rng)
        str_ids, next_ids["str"] = _values(str_spec, n, next_ids["str"], seen_ids["str"], rng)
        str_nulls = None
        if str_ids is not None:
            str_nulls = np.zeros(n, dtype=bool)
            str_nulls[3::7] = True  # some nulls, never all
        assert key_ids is not None
        attrs = attrs_table(key_ids, str_ids, str_nulls)
        logs = logs_table(on, seed)
        bundle = OtapBundle(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs})

        # expected dictionary events and stream restarts
        expected: list[tuple[str, str]] = []
        if str_ids is not None and not str_present:
            expected.append(("field_added", "str"))
        str_now = str_present or str_ids is not None
        str_valid = None if str_ids is None else str_ids[~str_nulls]
        results = {"key": models["key"].feed(key_ids, n)}
        if str_now:
            results["str"] = models["str"].feed(str_valid, n)
        for name, (event, _, _) in results.items():
            if event:
                expected.append((event, name))
        for name, (_, seen, total) in results.items():
            m = models[name]
            m.level, m.seen, m.total = m._next, seen, total  # type: ignore[attr-defined]
        shape = (str_now, models["key"].level, models["str"].level)
        new_stream = shape != prev_shape
        if new_stream:  # new IPC stream: dictionaries restart with this batch's values
            for name, ids in (("key", key_ids), ("str", str_valid)):
                m = models[name]
                if m.level is not None and (name == "key" or str_now):
                    m.seen = set() if ids is None else set(np.unique(ids).tolist())
                    m.total = n
        prev_shape = shape
        str_present = str_now
        for name, ids in (("key", key_ids), ("str", str_ids)):
            if ids is not None:
                seen_ids[name].extend(np.unique(ids)[-1000:].tolist())

        bar = enc.encode(bundle)
        got = sorted(
            (e.kind.value, e.path)
            for e in enc.last_events
            if e.payload_type is P.LOG_ATTRS and (e.kind in DICT_KINDS or e.kind is EventKind.FIELD_ADDED)
        )
        assert got == sorted(expected)
        for kind, path in expected:
            hypothesis.event(f"{path}: {kind}")
        opened = [e for e in enc.last_events if e.kind is EventKind.STREAM_OPENED and e.payload_type is P.LOG_ATTRS]
        assert bool(opened) == new_stream  # a new signature, and only that, opens a new stream
        signatures.append(schema_signature(enc.schema_of(P.LOG_ATTRS), P.LOG_ATTRS))
        if len(signatures) > 1:  # the signature changes exactly when a new stream opens
            assert (signatures[-1] != signatures[-2]) == new_stream
        schema = enc.schema_of(P.LOG_ATTRS)
        assert schema is not None
        for name, m in models.items():
            if name == "str" and not str_present:
                assert "str" not in schema.names
                continue
            t = schema.field(name).type
            want = m.index_type()
            assert (t.index_type if pa.types.is_dictionary(t) else None) == want, (name, t, want)

        # LOGS: the schema only grows, by exactly the columns that carried a value
        newly = {f.name for f, c in zip(LOGS_REF, logs.columns) if c.null_count < len(c)} - logs_seen
        added = {e.path for e in enc.last_events if e.payload_type is P.LOGS and e.kind is EventKind.FIELD_ADDED and "." not in e.path}
        assert added == newly
        logs_seen |= newly
        assert enc.schema_of(P.LOGS).names == [n_ for n_ in LOGS_REF.names if n_ in logs_seen]

        decoded = dec.decode(bar.to_bytes())
        assert decoded == bundle
        for pt in (P.LOGS, P.LOG_ATTRS):
            assert decoded[pt].equals(bundle[pt])

        # the Quiver path emits the same records; in a stream every emitted column has carried a
        # value in some batch (the schema never shrinks, so a column may be all null later on)
        rb = records.encode_records(bundle)
        assert Decoder().decode_records(rb) == bundle
        for pt in (P.LOGS, P.LOG_ATTRS):
            emitted = rb.slots[int(pt)]
            assert emitted.schema.equals(enc.schema_of(pt))
            columns = _columns(emitted)
            carried[pt] |= {name for name, has in columns.items() if has}
            assert set(columns) <= carried[pt], set(columns) - carried[pt]
        if unary_check:  # a fresh encoder per batch: no emitted column is all null
            unary = Encoder(Signal.LOGS, config).encode_records(bundle)
            for batch in unary.slots.values():
                assert all(_columns(batch).values()), _columns(batch)
            assert Decoder().decode_records(unary) == bundle


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drifting_sequences(big=False))
def test_small_cardinalities_follow_the_ladder_and_round_trip(batches) -> None:  # type: ignore[no-untyped-def]
    run_sequence(batches, unary_check=True)


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(drifting_sequences(big=True), threshold_sequences()))
def test_large_cardinalities_cross_u16_and_reset_threshold(batches) -> None:  # type: ignore[no-untyped-def]
    run_sequence(batches, unary_check=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    drifting_sequences(big=False),
    st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
    st.sampled_from([1, 50, 300, 500]),
)
def test_repetition_rule_falls_back_to_plain_for_the_rest_of_the_stream(batches, ratio, min_values) -> None:  # type: ignore[no-untyped-def]
    config = EncoderConfig(sort=False, dictionary_max_distinct_ratio=ratio, dictionary_min_values=min_values)
    run_sequence(batches, unary_check=True, config=config)


@pytest.mark.parametrize(
    ("ratio", "specs", "events"),
    [
        # 500 distinct of 500: falls back at once; the column stays plain (no event later)
        (0.5, [ColumnSpec(500, 0), ColumnSpec(10, 5000)], [[("dictionary_fallback", "key")], []]),
        # batches of 499 values are too small to judge, however many of their values are new
        (0.5, [ColumnSpec(499, 0), ColumnSpec(499, 0)], [[("dictionary_upgrade", "key")], []]),
        # 300 new of 600 is not above 0.5; 301 of 600 is
        (0.5, [ColumnSpec(300, 300)], [[("dictionary_upgrade", "key")]]),
        (0.5, [ColumnSpec(301, 299)], [[("dictionary_fallback", "key")]]),
        # a later batch is judged by the values new to the stream dictionary: 400 of 600
        (0.5, [ColumnSpec(300, 300), ColumnSpec(400, 200)], [[("dictionary_upgrade", "key")], [("dictionary_fallback", "key")]]),
        # None: the pure Go ladder
        (None, [ColumnSpec(1000, 0)], [[("dictionary_upgrade", "key")]]),
    ],
)
def test_repetition_rule_boundaries(ratio: float | None, specs: list[ColumnSpec], events: list[list[tuple[str, str]]]) -> None:
    enc, dec = Encoder(Signal.LOGS, EncoderConfig(sort=False, dictionary_max_distinct_ratio=ratio)), Decoder()
    logs = logs_table(frozenset(), 0)
    next_id = 0
    for spec, want in zip(specs, events):
        n = spec.fresh + spec.repeat
        ids = np.concatenate([np.arange(next_id, next_id + spec.fresh), np.full(spec.repeat, next_id)])
        next_id += spec.fresh
        bundle = OtapBundle(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs_table(ids[:n], None, None)})
        bar = enc.encode(bundle)
        assert [(e.kind.value, e.path) for e in enc.last_events if e.kind in DICT_KINDS] == want
        assert dec.decode(bar) == bundle
    fallbacks = sum(1 for w in events for kind, _ in w if kind == "dictionary_fallback")
    assert pa.types.is_dictionary(enc.schema_of(P.LOG_ATTRS).field("key").type) == (fallbacks == 0)
    assert enc.stats.count(EventKind.DICTIONARY_FALLBACK, P.LOG_ATTRS, "key") == fallbacks


@pytest.mark.parametrize(
    ("specs", "events"),
    [
        # 255 distinct fit u8, the 256th upgrades (within one batch and across batches)
        ([ColumnSpec(255, 0)], [[]]),
        ([ColumnSpec(256, 0)], [[("dictionary_upgrade", "key")]]),
        ([ColumnSpec(200, 0), ColumnSpec(55, 0), ColumnSpec(1, 0)], [[], [], [("dictionary_upgrade", "key")]]),
        # 65,535 fit u16; the 65,536th overflows to plain when the values rarely repeat ...
        ([ColumnSpec(65_535, 0)], [[("dictionary_upgrade", "key")]]),
        ([ColumnSpec(65_536, 0)], [[("dictionary_overflow", "key")]]),
        # ... and resets when they repeat (65,536 / 265,536 < 0.3); a ratio of 0.304 overflows
        ([ColumnSpec(300, 0), ColumnSpec(65_236, 200_000)], [[("dictionary_upgrade", "key")], [("dictionary_reset", "key")]]),
        ([ColumnSpec(300, 0), ColumnSpec(65_236, 150_000)], [[("dictionary_upgrade", "key")], [("dictionary_overflow", "key")]]),
    ],
)
def test_ladder_boundaries(specs: list[ColumnSpec], events: list[list[tuple[str, str]]]) -> None:
    enc, dec = Encoder(Signal.LOGS, CONFIG), Decoder()
    logs = logs_table(frozenset(), 0)
    next_id = 0
    for spec, want in zip(specs, events):
        n = spec.fresh + spec.repeat
        ids = np.concatenate([np.arange(next_id, next_id + spec.fresh), np.full(spec.repeat, next_id)])
        next_id += spec.fresh
        bundle = OtapBundle(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs_table(ids[:n], None, None)})
        bar = enc.encode(bundle)
        got = [(e.kind.value, e.path) for e in enc.last_events if e.kind in DICT_KINDS]
        assert got == want
        assert dec.decode(bar) == bundle
