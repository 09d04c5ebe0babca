"""Dictionary compaction: before the store serializes a batch, each large dictionary keeps only the
entries the batch's rows reference.

Why: a stream-mode encoder hands every batch its stream's cumulative dictionary (Arrow IPC streams
send dictionary deltas, so that is the natural shape), and the dictionary of a sliced batch is
its parent's whole dictionary. Written as it is, every WAL entry (and every WAL-bypassing segment)
would repeat all values of every earlier batch: WAL bytes per bundle would grow with the age of
the stream, and the total quadratically. Compacted, an entry holds what its rows need.

The values of every row are unchanged; only the dictionary representation (its length and the
index values) differs, which the segment writer's dictionary unification absorbs anyway.

Only dictionaries of at least MIN_DICTIONARY_BYTES with at most MAX_USED_FRACTION of their entries
referenced are rewritten, and only at the top level or under structs (what OTAP tables hold); a
dictionary under a list or map, or one whose indices are out of range, is left as it is. Both
bounds are chosen, not tuned: they keep the check off small dictionaries and the rewrite off
dictionaries a batch mostly uses, where it would copy nearly as much as it saves.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from .segment.dictionary import Path, dictionary_paths, struct_only

MIN_DICTIONARY_BYTES = 64 << 10
MAX_USED_FRACTION = 0.75


def compactable_paths(schema: pa.Schema) -> tuple[Path, ...]:
    """The dictionary positions of `schema` compaction may rewrite (top level or under structs)."""
    return tuple(p for p, _ in dictionary_paths(schema) if struct_only(schema, p))


def compact_batch(batch: pa.RecordBatch, paths: tuple[Path, ...]) -> pa.RecordBatch:
    """`batch` with the dictionaries at `paths` compacted where that pays; the same object when
    none does. The schema (metadata included) is unchanged."""
    if batch.get_total_buffer_size() < MIN_DICTIONARY_BYTES:  # (dictionaries included; under 1 us)
        return batch
    columns: dict[int, pa.Array] = {}
    for path in paths:
        top = path[0]
        column = columns.get(top, batch.column(top))
        rebuilt = _compact_at(column, path[1:])
        if rebuilt is not None:
            columns[top] = rebuilt
    if not columns:
        return batch
    return pa.RecordBatch.from_arrays(
        [columns.get(i, c) for i, c in enumerate(batch.columns)], schema=batch.schema
    )


def _compact_at(arr: pa.Array, rest: Path) -> pa.Array | None:
    """`arr` with the dictionary at relative path `rest` compacted, or None if unchanged."""
    if not rest:
        return compact_dictionary(arr) if pat.is_dictionary(arr.type) else None
    fields = list(arr.type)
    children = [arr.field(i) for i in range(len(fields))]
    child = _compact_at(children[rest[0]], rest[1:])
    if child is None:
        return None
    children[rest[0]] = child
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def compact_dictionary(arr: pa.DictionaryArray) -> pa.DictionaryArray | None:
    """The same values over only the referenced dictionary entries (in their original order), or
    None when the dictionary is small, mostly referenced, or its indices are out of range."""
    dictionary = arr.dictionary
    size = len(dictionary)
    if dictionary.nbytes < MIN_DICTIONARY_BYTES or not len(arr):
        return None
    indices = arr.indices
    offset, rows = indices.offset, len(indices)
    validity, data = indices.buffers()
    raw = np.frombuffer(data, dtype=indices.type.to_pandas_dtype(), count=offset + rows)
    valid = indices.drop_null().to_numpy() if indices.null_count else raw[offset:]
    if len(valid) and (int(valid.min()) < 0 or int(valid.max()) >= size):
        return None  # not a valid dictionary array: stored as given, as any other batch
    used = np.zeros(size, dtype=np.bool_)
    used[valid] = True
    keep = np.flatnonzero(used)
    if len(keep) > MAX_USED_FRACTION * size:
        return None
    remap = np.zeros(size, dtype=raw.dtype)
    remap[keep] = np.arange(len(keep), dtype=raw.dtype)
    # null slots may hold any index: clipped into range, they stay under their null bit
    renumbered = remap.take(raw, mode="clip")
    new_indices = pa.Array.from_buffers(
        indices.type, rows, [validity, pa.py_buffer(renumbered)], null_count=indices.null_count, offset=offset
    )
    return pa.DictionaryArray.from_arrays(new_indices, dictionary.take(pa.array(keep)), ordered=arr.type.ordered)
