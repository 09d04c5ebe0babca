"""Producer progress: how far a writer's input is stored, recorded in the same bundle as the data.

The table-write protocol's database-side offsets (seeds/table-write-protocol.txt): a writer that
replays its input after a failure (a retried Spark task, a job run again) asks the store how much of
that input its earlier attempts stored and skips it, so every input row is stored exactly once.
The offset travels in reserved slot ``PROGRESS_SLOT`` of the bundle it belongs to, so it is durable
in the same WAL entry, and later the same segment, as that bundle's data: after a crash both are
there or neither is.

A producer is any non-empty name that identifies one input stream across attempts (for example
``"<job id>/partition-3"``); its offset counts the input items consumed up to and including the
bundle, in the writer's own unit (rows, requests, bytes).
"""

from __future__ import annotations

import pyarrow as pa

from .bundle import RecordBundle
from .errors import BundleError

PROGRESS_SLOT = 63
PROGRESS_SCHEMA = pa.schema(
    [pa.field("producer", pa.string(), nullable=False), pa.field("offset", pa.int64(), nullable=False)]
)


def with_progress(bundle: RecordBundle, producer: str, offset: int) -> RecordBundle:
    """`bundle` plus the progress record "`producer` has consumed `offset` input items"."""
    if PROGRESS_SLOT in bundle.slots:
        raise BundleError(f"the bundle already carries a progress record (slot {PROGRESS_SLOT})")
    batch = pa.record_batch([pa.array([producer], pa.string()), pa.array([offset], pa.int64())], schema=PROGRESS_SCHEMA)
    check_progress(batch)
    return RecordBundle({**bundle.slots, PROGRESS_SLOT: batch}, bundle.fingerprints, bundle.ingestion_time_ns)


def check_progress(batch: pa.RecordBatch) -> None:
    """BundleError unless `batch` is one progress record: the schema above, one row, a non-empty
    producer and an offset >= 0 (slot 63 is reserved for it in every layout)."""
    where = f"slot {PROGRESS_SLOT} is reserved for producer progress"
    if not batch.schema.equals(PROGRESS_SCHEMA):
        raise BundleError(f"{where}: its batch must have the schema {PROGRESS_SCHEMA.to_string(show_schema_metadata=False)!r}, got {batch.schema.to_string(show_schema_metadata=False)!r}")
    if batch.num_rows != 1:
        raise BundleError(f"{where}: its batch must hold exactly one row, got {batch.num_rows}")
    producer, offset = record(batch)
    if not producer or offset is None or offset < 0:
        raise BundleError(f"{where}: needs a non-empty producer and an offset >= 0, got {producer!r}, {offset!r}")


def record(batch: pa.RecordBatch) -> tuple[str, int]:
    """(producer, offset) of a one-row progress batch."""
    return batch.column(0)[0].as_py(), batch.column(1)[0].as_py()


def max_offsets(batches: list[pa.RecordBatch]) -> dict[str, int]:
    """The largest offset of each producer in progress batches (a segment stream's batches hold
    many records each)."""
    if not batches:
        return {}
    grouped = pa.Table.from_batches(batches, schema=PROGRESS_SCHEMA).group_by("producer").aggregate([("offset", "max")])
    return dict(zip(grouped.column("producer").to_pylist(), grouped.column("offset_max").to_pylist(), strict=True))


def merge(into: dict[str, int], offsets: dict[str, int]) -> None:
    """Offsets only grow: keep the larger of each producer's two."""
    for producer, offset in offsets.items():
        if offset > into.get(producer, -1):
            into[producer] = offset
