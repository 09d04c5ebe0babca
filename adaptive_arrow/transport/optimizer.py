"""Transport optimisation of a whole bundle: sort top-down, renumber ids densely, delta-encode them;
and the inverse, back to plain ids.

Top-down means parents first: the root table (logs, spans or metrics) is sorted by its keys
(resource and scope ids among them) and renumbered; each child then has its ``parent_id`` rewritten to the new parent
numbering *before* it is sorted, so ``parent_id`` (its last sort key) orders children by the sorted
position of their parent. A table is finished (ids encoded) in its own step: its parent ids only
need the parent's numbering, recorded when the parent was done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from otap_model import ROOT_PAYLOAD, OtapBundle, PayloadType, Signal, relations
from otap_model.payload import ATTRIBUTE_TABLES, DATA_POINT_TABLES, EXEMPLAR_TABLES, ROOT_TABLES

from . import delta
from .columns import (
    DELTA,
    PLAIN,
    QUASI_DELTA,
    encoded_paths,
    gather,
    get_column,
    replace_column,
    replace_columns,
)
from .errors import TransportError
from .ids import Renumbering, renumber_delta
from .sort import DEFAULT_SORT_ORDERS, resolve_sort_orders, sort, sort_attributes, sort_keys

_ROOT_IDS = ("id", "resource.id", "scope.id")

Renumberings = dict[tuple[PayloadType, str], Renumbering]
"""(payload type, id column) -> the numbering that column got in the sorted table."""


def id_columns(pt: PayloadType) -> tuple[str, ...]:
    """The id columns a payload type owns (referenced by its children's parent_id)."""
    if pt in ROOT_TABLES:
        return _ROOT_IDS
    if pt in DATA_POINT_TABLES or pt in EXEMPLAR_TABLES or pt in (PayloadType.SPAN_EVENTS, PayloadType.SPAN_LINKS):
        return ("id",)
    return ()


def parent_id_encoding(pt: PayloadType) -> str | None:
    """How a payload type's ``parent_id`` is encoded (None: it has no parent)."""
    if pt in ROOT_TABLES:
        return None
    return DELTA if pt in DATA_POINT_TABLES else QUASI_DELTA


def optimize(bundle: OtapBundle, config: object | None = None) -> OtapBundle:
    """Sort every table, renumber ids densely in sorted order, and delta / quasi-delta encode them.

    ``config`` may carry ``sort_orders``: a mapping of payload type id to column paths that
    replaces the default order of those payload types (see ``sort.resolve_sort_orders``). Input
    id columns that are already encoded are restored first, so an optimised bundle may be
    optimised again; when the root order starts with its id columns (the reference orders) that
    second pass changes nothing.
    """
    tables = optimize_tables(bundle, sort_orders(config))
    return OtapBundle(bundle.signal, {pt: tables[pt].table for pt in bundle.tables})


@dataclass(frozen=True)
class SortedTable:
    """One optimised table and the row order it was gathered in (None: the input order)."""

    table: pa.RecordBatch
    rows: np.ndarray | None


Prepare = Callable[[PayloadType, pa.RecordBatch], pa.RecordBatch]


def sort_orders(config: object | None) -> dict[PayloadType, tuple[str, ...]]:
    """The sort order of every payload type under ``config`` (its ``sort_orders``, else the defaults)."""
    overrides = _sort_orders_of(config)
    return DEFAULT_SORT_ORDERS if overrides is None else resolve_sort_orders(overrides)


def optimize_tables(
    bundle: OtapBundle, orders: Mapping[PayloadType, Sequence[str]], prepare: Prepare | None = None
) -> dict[PayloadType, SortedTable]:
    """``optimize`` table by table, keeping each table's row order. ``prepare`` (the encoder's
    hook) may replace columns of each plain table before it is sorted, with columns that sort
    and gather the same way (a string column by its ``dictionary_encode``, so the encoder's
    dictionaries reuse the hashing the sort keys need and only indices are gathered)."""
    tables = restore(bundle).tables
    out: dict[PayloadType, SortedTable] = {}
    renumberings: Renumberings = {}
    for pt, parent in top_down(bundle.signal):
        table = tables.get(pt)
        if table is not None:
            if prepare is not None:
                table = prepare(pt, table)
            out[pt] = sort_table(pt, table, parent, orders[pt], renumberings)
    return out


def top_down(signal: Signal) -> list[tuple[PayloadType, tuple[PayloadType, str] | None]]:
    """Each payload type of the signal with its (parent, parent column), parents first."""
    return [(ROOT_PAYLOAD[signal], None)] + [(r.child, (r.parent, r.parent_column)) for r in relations(signal)]


def optimize_table(
    pt: PayloadType,
    table: pa.RecordBatch,
    parent: tuple[PayloadType, str] | None,
    order: Sequence[str],
    renumberings: Renumberings,
) -> pa.RecordBatch:
    """One table's step of the top-down pass (``sort_table`` without the row order)."""
    return sort_table(pt, table, parent, order, renumberings).table


def sort_table(
    pt: PayloadType,
    table: pa.RecordBatch,
    parent: tuple[PayloadType, str] | None,
    order: Sequence[str],
    renumberings: Renumberings,
) -> SortedTable:
    """One table's step of the top-down pass: rewrite its parent ids to the parent's new numbering
    (recorded in ``renumberings``), sort it, renumber and delta-encode its own ids (recording
    their numbering), and (quasi-)delta-encode its parent ids.

    The table is gathered in sorted order once (``columns.gather``: ``take`` with cheap paths for
    null-heavy columns); the parent id encodings read the
    rewritten parent ids and the sort keys through the permutation instead of gathering them.
    """
    where = pt.name
    new_parent_ids = None
    if parent is not None:
        parent_pt, parent_column = parent
        mapping = renumberings.get(parent)
        if mapping is None:
            raise TransportError(
                f"{where}: has {table.num_rows} rows but the bundle has no {parent_pt.name} table "
                "for their parent_id to refer to"
            )
        parent_ids = _require(table, "parent_id", where)
        new_parent_ids = mapping.apply(parent_ids, where, f"{parent_pt.name}.{parent_column}")
    overrides = None if new_parent_ids is None else {"parent_id": new_parent_ids}
    keys = sort_keys(table, order, where, overrides) if table.num_rows > 1 else {}
    ordering = sort_attributes(keys, get_column(table, "type"), table.num_rows) if pt in ATTRIBUTE_TABLES else None
    if ordering is None:
        ordering = sort(keys, table.num_rows)
    rows = ordering.perm
    sorted_table = table if rows is None else gather(table, rows)
    replaced: dict[str, tuple[pa.Array, str]] = {}
    for path in id_columns(pt):
        ids = get_column(sorted_table, path)
        if ids is not None:
            encoded, renumberings[(pt, path)] = renumber_delta(ids, f"{where}.{path}")
            replaced[path] = (encoded, DELTA)
    if new_parent_ids is not None:
        encoding = parent_id_encoding(pt)
        assert encoding is not None
        replaced["parent_id"] = (delta.encode_parent_ids(pt, table, new_parent_ids, ordering, keys), encoding)
    return SortedTable(replace_columns(sorted_table, replaced), rows)


def restore(bundle: OtapBundle) -> OtapBundle:
    """Plain ids again: delta columns by prefix sums over valid slots, quasi-delta columns by
    recomputing the equality runs; the ``encoding`` metadata is removed. Columns without that
    metadata, or marked ``plain``, are left as they are."""
    restored = {}
    for pt, table in bundle.tables.items():
        for path, encoding in encoded_paths(table.schema):
            column = get_column(table, path)
            assert column is not None  # encoded_paths only lists existing fields
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
            check_encoding(PayloadType(pt), path, column.type, encoding)
            if encoding == PLAIN:
                plain = column
            elif encoding == DELTA:
                plain = delta.delta_decode(column)
            else:
                plain = delta.quasi_delta_decode(column, delta.equal_runs(table, PayloadType(pt)))
            table = replace_column(table, path, plain, None)
        restored[pt] = table
    return OtapBundle(bundle.signal, restored)


def check_encoding(pt: PayloadType, path: str, type_: pa.DataType, encoding: str) -> None:
    """An ``encoding`` mark restore can undo: a known one, the delta encodings only on the payload
    type's id columns and parent_id, of uint16 / uint32 (dictionary values count), so no other
    column's buffer is ever read as ids; quasidelta only where its equality rule is defined."""
    if encoding == PLAIN:
        return
    if encoding not in (DELTA, QUASI_DELTA):
        raise TransportError(f"{pt.name}.{path}: unknown encoding {encoding!r} (expected {PLAIN!r}, {DELTA!r} or {QUASI_DELTA!r})")
    ids = id_columns(pt) + (("parent_id",) if parent_id_encoding(pt) is not None else ())
    if path not in ids:
        raise TransportError(
            f"{pt.name}.{path}: marked {encoding!r}, an encoding only the id columns of {pt.name} carry "
            f"({', '.join(ids) or 'it has none'})"
        )
    if encoding == QUASI_DELTA and (path != "parent_id" or parent_id_encoding(pt) != QUASI_DELTA):
        raise TransportError(
            f"{pt.name}.{path}: marked {encoding!r}, which is defined only for the parent_id of attribute, "
            "span event, span link and exemplar tables"
        )
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    if type_ not in (pa.uint16(), pa.uint32()):
        raise TransportError(f"{pt.name}.{path}: marked {encoding!r} but has type {type_}; ids are uint16 or uint32")


def _require(table: pa.RecordBatch, path: str, where: str) -> pa.Array:
    column = get_column(table, path)
    if column is None:
        raise TransportError(f"{where}: no {path} column")
    return column


def _sort_orders_of(config: object | None) -> Mapping[int, Sequence[str]] | None:
    orders = getattr(config, "sort_orders", None)
    if orders is not None and not isinstance(orders, Mapping):
        raise TransportError(f"config.sort_orders must be a mapping of payload type id to column paths, got {type(orders).__name__}")
    return orders
