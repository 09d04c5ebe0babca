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
import pyarrow.compute as pc

from . import kernels
from .columns import unsigned_array, unsigned_values
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
        _check_unsigned(parent_ids, where)
        if parent_ids.null_count:
            row = int(np.flatnonzero(~parent_ids.is_valid().to_numpy(zero_copy_only=False))[0])
            raise TransportError(f"{where}: parent_id is null at row {row}; every child row needs a parent")
        values, _ = unsigned_values(parent_ids)
        lut = self.lut
        if self.old is not None:
            slot = np.searchsorted(self.old, values)
            found = slot < self.old.size
            found[found] = self.old[slot[found]] == values[found]
            # a missing id gets a slot past the table, which kernels.remap reports
            values = np.where(found, slot, lut.size)
        out = np.empty(len(parent_ids), dtype=parent_ids.type.to_pandas_dtype())
        bad, largest = kernels.remap(values, lut, out)
        if bad >= 0:
            value = unsigned_values(parent_ids)[0][bad]
            raise TransportError(
                f"{where}: parent_id {int(value)} at row {bad} matches no {parent} "
                "(a dangling reference; every parent_id must name an id of the parent table)"
            )
        if largest > np.iinfo(out.dtype).max:
            raise TransportError(
                f"{where}: {parent} ids reach {largest}, beyond the {parent_ids.type} parent_id column"
            )
        return unsigned_array(out, parent_ids, None)


def renumber_delta(ids: pa.Array, where: str) -> tuple[pa.Array, Renumbering]:
    """Dense ids in order of first appearance, delta-encoded, and the old -> new mapping."""
    _check_unsigned(ids, where)
    values, _ = unsigned_values(ids)
    bitmap, offset = validity(ids)
    n = len(ids)
    old = None
    top = int(values.max()) if n and bitmap.size == 0 else _largest_valid(ids)
    if top >= max(_DIRECT_LOOKUP, 4 * n):
        present = values if bitmap.size == 0 else values[ids.is_valid().to_numpy(zero_copy_only=False)]
        old = np.unique(present)
        # null slots may hold anything: clip their slot into the table (the kernel never reads it)
        values = np.minimum(np.searchsorted(old, values), max(old.size - 1, 0)).astype(np.uint32)
        top = old.size - 1
    lut = np.full(top + 1, -1, dtype=np.int64)
    out = np.empty(n, dtype=ids.type.to_pandas_dtype())
    kernels.renumber_delta(values, bitmap, offset, lut, out)
    encoded = pa.Array.from_buffers(ids.type, n, [_null_buffer(ids), pa.py_buffer(out)], ids.null_count)
    return encoded, Renumbering(lut, old)


def _largest_valid(ids: pa.Array) -> int:
    largest = pc.max(ids).as_py()
    return -1 if largest is None else int(largest)


def _null_buffer(ids: pa.Array) -> pa.Buffer | None:
    if ids.null_count == 0:
        return None
    valid = ids.is_valid().to_numpy(zero_copy_only=False)
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _check_unsigned(ids: pa.Array, where: str) -> None:
    if ids.type not in (pa.uint16(), pa.uint32()):
        raise TransportError(f"{where}: id column has type {ids.type}; expected uint16 or uint32")
