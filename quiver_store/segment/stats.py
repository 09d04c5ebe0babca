"""Per-stream statistics computed from a stream's data (shared by the writer and verify())."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _column(batch: pa.RecordBatch, dotted: str) -> pa.Array | None:
    """The column at a dotted struct path, or None when the batch lacks it."""
    names = dotted.split(".")
    if names[0] not in batch.schema.names:
        return None
    arr = batch.column(names[0])
    for name in names[1:]:
        if not pat.is_struct(arr.type) or arr.type.get_field_index(name) < 0:
            return None
        arr = arr.field(name)
    return arr


def event_time_range(batches: list[pa.RecordBatch], column: str) -> tuple[int, int] | None:
    """(min, max) of the event-time column over the batches as int64 ns; None if the column is
    absent, all null, not an integer or timestamp, or outside the int64 range (never raises: a
    statistic must not make a finalize fail)."""
    lows, highs = [], []
    for batch in batches:
        arr = _column(batch, column)
        if arr is None:
            return None
        if pat.is_timestamp(arr.type):
            try:
                arr = arr.cast(pa.timestamp("ns", arr.type.tz)).cast(pa.int64())
            except pa.ArrowInvalid:  # seconds (or ms, us) past the i64 range in ns
                return None
        elif not pat.is_integer(arr.type):
            return None
        mm = pc.min_max(arr)
        if mm["min"].is_valid:
            lows.append(int(mm["min"].as_py()))
            highs.append(int(mm["max"].as_py()))
    if not lows or min(lows) < INT64_MIN or max(highs) > INT64_MAX:
        return None
    return min(lows), max(highs)
