"""Plain OTAP tables in the Arrow types Spark reads (adaptive_arrow.spark_types): no type Spark's
Arrow reader rejects, and every value unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest

from adaptive_arrow import AdaptiveArrowError
from adaptive_arrow.spark_types import spark_schema, to_spark_types
from otap_model import PayloadType, generate, reference_schema

MODELLED = [pt for pt in PayloadType if pt.value and pt is not PayloadType.MULTIVARIATE_METRICS]


def leaf_types(arrow_type: pa.DataType) -> list[pa.DataType]:
    if pa.types.is_struct(arrow_type):
        return [t for f in arrow_type for t in leaf_types(f.type)]
    if pa.types.is_list(arrow_type):
        return leaf_types(arrow_type.value_type)
    return [arrow_type]


@pytest.mark.parametrize("payload_type", MODELLED, ids=lambda pt: pt.name)
def test_spark_schema_holds_only_types_spark_reads(payload_type: PayloadType) -> None:
    schema = spark_schema(payload_type)
    assert schema.names == reference_schema(payload_type).names
    for field in schema:
        for leaf in leaf_types(field.type):
            assert not pa.types.is_unsigned_integer(leaf), (field.name, leaf)
            assert not (pa.types.is_fixed_size_binary(leaf) or pa.types.is_dictionary(leaf)), (field.name, leaf)
            assert not (pa.types.is_timestamp(leaf) or pa.types.is_duration(leaf)), (field.name, leaf)


@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_every_value_survives_the_cast(signal: str) -> None:
    """Cast back to the reference types, every generated table is equal to itself."""
    for bundle in generate(signal, 600, batch_size=300, seed=3):
        for pt, table in bundle.tables.items():
            spark = to_spark_types(table, pt)
            assert spark.schema.equals(spark_schema(pt))
            back = pa.Table.from_batches([spark]).cast(table.schema)
            assert back.to_pylist() == pa.Table.from_batches([table]).to_pylist(), pt.name


def test_a_count_above_spark_bigint_range_is_named() -> None:
    schema = reference_schema(PayloadType.SUMMARY_DATA_POINTS)
    table = pa.RecordBatch.from_pylist([{"id": 0, "parent_id": 0, "count": 2**63}], schema=schema)
    with pytest.raises(AdaptiveArrowError, match=r"^SUMMARY_DATA_POINTS\.count does not fit Spark's int64 \("):
        to_spark_types(table, PayloadType.SUMMARY_DATA_POINTS)
    with pytest.raises(AdaptiveArrowError, match=r"^LOGS table has no column 'id'; its columns: \['x'\]$"):
        to_spark_types(pa.record_batch({"x": pa.array([1])}), PayloadType.LOGS)
