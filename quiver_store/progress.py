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

import numbers

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .bundle import RecordBundle
from .errors import BundleError, CorruptionError
from .segment.reader import SegmentReader

PROGRESS_SLOT = 63
PROGRESS_SCHEMA = pa.schema(
    [pa.field("producer", pa.string(), nullable=False), pa.field("offset", pa.int64(), nullable=False)]
)

OFFSET_MAX = (1 << 63) - 1  # stored as int64
_NEEDS = "needs a non-empty producer and an offset >= 0"


def with_progress(bundle: RecordBundle, producer: str, offset: int) -> RecordBundle:
    """`bundle` plus the progress record "`producer` has consumed `offset` input items".

    BundleError, before anything is built, unless `producer` is a non-empty str that encodes to
    UTF-8 and `offset` an int (not a bool; numpy integers too) in 0..2**63-1."""
    if PROGRESS_SLOT in bundle.slots:
        raise BundleError(f"the bundle already carries a progress record (slot {PROGRESS_SLOT})")
    problem = _problem(producer, offset)
    if problem:
        raise BundleError(f"with_progress {_NEEDS}, got {producer!r}, {offset!r}: {problem}")
    batch = pa.record_batch(
        [pa.array([producer], pa.string()), pa.array([int(offset)], pa.int64())], schema=PROGRESS_SCHEMA
    )
    return RecordBundle({**bundle.slots, PROGRESS_SLOT: batch}, bundle.fingerprints, bundle.ingestion_time_ns)


def _problem(producer: object, offset: object) -> str | None:
    """What is wrong with one progress record, None when nothing is (the rules of with_progress)."""
    return producer_problem(producer) or _offset_problem(offset)


def producer_problem(producer: object) -> str | None:
    """What is wrong with a producer name (committed_offset asks too), None when nothing is."""
    if producer is None:
        return "the producer is None (null)"
    if not isinstance(producer, str):
        return f"the producer must be a str, not {type(producer).__name__}"
    if not producer:
        return "the producer is empty"
    try:
        producer.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"the producer is not valid UTF-8 ({exc.reason} at index {exc.start})"
    return None


def _offset_problem(offset: object) -> str | None:
    if offset is None:
        return "the offset is None (null)"
    if isinstance(offset, bool | np.bool_) or not isinstance(offset, numbers.Integral):
        return f"the offset must be an int, not {type(offset).__name__}"
    value = int(offset)
    if value < 0:
        return "the offset is negative"
    if value > OFFSET_MAX:
        return f"the offset is above 2**63-1 ({OFFSET_MAX}), the largest it can be"
    return None


def check_progress(batch: pa.RecordBatch) -> None:
    """BundleError unless `batch` is one progress record: the schema above, one row, a non-empty
    producer and an offset >= 0 (slot 63 is reserved for it in every layout), as with_progress
    checks them."""
    where = f"slot {PROGRESS_SLOT} is reserved for producer progress"
    if not batch.schema.equals(PROGRESS_SCHEMA):
        raise BundleError(f"{where}: its batch {_schema_problem(batch)}")
    if batch.num_rows != 1:
        raise BundleError(f"{where}: its batch must hold exactly one row, got {batch.num_rows}")
    producer, offset = record(batch)
    problem = _problem(producer, offset)
    if problem:
        raise BundleError(f"{where}: {_NEEDS}, got {producer!r}, {offset!r}: {problem}")


def _schema_problem(batch: pa.RecordBatch) -> str:
    return f"must have the schema {PROGRESS_SCHEMA.to_string(show_schema_metadata=False)!r}, got {batch.schema.to_string(show_schema_metadata=False)!r}"


def record(batch: pa.RecordBatch) -> tuple[str, int]:
    """(producer, offset) of a one-row progress batch."""
    return batch.column(0)[0].as_py(), batch.column(1)[0].as_py()


def max_offsets(batches: list[pa.RecordBatch]) -> dict[str, int]:
    """The largest offset of each producer in progress batches (a segment stream's batches hold
    many records each).

    BundleError when a batch is not progress records by the rules of with_progress (a segment
    whose checksums hold can still carry one written by a foreign or buggy writer): an offset
    read from it could make a writer skip input it never stored."""
    for batch in batches:
        _check_records(batch)
    if not batches:
        return {}
    # committed_offset's first call runs this once per segment: numpy's maximum.at over dictionary
    # indices costs a sixth of an Acero group_by on these few-row tables.
    table = pa.Table.from_batches(batches, schema=PROGRESS_SCHEMA)
    producers = pc.dictionary_encode(table.column("producer")).combine_chunks()
    largest = np.full(len(producers.dictionary), -1, np.int64)
    np.maximum.at(largest, producers.indices.to_numpy(), table.column("offset").to_numpy())
    return dict(zip(producers.dictionary.to_pylist(), largest.tolist(), strict=True))


def segment_offsets(reader: SegmentReader) -> dict[str, int]:
    """max_offsets of the progress records of one segment; CorruptionError naming the segment
    when they are not valid progress records (the reader validated each batch's Arrow data in
    full as it read it)."""
    streams = [s.stream_id for s in reader.info.streams if s.slot == PROGRESS_SLOT]
    try:
        return max_offsets([b for stream_id in streams for b in reader.stream_batches(stream_id)])
    except BundleError as exc:
        raise CorruptionError(
            f"{exc}; the committed offsets of its producers are unknown until the segment is restored or removed",
            reader.path,
        ) from None


def _check_records(batch: pa.RecordBatch) -> None:
    """BundleError unless `batch` (valid Arrow data) holds only valid progress records, any
    number of rows."""
    if not batch.schema.equals(PROGRESS_SCHEMA):
        raise BundleError(f"progress records: their batch {_schema_problem(batch)}")
    producers, offsets = batch.column(0), batch.column(1)
    if producers.null_count or offsets.null_count:
        raise BundleError(f"progress records: {producers.null_count} null producers, {offsets.null_count} null offsets")
    if len(batch) and pc.min(pc.binary_length(producers)).as_py() == 0:
        raise BundleError("progress records: one has an empty producer")
    lowest = pc.min(offsets).as_py()
    if lowest is not None and lowest < 0:
        raise BundleError(f"progress records: one has a negative offset ({lowest})")


def merge(into: dict[str, int], offsets: dict[str, int]) -> None:
    """Offsets only grow: keep the larger of each producer's two."""
    for producer, offset in offsets.items():
        if offset > into.get(producer, -1):
            into[producer] = offset
