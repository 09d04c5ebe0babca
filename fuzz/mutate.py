"""Mutations of an Arrow record batch driven by fuzz input: what a buggy producer or a hand-made
table can hold while still being valid Arrow."""

from __future__ import annotations

import contextlib
from typing import Any

import atheris
import pyarrow as pa

ENCODINGS = [b"plain", b"delta", b"quasidelta", b"", b"zz"]


def value_for(type_: pa.DataType, fdp: atheris.FuzzedDataProvider) -> Any:
    """A value of ``type_`` (None one time in six), extremes of integers included."""
    if fdp.ConsumeIntInRange(0, 5) == 0:
        return None
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    if pa.types.is_boolean(type_):
        return fdp.ConsumeBool()
    if pa.types.is_integer(type_):
        bits = type_.bit_width
        lo, hi = (0, 2**bits - 1) if pa.types.is_unsigned_integer(type_) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return [lo, hi, 0, fdp.ConsumeIntInRange(lo, hi)][fdp.ConsumeIntInRange(0, 3)]
    if pa.types.is_floating(type_):
        return fdp.ConsumeFloat()
    if pa.types.is_timestamp(type_) or pa.types.is_duration(type_):
        return fdp.ConsumeIntInRange(-(2**63), 2**63 - 1)
    if pa.types.is_fixed_size_binary(type_):
        return fdp.ConsumeBytes(type_.byte_width)
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 20))
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 12))
    if pa.types.is_struct(type_):
        return {f.name: value_for(f.type, fdp) for f in type_}
    return None


def mutate(batch: pa.RecordBatch, fdp: atheris.FuzzedDataProvider) -> pa.RecordBatch:
    """One to four of: a value replaced, a column dropped, a column all null, an ``encoding``
    mark set, the rows cut short."""
    columns, fields = list(batch.columns), list(batch.schema)
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        if not columns:
            break
        i = fdp.ConsumeIntInRange(0, len(columns) - 1)
        op = fdp.ConsumeIntInRange(0, 6)
        column, field = columns[i], fields[i]
        if op <= 2 and len(column):
            values = column.to_pylist()
            values[fdp.ConsumeIntInRange(0, len(values) - 1)] = value_for(field.type, fdp)
            with contextlib.suppress(pa.ArrowException, OverflowError, TypeError, ValueError):  # unbuildable: no change
                columns[i] = pa.array(values, type=field.type)
        elif op == 3:
            del columns[i], fields[i]
        elif op == 4:
            columns[i] = pa.nulls(len(column), field.type)
            fields[i] = field.with_nullable(True)
        elif op == 5:
            fields[i] = field.with_metadata({**(field.metadata or {}), b"encoding": fdp.PickValueInList(ENCODINGS)})
        else:
            rows = fdp.ConsumeIntInRange(0, len(column))
            columns = [c.slice(0, rows) for c in columns]
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=batch.schema.metadata))
