"""Sort orders per payload type and a stable multi-key sort that works on any column type.

Each key column becomes an unsigned integer key that orders like the column, nulls last: strings,
binaries and fixed-size binaries (and dictionary columns) through a dense rank of their distinct
values, integers and timestamps shifted by their minimum, floats through their order-preserving bit
pattern. Keys are packed least significant first into as few u64 words as their bit widths allow,
then one stable ``argsort`` (one word) or ``np.lexsort`` (several) orders the rows. Ties keep input
order, so sorting twice by the same keys changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otap_model import PayloadType, reference_schema

from .columns import get_column, get_field
from .errors import TransportError

P = PayloadType

_ROOT_LOGS = ("resource.id", "scope.id", "trace_id")
_ROOT_SPANS = ("resource.id", "scope.id", "name", "trace_id")
_ROOT_METRICS = ("resource.id", "scope.id", "metric_type", "name")
_ATTRS = ("type", "key", "str", "int", "double", "bool", "bytes", "ser", "parent_id")
_DATA_POINTS = ("parent_id",)
_EXEMPLARS = ("int_value", "double_value", "parent_id")

ATTRIBUTE_TABLES = frozenset(
    {
        P.RESOURCE_ATTRS,
        P.SCOPE_ATTRS,
        P.LOG_ATTRS,
        P.SPAN_ATTRS,
        P.METRIC_ATTRS,
        P.SPAN_EVENT_ATTRS,
        P.SPAN_LINK_ATTRS,
        P.NUMBER_DP_ATTRS,
        P.SUMMARY_DP_ATTRS,
        P.HISTOGRAM_DP_ATTRS,
        P.EXP_HISTOGRAM_DP_ATTRS,
        P.NUMBER_DP_EXEMPLAR_ATTRS,
        P.HISTOGRAM_DP_EXEMPLAR_ATTRS,
        P.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS,
    }
)
DATA_POINT_TABLES = frozenset(
    {P.NUMBER_DATA_POINTS, P.SUMMARY_DATA_POINTS, P.HISTOGRAM_DATA_POINTS, P.EXP_HISTOGRAM_DATA_POINTS}
)
EXEMPLAR_TABLES = frozenset({P.NUMBER_DP_EXEMPLARS, P.HISTOGRAM_DP_EXEMPLARS, P.EXP_HISTOGRAM_DP_EXEMPLARS})
ROOT_TABLES = frozenset({P.LOGS, P.SPANS, P.UNIVARIATE_METRICS})

REFERENCE_SORT_ORDERS: dict[PayloadType, tuple[str, ...]] = {
    P.LOGS: _ROOT_LOGS,
    P.SPANS: _ROOT_SPANS,
    P.UNIVARIATE_METRICS: _ROOT_METRICS,
    P.SPAN_EVENTS: ("name", "parent_id"),
    P.SPAN_LINKS: ("trace_id", "parent_id"),
    **{pt: _ATTRS for pt in ATTRIBUTE_TABLES},
    **{pt: _DATA_POINTS for pt in DATA_POINT_TABLES},
    **{pt: _EXEMPLARS for pt in EXEMPLAR_TABLES},
}
"""The Rust reference's sort columns (otap-reference.md section 3.3), per payload type."""

DEFAULT_SORT_ORDERS: dict[PayloadType, tuple[str, ...]] = {
    **REFERENCE_SORT_ORDERS,
    P.LOGS: ("severity_number", "scope.name", "resource.id", "scope.id", "trace_id"),
    P.UNIVARIATE_METRICS: ("metric_type", "unit", "name", "resource.id", "scope.id"),
}
"""The sort orders ``optimize`` uses when the config gives none: the reference orders, except that
logs group by severity and instrumentation library and metrics by type, unit and name across
resources, which measured smaller on every generator profile (docs/benchmarks.md, "Sorting and
delta ids")."""


def resolve_sort_orders(
    overrides: Mapping[int, Sequence[str]] | None,
) -> dict[PayloadType, tuple[str, ...]]:
    """Defaults with ``overrides`` applied, validated against the reference schemas.

    Every path must name a sortable column of its payload type. A child table's ``parent_id`` is the
    last key (appended when the override leaves it out); anywhere else it is an error.
    """
    orders = dict(DEFAULT_SORT_ORDERS)
    for key, paths in (overrides or {}).items():
        try:
            pt = PayloadType(key)
        except ValueError:
            raise TransportError(f"sort_orders: unknown payload type id {key}") from None
        if pt not in orders:
            raise TransportError(f"sort_orders: payload type {pt.name} has no table to sort")
        if isinstance(paths, str):
            raise TransportError(f"sort_orders[{pt.name}]: give a sequence of column paths, not the string {paths!r}")
        order = tuple(paths)
        schema = reference_schema(pt)
        for path in order:
            field = get_field(schema, path)
            if field is None:
                raise TransportError(f"sort_orders[{pt.name}]: no column {path!r} (columns: {schema.names})")
            if pa.types.is_nested(field.type):
                raise TransportError(f"sort_orders[{pt.name}]: column {path!r} is {field.type}, which cannot be a sort key")
        if pt not in ROOT_TABLES:
            if "parent_id" in order[:-1]:
                raise TransportError(
                    f"sort_orders[{pt.name}]: parent_id must be the last sort key (got {order}); "
                    "the parent id encodings rely on it"
                )
            if not order or order[-1] != "parent_id":
                order = (*order, "parent_id")
        orders[pt] = order
    return orders


def sort_indices(batch: pa.RecordBatch, paths: Sequence[str], where: str) -> np.ndarray | None:
    """Row order that sorts ``batch`` by ``paths`` (stable, ascending, nulls last); None when the
    batch is already in that order. ``where`` names the table in error messages."""
    if batch.num_rows < 2:
        return None
    words: list[np.ndarray] = []
    word = np.zeros(batch.num_rows, dtype=np.uint64)
    shift = 0
    for path in reversed(paths):  # least significant key first
        column = get_column(batch, path)
        if column is None or column.null_count == len(column):
            continue  # an absent or all-null column orders nothing
        key, bits = _key(column, f"{where}.{path}")
        if bits == 0:
            continue
        if shift + bits > 64:
            words.append(word)
            word, shift = np.zeros(batch.num_rows, dtype=np.uint64), 0
        word |= key << np.uint64(shift) if shift else key
        shift += bits
    if shift:
        words.append(word)
    if not words:
        return None
    if len(words) == 1:
        if bool(np.all(words[0][1:] >= words[0][:-1])):
            return None
        return np.argsort(words[0], kind="stable")
    order = np.lexsort(words)
    if bool(np.all(order[1:] > order[:-1])):
        return None
    return order


def _key(column: pa.Array, where: str) -> tuple[np.ndarray, int]:
    """An unsigned key ordering like ``column`` (nulls last) and its bit width."""
    type_ = column.type
    if pa.types.is_dictionary(type_):
        return _ranked(column.indices, column.dictionary, column)
    if (
        pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_fixed_size_binary(type_)
    ):
        encoded = pc.dictionary_encode(column)
        return _ranked(encoded.indices, encoded.dictionary, column)
    if pa.types.is_boolean(type_):
        key = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint64)
        return _nulls_last(key, column, np.uint64(1))
    if pa.types.is_floating(type_):
        bits = _primitive(column).astype(np.float64).view(np.uint64)
        negative = (bits >> np.uint64(63)).astype(bool)
        key = np.where(negative, ~bits, bits | np.uint64(1 << 63))
        return _shifted(key, column)
    if pa.types.is_integer(type_) or pa.types.is_temporal(type_):
        raw = _primitive(column)
        if raw.dtype.kind == "i":
            key = raw.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
        else:
            key = raw.astype(np.uint64)
        return _shifted(key, column)
    raise TransportError(f"{where}: cannot sort by a column of type {type_}")


def _primitive(column: pa.Array) -> np.ndarray:
    """Values of a fixed-width column without copying (null slots hold arbitrary values)."""
    width = column.type.bit_width // 8
    kind = "f" if pa.types.is_floating(column.type) else ("i" if _signed(column.type) else "u")
    values = np.frombuffer(column.buffers()[1], dtype=np.dtype(f"<{kind}{width}"))
    return values[column.offset : column.offset + len(column)]


def _signed(type_: pa.DataType) -> bool:
    return pa.types.is_signed_integer(type_) or pa.types.is_temporal(type_)


def _shifted(key: np.ndarray, column: pa.Array) -> tuple[np.ndarray, int]:
    valid = None if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
    present = key if valid is None else key[valid]
    if present.size == 0:
        return np.zeros(len(key), dtype=np.uint64), 0
    low, high = present.min(), present.max()
    if valid is not None and high - low == np.iinfo(np.uint64).max:  # no room for the null key
        _, dense = np.unique(key, return_inverse=True)
        return _nulls_last(dense.astype(np.uint64), column, np.uint64(dense[valid].max()), valid)
    return _nulls_last(key - low, column, high - low, valid)


def _ranked(indices: pa.Array, dictionary: pa.Array, column: pa.Array) -> tuple[np.ndarray, int]:
    """Key of a dictionary-encoded column: the dense rank of each row's dictionary value."""
    if len(dictionary) == 0:
        return np.zeros(len(column), dtype=np.uint64), 0
    ranks = pc.rank(dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.uint64)
    ranks -= np.uint64(1)
    codes = indices.fill_null(0).to_numpy(zero_copy_only=False)
    return _nulls_last(ranks[codes], column, ranks.max())


def _nulls_last(
    key: np.ndarray, column: pa.Array, high: np.uint64, valid: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Give null rows the key ``high + 1``; return the key and its bit width."""
    if column.null_count:
        if valid is None:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
        high = np.uint64(high) + np.uint64(1)
        key = np.where(valid, key, high)
    return key, int(high).bit_length()
