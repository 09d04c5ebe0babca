"""The transformation tree: one node per reference-schema field, composing that field's transforms.

Built from an annotated schema (``#optional`` / nullable -> NoField, ``#dictionary`` ->
DictionaryTransform, union -> UnionVariants, otherwise Identity), recursively over struct
children, list elements, map keys and items and union variants. Only struct children and
top-level fields can be absent: a list element, map key or item, or union variant follows its
container (dropping it alone would lose the container's lengths).
"""

from __future__ import annotations

from enum import StrEnum

import pyarrow as pa
import pyarrow.types as pt

from otap_model import annotation

from .dictionary import DictionaryTransform, RepetitionRule, index_ladder
from .identity import Identity
from .no_field import NoField
from .union import UnionVariants

Transform = Identity | NoField | DictionaryTransform | UnionVariants


class Kind(StrEnum):
    LEAF = "leaf"
    STRUCT = "struct"
    LIST = "list"
    MAP = "map"
    UNION = "union"


def _kind(t: pa.DataType) -> Kind:
    if pt.is_struct(t):
        return Kind.STRUCT
    if pt.is_map(t):
        return Kind.MAP
    if pt.is_list(t):
        return Kind.LIST
    if pt.is_union(t):
        return Kind.UNION
    return Kind.LEAF


class TransformNode:
    """One reference field, its transforms (applied in order) and its child nodes."""

    def __init__(self, field: pa.Field, path: str, transforms: list[Transform], children: list[TransformNode]):
        self.field = field
        self.name = field.name
        self.path = path
        self.kind = _kind(field.type)
        self.transforms = transforms
        self.children = children
        self.dictionary: DictionaryTransform | None = next(
            (t for t in transforms if isinstance(t, DictionaryTransform)), None
        )
        self.union: UnionVariants | None = next((t for t in transforms if isinstance(t, UnionVariants)), None)
        # False while a NoField transform removes the field (kept as a flag: read on every column)
        self.present = not any(isinstance(t, NoField) for t in transforms)

    def remove_optional(self) -> None:
        """Missing-field event: the field carries values from now on."""
        self.transforms = [t for t in self.transforms if not isinstance(t, NoField)] or [Identity()]
        self.present = True

    def fresh(self) -> TransformNode:
        """A copy with the initial state (optional fields absent, empty dictionaries), without
        decoding annotations again: trees are cloned from a cached blueprint per schema (which
        itself is never mutated, so its derived attributes are copied as they are)."""
        node = object.__new__(TransformNode)
        node.field, node.name, node.path, node.kind = self.field, self.name, self.path, self.kind
        node.present, node.dictionary, node.union = self.present, None, None
        node.transforms = []
        for t in self.transforms:
            if isinstance(t, DictionaryTransform):
                t = node.dictionary = DictionaryTransform(t.value_type, t.ladder, t.threshold, t.repetition)
            elif isinstance(t, UnionVariants):
                t = node.union = UnionVariants(self.field.type)
            node.transforms.append(t)  # Identity and NoField are stateless
        node.children = [c.fresh() for c in self.children]
        return node

    def walk(self):  # type: ignore[no-untyped-def]
        yield self
        for child in self.children:
            yield from child.walk()

    def __repr__(self) -> str:
        return f"TransformNode({self.path!r}, {self.transforms})"


def _node(
    field: pa.Field, path: str, can_drop: bool, limit: int, threshold: float, repetition: RepetitionRule | None
) -> TransformNode:
    ann = annotation(field)
    t = field.type
    kind = _kind(t)
    transforms: list[Transform] = []
    if can_drop and (ann.optional or field.nullable):
        transforms.append(NoField())
    if ann.dictionary is not None and kind is Kind.LEAF and not pt.is_dictionary(t):
        transforms.append(DictionaryTransform(t, index_ladder(ann.dictionary, limit), threshold, repetition))
    if kind is Kind.UNION:
        transforms.append(UnionVariants(t))
    if not transforms:
        transforms.append(Identity())
    children: list[TransformNode] = []
    if kind is Kind.STRUCT:
        children = [_node(t.field(i), f"{path}.{t.field(i).name}", True, limit, threshold, repetition) for i in range(t.num_fields)]
    elif kind is Kind.MAP:
        children = [
            _node(t.key_field, f"{path}.key", False, limit, threshold, repetition),
            _node(t.item_field, f"{path}.item", False, limit, threshold, repetition),
        ]
    elif kind is Kind.LIST:
        children = [_node(t.value_field, f"{path}.{t.value_field.name}", False, limit, threshold, repetition)]
    elif kind is Kind.UNION:
        children = [_node(t.field(i), f"{path}.{t.field(i).name}", False, limit, threshold, repetition) for i in range(t.num_fields)]
    return TransformNode(field, path, transforms, children)


_BLUEPRINTS: dict[tuple[int, int, float, RepetitionRule | None], tuple[pa.Schema, list[TransformNode]]] = {}


def build_tree(
    schema: pa.Schema,
    *,
    dictionary_limit: int = 65535,
    reset_threshold: float = 0.3,
    repetition: RepetitionRule | None = None,
) -> list[TransformNode]:
    """The transformation tree of an annotated schema: one root node per top-level field.

    Blueprints are cached per schema object (the cache keeps the schema alive, so its id stays
    unique); each call returns a fresh tree with its own state.
    """
    key = (id(schema), dictionary_limit, reset_threshold, repetition)
    cached = _BLUEPRINTS.get(key)
    if cached is None:
        roots = [_node(f, f.name, True, dictionary_limit, reset_threshold, repetition) for f in schema]
        if len(_BLUEPRINTS) < 1024:
            _BLUEPRINTS[key] = (schema, roots)
        cached = (schema, roots)
    return [root.fresh() for root in cached[1]]
