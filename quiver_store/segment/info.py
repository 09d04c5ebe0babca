"""What a finalized segment holds, as recorded in its metadata (no stream bytes needed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class StreamInfo:
    """One (slot, schema fingerprint) Arrow IPC file slice inside a segment.

    ``fingerprint`` is the fingerprint the bundles were ingested with; the stored IPC schema can
    differ from the ingested one only in dictionary index widths (widened at unification).
    ``chunks`` counts the bundles that contributed a batch, ``batches`` the IPC record batches
    the chunks were coalesced into. Event times are None when the slot has no event-time column
    or the stream lacks it.
    """

    stream_id: int
    slot: int
    fingerprint: bytes
    rows: int
    chunks: int
    bytes: int
    present_columns: tuple[str, ...]
    offset: int = 0
    batches: int = 0
    crc32c: int = 0
    event_time_min_ns: int | None = None
    event_time_max_ns: int | None = None


@dataclass(frozen=True)
class SegmentInfo:
    """Summary of one finalized segment file; built by the writer and by the reader's open()."""

    seq: int
    path: str
    size_bytes: int
    bundle_count: int
    stream_count: int
    ingestion_time_min_ns: int
    ingestion_time_max_ns: int
    metadata: Mapping[str, str]
    streams: tuple[StreamInfo, ...]
    representative_schemas: Mapping[int, pa.Schema] = field(default_factory=dict)
    event_time_columns: Mapping[int, str] = field(default_factory=dict)
    opened_at_ns: int = 0
    created_at_ns: int = 0
    format_version: int = 1

    @property
    def slots(self) -> tuple[int, ...]:
        """Slot ids with at least one stream, ascending."""
        return tuple(sorted({s.slot for s in self.streams}))

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.streams)

    def event_time_range_ns(self, slot: int | None = None) -> tuple[int, int] | None:
        """(min, max) event time over the streams of `slot` (all slots when None), if recorded."""
        lows = [s.event_time_min_ns for s in self.streams if s.event_time_min_ns is not None and slot in (None, s.slot)]
        highs = [s.event_time_max_ns for s in self.streams if s.event_time_max_ns is not None and slot in (None, s.slot)]
        if not lows:
            return None
        return min(lows), max(highs)  # type: ignore[type-var]
