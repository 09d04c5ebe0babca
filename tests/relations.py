"""Structural checks of an OtapBundle: schemas conform and every parent_id resolves."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otap_model import OtapBundle, conforms, relations


def _key_column(table: pa.RecordBatch, dotted: str) -> pa.Array:
    head, _, rest = dotted.partition(".")
    column = table.column(head)
    return column.field(rest) if rest else column


def check_relations(bundle: OtapBundle) -> None:
    """Assert every table conforms to its reference schema, every child's parent_id names an
    existing parent row, and `id` columns are unique within their table."""
    for pt, table in bundle.tables.items():
        conforms(table, pt)
        if "id" in table.schema.names:
            ids = table.column("id").drop_null().to_numpy()
            assert np.unique(ids).size == ids.size, f"{pt.name}.id has duplicates"
    for rel in relations(bundle.signal):
        child = bundle.get(rel.child)
        if child is None or child.num_rows == 0:
            continue
        parent = bundle.get(rel.parent)
        assert parent is not None, f"{rel.child.name} has rows but its parent {rel.parent.name} is absent"
        keys = _key_column(parent, rel.parent_column).drop_null()
        missing = pc.invert(pc.is_in(child.column("parent_id"), value_set=keys.cast(child.column("parent_id").type)))
        n_missing = pc.sum(missing).as_py() or 0
        assert n_missing == 0, f"{n_missing} {rel.child.name} rows point at no {rel.parent.name}.{rel.parent_column}"
