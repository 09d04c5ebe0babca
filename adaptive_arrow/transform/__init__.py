"""Field transforms and the transformation tree built from an annotated reference schema."""

from .dictionary import DictionaryEvent, DictionaryPlan, DictionaryTransform, RepetitionRule, index_ladder
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
    "RepetitionRule",
    "TransformNode",
    "UnionVariants",
    "build_tree",
    "index_ladder",
]
