"""`bundle[pt]` for a table the bundle lacks says why (was a bare KeyError naming only the key)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from otap_model import MissingTableError, OtapBundle, OtapModelError, PayloadType, SchemaError, generate


@pytest.fixture(scope="module")
def logs():  # type: ignore[no-untyped-def]
    return next(generate("logs", 10, batch_size=10, seed=1))


def test_a_payload_type_of_the_signal_without_rows(logs) -> None:  # type: ignore[no-untyped-def]
    bundle = OtapBundle("logs", {pt: t for pt, t in logs.tables.items() if pt != PayloadType.LOG_ATTRS})
    with pytest.raises(MissingTableError) as info:
        bundle[PayloadType.LOG_ATTRS]
    assert str(info.value) == (
        "this logs bundle has no LOG_ATTRS table (payload types without rows are absent; "
        "bundle.get(PayloadType.LOG_ATTRS) returns None); its tables: RESOURCE_ATTRS, LOGS"
    )
    assert bundle.get(PayloadType.LOG_ATTRS) is None


def test_a_payload_type_of_another_signal(logs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MissingTableError, match=r"^SPANS does not belong to signal logs; this bundle's tables: RESOURCE_ATTRS, LOGS, LOG_ATTRS$"):
        logs[PayloadType.SPANS]


@pytest.mark.parametrize("key", ["nope", 999])
def test_not_a_payload_type(logs, key: object) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MissingTableError, match=rf"^{key!r} is not a payload type \(PayloadType member or its number\)"):
        logs[key]


def test_still_a_key_error_and_the_package_base(logs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KeyError):
        logs[PayloadType.SPANS]
    with pytest.raises(OtapModelError):
        logs[PayloadType.SPANS]
    assert logs[PayloadType.LOGS].num_rows == 10
    assert logs[int(PayloadType.LOGS)].num_rows == 10


@pytest.mark.parametrize(
    ("signal", "tables", "message"),
    [
        ("bogus", {}, r"^OtapBundle: signal 'bogus' is not one of \['logs', 'traces', 'metrics'\]$"),
        ("logs", [1, 2], r"^OtapBundle: tables must be a dict of PayloadType to pyarrow.RecordBatch, got list$"),
        ("logs", {99: None}, r"^OtapBundle\(logs\): table key 99 is not a payload type \(PayloadType member or its number\)$"),
        ("logs", {PayloadType.LOGS: "x"}, r"^OtapBundle: the LOGS table must be a pyarrow.RecordBatch or Table, got str \(otap_model.conform"),
        ("logs", {PayloadType.SPANS: None}, r"^payload type SPANS does not belong to signal logs; its payload types are \['LOGS'"),
    ],
    ids=["signal", "tables", "key", "value", "foreign"],
)
def test_a_bundle_of_something_else_raises_schema_error(signal: str, tables: object, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        OtapBundle(signal, tables)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)  # what OtapBundle raised before, still caught


def test_int_keys_and_pyarrow_tables_become_payload_types_and_batches(logs) -> None:  # type: ignore[no-untyped-def]
    tables = {int(pt): pa.Table.from_batches([t[:4], t[4:]]) for pt, t in logs.tables.items()}
    bundle = OtapBundle("logs", tables)
    assert all(type(pt) is PayloadType and isinstance(t, pa.RecordBatch) for pt, t in bundle.tables.items())
    assert bundle == logs
    assert OtapBundle("logs", logs.tables).tables is logs.tables  # already in shape: kept as given
