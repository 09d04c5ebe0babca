"""Field transforms and the transformation tree built from an annotated reference schema."""

from .dictionary import DictionaryEvent, DictionaryPlan, DictionaryTransform, index_ladder
from .identity import Identity
from .no_field import NoField
from .node import TransformNode, build_tree
from .union import UnionVariants

__all__ = [
    "DictionaryEvent",
    "DictionaryPlan",
    "DictionaryTransform",
    "Identity",
    "NoField",
    "TransformNode",
    "UnionVariants",
    "build_tree",
    "index_ladder",
]
