"""Dictionary encoding with an index-width ladder, overflow to the plain type, and reset.

The ladder follows the Go producer (``config/dictionary.go``): annotation ``8`` starts with u8
indices and may widen to u16, annotation ``16`` starts with u16; the widest rung is capped by
``dictionary_limit``. Cardinality counts distinct values over the life of the IPC stream (the
running dictionary is the stream's dictionary, so every batch carries it and the IPC writer
emits only deltas). Past the widest rung, a dictionary whose distinct/total ratio is below the
reset threshold starts again from the current batch's values (a replacement dictionary on the
wire); otherwise the column falls back to its plain type for good. The stream dictionary lives
in a memo (``memo.py``) so each batch hashes only its own values.

Beyond Go's ladder, an optional ``RepetitionRule`` drops a dictionary whose values barely repeat
(near-unique bodies, ids, durations): when one batch carries at least ``min_values`` non-null
values of the column and more than ``max_distinct_ratio`` of them are new to the stream
dictionary, the column falls back to its plain type for the rest of the stream. Such a
dictionary costs its values plus an index per row, more than the plain column, whose few
repeats zstd finds anyway within a batch that large. The rule judges single batches, not the
stream's cumulative count: small batches (a few hundred values) never trigger it, because
there the dictionary is the only memory of values sent in earlier messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .memo import HashMemo, Memo, jit, new_memo

INDEX_TYPES: tuple[pa.DataType, ...] = (pa.uint8(), pa.uint16(), pa.uint32())
INDEX_MAX: tuple[int, ...] = (2**8 - 1, 2**16 - 1, 2**32 - 1)
HASH_FIRST_MIN_ROWS = 2048


class DictionaryEvent(StrEnum):
    """What a batch did to a dictionary column (at most one per column per batch)."""

    UPGRADE = "dictionary_upgrade"  # wider index type
    OVERFLOW = "dictionary_overflow"  # past the widest rung, plain type from now on
    RESET = "dictionary_reset"  # past the widest rung but repetitive: dictionary restarted
    FALLBACK = "dictionary_fallback"  # values barely repeat (RepetitionRule): plain type from now on


@dataclass(frozen=True)
class RepetitionRule:
    """Fall back to the plain type when a batch of at least ``min_values`` non-null values brings
    more than ``max_distinct_ratio * values`` values new to the stream dictionary."""

    max_distinct_ratio: float
    min_values: int

    def fires(self, new: int, values: int) -> bool:
        return values >= self.min_values and new > self.max_distinct_ratio * values


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
    codes: np.ndarray  # int32 indices of `array` into the memo (0 in null slots)
    memo: Memo  # the stream dictionary after this batch (its first `cardinality` entries)
    level: int | None  # ladder rung after this batch; None = plain type
    total: int  # cumulative slot count (nulls included), the ratio's denominator
    event: DictionaryEvent | None
    cardinality: int
    alone: bool  # the memo holds only this batch's values

    def restart(self) -> None:
        """The batch opens a new IPC stream: its dictionary holds only this batch's values."""
        if self.level is None:
            return
        self.total = len(self.array)
        if self.alone:  # the stream dictionary was empty: nothing to hash again
            return
        self.memo = new_memo(self.memo.value_type)
        self.codes = self.memo.encode(self.array)
        self.cardinality = self.memo.size
        self.alone = True


@jit
def _spread(codes: np.ndarray, bitmap: np.ndarray, offset: int, out: np.ndarray) -> None:
    """out[i] = the next of ``codes`` where bit ``offset + i`` of ``bitmap`` is set (out zeroed)."""
    j = 0
    for i in range(out.size):
        p = offset + i
        if (bitmap[p >> 3] >> (p & 7)) & 1:
            out[i] = codes[j]
            j += 1


def dictionary_encode(array: pa.Array) -> pa.DictionaryArray:
    """``pc.dictionary_encode(array)`` (null slots index 0); a mostly-null column hashes only its
    valid values, since pyarrow's kernel visits every slot (6x slower at 12 valid in 21,000)."""
    if 2 * array.null_count <= len(array):
        return pc.dictionary_encode(array)
    valid = pc.dictionary_encode(pc.drop_null(array))
    packed = valid.indices
    codes = np.frombuffer(packed.buffers()[1], dtype=np.int32)[packed.offset : packed.offset + len(packed)]
    out = np.zeros(len(array), dtype=np.int32)
    _spread(codes, np.frombuffer(array.buffers()[0], dtype=np.uint8), array.offset, out)
    indices = pa.Array.from_buffers(pa.int32(), len(array), [_validity_buffer(array), pa.py_buffer(out)], array.null_count)
    return pa.DictionaryArray.from_arrays(indices, valid.dictionary, safe=False)


def _binary_like(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or (
        pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    )


def _validity_buffer(array: pa.Array) -> pa.Buffer | None:
    """The array's validity bitmap starting at bit 0 (None without nulls)."""
    if array.null_count == 0:
        return None
    buf = array.buffers()[0]
    if buf is not None and array.offset % 8 == 0:
        return buf.slice(array.offset // 8)
    return pc.is_valid(array).buffers()[1]


class DictionaryTransform:
    """Per-column dictionary state: current rung, stream dictionary (a memo) and cumulative total."""

    def __init__(
        self,
        value_type: pa.DataType,
        ladder: tuple[tuple[pa.DataType, int], ...],
        threshold: float,
        repetition: RepetitionRule | None = None,
    ):
        self.value_type = value_type
        self.ladder = ladder
        self.threshold = threshold
        self.repetition = repetition
        self.level: int | None = 0 if ladder else None
        self.memo: Memo = new_memo(value_type)
        self.total = 0

    @property
    def index_type(self) -> pa.DataType | None:
        return None if self.level is None else self.ladder[self.level][0]

    @property
    def values(self) -> pa.Array:
        """The committed stream dictionary."""
        return self.memo.values(self.memo.committed)

    def emitted_type(self, level: int | None) -> pa.DataType:
        if level is None:
            return self.value_type
        return pa.dictionary(self.ladder[level][0], self.value_type)

    def transform(self, field: pa.Field) -> pa.Field | None:
        return field.with_type(self.emitted_type(self.level))

    def hashes_first(self, array: pa.Array, sort_key: bool) -> bool:
        """Whether the encoder should ``dictionary_encode`` this plain binary-like column before
        sorting (the sort then ranks the batch dictionary and gathers only indices, and ``plan``
        looks up only the dictionary's values): when the column is a sort key, which the sort
        would hash anyway, or when the memo would hash this batch through pyarrow itself. Columns
        shorter than ``HASH_FIRST_MIN_ROWS`` stay plain: there the fixed cost of the extra arrays
        and kernel calls outweighs the hashing saved (measured on the metrics tables)."""
        if len(array) < HASH_FIRST_MIN_ROWS:
            return False
        if self.level is None or not isinstance(self.memo, HashMemo) or not _binary_like(self.value_type):
            return False
        if array.null_count == len(array):
            return False
        return sort_key or self.memo.hashes_with_arrow(array)

    def plan(self, array: pa.Array) -> DictionaryPlan | None:
        """Feed one batch's column without changing state; None when the column is plain for good.

        The memo hashes only the batch: values seen earlier in the stream keep their indices,
        new ones are appended in first-seen order (pending until ``commit``).
        """
        if self.level is None:
            return None
        alone = self.memo.committed == 0
        codes = self.memo.encode(array)
        cardinality = self.memo.size
        total = self.total + len(array)
        level = self.level
        while level < len(self.ladder) and cardinality > self.ladder[level][1]:
            level += 1
        if level < len(self.ladder):
            new = cardinality - self.memo.committed
            if self.repetition is not None and self.repetition.fires(new, len(array) - array.null_count):
                return DictionaryPlan(array, codes, self.memo, None, total, DictionaryEvent.FALLBACK, cardinality, alone)
            event = DictionaryEvent.UPGRADE if level > self.level else None
            return DictionaryPlan(array, codes, self.memo, level, total, event, cardinality, alone)
        widest = len(self.ladder) - 1
        if total and cardinality / total < self.threshold:
            own = new_memo(self.value_type)
            own_codes = own.encode(array)
            if own.size <= self.ladder[widest][1]:
                return DictionaryPlan(array, own_codes, own, widest, len(array), DictionaryEvent.RESET, own.size, True)
        return DictionaryPlan(array, codes, self.memo, None, total, DictionaryEvent.OVERFLOW, cardinality, alone)

    def encode(self, array: pa.Array, plan: DictionaryPlan | None) -> pa.Array:
        """The column as emitted under `plan`: dictionary-encoded, or plain past overflow.

        Indices are narrowed with numpy (they fit the rung by construction) and wrapped with the
        batch's own validity bitmap; ``safe=False`` skips re-checking them against the dictionary.
        """
        if plan is None or plan.level is None:
            return array
        index_type = self.ladder[plan.level][0]
        data = pa.py_buffer(plan.codes.astype(index_type.to_pandas_dtype(), copy=False))
        indices = pa.Array.from_buffers(index_type, len(array), [_validity_buffer(array), data], array.null_count)
        return pa.DictionaryArray.from_arrays(indices, plan.memo.values(plan.cardinality), safe=False)

    def commit(self, plan: DictionaryPlan | None) -> None:
        if plan is None:
            return
        self.level = plan.level
        if plan.level is None:
            self.memo = new_memo(self.value_type)
            self.total = 0
        else:
            plan.memo.commit(plan.cardinality)
            self.memo = plan.memo
            self.total = plan.total

    def __repr__(self) -> str:
        return f"DictionaryTransform(index={self.index_type}, cardinality={self.memo.committed}, total={self.total})"
