"""Union-variant pruning: only the variants seen so far are emitted, with their original type codes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class UnionVariants:
    """Keeps the union variants whose type codes appeared in the stream (the set only grows)."""

    def __init__(self, union_type: pa.UnionType) -> None:
        self.type_codes: tuple[int, ...] = tuple(union_type.type_codes)
        self.seen: frozenset[int] = frozenset()

    def present_codes(self, type_codes: pa.Array) -> frozenset[int]:
        """Type codes used by at least one slot (`type_codes`: the union's int8 type ids)."""
        codes = np.unique(np.asarray(type_codes))
        return frozenset(int(c) for c in codes)

    def kept(self, seen: frozenset[int]) -> list[int]:
        """Child positions kept for a set of seen codes, in reference order."""
        return [i for i, code in enumerate(self.type_codes) if code in seen]

    def transform(self, field: pa.Field) -> pa.Field | None:
        return field  # the node rebuilds the union type from its kept children

    def __repr__(self) -> str:
        return f"UnionVariants(seen={sorted(self.seen)})"
