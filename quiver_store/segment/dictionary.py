"""Per-stream dictionary unification: track the union of each dictionary column's values while
a segment is open, then rebuild the stream's chunks against one deterministic dictionary.

Order is first appearance across the stream's chunks, deduplicated. Fast path (what the OTAP
encoder produces): when every chunk's dictionary is a prefix of the longest one, that dictionary
IS the unified one, and chunks get it attached without touching their indices (zero-copy).
Otherwise pyarrow's DictionaryUnifier rewrites the indices. Index types widen (same signedness)
when the unified dictionary outgrows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

Path = tuple[int, ...]  # top-level column index, then child index per nesting level


def _children(typ: pa.DataType) -> list[pa.DataType]:
    if pat.is_struct(typ):
        return [typ.field(i).type for i in range(typ.num_fields)]
    if pat.is_map(typ):
        return [typ.key_type, typ.item_type]
    if pat.is_list(typ) or pat.is_large_list(typ) or pat.is_fixed_size_list(typ) or pat.is_list_view(typ):
        return [typ.value_type]
    return []


def dictionary_paths(schema: pa.Schema) -> list[tuple[Path, pa.DictionaryType]]:
    """Every dictionary-typed position in the schema, at any nesting depth."""
    found: list[tuple[Path, pa.DictionaryType]] = []

    def walk(typ: pa.DataType, path: Path) -> None:
        if pat.is_dictionary(typ):
            found.append((path, typ))
            return
        for i, child in enumerate(_children(typ)):
            walk(child, (*path, i))

    for i, f in enumerate(schema):
        walk(f.type, (i,))
    return found


def _child_array(arr: pa.Array, i: int) -> pa.Array:
    typ = arr.type
    if pat.is_struct(typ):
        return arr.field(i)
    if pat.is_map(typ):
        return arr.keys if i == 0 else arr.items
    return arr.values


def leaf_dictionary(batch: pa.RecordBatch, path: Path) -> pa.Array:
    """The dictionary values a batch carries at `path`."""
    arr = batch.column(path[0])
    for i in path[1:]:
        arr = _child_array(arr, i)
    return arr.dictionary


def struct_only(schema: pa.Schema, path: Path) -> bool:
    """True when `path` descends through structs only (the fast path can rebuild those)."""
    typ = schema.field(path[0]).type
    for i in path[1:]:
        if not pat.is_struct(typ):
            return False
        typ = typ.field(i).type
    return True


@dataclass(frozen=True)
class DictionaryUnion:
    """Running union of one dictionary position's values over a stream's chunks (immutable).

    While every chunk's dictionary is a prefix of the longest one, `values` is that dictionary and
    `size` is exact (one comparison per chunk). Otherwise dictionaries queue in `pending` and
    `size` is an upper bound (|values| + sum |pending|); `exact()` merges them in first-appearance
    order with one hash pass, which the accumulator asks for only when the bound crosses the
    stream's dictionary limit, so overlapping dictionaries cost no hashing per append.
    """

    values: pa.Array
    prefix: bool  # every chunk's dictionary so far is a prefix of `values`
    pending: tuple[pa.Array, ...] = ()
    size: int = 0
    nbytes: int = 0

    @classmethod
    def start(cls, dictionary: pa.Array) -> DictionaryUnion:
        return cls(dictionary, True, (), len(dictionary), dictionary.nbytes)

    def extend(self, dictionary: pa.Array) -> DictionaryUnion:
        """The union after one more chunk whose dictionary is `dictionary`."""
        if self.prefix:
            n, m = len(self.values), len(dictionary)
            if m <= n and (dictionary is self.values or self.values.slice(0, m).equals(dictionary)):
                return self
            if m > n and dictionary.slice(0, n).equals(self.values):
                return DictionaryUnion(dictionary, True, (), m, dictionary.nbytes)
        return DictionaryUnion(
            self.values, False, (*self.pending, dictionary), self.size + len(dictionary), self.nbytes + dictionary.nbytes
        )

    def exact(self) -> DictionaryUnion:
        """The same union with pending dictionaries merged (deduplicated, first-appearance order)."""
        if not self.pending:
            return self
        merged = pc.unique(pa.concat_arrays([self.values, *self.pending]))
        return DictionaryUnion(merged, False, (), len(merged), merged.nbytes)


def index_capacity(index_type: pa.DataType) -> int:
    """Number of dictionary entries an index type can address."""
    bits = index_type.bit_width
    return 1 << (bits - 1 if pat.is_signed_integer(index_type) else bits)


def widened_index_type(index_type: pa.DataType, size: int) -> pa.DataType:
    """Smallest index type of the same signedness, at least as wide, addressing `size` entries."""
    signed = pat.is_signed_integer(index_type)
    ladder = [pa.int8(), pa.int16(), pa.int32(), pa.int64()] if signed else [
        pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()
    ]
    for candidate in ladder:
        if candidate.bit_width >= index_type.bit_width and index_capacity(candidate) >= size:
            return candidate
    return ladder[-1]


def _replace_type(typ: pa.DataType, path: Path, new: pa.DataType) -> pa.DataType:
    if not path:
        return new
    i, rest = path[0], path[1:]
    if pat.is_struct(typ):
        fields = [typ.field(k) for k in range(typ.num_fields)]
        fields[i] = fields[i].with_type(_replace_type(fields[i].type, rest, new))
        return pa.struct(fields)
    if pat.is_map(typ):
        key, item = typ.key_field, typ.item_field
        if i == 0:
            key = key.with_type(_replace_type(key.type, rest, new))
        else:
            item = item.with_type(_replace_type(item.type, rest, new))
        return pa.map_(key, item, keys_sorted=typ.keys_sorted)
    value = typ.value_field.with_type(_replace_type(typ.value_type, rest, new))
    if pat.is_large_list(typ):
        return pa.large_list(value)
    if pat.is_fixed_size_list(typ):
        return pa.list_(value, typ.list_size)
    if pat.is_list_view(typ):
        return pa.list_view(value)
    return pa.list_(value)


def unified_schema(schema: pa.Schema, unions: Mapping[Path, DictionaryUnion]) -> pa.Schema:
    """`schema` with every dictionary index type widened to address its unified dictionary."""
    out = schema
    for path, typ in dictionary_paths(schema):
        union = unions.get(path)
        if union is None or union.size <= index_capacity(typ.index_type):
            continue
        wide = pa.dictionary(widened_index_type(typ.index_type, union.size), typ.value_type, typ.ordered)
        f = out.field(path[0])
        out = out.set(path[0], f.with_type(_replace_type(f.type, path[1:], wide)))
    return out


def _attach(
    arr: pa.Array, target: pa.DataType, prefix: Path, values: Mapping[Path, pa.Array], inner: frozenset[Path]
) -> pa.Array:
    """Rebuild `arr` with the unified dictionaries attached at the paths below `prefix`
    (`inner`: every proper prefix of those paths, so untouched children are kept as they are)."""
    if pat.is_dictionary(target):
        dictionary = values[prefix]
        indices = arr.indices
        if indices.type != target.index_type:
            indices = indices.cast(target.index_type)
        elif arr.dictionary is dictionary:
            return arr
        return pa.DictionaryArray.from_arrays(indices, dictionary, safe=False)
    children = []
    for i in range(target.num_fields):
        child = arr.field(i)
        path = (*prefix, i)
        if path in values or path in inner:
            child = _attach(child, target.field(i).type, path, values, inner)
        children.append(child)
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _widen(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """`arr` with dictionary index types widened to those of `target` (structs rebuilt, not cast:
    pyarrow's struct cast rejects non-nullable children under null parents)."""
    if arr.type.equals(target):
        return arr
    if pat.is_struct(target):
        children = [_widen(arr.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null() if arr.null_count else None)
    return arr.cast(target)


def _distinct(values: pa.Array) -> bool:
    return pc.count_distinct(values, mode="all").as_py() == len(values)


def unify_chunks(
    schema: pa.Schema, chunks: list[pa.RecordBatch], unions: Mapping[Path, DictionaryUnion]
) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """The stream's stored schema and its chunks rebuilt against unified dictionaries.

    Never mutates its inputs; chunks without dictionary columns are returned relabelled with
    the stream schema (zero-copy).
    """
    unions = {p: u.exact() for p, u in unions.items()}  # exact sizes decide the index widths
    target = unified_schema(schema, unions)
    if not unions:
        return target, [pa.RecordBatch.from_arrays(c.columns, schema=target) for c in chunks]
    fast = all(u.prefix and struct_only(schema, p) and _distinct(u.values) for p, u in unions.items())
    if fast:
        values = {p: u.values for p, u in unions.items()}
        inner = frozenset(p[:k] for p in values for k in range(1, len(p)))
        top = {p[0] for p in values}
        out = []
        for chunk in chunks:
            cols = [
                _attach(col, target.field(i).type, (i,), values, inner) if i in top else col
                for i, col in enumerate(chunk.columns)
            ]
            out.append(pa.RecordBatch.from_arrays(cols, schema=target))
        return target, out
    cast = [
        pa.RecordBatch.from_arrays([_widen(col, f.type) for col, f in zip(c.columns, target)], schema=target)
        for c in chunks
    ]
    filled = [c for c in cast if c.num_rows]
    if not filled:  # only empty chunks: give them all the first one's dictionaries
        return target, [cast[0]] * len(cast)
    unified = iter(pa.Table.from_batches(filled, schema=target).unify_dictionaries().to_batches())
    empty = None
    out = []
    for c in cast:
        if c.num_rows:
            out.append(next(unified))
        else:  # Table.to_batches drops empty chunks; give them the unified dictionaries too
            empty = empty or pa.Table.from_batches(filled[:1], schema=target).unify_dictionaries().to_batches()[0]
            out.append(empty.slice(0, 0))
    return target, out


def _decode(arr: pa.Array) -> pa.Array:
    typ = arr.type
    if pat.is_dictionary(typ):
        return arr.dictionary.take(arr.indices)
    if pat.is_struct(typ):
        children = [_decode(arr.field(i)) for i in range(typ.num_fields)]
        fields = [typ.field(i).with_type(c.type) for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null() if arr.null_count else None)
    if dictionary_paths(pa.schema([("x", typ)])):
        return arr.cast(_plain_type(typ))
    return arr


def _plain_type(typ: pa.DataType) -> pa.DataType:
    if pat.is_dictionary(typ):
        return _plain_type(typ.value_type)
    if pat.is_struct(typ):
        return pa.struct([f.with_type(_plain_type(f.type)) for f in typ])
    if pat.is_map(typ):
        return pa.map_(typ.key_field.with_type(_plain_type(typ.key_type)), typ.item_field.with_type(_plain_type(typ.item_type)))
    if pat.is_large_list(typ):
        return pa.large_list(typ.value_field.with_type(_plain_type(typ.value_type)))
    if pat.is_fixed_size_list(typ):
        return pa.list_(typ.value_field.with_type(_plain_type(typ.value_type)), typ.list_size)
    if pat.is_list(typ):
        return pa.list_(typ.value_field.with_type(_plain_type(typ.value_type)))
    return typ


def decode_chunks(schema: pa.Schema, chunks: list[pa.RecordBatch]) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """Fallback when unification cannot handle a stream: every dictionary column decoded to its
    value type (values unchanged, larger on disk), so a finalize never fails on dictionaries."""
    out = [pa.RecordBatch.from_arrays([_decode(c) for c in chunk.columns], names=schema.names) for chunk in chunks]
    target = pa.schema([f.with_type(c.type) for f, c in zip(schema, out[0].columns)], metadata=schema.metadata)
    return target, [pa.RecordBatch.from_arrays(b.columns, schema=target) for b in out]
