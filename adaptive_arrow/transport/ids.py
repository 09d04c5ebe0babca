"""Dense id reassignment after sorting, and rewriting children's parent ids to match.

Ids are renumbered 0, 1, 2, ... in order of first appearance in the sorted table, so a sorted id
column climbs by 0 or 1 per row (resource and scope ids repeat across the rows of one resource or
scope; log, span, event, link, data point and exemplar ids are one per row). Null ids stay null: a
row without children keeps no id.

The old -> new mapping is a lookup table indexed by the old id (u16 ids, and u32 ids that stay
below a few times the row count); sparser u32 ids are first replaced by their slot among the
sorted distinct ids. Renumbering and delta encoding happen in one numba pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import kernels
from .columns import unsigned_array, values_view
from .errors import TransportError
from .sort import validity

_DIRECT_LOOKUP = 1 << 16
"""Old ids below this (or below 4x the row count) index the lookup table directly."""


@dataclass(frozen=True)
class Renumbering:
    """Old id -> new id: ``lut[slot]`` is the new id (-1: no such id), where ``slot`` is the old id
    itself when ``old`` is None, else its index in the sorted distinct old ids ``old``."""

    lut: np.ndarray
    old: np.ndarray | None = None

    def apply(self, parent_ids: pa.Array, where: str, parent: str) -> pa.Array:
        """Rewrite a child's ``parent_id`` column; every value must name an existing parent id."""
        dtype, top = _unsigned(parent_ids, where)
        if parent_ids.null_count:
            row = int(np.flatnonzero(~parent_ids.is_valid().to_numpy(zero_copy_only=False))[0])
            raise TransportError(f"{where}: parent_id is null at row {row}; every child row needs a parent")
        given = values_view(parent_ids, dtype)
        values = given
        lut = self.lut
        if self.old is not None:
            slot = np.searchsorted(self.old, values)
            found = slot < self.old.size
            found[found] = self.old[slot[found]] == values[found]
            # a missing id gets a slot past the table, which kernels.remap reports
            values = np.where(found, slot, lut.size)
        out = np.empty(len(parent_ids), dtype=dtype)
        bad, largest = kernels.remap(values, lut, out)
        if bad >= 0:
            raise TransportError(
                f"{where}: parent_id {int(given[bad])} at row {bad} matches no {parent} "
                "(a dangling reference; every parent_id must name an id of the parent table)"
            )
        if largest > top:
            raise TransportError(
                f"{where}: {parent} ids reach {largest}, beyond the {parent_ids.type} parent_id column"
            )
        return unsigned_array(out, parent_ids, None)


def renumber_delta(ids: pa.Array, where: str) -> tuple[pa.Array, Renumbering]:
    """Dense ids in order of first appearance, delta-encoded, and the old -> new mapping.

    One pass (``kernels.valid_max``) finds the largest valid id and repacks the validity from bit 0
    (the output's null buffer), so a column with nulls costs no ``pc.max`` or ``is_valid``."""
    dtype, _ = _unsigned(ids, where)
    values = values_view(ids, dtype)
    bitmap, offset = validity(ids)
    n = len(ids)
    nulls = ids.null_count
    bits = np.zeros((n + 7) // 8 if nulls else 0, dtype=np.uint8)
    top = kernels.valid_max(values, bitmap, offset, bits)
    old = None
    if top >= max(_DIRECT_LOOKUP, 4 * n):
        present = values if not nulls else values[ids.is_valid().to_numpy(zero_copy_only=False)]
        old = np.unique(present)
        # null slots may hold anything: clip their slot into the table (the kernel never reads it)
        values = np.minimum(np.searchsorted(old, values), max(old.size - 1, 0)).astype(np.uint32)
        top = old.size - 1
    lut = np.full(top + 1, -1, dtype=np.int64)
    out = np.empty(n, dtype=dtype)
    kernels.renumber_delta(values, bitmap, offset, lut, out)
    encoded = pa.Array.from_buffers(ids.type, n, [pa.py_buffer(bits) if nulls else None, pa.py_buffer(out)], nulls)
    return encoded, Renumbering(lut, old)


_UNSIGNED: dict[int, tuple[np.dtype, int]] = {pa.uint16().id: (np.dtype(np.uint16), 0xFFFF), pa.uint32().id: (np.dtype(np.uint32), 0xFFFFFFFF)}


def _unsigned(ids: pa.Array, where: str) -> tuple[np.dtype, int]:
    """The numpy dtype and largest value of a u16 / u32 id column; any other type is an error."""
    found = _UNSIGNED.get(ids.type.id)
    if found is None:
        raise TransportError(f"{where}: id column has type {ids.type}; expected uint16 or uint32")
    return found
