"""Sort orders per payload type and a stable multi-key sort that works on any column type.

Each key column becomes an unsigned integer key that orders like the column, nulls last: strings,
binaries and fixed-size binaries (and dictionary columns) through a dense rank of their distinct
values, integers and timestamps shifted by their minimum, floats through their order-preserving bit
pattern. Equal keys mean equal values, so the quasi-delta encoder reuses them. Keys are packed
least significant first into as few u64 words as their bit widths allow, each word with the row
position in its low bits, and sorted with numpy's SIMD ``np.sort`` (an order of magnitude faster
than a stable ``argsort``). Ties keep input order, so sorting twice by the same keys changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otap_model import PayloadType, reference_schema
from otap_model.payload import ATTRIBUTE_TABLES, DATA_POINT_TABLES, EXEMPLAR_TABLES, ROOT_TABLES

from . import kernels
from .columns import get_column, get_field, values_view
from .errors import TransportError

P = PayloadType

_ROOT_LOGS = ("resource.id", "scope.id", "trace_id")
_ROOT_SPANS = ("resource.id", "scope.id", "name", "trace_id")
_ROOT_METRICS = ("resource.id", "scope.id", "metric_type", "name")
_ATTRS = ("type", "key", "str", "int", "double", "bool", "bytes", "ser", "parent_id")
_DATA_POINTS = ("parent_id",)
_EXEMPLARS = ("int_value", "double_value", "parent_id")


REFERENCE_SORT_ORDERS: dict[PayloadType, tuple[str, ...]] = {
    P.LOGS: _ROOT_LOGS,
    P.SPANS: _ROOT_SPANS,
    P.UNIVARIATE_METRICS: _ROOT_METRICS,
    P.SPAN_EVENTS: ("name", "parent_id"),
    P.SPAN_LINKS: ("trace_id", "parent_id"),
    **{pt: _ATTRS for pt in ATTRIBUTE_TABLES},
    **{pt: _DATA_POINTS for pt in DATA_POINT_TABLES},
    **{pt: _EXEMPLARS for pt in EXEMPLAR_TABLES},
}
"""The Rust reference's sort columns (otap-reference.md section 3.3), per payload type."""

DEFAULT_SORT_ORDERS: dict[PayloadType, tuple[str, ...]] = {
    **REFERENCE_SORT_ORDERS,
    P.LOGS: ("severity_number", "scope.name", "resource.id", "scope.id", "trace_id"),
    P.UNIVARIATE_METRICS: ("metric_type", "unit", "name", "resource.id", "scope.id"),
}
"""The sort orders ``optimize`` uses when the config gives none: the reference orders, except that
logs group by severity and instrumentation library and metrics by type, unit and name across
resources, which measured smaller on every generator profile (docs/benchmarks.md, "Sorting and
delta ids")."""


def resolve_sort_orders(
    overrides: Mapping[int, Sequence[str]] | None,
) -> dict[PayloadType, tuple[str, ...]]:
    """Defaults with ``overrides`` applied, validated against the reference schemas.

    Every path must name a sortable column of its payload type. A child table's ``parent_id`` is the
    last key (appended when the override leaves it out); anywhere else it is an error.
    """
    orders = dict(DEFAULT_SORT_ORDERS)
    for key, paths in (overrides or {}).items():
        try:
            pt = PayloadType(key)
        except ValueError:
            raise TransportError(f"sort_orders: unknown payload type id {key}") from None
        if pt not in orders:
            raise TransportError(f"sort_orders: payload type {pt.name} has no table to sort")
        if isinstance(paths, str):
            raise TransportError(f"sort_orders[{pt.name}]: give a sequence of column paths, not the string {paths!r}")
        order = tuple(paths)
        schema = reference_schema(pt)
        for path in order:
            field = get_field(schema, path)
            if field is None:
                raise TransportError(f"sort_orders[{pt.name}]: no column {path!r} (columns: {schema.names})")
            if pa.types.is_nested(field.type):
                raise TransportError(f"sort_orders[{pt.name}]: column {path!r} is {field.type}, which cannot be a sort key")
        if pt not in ROOT_TABLES:
            if "parent_id" in order[:-1]:
                raise TransportError(
                    f"sort_orders[{pt.name}]: parent_id must be the last sort key (got {order}); "
                    "the parent id encodings rely on it"
                )
            if not order or order[-1] != "parent_id":
                order = (*order, "parent_id")
        orders[pt] = order
    return orders


@dataclass(frozen=True)
class Key:
    """One column's sort key: u64 values ordering like the column (equal keys exactly when the
    values are equal), null rows holding ``null`` (larger than every valid key), in ``bits`` bits."""

    values: np.ndarray
    null: np.uint64
    bits: int
    dense: bool = False
    """True when the key is already a dense rank (cannot get narrower)."""
    low: int = 0
    """For integer keys (not ranked): the smallest valid key, which every key is shifted by."""


def sort_indices(batch: pa.RecordBatch, paths: Sequence[str], where: str) -> np.ndarray | None:
    """Row order that sorts ``batch`` by ``paths`` (stable, ascending, nulls last); None when the
    batch is already in that order. ``where`` names the table in error messages."""
    if batch.num_rows < 2:
        return None
    return order(sort_keys(batch, paths, where), batch.num_rows)


def sort_keys(
    batch: pa.RecordBatch, paths: Sequence[str], where: str, columns: Mapping[str, pa.Array] | None = None
) -> dict[str, Key | None]:
    """The key of every path in ``paths`` (None: absent or all-null column, which orders nothing);
    ``columns`` overrides columns of ``batch`` (a rewritten ``parent_id``)."""
    keys: dict[str, Key | None] = {}
    names = batch.schema.names
    unique = {name: i for i, name in enumerate(names)}
    positions = unique if len(unique) == len(names) else None  # duplicate names: get_column's own rules
    for path in paths:
        column = columns.get(path) if columns else None
        if column is None:
            column = get_column(batch, path, positions)
        keys[path] = None if column is None or column.null_count == len(column) else column_key(column, f"{where}.{path}")
    return keys


@dataclass(frozen=True)
class Ordering:
    """The result of ``sort``: the permutation and where each key sits in the packed words.

    ``fields[path] = (word, shift, bits, null)`` for every key packed into ``words`` (keys of zero
    width are constant and not packed). ``words`` are in input row order; ``sorted_words`` gives
    them in sorted order so runs of equal keys can be read sequentially.
    """

    perm: np.ndarray | None
    words: list[np.ndarray]
    fields: dict[str, tuple[int, int, int, np.uint64]]
    ranked: frozenset[str] = frozenset()
    """Keys packed as their dense rank rather than as given (equality kept, values not)."""
    last_sorted: np.ndarray | None = None
    position_bits: int = 0

    def sorted_words(self) -> np.ndarray:
        """The packed words in sorted row order, as a (words, rows) array."""
        n = self.words[0].size
        out = np.empty((len(self.words), n), dtype=np.uint64)
        for i, word in enumerate(self.words):
            if self.perm is None:
                out[i] = word
            elif i == len(self.words) - 1 and self.last_sorted is not None:
                np.right_shift(self.last_sorted, np.uint64(self.position_bits), out=out[i])
            else:
                np.take(word, self.perm, out=out[i])
        return out


def order(keys: Mapping[str, Key | None], n: int) -> np.ndarray | None:
    """The stable order of ``n`` rows by ``keys`` (most significant first); None when already sorted."""
    return sort(keys, n).perm


def sort(keys: Mapping[str, Key | None], n: int) -> Ordering:
    """Sort ``n`` rows by ``keys`` (most significant first), stable, nulls last.

    Keys are packed least significant first into u64 words of at most ``64 - b`` bits (``b`` bits
    number the rows); wide numeric keys are replaced by their dense rank when that saves a word.
    Each word, shifted left, gets the row's current position in its low ``b`` bits, so every
    packed value is unique and a plain (SIMD, unstable) ``np.sort`` gives a stable order; words are
    applied least significant first (LSD), each sort refining the order of the previous one.
    """
    used = [(path, key) for path, key in reversed(list(keys.items())) if key is not None and key.bits]
    if n < 2 or not used:
        return Ordering(None, [], {})
    position_bits = (n - 1).bit_length()
    room = 64 - position_bits
    ranked: frozenset[str] = frozenset()
    if sum(key.bits for _, key in used) > room:
        compacted = _compacted(used, room)
        ranked = frozenset(path for (path, key), (_, new) in zip(used, compacted, strict=True) if key is not new)
        used = compacted
    words: list[np.ndarray] = []
    fields: dict[str, tuple[int, int, int, np.uint64]] = {}
    word: np.ndarray | None = None
    shift = 0
    for path, key in used:
        if word is not None and shift + key.bits > room:
            words.append(word)
            word, shift = None, 0
        if word is None:
            word = key.values.copy()
        else:
            kernels.or_shifted(word, key.values, np.uint64(shift))
        fields[path] = (len(words), shift, key.bits, key.null)
        shift += key.bits
    assert word is not None
    words.append(word)
    if len(words) == 1 and kernels.is_sorted(words[0]):
        return Ordering(None, words, fields, ranked)
    positions = np.arange(n, dtype=np.uint64)
    mask = np.uint64((1 << position_bits) - 1)
    perm: np.ndarray | None = None
    for word in words:
        packed = word[perm] if perm is not None else word.copy()
        packed <<= np.uint64(position_bits)
        packed |= positions
        packed.sort()
        step = (packed & mask).astype(np.intp)
        perm = step if perm is None else perm[step]
    assert perm is not None
    if len(words) > 1 and kernels.is_sorted(perm):
        return Ordering(None, words, fields, ranked)
    return Ordering(perm, words, fields, ranked, packed, position_bits)


_ATTR_VALUES = ("str", "int", "double", "bool", "bytes", "ser")


def _width(keys: Mapping[str, Key | None]) -> int:
    return sum(key.bits for key in keys.values() if key is not None)
_NO_VALUES = np.empty(0, dtype=np.uint64)


def sort_attributes(keys: Mapping[str, Key | None], types: pa.Array | None, n: int) -> Ordering | None:
    """``sort`` of an attribute table in the reference order (type, key, str, int, double, bool,
    bytes, ser, parent_id) with its six value keys merged into one: a row's value sits in the
    column of its type and the others are null (the AnyValue contract), so among rows of one type
    only that column orders anything. The merged key is that column's key (nulls last), which
    orders the rows exactly as the six keys do, and usually fits the whole key in one u64 word
    where the six needed two or a dense ranking. Value keys wider than the room left are ranked
    first. None (sort the keys as they are) for another order, a type column that is not
    unsigned or has nulls, a row with a value outside its type's column, or keys that fit one
    word as they are.

    The returned ordering lists every value column's key at the merged field, so the quasi-delta
    encoding (``delta.encode_parent_ids``) reads the merged key wherever it reads a value key:
    under the same exclusivity, equal merged keys of two rows of one type are equal values."""
    if tuple(keys) != _ATTRS or n < 2 or types is None or types.null_count or not pa.types.is_unsigned_integer(types.type):
        return None
    room = 64 - (n - 1).bit_length()
    if _width(keys) <= room:
        return None  # one word as they are: merging would only add a pass
    values = {path: keys[path] for path in _ATTR_VALUES}
    present = [key for key in values.values() if key is not None]
    if not present:
        return None
    fixed = room - _width({path: keys[path] for path in ("type", "key", "parent_id")})
    ranked = False
    while max(int(key.null) for key in present).bit_length() > fixed:
        wide = [(path, key) for path, key in values.items() if key is not None and not key.dense and key.bits > _WIDE]
        if not wide:
            return None
        path, key = max(wide, key=lambda item: item[1].bits)
        values[path] = _dense(key)
        present = [key for key in values.values() if key is not None]
        ranked = True
    if ranked and _width({**keys, **values}) <= room:
        return sort({**keys, **values}, n)  # the ranking alone makes them fit one word
    null = np.uint64(max(int(key.null) for key in present))
    merged = np.empty(n, dtype=np.uint64)
    parts = [(_NO_VALUES, np.uint64(0)) if key is None else (key.values, key.null) for key in values.values()]
    if kernels.merge_attr_values(values_view(types, _dtype(types.type)), *(part for pair in parts for part in pair), null, merged) >= 0:
        return None
    ordering = sort(
        {"type": keys["type"], "key": keys["key"], "value": Key(merged, null, int(null).bit_length()), "parent_id": keys["parent_id"]}, n
    )
    field = ordering.fields.pop("value", None)
    if field is not None:
        ordering.fields.update((path, field) for path, value in values.items() if value is not None)
    return ordering


_SHORT = 256
"""String and binary columns up to this many rows are ranked row by row (``pc.rank`` of the column)
instead of through a dictionary: the fixed cost of the extra calls dominates such tables (warm, on
metrics batches: 116 rows 7 us ranked vs 15-20 us through a dictionary, 855 rows 29-33 vs 22-25 us)."""

_WIDE = 16
"""Numeric keys wider than this are worth ranking when the keys overflow a word (a wide range
over few distinct values: doubles, timestamps, sparse value columns)."""


def _compacted(keys: list[tuple[str, Key]], room: int) -> list[tuple[str, Key]]:
    """Dense-rank the widest numeric keys while the total width exceeds ``room``."""
    keys = list(keys)
    total = sum(key.bits for _, key in keys)
    wide = [i for i, (_, key) in enumerate(keys) if not key.dense and key.bits > _WIDE]
    for i in sorted(wide, key=lambda i: -keys[i][1].bits):
        if total <= room:
            break
        path, key = keys[i]
        ranked = _dense(key)
        total -= key.bits - ranked.bits
        keys[i] = (path, ranked)
    return keys


def _dense(key: Key) -> Key:
    """The key as the dense rank of its distinct values (nulls stay last)."""
    values = key.values
    valid = values != key.null
    present = values[valid]
    ordered = np.sort(present)  # SIMD sort; np.unique would hash, then sort
    distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if ordered.size else ordered
    out = np.full(values.size, distinct.size, dtype=np.uint64)
    out[valid] = np.searchsorted(distinct, present)
    high = distinct.size if present.size < values.size else distinct.size - 1
    return Key(out, np.uint64(distinct.size), int(high).bit_length(), dense=True)


def column_key(column: pa.Array, where: str) -> Key:
    """The sort key of a column with at least one valid value."""
    type_ = column.type
    kind, dtype = _kind(type_)
    if kind == _DICTIONARY:
        return _ranked(column.indices, column.dictionary)
    if kind == _BYTES:
        if len(column) <= _SHORT:  # rank the rows themselves: one call instead of hash, rank, map
            # pc.rank gives u64 ranks from 1; subtracting makes the writable copy the key needs
            ranks = pc.rank(column, sort_keys="ascending", tiebreaker="dense").to_numpy() - np.uint64(1)
            high = int(ranks.max())  # nulls rank last, one past the largest value
            null = np.uint64(high if column.null_count else high + 1)
            return Key(ranks, null, high.bit_length(), dense=True)
        if 2 * column.null_count > len(column):  # mostly null: hash the valid values only
            encoded = pc.dictionary_encode(pc.drop_null(column))
            return _ranked(encoded.indices, encoded.dictionary, column)
        encoded = pc.dictionary_encode(column)
        return _ranked(encoded.indices, encoded.dictionary)
    if kind == _OTHER:
        raise TransportError(f"{where}: cannot sort by a column of type {type_}")
    bitmap, offset = validity(column)
    out = np.empty(len(column), dtype=np.uint64)
    if kind == _BOOL:
        values = np.frombuffer(column.buffers()[1], dtype=np.uint8)
        kernels.bool_key(values, column.offset, bitmap, offset, out)
        high = 2 if column.null_count else 1
        return Key(out, np.uint64(2), high.bit_length(), dense=True)
    assert dtype is not None
    values = values_view(column, dtype)
    if kind == _FLOAT:
        values = values.astype(np.float64, copy=False).view(np.uint64)
    span_, low = kernels.numeric_key(values, kind, bitmap, offset, out)
    span = int(span_)
    if span == (1 << 64) - 1:  # keys fill all 64 bits: no room for a null key, rank them
        distinct, dense = np.unique(out if bitmap.size == 0 else out[_valid(column)], return_inverse=True)
        ranked = np.full(len(column), distinct.size, dtype=np.uint64)
        if bitmap.size == 0:
            ranked[:] = dense
        else:
            ranked[_valid(column)] = dense
        high = distinct.size if column.null_count else distinct.size - 1
        return Key(ranked, np.uint64(distinct.size), int(high).bit_length(), dense=True)
    high = span + 1 if column.null_count else span
    return Key(out, np.uint64(span + 1), high.bit_length(), low=int(low))


# Column kinds of ``column_key``; the numeric ones are ``kernels.numeric_key``'s ``kind`` argument.
_UNSIGNED, _SIGNED, _FLOAT, _BOOL, _BYTES, _DICTIONARY, _OTHER = range(7)

_KINDS: dict[int, tuple[int, np.dtype | None]] = {}
"""``_kind`` by Arrow type id: one dictionary look-up per key column instead of a chain of
``pa.types`` tests and a dtype built from a format string (a few microseconds per small table)."""


def _kind(type_: pa.DataType) -> tuple[int, np.dtype | None]:
    """The column kind of ``type_`` and, for fixed-width numbers, the numpy dtype of its values.
    Every type of one Arrow type id has the same kind and width, so the id is the cache key."""
    found = _KINDS.get(type_.id)
    if found is not None:
        return found
    dtype = None
    if pa.types.is_dictionary(type_):
        kind = _DICTIONARY
    elif (
        pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_fixed_size_binary(type_)
    ):
        kind = _BYTES
    elif pa.types.is_boolean(type_):
        kind = _BOOL
    elif pa.types.is_floating(type_) or pa.types.is_integer(type_) or pa.types.is_temporal(type_):
        dtype = _dtype(type_)
        kind = {"f": _FLOAT, "i": _SIGNED, "u": _UNSIGNED}[dtype.kind]
    else:
        kind = _OTHER
    _KINDS[type_.id] = (kind, dtype)
    return kind, dtype


def validity(column: pa.Array) -> tuple[np.ndarray, int]:
    """The column's validity bitmap bytes and bit offset (an empty bitmap: no nulls)."""
    if column.null_count == 0:
        return kernels.NO_BITMAP, 0
    return np.frombuffer(column.buffers()[0], dtype=np.uint8), column.offset


def _valid(column: pa.Array) -> np.ndarray:
    return column.is_valid().to_numpy(zero_copy_only=False)


def _dtype(type_: pa.DataType) -> np.dtype:
    width = type_.bit_width // 8
    kind = "f" if pa.types.is_floating(type_) else ("i" if _signed(type_) else "u")
    return np.dtype(f"<{kind}{width}")


def _signed(type_: pa.DataType) -> bool:
    return pa.types.is_signed_integer(type_) or pa.types.is_temporal(type_)


def _ranked(indices: pa.Array, dictionary: pa.Array, column: pa.Array | None = None) -> Key:
    """Key of a dictionary-encoded column: the dense rank of each row's dictionary value.
    ``column``: the indices encode only the valid rows of this column, in order."""
    rows = indices if column is None else column
    n = len(rows)
    if len(dictionary) == 0:
        return Key(np.zeros(n, dtype=np.uint64), np.uint64(1), 0, dense=True)
    ranks = pc.rank(dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy() - np.uint64(1)
    high = int(ranks.max())
    null = np.uint64(high + 1)
    index_dtype = _kind(indices.type)[1]
    assert index_dtype is not None  # dictionary indices are integers
    codes = values_view(indices, index_dtype)
    bitmap, offset = validity(rows)
    out = np.empty(n, dtype=np.uint64)
    kernels.rank_key(codes, ranks, bitmap, offset, null, column is not None, out)
    return Key(out, null, (high + 1 if rows.null_count else high).bit_length(), dense=True)
