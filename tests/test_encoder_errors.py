"""Bad input to the encoder: a clear adaptive_arrow exception and no change of encoder state."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from adaptive_arrow import (
    AdaptiveArrowError,
    ConfigError,
    Decoder,
    Encoder,
    EncoderConfig,
    EncodingError,
    SchemaUpdateLimitError,
)
from otap_model import OtapBundle, PayloadType, Signal, reference_schema

P = PayloadType
CONFIG = EncoderConfig(sort=False)


def _plain(pt: PayloadType, n: int, values: dict[str, pa.Array]) -> pa.RecordBatch:
    ref = reference_schema(pt)
    return pa.RecordBatch.from_arrays([values.get(f.name, pa.nulls(n, f.type)) for f in ref], schema=ref)


def _bundle(n: int, keys: list[str], *, sev: list[str] | None = None) -> OtapBundle:
    logs = _plain(P.LOGS, n, {
        "id": pa.array(np.arange(n), pa.uint16()),
        **({"severity_text": pa.array(sev)} if sev else {}),
    })
    m = len(keys)
    attrs = _plain(P.LOG_ATTRS, m, {
        "parent_id": pa.array(np.arange(m) % n, pa.uint16()),
        "key": pa.array(keys),
        "type": pa.array(np.ones(m), pa.uint8()),
        "str": pa.array(["v"] * m),
    })
    return OtapBundle(Signal.LOGS, {P.LOGS: logs, P.LOG_ATTRS: attrs})


def _encoded(enc: Encoder, bundle: OtapBundle) -> list[tuple[str, int, bytes]]:
    return [(p.schema_id, p.type, p.record) for p in enc.encode(bundle).payloads]


def _with(bundle: OtapBundle, pt: PayloadType, batch: pa.RecordBatch) -> OtapBundle:
    tables = dict(bundle.tables)
    tables[pt] = batch
    return OtapBundle(bundle.signal, tables)


GOOD1 = _bundle(4, ["a", "b", "c", "d"])
GOOD2 = _bundle(4, [f"k{i}" for i in range(300)], sev=["INFO", "WARN", "INFO", "ERROR"])
LOGS = GOOD1[P.LOGS]
ATTRS = GOOD1[P.LOG_ATTRS]


def _bad_cases() -> list[tuple[str, OtapBundle, type[Exception], str]]:
    extra = ATTRS.append_column("color", pa.array(["red"] * ATTRS.num_rows))
    wrong_type = ATTRS.set_column(1, pa.field("key", pa.large_string(), nullable=False), ATTRS.column(1).cast(pa.large_string()))
    missing = ATTRS.drop_columns(["ser"])
    swapped = pa.RecordBatch.from_arrays(
        [ATTRS.column(1), ATTRS.column(0), *ATTRS.columns[2:]],
        schema=pa.schema([ATTRS.schema.field(1), ATTRS.schema.field(0), *list(ATTRS.schema)[2:]]),
    )
    out_of_range = ATTRS.set_column(0, ATTRS.schema.field(0), pa.array([0, 1, 2, 99], pa.uint16()))
    body_field = LOGS.schema.field("body")

    def with_body(codes: list[int | None], absent: list[bool]) -> pa.RecordBatch:
        kids = [pa.array(codes, pa.uint8()), pa.array(["a", "b", "c", "d"]), *(pa.nulls(4, f.type) for f in list(body_field.type)[2:])]
        body = pa.StructArray.from_arrays(kids, fields=list(body_field.type), mask=pa.array(absent))
        return LOGS.set_column(LOGS.schema.get_field_index("body"), body_field, body)

    return [
        ("unknown column", _with(GOOD1, P.LOG_ATTRS, extra), EncodingError, r"LOG_ATTRS: unknown column\(s\) \['color'\]"),
        ("wrong type", _with(GOOD1, P.LOG_ATTRS, wrong_type), EncodingError, r"LOG_ATTRS.key: wrong type large_string"),
        ("missing column", _with(GOOD1, P.LOG_ATTRS, missing), EncodingError, r"missing column\(s\) \['ser'\]"),
        ("column order", _with(GOOD1, P.LOG_ATTRS, swapped), EncodingError, r"not in reference order"),
        ("ids out of range", _with(GOOD1, P.LOG_ATTRS, out_of_range), EncodingError,
         r"LOG_ATTRS.parent_id: 1 value\(s\) out of range \(e.g. 99\): no LOGS.id has that id"),
        ("orphan table", OtapBundle(Signal.LOGS, {P.LOG_ATTRS: ATTRS}), EncodingError, r"the bundle has no LOGS table"),
        ("body without a type", _with(GOOD1, P.LOGS, with_body([1, None, None, 1], [False, False, True, False])), EncodingError,
         r"^LOGS.body.type of a present body: 1 null value\(s\) in a not-null column \(e.g. rows \[1\]\)$"),
        ("body type code", _with(GOOD1, P.LOGS, with_body([1, 1, 9, 12], [False, False, False, True])), EncodingError,
         r"^LOGS.body.type: unknown AnyValue type code 9 at row 2; defined codes are 0 \(empty\) to 7 \(bytes\)$"),
        ("wrong signal", OtapBundle(Signal.TRACES, {}), EncodingError, r"bundle holds traces but this encoder encodes logs"),
    ]


@pytest.mark.parametrize(("name", "bad", "exc", "message"), _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_bad_batch_raises_and_leaves_state_unchanged(name: str, bad: OtapBundle, exc: type[Exception], message: str) -> None:
    reference = Encoder(Signal.LOGS, CONFIG)
    expected = [_encoded(reference, GOOD1), _encoded(reference, GOOD2)]
    enc = Encoder(Signal.LOGS, CONFIG)
    first = _encoded(enc, GOOD1)
    stats_before = enc.stats.as_dict()
    with pytest.raises(exc, match=message) as info:
        enc.encode(bad)
    assert isinstance(info.value, AdaptiveArrowError)
    assert enc.stats.as_dict() == stats_before
    assert [first, _encoded(enc, GOOD2)] == expected  # same bytes, same batch ids and schema ids


def test_too_many_schema_updates_in_one_batch() -> None:
    # GOOD2 adds a column (severity_text) to LOGS and upgrades LOG_ATTRS.key u8 -> u16: with a
    # limit of one update per table, LOG_ATTRS passes (dictionary round only) ...
    enc = Encoder(Signal.LOGS, EncoderConfig(sort=False, max_schema_updates=1))
    enc.encode(GOOD1)
    enc.encode(GOOD2)
    # ... but a table needing a new field AND a dictionary change in one batch needs two rounds.
    enc = Encoder(Signal.LOGS, EncoderConfig(sort=False, max_schema_updates=1))
    before = _encoded(Encoder(Signal.LOGS, EncoderConfig(sort=False, max_schema_updates=1)), GOOD1)
    keys_and_int = _bundle(4, [f"k{i}" for i in range(300)])
    attrs = keys_and_int[P.LOG_ATTRS]
    attrs = attrs.set_column(4, attrs.schema.field(4), pa.array(np.arange(300), pa.int64()))
    bad = _with(keys_and_int, P.LOG_ATTRS, attrs)
    assert _encoded(enc, GOOD1) == before
    with pytest.raises(SchemaUpdateLimitError, match=r"LOG_ATTRS: this batch needs 2 schema updates, more than max_schema_updates=1"):
        enc.encode(bad)
    assert enc.stats.batches == 1
    ok = Encoder(Signal.LOGS, CONFIG)
    ok.encode(GOOD1)
    assert Decoder().decode(Encoder(Signal.LOGS, CONFIG).encode(bad)) == bad


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ipc_compression": "lz4"}, "ipc_compression"),
        ({"dictionary_reset_threshold": 1.5}, "dictionary_reset_threshold"),
        ({"max_schema_updates": 0}, "max_schema_updates"),
        ({"dictionary_limit": -1}, "dictionary_limit"),
        ({"dictionary_max_distinct_ratio": 1.5}, r"dictionary_max_distinct_ratio must be None or a number in \[0, 1\], got 1.5"),
        ({"dictionary_max_distinct_ratio": True}, "dictionary_max_distinct_ratio"),
        ({"dictionary_min_values": 0}, r"dictionary_min_values must be an integer >= 1, got 0"),
        ({"sort": "yes"}, "sort"),
        ({"sort_orders": {30: "resource.id"}}, "sort_orders"),
    ],
)
def test_config_is_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EncoderConfig(**kwargs)  # type: ignore[arg-type]


def test_config_is_frozen_and_sort_orders_normalised() -> None:
    cfg = EncoderConfig(sort_orders={30: ["resource.id", "time_unix_nano"]})  # type: ignore[dict-item]
    assert cfg.sort_orders == {30: ("resource.id", "time_unix_nano")}
    with pytest.raises(AttributeError):
        cfg.sort = False  # type: ignore[misc]


def test_unknown_signal() -> None:
    with pytest.raises(EncodingError, match="unknown signal 'profiles'"):
        Encoder("profiles")
