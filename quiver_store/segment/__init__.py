"""Segment files: the open segment's accumulators, the writer, the zero-copy reader and the
representative-schema view across segments."""

from .accumulator import OpenSegment
from .info import SegmentInfo, StreamInfo
from .reader import SegmentReader
from .writer import write_segment

__all__ = ["OpenSegment", "SegmentInfo", "SegmentReader", "StreamInfo", "write_segment"]
