"""Feed, correct and build one payload table, vectorised and without replay.

``plan`` inspects every column of the plain table once (has it a non-null value? which union
variants? how many new distinct values?) and derives the events the Go feed phase would raise;
it changes no state, so a rejected batch leaves the encoder untouched. ``build`` then emits the
record once with the corrected schema, and ``commit`` makes the corrections permanent.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from otap_model import PayloadType
from otap_model.schema import fill_under_null_structs

from .events import Event, EventKind
from .signature import schema_signature
from .transform import dictionary
from .transform.dictionary import DictionaryPlan, RepetitionRule, dictionary_encode
from .transform.node import Kind, TransformNode, build_tree

ANNOTATION_PREFIX = b"#"


def _clean_metadata(md: dict[bytes, bytes] | None) -> dict[bytes, bytes] | None:
    """Drop the reference annotations (``#optional``...), keep the rest (e.g. ``encoding``)."""
    if not md:
        return None
    kept = {k: v for k, v in md.items() if not k.startswith(ANNOTATION_PREFIX)}
    return kept or None


def _has_value(array: pa.Array) -> bool:
    if len(array) == 0:
        return False
    if isinstance(array, pa.UnionArray):
        return any(_has_value(array.field(i)) for i in range(array.type.num_fields))
    return array.null_count < len(array)


def list_parts(array: pa.ListArray) -> tuple[pa.Array, pa.Array]:
    """(offsets starting at 0, the values they index) of a possibly sliced list or map array."""
    offsets = array.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start:
        offsets = pc.subtract(offsets, pa.scalar(start, offsets.type))
    return offsets, array.values.slice(start, end - start)


def union_parts(array: pa.UnionArray) -> tuple[pa.Array, pa.Array | None]:
    """(type codes, dense value offsets) of the union's own slots, honouring a slice offset
    (pyarrow's ``type_codes`` / ``offsets`` properties ignore it)."""
    buffers = array.buffers()
    size = array.offset + len(array)
    types = pa.Array.from_buffers(pa.int8(), size, [None, buffers[1]]).slice(array.offset)
    offsets = None
    if array.type.mode == "dense":
        offsets = pa.Array.from_buffers(pa.int32(), size, [None, buffers[2]]).slice(array.offset)
    if array.offset:  # UnionArray.from_* want unsliced type ids
        types = pa.array(types.to_numpy())
        offsets = None if offsets is None else pa.array(offsets.to_numpy())
    return types, offsets


@dataclass
class TablePlan:
    """Everything one batch of one table will do, computed before any state changes."""

    batch: pa.RecordBatch
    plain: Callable[[str], pa.Array] | None = None  # path -> plain column of a column hashed first
    arrays: dict[int, pa.Array] = field(default_factory=dict)  # node id -> inspected array
    added: set[int] = field(default_factory=set)  # node ids whose NoField goes
    dictionaries: dict[int, DictionaryPlan | None] = field(default_factory=dict)
    unions: dict[int, frozenset[int]] = field(default_factory=dict)  # node id -> seen codes after
    events: list[Event] = field(default_factory=list)
    schema: pa.Schema | None = None
    signature: str = ""
    route_key: tuple[str, str] = ("", "")
    new_stream: bool = False

    @property
    def rounds(self) -> int:
        """Corrective rounds the Go replay loop would need: one for fields, one for dictionaries."""
        kinds = {e.kind for e in self.events}
        structural = bool(kinds & {EventKind.FIELD_ADDED, EventKind.UNION_VARIANT_ADDED})
        dictionary = bool(
            kinds
            & {
                EventKind.DICTIONARY_UPGRADE,
                EventKind.DICTIONARY_OVERFLOW,
                EventKind.DICTIONARY_RESET,
                EventKind.DICTIONARY_FALLBACK,
            }
        )
        return int(structural) + int(dictionary)


class TableEncoder:
    """The adaptive state of one payload table: its transformation tree and current stream key."""

    def __init__(
        self,
        payload_type: PayloadType,
        schema: pa.Schema,
        *,
        dictionary_limit: int,
        reset_threshold: float,
        repetition: RepetitionRule | None = None,
    ):
        self.payload_type = payload_type
        self.reference = schema
        self.roots = build_tree(
            schema, dictionary_limit=dictionary_limit, reset_threshold=reset_threshold, repetition=repetition
        )
        self._nodes = {id(node): node for root in self.roots for node in root.walk()}
        self.route_key: tuple[str, str] | None = None
        self.last_schema: pa.Schema | None = None
        self._last_input: pa.Schema | None = None  # input schema of the last committed batch
        self._last_signature = ""

    # -- before sorting: hash once ---------------------------------------------------------------
    def hash_first(self, batch: pa.RecordBatch, sort_keys: Collection[str]) -> pa.RecordBatch:
        """``batch`` with the binary-like dictionary columns worth it (``hashes_first``) replaced by
        their ``dictionary_encode``, top level or struct children. The transport sort ranks their
        batch dictionaries and gathers only their indices; ``plan`` maps only the dictionaries'
        values through the stream dictionaries. ``plan`` needs the plain sorted column only when
        such a column goes plain (its ``plain`` callback)."""
        if batch.num_rows < dictionary.HASH_FIRST_MIN_ROWS:  # no column is long enough
            return batch
        columns: list[pa.Array] | None = None
        for i, node in enumerate(self.roots):
            column = batch.column(i)
            if node.kind is Kind.STRUCT:
                column = self._hash_children(node, column, sort_keys)
            elif node.dictionary is not None and node.dictionary.hashes_first(column, node.path in sort_keys):
                column = dictionary_encode(column)
            else:
                continue
            if column is not batch.column(i):
                if columns is None:
                    columns = batch.columns
                columns[i] = column
        if columns is None:
            return batch
        return pa.RecordBatch.from_arrays(columns, schema=_schema_of(batch.schema, columns))

    def _hash_children(self, node: TransformNode, struct: pa.StructArray, sort_keys: Collection[str]) -> pa.Array:
        children: list[pa.Array] | None = None
        for j, child in enumerate(node.children):
            if child.dictionary is None or child.kind is not Kind.LEAF:
                continue
            array = struct.field(j)
            if child.dictionary.hashes_first(array, child.path in sort_keys):
                if children is None:
                    children = [struct.field(k) for k in range(struct.type.num_fields)]
                children[j] = dictionary_encode(array)
        if children is None:
            return struct
        fields = [f.with_type(a.type) for f, a in zip(struct.type, children)]
        mask = struct.is_null() if struct.null_count else None
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)

    # -- feed: inspect once, derive events -------------------------------------------------
    def plan(self, batch: pa.RecordBatch, plain: Callable[[str], pa.Array] | None = None) -> TablePlan:
        """``plain``: for a batch from ``hash_first`` (sorted), the plain sorted column at a path."""
        plan = TablePlan(batch, plain)
        for node, column in zip(self.roots, batch.columns):
            self._inspect(node, column, plan)
        if not plan.events and self._last_input is not None and batch.schema.equals(self._last_input, check_metadata=True):
            # no event, same input schema (metadata included): the emitted schema cannot change
            assert self.last_schema is not None and self.route_key is not None
            plan.schema, plan.signature, plan.route_key = self.last_schema, self._last_signature, self.route_key
            return plan
        fields = [
            f for node, inp in zip(self.roots, batch.schema) if (f := self._emitted_field(node, inp, plan)) is not None
        ]
        plan.schema = pa.schema(fields, metadata=_clean_metadata(batch.schema.metadata))
        plan.signature = schema_signature(plan.schema, self.payload_type)
        plan.route_key = (plan.signature, _metadata_key(plan.schema))
        plan.new_stream = plan.route_key != self.route_key
        if plan.new_stream:
            for dplan in plan.dictionaries.values():
                if dplan is not None:
                    dplan.restart()
        return plan

    def _event(self, plan: TablePlan, kind: EventKind, node: TransformNode, detail: str = "") -> None:
        plan.events.append(Event(kind, self.payload_type, node.path, detail))

    def _inspect(self, node: TransformNode, array: pa.Array, plan: TablePlan) -> None:
        if not node.present:
            if not _has_value(array):
                return
            plan.added.add(id(node))
            self._event(plan, EventKind.FIELD_ADDED, node)
        plan.arrays[id(node)] = array
        if node.dictionary is not None:
            before = node.dictionary.index_type
            dplan = node.dictionary.plan(array)
            plan.dictionaries[id(node)] = dplan
            if dplan is not None and dplan.event is not None:
                after = "plain" if dplan.level is None else str(node.dictionary.ladder[dplan.level][0])
                self._event(plan, EventKind(dplan.event.value), node, f"{before}->{after}")
        if node.kind is Kind.STRUCT:
            children = array.flatten() if isinstance(array, pa.StructArray) else []
            for child, child_array in zip(node.children, children):
                self._inspect(child, child_array, plan)
        elif node.kind is Kind.LIST:
            self._inspect(node.children[0], list_parts(array)[1], plan)
        elif node.kind is Kind.MAP:
            entries = list_parts(array)[1]
            self._inspect(node.children[0], entries.field(0), plan)
            self._inspect(node.children[1], entries.field(1), plan)
        elif node.kind is Kind.UNION:
            assert node.union is not None
            seen = node.union.present_codes(union_parts(array)[0])
            fresh = seen - node.union.seen
            for code in sorted(fresh):
                self._event(plan, EventKind.UNION_VARIANT_ADDED, node, f"type code {code}")
            plan.unions[id(node)] = node.union.seen | seen
            for i, code in enumerate(node.union.type_codes):
                if code in plan.unions[id(node)]:
                    self._inspect(node.children[i], array.field(i), plan)

    # -- correct: the schema after this batch's events ----------------------------------------
    def _present(self, node: TransformNode, plan: TablePlan) -> bool:
        return node.present or id(node) in plan.added

    def _emitted_field(self, node: TransformNode, inp: pa.Field, plan: TablePlan) -> pa.Field | None:
        if not self._present(node, plan):
            return None
        t = inp.type
        if node.kind is Kind.STRUCT:
            kids = [self._emitted_field(c, t.field(i), plan) for i, c in enumerate(node.children)]
            t = pa.struct([k for k in kids if k is not None])
        elif node.kind is Kind.LIST:
            elem = self._emitted_field(node.children[0], t.value_field, plan)
            assert elem is not None
            t = pa.list_(elem)
        elif node.kind is Kind.MAP:
            key = self._emitted_field(node.children[0], t.key_field, plan)
            item = self._emitted_field(node.children[1], t.item_field, plan)
            assert key is not None and item is not None
            t = pa.map_(key, item)
        elif node.kind is Kind.UNION:
            assert node.union is not None
            seen = plan.unions.get(id(node), node.union.seen)
            kept = node.union.kept(seen)
            variants = [self._emitted_field(node.children[i], t.field(i), plan) for i in kept]
            t = pa.union(variants, t.mode, type_codes=[node.union.type_codes[i] for i in kept])
        elif node.dictionary is not None:
            dplan = plan.dictionaries.get(id(node))
            level = node.dictionary.level if dplan is None else dplan.level
            t = node.dictionary.emitted_type(level)
        return pa.field(inp.name, t, nullable=inp.nullable, metadata=_clean_metadata(inp.metadata))

    # -- build: emit the record once ------------------------------------------------------------
    def build(self, plan: TablePlan) -> pa.RecordBatch:
        assert plan.schema is not None
        columns = [
            self._emit(node, plan.schema.field(node.name), plan)
            for node in self.roots
            if self._present(node, plan)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=plan.schema)

    def _emit(self, node: TransformNode, out: pa.Field, plan: TablePlan) -> pa.Array:
        array = plan.arrays[id(node)]
        if node.kind is Kind.STRUCT:
            present = [c for c in node.children if self._present(c, plan)]
            kids = [self._emit(c, out.type.field(c.name), plan) for c in present]
            # inspection took the children from flatten(): nulls under null structs, also in not-null ones
            kids = [k if f.nullable else fill_under_null_structs(k, array) for k, f in zip(kids, out.type)]
            if not kids:
                validity = pc.is_valid(array)
                return pa.StructArray.from_buffers(out.type, len(array), [validity.buffers()[1]])
            mask = array.is_null() if array.null_count else None
            return pa.StructArray.from_arrays(kids, fields=list(out.type), mask=mask)
        if node.kind is Kind.LIST:
            offsets, _ = list_parts(array)
            values = self._emit(node.children[0], out.type.value_field, plan)
            mask = array.is_null() if array.null_count else None
            return pa.ListArray.from_arrays(offsets, values, type=out.type, mask=mask)
        if node.kind is Kind.MAP:
            offsets, _ = list_parts(array)
            keys = self._emit(node.children[0], out.type.key_field, plan)
            items = self._emit(node.children[1], out.type.item_field, plan)
            mask = array.is_null() if array.null_count else None
            return pa.MapArray.from_arrays(offsets, keys, items, type=out.type, mask=mask)
        if node.kind is Kind.UNION:
            assert node.union is not None
            kept = node.union.kept(plan.unions[id(node)])
            kids = [self._emit(node.children[i], out.type.field(j), plan) for j, i in enumerate(kept)]
            names = [out.type.field(j).name for j in range(len(kept))]
            codes = [node.union.type_codes[i] for i in kept]
            types, offsets = union_parts(array)
            if offsets is not None:
                return pa.UnionArray.from_dense(types, offsets, kids, names, codes)
            return pa.UnionArray.from_sparse(types, kids, names, codes)
        if node.dictionary is not None:
            dplan = plan.dictionaries.get(id(node))
            if (dplan is None or dplan.level is None) and pa.types.is_dictionary(array.type):
                assert plan.plain is not None  # hashed first (hash_first), and now plain
                return plan.plain(node.path)
            return node.dictionary.encode(array, dplan)
        return array

    # -- commit: make the corrections permanent -------------------------------------------------
    def commit(self, plan: TablePlan) -> None:
        for key in plan.added:
            self._nodes[key].remove_optional()
        for key, dplan in plan.dictionaries.items():
            dictionary = self._nodes[key].dictionary
            assert dictionary is not None
            dictionary.commit(dplan)
        for key, seen in plan.unions.items():
            union = self._nodes[key].union
            assert union is not None
            union.seen = seen
        self.route_key = plan.route_key
        self.last_schema = plan.schema
        self._last_input = plan.batch.schema
        self._last_signature = plan.signature


def _schema_of(schema: pa.Schema, columns: list[pa.Array]) -> pa.Schema:
    """``schema`` with each field's type set to its column's (names, nullability, metadata kept)."""
    for i, (f, column) in enumerate(zip(schema, columns)):
        if f.type != column.type:
            schema = schema.set(i, f.with_type(column.type))
    return schema


def _metadata_key(schema: pa.Schema) -> str:
    """Canonical text of the metadata the signature ignores but a reader needs (e.g. ``encoding``)."""
    parts: list[str] = []

    def visit(f: pa.Field, path: str) -> None:
        if f.metadata:
            parts.append(f"{path}={sorted(f.metadata.items())}")
        t = f.type
        if pa.types.is_struct(t) or pa.types.is_union(t):
            for i in range(t.num_fields):
                visit(t.field(i), f"{path}.{t.field(i).name}")
        elif pa.types.is_map(t):
            visit(t.key_field, f"{path}.key")
            visit(t.item_field, f"{path}.item")
        elif pa.types.is_list(t):
            visit(t.value_field, f"{path}.item")

    for f in schema:
        visit(f, f.name)
    if schema.metadata:
        parts.append(f"@{sorted(schema.metadata.items())}")
    return ";".join(parts)

