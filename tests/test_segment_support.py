"""Shared builders and comparisons for the segment tests."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.types as pat

from quiver_store.bundle import RecordBundle


def plain_type(typ: pa.DataType) -> pa.DataType:
    """`typ` with every dictionary replaced by its value type (recursively)."""
    if pat.is_dictionary(typ):
        return plain_type(typ.value_type)
    if pat.is_struct(typ):
        return pa.struct([f.with_type(plain_type(f.type)) for f in typ])
    if pat.is_list(typ):
        return pa.list_(typ.value_field.with_type(plain_type(typ.value_type)))
    if pat.is_large_list(typ):
        return pa.large_list(typ.value_field.with_type(plain_type(typ.value_type)))
    if pat.is_map(typ):
        return pa.map_(typ.key_field.with_type(plain_type(typ.key_type)), typ.item_field.with_type(plain_type(typ.item_type)))
    return typ


def plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    schema = pa.schema([f.with_type(plain_type(f.type)) for f in batch.schema])
    return batch.cast(schema)


def same_values(a: RecordBundle, b: RecordBundle) -> bool:
    """Equal slots, fingerprints, ingestion time and values (dictionaries compared decoded)."""
    if set(a.slots) != set(b.slots) or a.ingestion_time_ns != b.ingestion_time_ns:
        return False
    for slot in a.slots:
        if a.fingerprint(slot) != b.fingerprint(slot):
            return False
        if not plain(a.slots[slot]).equals(plain(b.slots[slot])):
            return False
    return True


def dict_array(indices: list[int | None], values: list[str], index_type: pa.DataType | None = None) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices, index_type or pa.uint8()), pa.array(values, pa.string()))


def logs_l1(rows: int, start: int = 0) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": pa.array(range(start, start + rows), pa.uint16()),
            "time_unix_nano": pa.array([1_000 + i for i in range(start, start + rows)], pa.timestamp("ns")),
            "severity_text": dict_array([i % 3 for i in range(rows)], ["INFO", "WARN", "ERROR"]),
        }
    )


def logs_l2(rows: int, start: int = 0) -> pa.RecordBatch:
    """L1 plus a column, and the severity as a plain string (schema drift)."""
    return pa.record_batch(
        {
            "id": pa.array(range(start, start + rows), pa.uint16()),
            "time_unix_nano": pa.array([5_000 + i for i in range(rows)], pa.timestamp("ns")),
            "severity_text": pa.array(["DEBUG"] * rows),
            "trace_id": pa.array([bytes([i % 256]) * 16 for i in range(rows)], pa.binary(16)),
        }
    )


def attrs(rows: int, keys: list[str], variant: int = 1) -> pa.RecordBatch:
    cols = {
        "parent_id": pa.array([i // 2 for i in range(rows)], pa.uint16()),
        "key": dict_array([i % len(keys) for i in range(rows)], keys),
    }
    if variant == 2:
        cols["int"] = pa.array(range(rows), pa.int64())
    return pa.record_batch(cols)
