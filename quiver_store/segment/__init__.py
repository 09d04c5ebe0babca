"""Segment files: the open segment's accumulators, the writer, the zero-copy reader and the
representative-schema view across segments."""

from .accumulator import OpenSegment
from .info import SegmentInfo, StreamInfo
from .reader import SegmentReader
from .schema_view import (
    conform_batch,
    load_batches,
    load_dataset,
    load_table,
    representative_schema,
    slot_schema,
)
from .writer import write_segment

__all__ = [
    "OpenSegment",
    "SegmentInfo",
    "SegmentReader",
    "StreamInfo",
    "conform_batch",
    "load_batches",
    "load_dataset",
    "load_table",
    "representative_schema",
    "slot_schema",
    "write_segment",
]
