"""Plain OTAP tables in the Arrow types Spark reads.

Spark's Arrow reader rejects unsigned integers, fixed-size binary and dictionaries, and reads
timestamps at microsecond precision (reference/python-stack-notes.md, 2.4). ``spark_schema`` maps
a payload type's reference schema to types Spark reads without changing a value: uint8, uint16
and uint32 widen to the next signed type, uint64 becomes int64 (a value above 2**63-1 raises
rather than wraps), fixed-size ids become binary, nanosecond timestamps and durations become
int64 nanoseconds (as their ``*_unix_nano`` names say), dictionaries their values; strings,
binaries, booleans, doubles, signed integers, structs (children nullable) and lists stay. Pure pyarrow: usable on
the driver (``spark.createDataFrame(to_spark_types(...))``) as well as in the tasks.
"""

from __future__ import annotations

import functools

import pyarrow as pa

from otap_model import PayloadType, reference_schema

from .errors import AdaptiveArrowError

_SIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


def spark_type(arrow_type: pa.DataType) -> pa.DataType:
    """`arrow_type` in a type Spark reads holding the same values (see the module docstring)."""
    if pa.types.is_struct(arrow_type):
        # Struct children nullable: Spark gives a null struct null children (the log body's
        # required `type` included), and its own toArrow then refuses a not-null child.
        return pa.struct([pa.field(f.name, spark_type(f.type)) for f in arrow_type])
    if pa.types.is_list(arrow_type):
        item = arrow_type.value_field
        return pa.list_(pa.field(item.name, spark_type(item.type), item.nullable))
    if pa.types.is_dictionary(arrow_type):
        return spark_type(arrow_type.value_type)
    if pa.types.is_fixed_size_binary(arrow_type):
        return pa.binary()
    if pa.types.is_timestamp(arrow_type) or pa.types.is_duration(arrow_type):
        return pa.int64()
    return _SIGNED.get(arrow_type, arrow_type)


@functools.cache
def spark_schema(payload_type: PayloadType | int) -> pa.Schema:
    """The reference schema of `payload_type` (columns in reference order) in Spark's types,
    without the annotation metadata."""
    return pa.schema([pa.field(f.name, spark_type(f.type), f.nullable) for f in reference_schema(PayloadType(payload_type))])


def to_spark_types(table: pa.RecordBatch, payload_type: PayloadType | int) -> pa.RecordBatch:
    """A plain table of `payload_type` (reference shape, as ``Decoder`` gives it) cast to
    ``spark_schema``; AdaptiveArrowError naming the column when a value does not fit (a uint64
    above 2**63-1) or a column is missing."""
    pt = PayloadType(payload_type)
    columns = []
    for field in spark_schema(pt):
        index = table.schema.get_field_index(field.name)
        if index < 0:
            raise AdaptiveArrowError(f"{pt.name} table has no column {field.name!r}; its columns: {table.schema.names}")
        try:
            columns.append(table.column(index).cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise AdaptiveArrowError(f"{pt.name}.{field.name} does not fit Spark's {field.type} ({exc})") from None
    return pa.RecordBatch.from_arrays(columns, schema=spark_schema(pt))
