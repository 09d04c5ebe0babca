"""conform: bring a table built elsewhere (pandas, polars, Spark, another Arrow producer) to the
exact reference schema of its payload type, which the encoder and `to_otlp` require.

Only value-preserving changes are made, and each is checked: other Arrow layouts of the same
values (large_string, string_view, large_binary, binary_view, large_list, dictionary-encoded
columns), wider or signed integers whose values fit the reference width (and whole floats, as
pandas makes of integer columns with nulls), float32, timestamps and durations in another unit or
time zone, or as numbers of nanoseconds (as OTLP's ``*_unix_nano`` fields are), binary ids of the
reference width as fixed-size binary, nullable fields without nulls where the reference says not
null, and absent optional columns (filled with nulls). Anything else raises SchemaError naming
the column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .bundle import one_batch
from .errors import SchemaError
from .payload import PayloadType
from .schema import fill_under_null_structs, reference_schema

_STRING_LIKE = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_BINARY_LIKE = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)
_LIST_LIKE = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view, pa.types.is_large_list_view)


def conform(table: Any, pt: PayloadType) -> pa.RecordBatch:
    """`table` as one RecordBatch with exactly `reference_schema(pt)`.

    `table` is a pyarrow RecordBatch or Table, a pandas DataFrame, or any object exporting an
    Arrow stream (polars, DuckDB: the ``__arrow_c_stream__`` protocol). A batch that already has
    the reference schema is returned as it is.
    """
    try:
        pt = PayloadType(pt)
    except ValueError:
        raise SchemaError(f"conform: {pt!r} is not a payload type (PayloadType member or its number)") from None
    batch = _as_batch(table, pt)
    ref = reference_schema(pt)
    if batch.schema.equals(ref):  # the same types (annotations aside): only nulls to rule out
        for want, column in zip(ref, batch.columns):
            if not want.nullable and column.null_count:
                _refuse_nulls(column, f"{pt.name}.{want.name}")
        if batch.schema.equals(ref, check_metadata=True):
            return batch
        return pa.RecordBatch.from_arrays(batch.columns, schema=ref)
    unknown = [n for n in batch.schema.names if ref.get_field_index(n) < 0]
    if unknown:
        raise SchemaError(f"{pt.name}: unknown column(s) {unknown}; the reference schema has {ref.names}")
    duplicated = sorted({n for n in batch.schema.names if batch.schema.get_all_field_indices(n)[1:]})
    if duplicated:
        raise SchemaError(f"{pt.name}: column(s) {duplicated} appear more than once")
    required = [f.name for f in ref if not f.nullable and f.name not in batch.schema.names]
    if required:
        raise SchemaError(f"{pt.name}: missing required (not null) column(s) {required}")
    n = batch.num_rows
    arrays = []
    for want in ref:
        i = batch.schema.get_field_index(want.name)
        if i < 0:
            arrays.append(pa.nulls(n, want.type))
        else:
            arrays.append(_conform_array(batch.column(i), want, f"{pt.name}.{want.name}"))
    return pa.RecordBatch.from_arrays(arrays, schema=ref)


def _as_batch(table: Any, pt: PayloadType) -> pa.RecordBatch:
    if isinstance(table, pa.RecordBatch):
        return table
    return one_batch(table if isinstance(table, pa.Table) else _as_table(table, pt))


def _as_table(data: Any, pt: PayloadType) -> pa.Table:
    if type(data).__module__.startswith("pandas"):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise SchemaError(f"{pt.name}: the pandas DataFrame does not convert to Arrow: {e}") from None
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        try:
            return pa.table(data)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise SchemaError(f"{pt.name}: the {type(data).__name__} does not export an Arrow table: {e}") from None
    raise SchemaError(
        f"{pt.name}: expected a pyarrow RecordBatch or Table, a pandas DataFrame or an object with "
        f"__arrow_c_stream__, got {type(data).__name__}"
    )


def _conform_array(array: pa.Array, want: pa.Field, where: str) -> pa.Array:
    """`array` with `want`'s type; raises SchemaError when that would change a value."""
    target = want.type
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    have = array.type
    if pa.types.is_null(have):
        out = pa.nulls(len(array), target)
    elif have.equals(target):
        out = array
    elif pa.types.is_struct(target):
        out = _conform_struct(array, target, where)
    elif pa.types.is_list(target):
        out = _conform_list(array, target, where)
    else:
        out = _cast(array, target, where)
    if not want.nullable and out.null_count:
        _refuse_nulls(out, where)
    return out


def _refuse_nulls(array: pa.Array, where: str) -> None:
    rows = np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))
    raise SchemaError(f"{where}: {rows.size} null value(s) in a not-null column (e.g. rows {rows[:5].tolist()})")


def _cast(array: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    have = array.type
    if not _castable(have, target):
        raise SchemaError(f"{where}: {have} cannot hold the reference type {target} without changing values")
    temporal = pa.types.is_timestamp(target) or pa.types.is_duration(target)
    if pa.types.is_floating(have) and (pa.types.is_integer(target) or temporal):
        _refuse_inexact_floats(array, where)
    try:
        if temporal and not (pa.types.is_timestamp(have) or pa.types.is_duration(have)):
            array = array.cast(pa.int64())  # numbers are nanoseconds (since the epoch), as in OTLP
        return array.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"{where}: a value does not fit {target}: {e}") from None


_EXACT_FLOAT = 2.0**53  # above it a float64 cannot tell neighbouring integers apart


def _refuse_inexact_floats(array: pa.Array, where: str) -> None:
    top = pc.max(pc.abs(array)).as_py()
    if top is not None and top >= _EXACT_FLOAT:
        raise SchemaError(
            f"{where}: float value {top:.17g} is beyond 2**53, where floats no longer hold every integer, so the "
            "original integer is unknown (pandas turns integer columns with nulls into float64: convert with "
            "to_pandas(types_mapper=pandas.ArrowDtype) to keep them integers)"
        )


def _castable(have: pa.DataType, target: pa.DataType) -> bool:
    def kind(*preds: Any) -> bool:
        return any(p(have) for p in preds)

    if pa.types.is_string(target):
        return kind(*_STRING_LIKE)
    if pa.types.is_binary(target):
        return kind(*_BINARY_LIKE)
    if pa.types.is_fixed_size_binary(target):
        return kind(*_BINARY_LIKE, pa.types.is_fixed_size_binary)
    if pa.types.is_integer(target):
        # Floats too: pandas turns integer columns with nulls into float64; the cast checks
        # that every value is whole and fits.
        return kind(pa.types.is_integer, pa.types.is_floating)
    if pa.types.is_floating(target):
        return kind(pa.types.is_floating)
    if pa.types.is_timestamp(target):
        return kind(pa.types.is_timestamp, pa.types.is_integer, pa.types.is_floating)
    if pa.types.is_duration(target):
        return kind(pa.types.is_duration, pa.types.is_integer, pa.types.is_floating)
    if pa.types.is_boolean(target):
        return kind(pa.types.is_boolean)
    return False


def _conform_struct(array: pa.Array, target: pa.StructType, where: str) -> pa.Array:
    if not pa.types.is_struct(array.type):
        raise SchemaError(f"{where}: {array.type} is not a struct; the reference type is {target}")
    have = array.type
    names = [have.field(i).name for i in range(have.num_fields)]
    known = {target.field(i).name for i in range(target.num_fields)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SchemaError(f"{where}: unknown struct field(s) {unknown}; the reference struct has {sorted(known)}")
    children = []
    for j in range(target.num_fields):
        want = target.field(j)
        path = f"{where}.{want.name}"
        if want.name not in names:
            if not want.nullable:
                raise SchemaError(f"{path}: missing struct field, which is required (not null)")
            children.append(pa.nulls(len(array), want.type))
            continue
        child = _conform_array(array.field(names.index(want.name)), want.with_nullable(True), path)
        if not want.nullable and child.null_count:
            child = fill_under_null_structs(child, array)  # slots under a null struct carry no value
            if child.null_count:  # elsewhere a null breaks the reference
                _refuse_nulls(child, path)
        children.append(child)
    mask = None if array.null_count == 0 else array.is_null()
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _conform_list(array: pa.Array, target: pa.ListType, where: str) -> pa.Array:
    if not any(p(array.type) for p in _LIST_LIKE):
        raise SchemaError(f"{where}: {array.type} is not a list; the reference type is {target}")
    if not pa.types.is_list(array.type):
        try:
            array = array.cast(pa.list_(array.type.value_field))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{where}: the list does not fit 32-bit offsets: {e}") from None
    values = _conform_array(array.values, target.value_field, f"{where}[]")
    mask = None if array.null_count == 0 else array.is_null()
    return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
