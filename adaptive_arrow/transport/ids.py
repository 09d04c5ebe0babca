"""Dense id reassignment after sorting, and rewriting children's parent ids to match.

Ids are renumbered 0, 1, 2, ... in order of first appearance in the sorted table, so a sorted id
column climbs by 0 or 1 per row (resource and scope ids repeat across the rows of one resource or
scope; log, span, event, link, data point and exemplar ids are one per row). Null ids stay null: a
row without children keeps no id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .columns import unsigned_array, unsigned_values
from .errors import TransportError


@dataclass(frozen=True)
class Renumbering:
    """Old id -> new id: ``old`` sorted ascending, ``new[i]`` the new id of ``old[i]``."""

    old: np.ndarray
    new: np.ndarray

    def apply(self, parent_ids: pa.Array, where: str, parent: str) -> pa.Array:
        """Rewrite a child's ``parent_id`` column; every value must name an existing parent id."""
        _check_unsigned(parent_ids, where)
        if parent_ids.null_count:
            row = int(np.flatnonzero(~parent_ids.is_valid().to_numpy(zero_copy_only=False))[0])
            raise TransportError(f"{where}: parent_id is null at row {row}; every child row needs a parent")
        values, _ = unsigned_values(parent_ids)
        slot = np.searchsorted(self.old, values)
        found = slot < self.old.size
        found[found] = self.old[slot[found]] == values[found]
        if not found.all():
            row = int(np.flatnonzero(~found)[0])
            raise TransportError(
                f"{where}: parent_id {int(values[row])} at row {row} matches no {parent} "
                "(a dangling reference; every parent_id must name an id of the parent table)"
            )
        new = self.new[slot]
        if new.size and int(new.max()) > np.iinfo(values.dtype).max:
            raise TransportError(
                f"{where}: {parent} ids reach {int(new.max())}, beyond the {parent_ids.type} parent_id column"
            )
        return unsigned_array(new.astype(values.dtype, copy=False), parent_ids, None)


def renumber(ids: pa.Array, where: str) -> tuple[pa.Array, Renumbering]:
    """Dense ids in order of first appearance, and the old -> new mapping."""
    _check_unsigned(ids, where)
    values, valid = unsigned_values(ids)
    present = values if valid is None else values[valid]
    old, first, inverse = np.unique(present, return_index=True, return_inverse=True)
    rank = np.empty(old.size, dtype=values.dtype)
    rank[np.argsort(first, kind="stable")] = np.arange(old.size, dtype=values.dtype)
    mapping = Renumbering(old, rank)
    new_present = rank[inverse]
    if np.array_equal(new_present, present):
        return ids, mapping
    if valid is None:
        return unsigned_array(new_present, ids, None), mapping
    out = np.zeros(values.size, dtype=values.dtype)
    out[valid] = new_present
    return unsigned_array(out, ids, valid), mapping


def _check_unsigned(ids: pa.Array, where: str) -> None:
    if ids.type not in (pa.uint16(), pa.uint32()):
        raise TransportError(f"{where}: id column has type {ids.type}; expected uint16 or uint32")
