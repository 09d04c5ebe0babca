"""numba loops for sort keys, id encodings and id checks: one fused, branchy pass each, writing into arrays the
caller allocated with numpy (numba's own allocations page-fault; numpy's do not).

Arithmetic wraps at the width of ``out`` (u16 or u32), so decoding ``encode(x)`` gives ``x`` back
even when a delta is negative. ``valid`` is a bool mask, or an empty array when every slot is valid.
``eq[i]`` says row ``i`` equals row ``i - 1`` on the table's quasi-delta columns (``eq[0]`` is False).
Kernels reading Arrow columns directly take the validity ``bitmap`` bytes and the array's bit
``offset`` (an empty bitmap: no nulls), and an optional permutation ``perm`` (empty: identity) so
sorted values are read in place instead of gathered first.

Compilation is cached on disk when numba finds a writable cache directory; when none is writable
(read-only package directory and home, ``NUMBA_CACHE_DIR`` unwritable) numba refuses ``cache=True``
at decoration time, so the kernels are compiled per process instead and ``CACHED`` is False.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

_cached: list[bool] = []


def _compile(fn: Callable[..., Any]) -> Any:
    try:
        compiled = numba.njit(cache=True, nogil=True)(fn)
        _cached.append(True)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        compiled = numba.njit(cache=False, nogil=True)(fn)
        _cached.append(False)
    return compiled


def _delta_decode(values: np.ndarray, valid: np.ndarray, out: np.ndarray) -> None:
    check = valid.size != 0
    acc = 0
    for i in range(values.size):
        if check and not valid[i]:
            out[i] = 0
            continue
        acc += values[i]
        out[i] = acc


def _quasi_delta_decode(values: np.ndarray, eq: np.ndarray, out: np.ndarray) -> None:
    prev = 0
    for i in range(values.size):
        v = values[i] + prev if eq[i] else values[i]
        out[i] = v
        prev = out[i]


# --- sort keys ---------------------------------------------------------------------------------

_SIGN = np.uint64(1 << 63)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def _numeric_key(
    values: np.ndarray, kind: int, bitmap: np.ndarray, offset: int, out: np.ndarray
) -> tuple[np.uint64, np.uint64]:
    """Order-preserving u64 key of integers (kind 0 unsigned, 1 signed) or float64 bit patterns
    (kind 2), shifted by the smallest valid key ``low``; null rows get ``high + 1`` where ``high``
    is the largest shifted valid key. Returns ``(high, low)``; when ``high`` is the largest u64
    (no room for a null key) ``out`` holds unshifted keys and the caller ranks them instead."""
    n = values.size
    has_bitmap = bitmap.size != 0
    low = _ONES
    high = np.uint64(0)
    count = 0
    for i in range(n):
        if has_bitmap:
            bit = offset + i
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        if kind == 0:
            key = np.uint64(values[i])
        elif kind == 1:
            key = np.uint64(np.int64(values[i])) ^ _SIGN
        else:
            raw = np.uint64(values[i])
            key = ~raw if raw >> np.uint64(63) else raw | _SIGN
        out[i] = key
        low = min(low, key)
        high = max(high, key)
        count += 1
    if count == 0:
        return np.uint64(0), np.uint64(0)
    span = high - low
    if span == _ONES:
        return span, low
    null = span + np.uint64(1)
    for i in range(n):
        if has_bitmap:
            bit = offset + i
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                out[i] = null
                continue
        out[i] -= low
    return span, low


def _bool_key(values: np.ndarray, value_offset: int, bitmap: np.ndarray, offset: int, out: np.ndarray) -> None:
    """Key of a bit-packed boolean column: 0 false, 1 true, 2 null."""
    has_bitmap = bitmap.size != 0
    for i in range(out.size):
        if has_bitmap:
            bit = offset + i
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                out[i] = 2
                continue
        bit = value_offset + i
        out[i] = (values[bit >> 3] >> (bit & 7)) & 1


def _rank_key(
    codes: np.ndarray, ranks: np.ndarray, bitmap: np.ndarray, offset: int, null: int, packed: bool, out: np.ndarray
) -> None:
    """Key of a dictionary-encoded column: the rank of each row's dictionary value; nulls ``null``.
    ``packed``: ``codes`` holds the valid rows only (the column was encoded without its nulls)."""
    has_bitmap = bitmap.size != 0
    j = 0
    for i in range(out.size):
        if has_bitmap:
            bit = offset + i
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                out[i] = null
                continue
        out[i] = ranks[codes[j if packed else i]]
        j += 1


def _is_sorted(word: np.ndarray) -> bool:
    for i in range(1, word.size):  # noqa: SIM110 (numba compiles loops, not all() over generators)
        if word[i] < word[i - 1]:
            return False
    return True


def _or_shifted(word: np.ndarray, key: np.ndarray, shift: np.uint64) -> None:
    """``word |= key << shift`` in one pass, without numpy's temporary."""
    for i in range(word.size):
        word[i] |= key[i] << shift


# --- ids -----------------------------------------------------------------------------------------


def _renumber_delta(values: np.ndarray, bitmap: np.ndarray, offset: int, lut: np.ndarray, out: np.ndarray) -> int:
    """Dense ids in order of first appearance (``lut[old]`` gets the new id; -1 = unseen),
    delta-encoded into ``out`` (null slots 0, skipped by the running value). Returns the count."""
    has_bitmap = bitmap.size != 0
    count = 0
    prev = 0
    for i in range(values.size):
        if has_bitmap:
            bit = offset + i
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                out[i] = 0
                continue
        new = lut[values[i]]
        if new < 0:
            new = count
            lut[values[i]] = new
            count += 1
        out[i] = new - prev
        prev = new
    return count


def _valid_max(values: np.ndarray, bitmap: np.ndarray, offset: int, bits: np.ndarray) -> int:
    """The largest valid value of a u16 / u32 column (-1: none). With a ``bitmap``, each valid slot's bit is also set in
    ``bits`` (zeroed, starting at bit 0): the validity repacked without the offset, as
    ``np.packbits(valid, bitorder="little")`` gives it."""
    largest = -1
    if bitmap.size == 0:
        for i in range(values.size):
            if values[i] > largest:
                largest = values[i]
        return largest
    for i in range(values.size):
        bit = offset + i
        if (bitmap[bit >> 3] >> (bit & 7)) & 1:
            bits[i >> 3] |= np.uint8(1 << (i & 7))
            if values[i] > largest:
                largest = values[i]
    return largest


def _remap(values: np.ndarray, lut: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """``out[i] = lut[values[i]]``. Returns (first row whose value has no entry or -1, largest new id)."""
    largest = 0
    for i in range(values.size):
        v = values[i]
        new = lut[v] if v < lut.size else -1
        if new < 0:
            return i, largest
        out[i] = new
        largest = max(largest, new)
    return -1, largest


def _delta_perm(values: np.ndarray, perm: np.ndarray, out: np.ndarray) -> None:
    """Delta encoding of ``values[perm]`` (no nulls)."""
    permuted = perm.size != 0
    prev = 0
    for i in range(out.size):
        v = values[perm[i]] if permuted else values[i]
        out[i] = v - prev
        prev = v


def _quasi_delta_perm(values: np.ndarray, perm: np.ndarray, eq: np.ndarray, out: np.ndarray) -> None:
    """Quasi-delta encoding of ``values[perm]`` under ``eq`` (already in sorted order)."""
    permuted = perm.size != 0
    prev = 0
    for i in range(out.size):
        v = values[perm[i]] if permuted else values[i]
        out[i] = v - prev if eq[i] else v
        prev = v


def _key_equal(key: np.ndarray, null: int, perm: np.ndarray, eq: np.ndarray) -> None:
    """``eq[i] &= key[row i] == key[row i - 1]``, both valid, rows read through ``perm``; an empty
    ``key`` is a column that is absent or all null (never equal)."""
    n = eq.size
    if n == 0:
        return
    if key.size == 0:
        eq[:] = False
        return
    permuted = perm.size != 0
    prev = key[perm[0]] if permuted else key[0]
    eq[0] = False
    for i in range(1, n):
        k = key[perm[i]] if permuted else key[i]
        if k != prev or k == null:
            eq[i] = False
        prev = k


def _exemplar_equal(
    ints: np.ndarray, int_null: int, doubles: np.ndarray, double_null: int, perm: np.ndarray, eq: np.ndarray
) -> None:
    """The exemplar rule: ``eq[i]`` when rows i and i - 1 hold the same int and both no double, or
    the same double and both no int (rows read through ``perm``; an empty key is a column that is
    absent or all null, so never equal and always null)."""
    n = eq.size
    if n == 0:
        return
    eq[0] = False
    permuted = perm.size != 0
    has_ints = ints.size != 0
    has_doubles = doubles.size != 0
    r = perm[0] if permuted else 0
    prev_i = ints[r] if has_ints else int_null
    prev_d = doubles[r] if has_doubles else double_null
    for i in range(1, n):
        r = perm[i] if permuted else i
        k_i = ints[r] if has_ints else int_null
        k_d = doubles[r] if has_doubles else double_null
        ints_equal = has_ints and k_i == prev_i and k_i != int_null
        doubles_equal = has_doubles and k_d == prev_d and k_d != double_null
        ints_null = k_i == int_null and prev_i == int_null
        doubles_null = k_d == double_null and prev_d == double_null
        eq[i] = (ints_equal and doubles_null) or (doubles_equal and ints_null)
        prev_i = k_i
        prev_d = k_d


def _attrs_quasi_delta(
    values: np.ndarray,
    perm: np.ndarray,
    types: np.ndarray,
    type_bitmap: np.ndarray,
    type_offset: int,
    keys: np.ndarray,
    key_null: np.uint64,
    strs: np.ndarray,
    str_null: np.uint64,
    ints: np.ndarray,
    int_null: np.uint64,
    doubles: np.ndarray,
    double_null: np.uint64,
    bools: np.ndarray,
    bool_null: np.uint64,
    binaries: np.ndarray,
    binary_null: np.uint64,
    out: np.ndarray,
) -> None:
    """Quasi-delta encoding of an attribute table's sorted parent ids in one pass.

    Row i equals row i - 1 when both have the same valid type, the same valid key and the same
    valid value in the value column of their type (str 1, int 2, double 3, bool 4, bytes 7; Empty,
    Map and Slice never equal). ``types`` holds the raw type codes (validity in ``type_bitmap``);
    every other column is given by its sort key (``*_null``: the key of a null row; an empty key
    array: the column is absent or all null).
    """
    permuted = perm.size != 0
    usable = types.size != 0 and keys.size != 0
    has_bitmap = type_bitmap.size != 0
    prev_row = 0
    prev = 0
    for i in range(out.size):
        row = perm[i] if permuted else i
        v = values[row]
        equal = False
        if i > 0 and usable:
            t = types[row]
            k = keys[row]
            valid = True
            if has_bitmap:
                a_bit = type_offset + row
                b_bit = type_offset + prev_row
                valid = (type_bitmap[a_bit >> 3] >> (a_bit & 7)) & 1 and (type_bitmap[b_bit >> 3] >> (b_bit & 7)) & 1
            if valid and t == types[prev_row] and k == keys[prev_row] and k != key_null:
                code = t
                if code == 1:
                    column, null = strs, str_null
                elif code == 2:
                    column, null = ints, int_null
                elif code == 3:
                    column, null = doubles, double_null
                elif code == 4:
                    column, null = bools, bool_null
                elif code == 7:
                    column, null = binaries, binary_null
                else:
                    column, null = strs[:0], str_null
                if column.size != 0:
                    a = column[row]
                    equal = a == column[prev_row] and a != null
        out[i] = v - prev if equal else v
        prev = v
        prev_row = row


def _attrs_quasi_delta_sorted(
    values: np.ndarray,
    perm: np.ndarray,
    words: np.ndarray,
    layout: np.ndarray,
    nulls: np.ndarray,
    type_low: np.uint64,
    out: np.ndarray,
) -> None:
    """``_attrs_quasi_delta`` reading the columns' keys from the sort's packed words in sorted order
    (sequential reads instead of one random read per column and row).

    Fields, in ``layout`` rows: type, key, str, int, double, bool, bytes; each ``(mode, word,
    shift, bits)`` with mode 0 (absent or all null: never equal), 1 (one value, no nulls: always
    equal) or 2 (packed: bits ``shift .. shift + bits`` of ``words[word]``, null when equal to
    ``nulls[field]``). The type's code is its key plus ``type_low``.
    """
    # Branch-free rows: each field's mode becomes its (mask, null key). Mode 2 keeps its own; mode
    # 1 reads 0 under mask 0 with a null key of all ones (always equal); mode 0 reads 0 under mask
    # 0 with null key 0 (never equal). Type codes past 7 and codes without a value column take
    # code 0's mode 0 entry.
    mask = np.zeros(7, dtype=np.uint64)
    null = np.zeros(7, dtype=np.uint64)
    for f in range(7):
        if layout[f, 0] == 2:
            mask[f] = (np.uint64(1) << np.uint64(layout[f, 3])) - np.uint64(1)
            null[f] = nulls[f]
        elif layout[f, 0] == 1:
            null[f] = _ONES
    t_row, t_shift, t_mask, t_null = layout[0, 1], np.uint64(layout[0, 2]), mask[0], null[0]
    k_row, k_shift, k_mask, k_null = layout[1, 1], np.uint64(layout[1, 2]), mask[1], null[1]
    c_row = np.zeros(8, dtype=np.int64)  # type code -> its value field's word, shift, mask, null
    c_shift = np.zeros(8, dtype=np.uint64)
    c_mask = np.zeros(8, dtype=np.uint64)
    c_null = np.zeros(8, dtype=np.uint64)
    for code, f in ((1, 2), (2, 3), (3, 4), (4, 5), (7, 6)):
        c_row[code], c_shift[code], c_mask[code], c_null[code] = layout[f, 1], np.uint64(layout[f, 2]), mask[f], null[f]
    permuted = perm.size != 0
    n = out.size
    if n == 0:
        return
    out[0] = values[perm[0]] if permuted else values[0]
    prev = out[0]
    for i in range(1, n):
        v = values[perm[i]] if permuted else values[i]
        ta = (words[t_row, i] >> t_shift) & t_mask
        tb = (words[t_row, i - 1] >> t_shift) & t_mask
        ka = (words[k_row, i] >> k_shift) & k_mask
        kb = (words[k_row, i - 1] >> k_shift) & k_mask
        code = ta + type_low
        c = code if code < 8 else np.uint64(0)
        r, sh, m = c_row[c], c_shift[c], c_mask[c]
        va = (words[r, i] >> sh) & m
        vb = (words[r, i - 1] >> sh) & m
        equal = (ta != t_null) & (ta == tb) & (ka != k_null) & (ka == kb) & (va != c_null[c]) & (va == vb)
        out[i] = v - prev if equal else v
        prev = v

def _merge_attr_values(
    types: np.ndarray,
    strs: np.ndarray,
    str_null: np.uint64,
    ints: np.ndarray,
    int_null: np.uint64,
    doubles: np.ndarray,
    double_null: np.uint64,
    bools: np.ndarray,
    bool_null: np.uint64,
    binaries: np.ndarray,
    binary_null: np.uint64,
    sers: np.ndarray,
    ser_null: np.uint64,
    null: np.uint64,
    out: np.ndarray,
) -> int:
    """One sort key for an attribute table's value columns: each row's key in the column of its
    type (str 1, int 2, double 3, bool 4, bytes 7, ser 5 and 6), ``null`` when that value is null
    or the type has no column. Each column is given by its sort key (``*_null``: its null key; an
    empty array: absent or all null). Returns -1, or the first row holding a value in a column
    other than its type's (the columns are then not exclusive and the caller sorts them apart)."""
    for r in range(out.size):
        t = types[r]
        v = null
        if strs.size != 0 and strs[r] != str_null:
            if t != 1:
                return r
            v = strs[r]
        if ints.size != 0 and ints[r] != int_null:
            if t != 2:
                return r
            v = ints[r]
        if doubles.size != 0 and doubles[r] != double_null:
            if t != 3:
                return r
            v = doubles[r]
        if bools.size != 0 and bools[r] != bool_null:
            if t != 4:
                return r
            v = bools[r]
        if binaries.size != 0 and binaries[r] != binary_null:
            if t != 7:
                return r
            v = binaries[r]
        if sers.size != 0 and sers[r] != ser_null:
            if t != 5 and t != 6:
                return r
            v = sers[r]
        out[r] = v
    return -1


# --- id checks of the encoder's input ------------------------------------------------------------


def _ids_present(ids: np.ndarray, keys: np.ndarray, bitmap: np.ndarray, offset: int, limit: int) -> int:
    """1 when every id is one of the valid keys, 0 when one is not, -1 when the largest valid key
    reaches ``limit`` (too large for a presence table). ``ids`` has no nulls."""
    check = bitmap.size != 0
    top = -1
    for j in range(keys.size):
        if check:
            bit = offset + j
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        top = max(top, int(keys[j]))
    if top < 0:
        return 0 if ids.size else 1
    if top >= limit:
        return -1
    present = np.zeros(top + 1, dtype=np.bool_)
    for j in range(keys.size):
        if check:
            bit = offset + j
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        present[keys[j]] = True
    for i in range(ids.size):
        v = int(ids[i])
        if v > top or not present[v]:
            return 0
    return 1


def _most_repeated(values: np.ndarray, bitmap: np.ndarray, offset: int) -> int:
    """The valid value occurring most often (the smallest of equally frequent ones) when it occurs
    more than once, else -1; -2 when the largest valid value is at least 8 x valid + 1024 (a
    counting table would be too sparse)."""
    check = bitmap.size != 0
    top = -1
    valid = 0
    for j in range(values.size):
        if check:
            bit = offset + j
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        valid += 1
        top = max(top, int(values[j]))
    if valid < 2:
        return -1
    if top >= 8 * valid + 1024:
        return -2
    counts = np.zeros(top + 1, dtype=np.int64)
    for j in range(values.size):
        if check:
            bit = offset + j
            if not (bitmap[bit >> 3] >> (bit & 7)) & 1:
                continue
        counts[values[j]] += 1
    best = 0
    for v in range(top + 1):
        if counts[v] > counts[best]:
            best = v
    return best if counts[best] > 1 else -1


# --- gathering mostly-null columns in sorted order ----------------------------------------------


def _inverse(perm: np.ndarray, out: np.ndarray) -> None:
    """``out[perm[i]] = i``: the sorted position of every input row."""
    for i in range(perm.size):
        out[perm[i]] = i


def _valid_rows(bitmap: np.ndarray, offset: int, n: int, out: np.ndarray) -> int:
    """The rows whose validity bit (bit ``offset + row`` of ``bitmap``) is set, ascending, into
    ``out``; whole zero bytes are skipped at once. Returns how many."""
    k = 0
    i = 0
    while i < n:
        bit = offset + i
        if bit & 7 == 0 and i + 8 <= n and bitmap[bit >> 3] == 0:
            i += 8
            continue
        if (bitmap[bit >> 3] >> (bit & 7)) & 1:
            out[k] = i
            k += 1
        i += 1
    return k


def _scatter_values(values: np.ndarray, rows: np.ndarray, inv: np.ndarray, out: np.ndarray, bits: np.ndarray) -> None:
    """``out[inv[r]] = values[r]`` and validity bit ``inv[r]`` set, for each valid row ``r``."""
    for j in range(rows.size):
        r = rows[j]
        p = inv[r]
        out[p] = values[r]
        bits[p >> 3] |= np.uint8(1 << (p & 7))


def _scatter_bits(
    values: np.ndarray, value_offset: int, rows: np.ndarray, inv: np.ndarray, out: np.ndarray, bits: np.ndarray
) -> None:
    """``_scatter_values`` for bit-packed booleans (value bit ``value_offset + r``)."""
    for j in range(rows.size):
        r = rows[j]
        p = inv[r]
        v = value_offset + r
        if (values[v >> 3] >> (v & 7)) & 1:
            out[p >> 3] |= np.uint8(1 << (p & 7))
        bits[p >> 3] |= np.uint8(1 << (p & 7))


def _scatter_lengths(offsets: np.ndarray, rows: np.ndarray, inv: np.ndarray, lengths: np.ndarray, bits: np.ndarray) -> None:
    """Byte length of each valid row of a binary-like column at its sorted position (``lengths``
    zeroed, one longer than the rows: its prefix sum gives the output offsets)."""
    for j in range(rows.size):
        r = rows[j]
        p = inv[r]
        lengths[p + 1] = offsets[r + 1] - offsets[r]
        bits[p >> 3] |= np.uint8(1 << (p & 7))


def _scatter_bytes(
    data: np.ndarray, offsets: np.ndarray, rows: np.ndarray, inv: np.ndarray, out_offsets: np.ndarray, out: np.ndarray
) -> None:
    """Copy each valid row's bytes to where ``out_offsets`` puts its sorted position."""
    for j in range(rows.size):
        r = rows[j]
        s = offsets[r]
        d = out_offsets[inv[r]]
        for b in range(offsets[r + 1] - s):
            out[d + b] = data[s + b]


delta_decode = _compile(_delta_decode)
quasi_delta_decode = _compile(_quasi_delta_decode)
numeric_key = _compile(_numeric_key)
bool_key = _compile(_bool_key)
rank_key = _compile(_rank_key)
is_sorted = _compile(_is_sorted)
or_shifted = _compile(_or_shifted)
renumber_delta = _compile(_renumber_delta)
remap = _compile(_remap)
valid_max = _compile(_valid_max)
delta_perm = _compile(_delta_perm)
quasi_delta_perm = _compile(_quasi_delta_perm)
key_equal = _compile(_key_equal)
exemplar_equal = _compile(_exemplar_equal)
attrs_quasi_delta = _compile(_attrs_quasi_delta)
attrs_quasi_delta_sorted = _compile(_attrs_quasi_delta_sorted)
merge_attr_values = _compile(_merge_attr_values)
inverse = _compile(_inverse)
valid_rows = _compile(_valid_rows)
scatter_values = _compile(_scatter_values)
scatter_bits = _compile(_scatter_bits)
scatter_lengths = _compile(_scatter_lengths)
scatter_bytes = _compile(_scatter_bytes)
ids_present = _compile(_ids_present)
most_repeated = _compile(_most_repeated)

CACHED: bool = all(_cached)
"""True when the compiled kernels are cached on disk (False: compiled in every process)."""

NO_NULLS = np.empty(0, dtype=np.bool_)
"""The ``valid`` argument meaning "every slot is valid"."""

NO_BITMAP = np.empty(0, dtype=np.uint8)
"""The ``bitmap`` argument meaning "no nulls"."""

IDENTITY = np.empty(0, dtype=np.intp)
"""The ``perm`` argument meaning "rows in their own order"."""
