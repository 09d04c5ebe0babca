"""Dictionary encoding with an index-width ladder, overflow to the plain type, and reset.

The ladder follows the Go producer (``config/dictionary.go``): annotation ``8`` starts with u8
indices and may widen to u16, annotation ``16`` starts with u16; the widest rung is capped by
``dictionary_limit``. Cardinality counts distinct values over the life of the IPC stream (the
running dictionary is the stream's dictionary, so every batch carries it and the IPC writer
emits only deltas). Past the widest rung, a dictionary whose distinct/total ratio is below the
reset threshold starts again from the current batch's values (a replacement dictionary on the
wire); otherwise the column falls back to its plain type for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

INDEX_TYPES: tuple[pa.DataType, ...] = (pa.uint8(), pa.uint16(), pa.uint32())
INDEX_MAX: tuple[int, ...] = (2**8 - 1, 2**16 - 1, 2**32 - 1)


class DictionaryEvent(StrEnum):
    """What a batch did to a dictionary column (at most one per column per batch)."""

    UPGRADE = "dictionary_upgrade"  # wider index type
    OVERFLOW = "dictionary_overflow"  # past the widest rung, plain type from now on
    RESET = "dictionary_reset"  # past the widest rung but repetitive: dictionary restarted


def _rung_for(cardinality: int) -> int:
    for i, top in enumerate(INDEX_MAX):
        if cardinality <= top:
            return i
    return len(INDEX_MAX) - 1


def index_ladder(width: int, limit: int) -> tuple[tuple[pa.DataType, int], ...]:
    """The (index type, largest cardinality) rungs of a field annotated ``#dictionary=width``."""
    if limit <= 0:
        return ()
    first = min(INDEX_MAX[0] if width == 8 else INDEX_MAX[1], limit)
    lo, hi = _rung_for(first), _rung_for(limit)
    return tuple((INDEX_TYPES[i], min(INDEX_MAX[i], limit)) for i in range(lo, hi + 1))


@dataclass
class DictionaryPlan:
    """The outcome of feeding one batch's column to a dictionary transform (not yet committed)."""

    array: pa.Array  # the batch's column
    indices: pa.Array  # int32 indices of `array` into `values` (nulls kept)
    values: pa.Array  # the stream dictionary after this batch
    level: int | None  # ladder rung after this batch; None = plain type
    total: int  # cumulative slot count (nulls included), the ratio's denominator
    event: DictionaryEvent | None
    cardinality: int

    def restart(self) -> None:
        """The batch opens a new IPC stream: its dictionary holds only this batch's values."""
        if self.level is None:
            return
        self.indices, self.values = _encode_alone(self.array)
        self.total = len(self.array)
        self.cardinality = len(self.values)


def _encode_alone(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(int32 indices, distinct values in first-seen order) of one column."""
    local = pc.dictionary_encode(array)
    return local.indices, local.dictionary


class DictionaryTransform:
    """Per-column dictionary state: current rung, stream dictionary and cumulative total."""

    def __init__(self, value_type: pa.DataType, ladder: tuple[tuple[pa.DataType, int], ...], threshold: float):
        self.value_type = value_type
        self.ladder = ladder
        self.threshold = threshold
        self.level: int | None = 0 if ladder else None
        self.values: pa.Array = pa.array([], type=value_type)
        self.total = 0

    @property
    def index_type(self) -> pa.DataType | None:
        return None if self.level is None else self.ladder[self.level][0]

    def emitted_type(self, level: int | None) -> pa.DataType:
        if level is None:
            return self.value_type
        return pa.dictionary(self.ladder[level][0], self.value_type)

    def transform(self, field: pa.Field) -> pa.Field | None:
        return field.with_type(self.emitted_type(self.level))

    def plan(self, array: pa.Array) -> DictionaryPlan | None:
        """Feed one batch's column without changing state; None when the column is plain for good.

        One hash pass over the stream dictionary followed by the batch: dictionary-encoding the
        two as one chunked array keeps the stream dictionary's order (its values are distinct)
        and appends the batch's new values in first-seen order, so the batch's indices are
        already stream indices.
        """
        if self.level is None:
            return None
        if array.null_count == len(array):  # nothing to hash
            indices, values = pa.nulls(len(array), pa.int32()), self.values
        else:
            encoded = pa.chunked_array([self.values, array], type=self.value_type).dictionary_encode()
            last = encoded.chunk(encoded.num_chunks - 1)
            indices, values = last.indices, last.dictionary
        cardinality = len(values)
        total = self.total + len(array)
        level = self.level
        while level < len(self.ladder) and cardinality > self.ladder[level][1]:
            level += 1
        if level < len(self.ladder):
            event = DictionaryEvent.UPGRADE if level > self.level else None
            return DictionaryPlan(array, indices, values, level, total, event, cardinality)
        widest = len(self.ladder) - 1
        if total and cardinality / total < self.threshold:
            own_indices, own_values = _encode_alone(array)
            if len(own_values) <= self.ladder[widest][1]:
                return DictionaryPlan(
                    array, own_indices, own_values, widest, len(array), DictionaryEvent.RESET, len(own_values)
                )
        return DictionaryPlan(array, indices, self.values, None, total, DictionaryEvent.OVERFLOW, cardinality)

    def encode(self, array: pa.Array, plan: DictionaryPlan | None) -> pa.Array:
        """The column as emitted under `plan`: dictionary-encoded, or plain past overflow."""
        if plan is None or plan.level is None:
            return array
        indices = plan.indices.cast(self.ladder[plan.level][0], safe=False)
        return pa.DictionaryArray.from_arrays(indices, plan.values)

    def commit(self, plan: DictionaryPlan | None) -> None:
        if plan is None:
            return
        self.level = plan.level
        if plan.level is None:
            self.values = pa.array([], type=self.value_type)
            self.total = 0
        else:
            self.values = plan.values
            self.total = plan.total

    def __repr__(self) -> str:
        return f"DictionaryTransform(index={self.index_type}, cardinality={len(self.values)}, total={self.total})"
