"""Persistent value -> index memos of the stream dictionaries.

A dictionary column's cardinality is cumulative over its IPC stream, so every batch must be
matched against all values seen so far. Hashing the whole stream dictionary again for every
batch costs O(stream) per batch; a memo keeps its hash table between batches and hashes only
the batch (pyarrow's ``dictionary_encode``) and then looks up only the batch's distinct values.
``HashMemo`` is an open-addressing table (linear probing) over the dictionary's own bytes, kept
in numpy arrays and driven by numba kernels; it covers binary-like values (string,
binary and their large variants) and fixed-width values (integers, temporal types, fixed-size
binary, decimals). ``ArrowMemo`` falls back to pyarrow's ``dictionary_encode`` for any other
value type (booleans, floats, views), re-hashing the stream dictionary each batch.

Both number values in first-seen order, so indices equal those of ``pc.dictionary_encode`` over
the stream dictionary followed by the batch. ``encode`` adds the batch's new values as pending
entries; ``commit(size)`` keeps the first ``size`` entries; the next ``encode`` first drops any
entries never committed (a rejected batch), so a plan that is discarded changes nothing. The
dictionary bytes are append-only: arrays returned by ``values`` stay valid after later batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_EMPTY = -1
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def jit(fn: Callable[..., Any], **options: Any) -> Any:
    """``numba.njit``, cached on disk when a cache directory is writable (compiled per process otherwise)."""
    try:
        return numba.njit(cache=True, nogil=True, **options)(fn)
    except RuntimeError:  # no writable cache directory: compile per process
        return numba.njit(cache=False, nogil=True, **options)(fn)


@intrinsic
def _load8(typingctx: Any, array: Any, index: Any) -> Any:
    """Unaligned little-endian u64 load of array[index:index + 8] (the caller stays in bounds)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [args[1]])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(array, index), codegen


@intrinsic
def _store8(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """Unaligned little-endian u64 store to array[index:index + 8] (the caller stays in bounds)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [args[1]])
        builder.store(args[2], builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(array, index, types.uint64), codegen


@jit
def _copy(src: np.ndarray, s: int, dst: np.ndarray, d: int, length: int) -> None:
    """dst[d:d + length] = src[s:s + length], 8 bytes per step (slice assignment goes bytewise)."""
    k = 0
    while k + 8 <= length:
        _store8(dst, d + k, _load8(src, s + k))  # type: ignore[call-arg]
        k += 8
    while k < length:
        dst[d + k] = src[s + k]
        k += 1


def _word(data: np.ndarray, j: int, end: int) -> np.uint64:
    """Bytes data[j:min(j + 8, end)] as a little-endian u64, zero padded."""
    if j + 8 <= end:
        return _load8(data, j)  # type: ignore[call-arg]
    w = np.uint64(0)
    shift = np.uint64(0)
    for k in range(j, end):
        w |= np.uint64(data[k]) << shift
        shift += np.uint64(8)
    return w


_word = jit(_word, inline="always")


@jit
def _hash(data: np.ndarray, start: int, end: int) -> np.uint64:
    """64-bit hash of data[start:end]: one multiply per 8 bytes, splitmix finaliser."""
    h = np.uint64(end - start) * _M1
    j = start
    while j < end:
        h = (h ^ _word(data, j, end)) * _M2
        h ^= h >> np.uint64(29)
        j += 8
    h ^= h >> np.uint64(31)
    h *= _M3
    h ^= h >> np.uint64(32)
    return h


@jit
def _same(a: np.ndarray, s: int, b: np.ndarray, t: int, length: int) -> bool:
    j = 0
    while j < length:
        if _word(a, s + j, s + length) != _word(b, t + j, t + length):
            return False
        j += 8
    return True


@jit
def _insert(
    data: np.ndarray,
    offsets: np.ndarray,
    start: int,
    n: int,
    width: int,
    bitmap: np.ndarray,
    table: np.ndarray,
    hashes: np.ndarray,
    stamps: np.ndarray,
    stamp: int,
    dict_data: np.ndarray,
    dict_offsets: np.ndarray,
    size: int,
    out: np.ndarray,
    positions: np.ndarray,
) -> tuple[int, int]:
    """Look up (inserting when new) values start..start+n-1, or start + positions[i] for each i
    when ``positions`` is not empty (n = its size); their indices go to ``out``.

    ``width`` > 0: fixed-width values of that many bytes; 0: binary-like values delimited by
    ``offsets``. ``bitmap`` (empty: no nulls) is the Arrow validity bitmap, indexed like the
    values; null slots get index 0. Returns (dictionary size afterwards, distinct values seen),
    counting distinct values by stamping each entry with ``stamp``. The caller guarantees room
    for n more entries and a table at most half full afterwards.
    """
    mask = np.uint64(table.size - 1)
    check = bitmap.size != 0
    indirect = positions.size != 0
    distinct = 0
    for i in range(n):
        p = start + (positions[i] if indirect else i)
        if check and not (bitmap[p >> 3] >> (p & 7)) & 1:
            out[i] = 0
            continue
        if width:
            s = np.int64(p * width)
            e = s + width
        else:
            s = np.int64(offsets[p])
            e = np.int64(offsets[p + 1])
        length = e - s
        h = _hash(data, s, e)
        slot = h & mask
        while True:
            idx = np.int64(table[slot])
            if idx == _EMPTY:
                if width:
                    ds = np.int64(size * width)
                else:
                    ds = np.int64(dict_offsets[size])
                    dict_offsets[size + 1] = ds + length
                _copy(data, s, dict_data, ds, length)
                table[slot] = size
                hashes[size] = h
                stamps[size] = stamp
                distinct += 1
                out[i] = size
                size += 1
                break
            if hashes[idx] == h:
                if width:
                    ds = np.int64(idx * width)
                    same = True
                else:
                    ds = np.int64(dict_offsets[idx])
                    same = dict_offsets[idx + 1] - ds == length
                if same and _same(dict_data, ds, data, s, length):
                    if stamps[idx] != stamp:
                        stamps[idx] = stamp
                        distinct += 1
                    out[i] = idx
                    break
            slot = (slot + np.uint64(1)) & mask
    return size, distinct


@jit
def _rehash(hashes: np.ndarray, size: int, table: np.ndarray) -> None:
    """Rebuild ``table`` (already filled with _EMPTY) from the first ``size`` entries."""
    mask = np.uint64(table.size - 1)
    for idx in range(size):
        slot = hashes[idx] & mask
        while table[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = idx


@jit
def _drop(hashes: np.ndarray, table: np.ndarray, keep: int, size: int) -> None:
    """Remove entries keep..size-1, newest first (exact undo of their linear-probing inserts)."""
    mask = np.uint64(table.size - 1)
    for idx in range(size - 1, keep - 1, -1):
        slot = hashes[idx] & mask
        while table[slot] != idx:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = _EMPTY


@jit
def _first_seen(codes: np.ndarray, bitmap: np.ndarray, offset: int, ranks: np.ndarray, order: np.ndarray) -> int:
    """Number the dictionary codes a batch uses in order of first appearance: ``ranks[code]`` (-1
    on entry) becomes its number and ``order[number]`` the code. Null slots (``bitmap`` bit clear,
    at bit ``offset + i``; empty bitmap: no nulls) are skipped. Returns how many codes are used."""
    check = bitmap.size != 0
    k = 0
    for i in range(codes.size):
        if check:
            p = offset + i
            if not (bitmap[p >> 3] >> (p & 7)) & 1:
                continue
        c = codes[i]
        if ranks[c] < 0:
            ranks[c] = k
            order[k] = c
            k += 1
    return k


@jit
def _recode(
    codes: np.ndarray, bitmap: np.ndarray, offset: int, ranks: np.ndarray, mapping: np.ndarray, out: np.ndarray
) -> None:
    """out[i] = mapping[ranks[codes[i]]] (the stream index of row i's value); 0 in null slots."""
    check = bitmap.size != 0
    for i in range(codes.size):
        if check:
            p = offset + i
            if not (bitmap[p >> 3] >> (p & 7)) & 1:
                out[i] = 0
                continue
        out[i] = mapping[ranks[codes[i]]]


def _fixed_width(t: pa.DataType) -> int:
    """Byte width of a fixed-width value type the hash memo handles exactly, else 0."""
    if pt.is_fixed_size_binary(t):
        return int(t.byte_width)
    if pt.is_integer(t) or pt.is_temporal(t) or pt.is_decimal(t):
        bits = t.bit_width
        return bits // 8 if bits % 8 == 0 else 0
    return 0  # floats are excluded: Arrow's hashing treats NaN payloads and -0.0 specially


def _offset_dtype(t: pa.DataType) -> type | None:
    if pt.is_string(t) or pt.is_binary(t):
        return np.int32
    if pt.is_large_string(t) or pt.is_large_binary(t):
        return np.int64
    return None


def _grow(a: np.ndarray, need: int) -> np.ndarray:
    """A copy of `a` with room for at least `need` items (doubling); `a` itself if it fits."""
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size), dtype=a.dtype)
    out[: a.size] = a
    return out


_NO_BYTES = np.empty(0, dtype=np.uint8)
_NO_POSITIONS = np.empty(0, dtype=np.int32)


def _is_identity(order: np.ndarray) -> bool:
    return bool((order == np.arange(order.size, dtype=order.dtype)).all())
_SMALL = 512  # rows up to which the direct path's lower fixed cost wins whatever the values


def _valid_mask(array: pa.Array) -> np.ndarray:
    """Boolean numpy mask of the array's valid slots."""
    buf = array.buffers()[0]
    if buf is None:
        return pc.is_valid(array).to_numpy(zero_copy_only=False)
    bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")
    return bits[array.offset : array.offset + len(array)].view(np.bool_)


class HashMemo:
    """Numba hash memo of binary-like or fixed-width values (see the module docstring)."""

    def __init__(self, value_type: pa.DataType) -> None:
        self.value_type = value_type
        self.width = _fixed_width(value_type)
        self._offset_dtype = _offset_dtype(value_type)
        assert self.width or self._offset_dtype is not None, value_type
        self.size = 0
        self.committed = 0
        self._table = np.full(16, _EMPTY, dtype=np.int32)
        self._hashes = np.empty(8, dtype=np.uint64)
        self._stamps = np.zeros(8, dtype=np.int64)  # last batch that saw each entry
        self._stamp = 0
        self._direct = False  # hash through the memo alone (the last batch was mostly distinct)
        self._data = np.empty(64, dtype=np.uint8)
        self._offsets: np.ndarray = np.zeros(9 if not self.width else 0, dtype=self._offset_dtype or np.int32)
        # The first batch's dictionary as pyarrow made it, entered into the table only when a
        # later batch needs it (never, for a one-batch stream)
        self._arrow: pa.Array | None = None

    @staticmethod
    def supports(value_type: pa.DataType) -> bool:
        return bool(_fixed_width(value_type)) or _offset_dtype(value_type) is not None

    def encode(self, array: pa.Array) -> np.ndarray:
        """int32 stream indices of the batch's values (null slots 0); new values stay pending.

        Two ways: mostly repeated values are hashed by pyarrow (``dictionary_encode``, faster
        per value) and only the batch's distinct values go through the memo, whose indices one
        take spreads back (into an empty memo, pyarrow's dictionary itself is kept, and hashed
        into the table only when the next batch comes); mostly distinct values (judged by the
        previous batch), mostly-null columns and small batches go through the memo directly
        (hashing twice, visiting nulls, or the fixed cost of the pyarrow path would cost more).
        A ``DictionaryArray`` (the encoder dictionary-encoded the column before sorting) is
        already hashed: only its dictionary's used values are looked up (``_encode_dictionary``).
        """
        if self._arrow is not None:  # the dictionary so far is one pyarrow array, not yet hashed
            arrow, self._arrow = self._arrow, None
            self.size = 0
            if self.committed:
                self._lookup(arrow, arrow.offset, self.committed, self.committed, _NO_BYTES, np.empty(self.committed, np.int32))
        elif self.size > self.committed:
            _drop(self._hashes, self._table, self.committed, self.size)
            self.size = self.committed
        n = len(array)
        valid = n - array.null_count
        if valid == 0:
            return np.zeros(n, dtype=np.int32)
        self._stamp += 1
        if pa.types.is_dictionary(array.type):
            out, distinct = self._encode_dictionary(array)
            self._direct = 2 * distinct > valid
            return out
        buf = array.buffers()[0]
        sparse = 2 * array.null_count > n  # mostly nulls: the kernel skips them cheaply
        if (self._direct or sparse or n <= _SMALL) and (array.null_count == 0 or buf is not None):
            out = np.empty(n, dtype=np.int32)
            bitmap = np.frombuffer(buf, dtype=np.uint8) if array.null_count else _NO_BYTES
            distinct = self._lookup(array, array.offset, n, valid, bitmap, out)
        else:
            local = pc.dictionary_encode(array)
            distinct_values = local.dictionary
            distinct = len(distinct_values)
            indices = local.indices
            raw = np.frombuffer(indices.buffers()[1], dtype=np.int32)[indices.offset : indices.offset + n]
            if self.size == 0:  # empty memo: the batch's dictionary is the stream's; hash it later
                self._arrow, self.size = distinct_values, distinct
                out = raw.copy()
            else:
                mapping = np.empty(distinct, dtype=np.int32)
                self._lookup(distinct_values, distinct_values.offset, distinct, distinct, _NO_BYTES, mapping)
                out = mapping.take(raw, mode="clip")  # null slots hold arbitrary values: keep them in range
            if array.null_count:
                out[~_valid_mask(array)] = 0  # as dictionary_encode leaves them (same wire bytes)
        self._direct = 2 * distinct > valid
        return out

    def hashes_with_arrow(self, array: pa.Array) -> bool:
        """Whether ``encode`` would hash this plain batch with pyarrow (see ``encode``)."""
        n = len(array)
        return not self._direct and 2 * array.null_count <= n and n > _SMALL

    def _encode_dictionary(self, array: pa.DictionaryArray) -> tuple[np.ndarray, int]:
        """The batch already dictionary-encoded (``pc.dictionary_encode`` before sorting, so the
        sort and this memo hash each value once): only the batch dictionary's values go through
        the memo, in order of first appearance in the rows, so the stream indices are those the
        plain column would get. Returns (indices, distinct values used)."""
        indices, dictionary = array.indices, array.dictionary
        n = len(indices)
        codes = np.frombuffer(indices.buffers()[1], dtype=indices.type.to_pandas_dtype())[indices.offset : indices.offset + n]
        bitmap = np.frombuffer(indices.buffers()[0], dtype=np.uint8) if indices.null_count else _NO_BYTES
        ranks = np.full(len(dictionary), -1, dtype=np.int32)
        order = np.empty(len(dictionary), dtype=np.int32)
        used = int(_first_seen(codes, bitmap, indices.offset, ranks, order))
        if self.size == 0:  # empty memo: these values are the stream's dictionary; hash them later
            if used == len(dictionary) and _is_identity(order):
                self._arrow = dictionary
            else:
                self._arrow = dictionary.take(pa.Array.from_buffers(pa.int32(), used, [None, pa.py_buffer(order)]))
            self.size = used
            mapping = np.arange(used, dtype=np.int32)
        else:  # look the used values up where they are, in first-seen order
            mapping = np.empty(used, dtype=np.int32)
            self._lookup(dictionary, dictionary.offset, used, used, _NO_BYTES, mapping, order[:used])
        out = np.empty(n, dtype=np.int32)
        _recode(codes, bitmap, indices.offset, ranks, mapping, out)
        return out, used

    def _lookup(
        self, values: pa.Array, start: int, n: int, valid: int, bitmap: np.ndarray, out: np.ndarray,
        positions: np.ndarray = _NO_POSITIONS,
    ) -> int:
        """Run the kernel over values[start:start + n] (buffer positions), or over the ``positions``
        of values[start:] when given, after making room."""
        buffers = values.buffers()
        if self.width:
            data = np.frombuffer(buffers[1], dtype=np.uint8)
            offsets = self._offsets
            new_bytes = valid * self.width
            used = self.size * self.width
        else:
            offsets = np.frombuffer(buffers[1], dtype=self._offset_dtype)
            data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else _NO_BYTES
            end = start + (len(values) - (start - values.offset) if positions.size else n)
            new_bytes = int(offsets[end] - offsets[start])
            used = int(self._offsets[self.size])
            self._offsets = _grow(self._offsets, self.size + valid + 1)
        self._data = _grow(self._data, used + new_bytes)
        self._hashes = _grow(self._hashes, self.size + valid)
        self._stamps = _grow(self._stamps, self.size + valid)
        if 2 * (self.size + valid) > self._table.size:
            capacity = self._table.size
            while 2 * (self.size + valid) > capacity:
                capacity *= 2
            self._table = np.full(capacity, _EMPTY, dtype=np.int32)
            _rehash(self._hashes, self.size, self._table)
        self.size, distinct = _insert(
            data, offsets, start, n, self.width, bitmap, self._table, self._hashes, self._stamps, self._stamp,
            self._data, self._offsets, self.size, out, positions,
        )
        return int(distinct)

    def values(self, size: int) -> pa.Array:
        """The first `size` dictionary values (zero-copy over the memo's append-only bytes)."""
        if self._arrow is not None:
            return self._arrow.slice(0, size)
        if self.width:
            return pa.Array.from_buffers(self.value_type, size, [None, pa.py_buffer(self._data[: size * self.width])])
        offsets = self._offsets[: size + 1]
        data = self._data[: int(offsets[size])]
        return pa.Array.from_buffers(self.value_type, size, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    def commit(self, size: int) -> None:
        self.committed = size


class ArrowMemo:
    """pyarrow fallback: one ``dictionary_encode`` of the stream dictionary followed by the batch
    (the dictionary's values are distinct, so its order is kept and new values follow)."""

    def __init__(self, value_type: pa.DataType) -> None:
        self.value_type = value_type
        self._committed: pa.Array = pa.array([], type=value_type)
        self._pending: pa.Array = self._committed
        self.size = 0
        self.committed = 0

    def encode(self, array: pa.Array) -> np.ndarray:
        if array.null_count == len(array):
            self._pending, self.size = self._committed, self.committed
            return np.zeros(len(array), dtype=np.int32)
        encoded = pa.chunked_array([self._committed, array], type=self.value_type).dictionary_encode()
        last = encoded.chunk(encoded.num_chunks - 1)
        self._pending, self.size = last.dictionary, len(last.dictionary)
        return pc.fill_null(last.indices, 0).to_numpy()

    def values(self, size: int) -> pa.Array:
        return self._pending.slice(0, size)

    def commit(self, size: int) -> None:
        self._committed = self._pending.slice(0, size)
        self.committed = size


Memo = HashMemo | ArrowMemo


def new_memo(value_type: pa.DataType) -> Memo:
    return HashMemo(value_type) if HashMemo.supports(value_type) else ArrowMemo(value_type)
