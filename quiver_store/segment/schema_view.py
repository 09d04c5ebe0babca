"""Representative schema per slot: one stable schema covering every stream of a slot across
segments (the seed's DataFusion discussion), and loaders that conform stored batches to it.

Columns: the union, in order of first appearance. Types: the widest seen — a plain value type
beats a dictionary of it, a wider dictionary index beats a narrower one, structs and lists merge
their children the same way, other differences promote as ``pa.unify_schemas(permissive)`` does.
A column missing from some stream is nullable. Conforming reorders, adds null columns and casts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.types as pat

from ..errors import QuiverError
from ..fs import DEFAULT_FS, FileSystem
from .info import SegmentInfo
from .reader import SegmentReader


def _wider_index(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a.bit_width != b.bit_width:
        return a if a.bit_width > b.bit_width else b
    # same width: indices are never negative, so the unsigned one holds both
    return b if pat.is_signed_integer(a) and not pat.is_signed_integer(b) else a


def _merge_type(a: pa.DataType, b: pa.DataType, where: str, strict: bool = True) -> pa.DataType:
    if not strict:
        try:
            return _merge_type(a, b, where)
        except QuiverError:
            return a  # lenient: the first type seen stands; conforming the other fails at load time
    if a.equals(b):
        return a
    if pat.is_dictionary(a) or pat.is_dictionary(b):
        va = a.value_type if pat.is_dictionary(a) else a
        vb = b.value_type if pat.is_dictionary(b) else b
        value = _merge_type(va, vb, where)
        if pat.is_dictionary(a) and pat.is_dictionary(b):
            return pa.dictionary(_wider_index(a.index_type, b.index_type), value, a.ordered and b.ordered)
        return value
    if pat.is_struct(a) and pat.is_struct(b):
        return pa.struct(_merge_fields([list(a), list(b)], where))
    for is_kind, make in ((pat.is_list, pa.list_), (pat.is_large_list, pa.large_list)):
        if is_kind(a) and is_kind(b):
            (field,) = _merge_fields([[a.value_field], [b.value_field]], where)
            return make(field)
    try:
        merged = pa.unify_schemas([pa.schema([("x", a)]), pa.schema([("x", b)])], promote_options="permissive")
    except (pa.ArrowException, TypeError) as e:
        raise QuiverError(f"column {where}: types {a} and {b} have no common representative type ({e})") from None
    return merged.field(0).type


def _merge_fields(groups: list[list[pa.Field]], where: str = "", strict: bool = True) -> list[pa.Field]:
    order: list[str] = []
    types: dict[str, pa.DataType] = {}
    nullable: dict[str, bool] = {}
    seen: dict[str, int] = {}
    for fields in groups:
        for f in fields:
            if f.name not in types:
                order.append(f.name)
                types[f.name] = f.type
                nullable[f.name] = f.nullable
                seen[f.name] = 0
            else:
                types[f.name] = _merge_type(types[f.name], f.type, f"{where}{f.name}", strict)
                nullable[f.name] = nullable[f.name] or f.nullable
            seen[f.name] += 1
    return [pa.field(n, types[n], nullable[n] or seen[n] < len(groups)) for n in order]


def representative_schema(schemas: Iterable[pa.Schema], *, strict: bool = True) -> pa.Schema:
    """The representative schema of one slot over `schemas` (stream or per-segment schemas).

    Columns whose types have no common type raise QuiverError, or with ``strict=False`` (what the
    writer uses, so a finalize never fails on it) keep the first type seen.
    """
    group = list(schemas)
    if not group:
        raise QuiverError("representative_schema needs at least one schema")
    return pa.schema(_merge_fields([list(s) for s in group], strict=strict))


def _conform_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type.equals(target):
        return arr
    if pat.is_struct(target) and pat.is_struct(arr.type):
        names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = [
            _conform_array(arr.field(names[f.name]), f.type) if f.name in names else pa.nulls(len(arr), f.type)
            for f in target
        ]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if (pat.is_list(target) and pat.is_list(arr.type)) or (pat.is_large_list(target) and pat.is_large_list(arr.type)):
        values = _conform_array(arr.values, target.value_type)
        kind = pa.ListArray if pat.is_list(target) else pa.LargeListArray
        mask = arr.is_null() if arr.null_count else None
        return kind.from_arrays(arr.offsets, values, type=target, mask=mask)
    return arr.cast(target)


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with the columns, order and types of `schema` (missing columns become nulls)."""
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        try:
            columns.append(_conform_array(batch.column(i), f.type) if i >= 0 else pa.nulls(batch.num_rows, f.type))
        except pa.ArrowException as e:
            raise QuiverError(f"column {f.name!r} cannot be conformed to {f.type}: {e}") from None
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _readers(segments: Iterable[SegmentReader | str], fs: FileSystem) -> tuple[list[SegmentReader], list[SegmentReader]]:
    """(all readers, the ones opened here and to be closed by the caller)."""
    readers, opened = [], []
    for seg in segments:
        if isinstance(seg, SegmentReader):
            readers.append(seg)
        else:
            reader = SegmentReader.open(seg, fs=fs)
            readers.append(reader)
            opened.append(reader)
    return readers, opened


def slot_schema(segments: Iterable[SegmentReader | SegmentInfo], slot: int) -> pa.Schema | None:
    """Representative schema of `slot` across segments (from their metadata), None if absent.

    QuiverError names the segment whose types for a column cannot be merged with the segments
    before it, and, for an open reader, a segment whose own streams of the slot disagree
    (check_slot_streams); a SegmentInfo alone cannot show the latter, its streams are not read."""
    segments = list(segments)
    for seg in segments:
        if isinstance(seg, SegmentReader):
            check_slot_streams(seg, slot)
    infos = [s.info if isinstance(s, SegmentReader) else s for s in segments]
    found = [(f"segment {i.seq}", i.representative_schemas[slot]) for i in infos if slot in i.representative_schemas]
    return merge_named(found, f"slot {slot}") if found else None


def merge_named(parts: list[tuple[str, pa.Schema]], what: str) -> pa.Schema:
    """The representative schema of `parts` (name, schema); QuiverError naming the first part
    whose types cannot be merged with those before it, and the earlier part it conflicts with."""
    try:
        return representative_schema([s for _, s in parts])
    except QuiverError as exc:
        refused = exc  # find the culprit: only this path merges part by part
    merged = parts[0][1]
    for index, (name, schema) in enumerate(parts[1:], 1):
        try:
            merged = representative_schema([merged, schema])
        except QuiverError as exc:
            earlier = [n for n, s in parts[:index] if _conflicts(s, schema)][:1] or ["the ones before it"]
            raise QuiverError(f"{what}: {name} cannot be merged with {earlier[0]}: {exc}") from None
    raise QuiverError(f"{what}: {refused}")


def _conflicts(a: pa.Schema, b: pa.Schema) -> bool:
    try:
        representative_schema([a, b])
    except QuiverError:
        return True
    return False


def stream_schemas(reader: SegmentReader, slot: int) -> list[tuple[int, pa.Schema]]:
    """(stream id, schema as stored) of every stream of `slot` in one segment. A segment records
    one representative schema per slot, which the writer builds keeping the first type of a column
    whose types cannot be merged, so only the streams show such a conflict; this reads the schema
    of each from its IPC file footer, decoding no batch."""
    return [(st.stream_id, reader.stream_schema(st.stream_id)) for st in reader.info.streams if st.slot == slot]


def check_slot_streams(reader: SegmentReader, slot: int) -> None:
    """QuiverError naming the segment, the streams and the column when the streams of `slot` in
    this segment have types that cannot be merged (the same column stored as int64 by one bundle
    and as string by another): load_table would fail conforming one of them to the segment's
    representative schema, which shows only the first type. A slot with one stream passes unread."""
    if sum(1 for st in reader.info.streams if st.slot == slot) < 2:
        return
    parts = [(f"stream {sid}", schema) for sid, schema in stream_schemas(reader, slot)]
    merge_named(parts, f"segment {reader.info.seq} ({reader.path}): the streams of slot {slot} disagree")


def _slot_batches(reader: SegmentReader, slot: int) -> Iterator[pa.RecordBatch]:
    """The slot's batches in bundle order, merging runs of contiguous rows of one record batch."""
    run: tuple[int, int, int, int] | None = None  # stream, batch, first row, row count
    for sid, batch, row_offset, row_count in reader.slot_refs(slot):
        if run is not None and run[:2] == (sid, batch) and run[2] + run[3] == row_offset:
            run = (sid, batch, run[2], run[3] + row_count)
            continue
        if run is not None:
            yield reader.record_batch(run[0], run[1]).slice(run[2], run[3])
        run = (sid, batch, row_offset, row_count)
    if run is not None:
        yield reader.record_batch(run[0], run[1]).slice(run[2], run[3])


def load_batches(
    segments: Iterable[SegmentReader | str], slot: int, *, schema: pa.Schema | None = None, fs: FileSystem = DEFAULT_FS
) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """Every row of `slot` in the segments (in segment then bundle order), conformed to `schema`
    (default: the representative schema across the segments)."""
    readers, opened = _readers(segments, fs)
    try:
        target = schema or slot_schema(readers, slot)
        if target is None:
            raise QuiverError(f"slot {slot} has no stream in the {len(readers)} segment(s) given")
        return target, [conform_batch(b, target) for r in readers for b in _slot_batches(r, slot)]
    finally:
        for r in opened:
            r.close()


def load_table(
    segments: Iterable[SegmentReader | str], slot: int, *, schema: pa.Schema | None = None, fs: FileSystem = DEFAULT_FS
) -> pa.Table:
    """Whole segments as one pyarrow.Table per slot under the representative schema."""
    target, batches = load_batches(segments, slot, schema=schema, fs=fs)
    return pa.Table.from_batches(batches, schema=target)


def load_dataset(
    segments: Iterable[SegmentReader | str], slot: int, *, schema: pa.Schema | None = None, fs: FileSystem = DEFAULT_FS
) -> ds.Dataset:
    """Whole segments as one in-memory pyarrow.dataset per slot (filter / project / to_table)."""
    target, batches = load_batches(segments, slot, schema=schema, fs=fs)
    return ds.InMemoryDataset(batches, schema=target)
