"""OTAP payload types, signals and the parent/child relations between payload tables.

Ids follow the OTel Arrow protocol's ``ArrowPayloadType`` enum; a payload type id is also the
Quiver slot id of that table (DESIGN.md section 2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import IntEnum, StrEnum

import pyarrow as pa


class PayloadType(IntEnum):
    """OTAP ``ArrowPayloadType`` ids."""

    UNKNOWN = 0
    RESOURCE_ATTRS = 1
    SCOPE_ATTRS = 2
    UNIVARIATE_METRICS = 10
    NUMBER_DATA_POINTS = 11
    SUMMARY_DATA_POINTS = 12
    HISTOGRAM_DATA_POINTS = 13
    EXP_HISTOGRAM_DATA_POINTS = 14
    NUMBER_DP_ATTRS = 15
    SUMMARY_DP_ATTRS = 16
    HISTOGRAM_DP_ATTRS = 17
    EXP_HISTOGRAM_DP_ATTRS = 18
    NUMBER_DP_EXEMPLARS = 19
    HISTOGRAM_DP_EXEMPLARS = 20
    EXP_HISTOGRAM_DP_EXEMPLARS = 21
    NUMBER_DP_EXEMPLAR_ATTRS = 22
    HISTOGRAM_DP_EXEMPLAR_ATTRS = 23
    EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS = 24
    MULTIVARIATE_METRICS = 25
    METRIC_ATTRS = 26
    LOGS = 30
    LOG_ATTRS = 31
    SPANS = 40
    SPAN_ATTRS = 41
    SPAN_EVENTS = 42
    SPAN_LINKS = 43
    SPAN_EVENT_ATTRS = 44
    SPAN_LINK_ATTRS = 45


class Signal(StrEnum):
    """The three OpenTelemetry signals."""

    LOGS = "logs"
    TRACES = "traces"
    METRICS = "metrics"


@dataclass(frozen=True)
class Relation:
    """How a child payload table points at its parent.

    ``parent_column`` is the dotted path of the parent's key column (``id``, ``resource.id`` or
    ``scope.id``); the child always refers to it through its own ``parent_id`` column.
    """

    child: PayloadType
    parent: PayloadType
    parent_column: str
    parent_id_type: pa.DataType


_U16, _U32 = pa.uint16(), pa.uint32()

ROOT_PAYLOAD: dict[Signal, PayloadType] = {
    Signal.LOGS: PayloadType.LOGS,
    Signal.TRACES: PayloadType.SPANS,
    Signal.METRICS: PayloadType.UNIVARIATE_METRICS,
}

# Payload types of each signal, parents before children (the order tables are encoded in).
SIGNAL_PAYLOADS: dict[Signal, tuple[PayloadType, ...]] = {
    Signal.LOGS: (
        PayloadType.LOGS,
        PayloadType.RESOURCE_ATTRS,
        PayloadType.SCOPE_ATTRS,
        PayloadType.LOG_ATTRS,
    ),
    Signal.TRACES: (
        PayloadType.SPANS,
        PayloadType.RESOURCE_ATTRS,
        PayloadType.SCOPE_ATTRS,
        PayloadType.SPAN_ATTRS,
        PayloadType.SPAN_EVENTS,
        PayloadType.SPAN_LINKS,
        PayloadType.SPAN_EVENT_ATTRS,
        PayloadType.SPAN_LINK_ATTRS,
    ),
    Signal.METRICS: (
        PayloadType.UNIVARIATE_METRICS,
        PayloadType.RESOURCE_ATTRS,
        PayloadType.SCOPE_ATTRS,
        PayloadType.METRIC_ATTRS,
        PayloadType.NUMBER_DATA_POINTS,
        PayloadType.SUMMARY_DATA_POINTS,
        PayloadType.HISTOGRAM_DATA_POINTS,
        PayloadType.EXP_HISTOGRAM_DATA_POINTS,
        PayloadType.NUMBER_DP_ATTRS,
        PayloadType.SUMMARY_DP_ATTRS,
        PayloadType.HISTOGRAM_DP_ATTRS,
        PayloadType.EXP_HISTOGRAM_DP_ATTRS,
        PayloadType.NUMBER_DP_EXEMPLARS,
        PayloadType.HISTOGRAM_DP_EXEMPLARS,
        PayloadType.EXP_HISTOGRAM_DP_EXEMPLARS,
        PayloadType.NUMBER_DP_EXEMPLAR_ATTRS,
        PayloadType.HISTOGRAM_DP_EXEMPLAR_ATTRS,
        PayloadType.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS,
    ),
}


def _rel(child: PayloadType, parent: PayloadType, column: str, width: pa.DataType) -> Relation:
    return Relation(child, parent, column, width)


P = PayloadType


@functools.cache
def relations(signal: Signal) -> tuple[Relation, ...]:
    """Every parent/child relation of a signal, parents before children (built once per signal:
    the encoder's checks ask for them several times per bundle, about 10 us each when rebuilt)."""
    root = ROOT_PAYLOAD[signal]
    common = (
        _rel(P.RESOURCE_ATTRS, root, "resource.id", _U16),
        _rel(P.SCOPE_ATTRS, root, "scope.id", _U16),
    )
    if signal is Signal.LOGS:
        return (*common, _rel(P.LOG_ATTRS, P.LOGS, "id", _U16))
    if signal is Signal.TRACES:
        return (
            *common,
            _rel(P.SPAN_ATTRS, P.SPANS, "id", _U16),
            _rel(P.SPAN_EVENTS, P.SPANS, "id", _U16),
            _rel(P.SPAN_LINKS, P.SPANS, "id", _U16),
            _rel(P.SPAN_EVENT_ATTRS, P.SPAN_EVENTS, "id", _U32),
            _rel(P.SPAN_LINK_ATTRS, P.SPAN_LINKS, "id", _U32),
        )
    metric_rels = [_rel(P.METRIC_ATTRS, P.UNIVARIATE_METRICS, "id", _U16)]
    for dp, attrs, exemplars, exemplar_attrs in DATA_POINT_FAMILIES:
        metric_rels.append(_rel(dp, P.UNIVARIATE_METRICS, "id", _U16))
        metric_rels.append(_rel(attrs, dp, "id", _U32))
        if exemplars is not None and exemplar_attrs is not None:
            metric_rels.append(_rel(exemplars, dp, "id", _U32))
            metric_rels.append(_rel(exemplar_attrs, exemplars, "id", _U32))
    return (*common, *metric_rels)


# (data point table, its attributes, its exemplars, the exemplars' attributes); summaries have no exemplars.
DATA_POINT_FAMILIES: tuple[tuple[PayloadType, PayloadType, PayloadType | None, PayloadType | None], ...] = (
    (P.NUMBER_DATA_POINTS, P.NUMBER_DP_ATTRS, P.NUMBER_DP_EXEMPLARS, P.NUMBER_DP_EXEMPLAR_ATTRS),
    (P.SUMMARY_DATA_POINTS, P.SUMMARY_DP_ATTRS, None, None),
    (P.HISTOGRAM_DATA_POINTS, P.HISTOGRAM_DP_ATTRS, P.HISTOGRAM_DP_EXEMPLARS, P.HISTOGRAM_DP_EXEMPLAR_ATTRS),
    (
        P.EXP_HISTOGRAM_DATA_POINTS,
        P.EXP_HISTOGRAM_DP_ATTRS,
        P.EXP_HISTOGRAM_DP_EXEMPLARS,
        P.EXP_HISTOGRAM_DP_EXEMPLAR_ATTRS,
    ),
)


def signal_of(payload_type: PayloadType) -> Signal | None:
    """The signal a payload type belongs to; None for the shared RESOURCE_ATTRS/SCOPE_ATTRS."""
    if payload_type in (P.RESOURCE_ATTRS, P.SCOPE_ATTRS):
        return None
    for signal, members in SIGNAL_PAYLOADS.items():
        if payload_type in members:
            return signal
    return None


# Kinds of payload tables, as the schemas and the transport encodings treat them.
ATTRIBUTE_TABLES_16: frozenset[PayloadType] = frozenset(
    {P.RESOURCE_ATTRS, P.SCOPE_ATTRS, P.LOG_ATTRS, P.SPAN_ATTRS, P.METRIC_ATTRS}
)
ATTRIBUTE_TABLES_32: frozenset[PayloadType] = frozenset(
    {P.SPAN_EVENT_ATTRS, P.SPAN_LINK_ATTRS} | {attrs for _, attrs, _, _ in DATA_POINT_FAMILIES}
    | {ex_attrs for _, _, _, ex_attrs in DATA_POINT_FAMILIES if ex_attrs is not None}
)
ATTRIBUTE_TABLES: frozenset[PayloadType] = ATTRIBUTE_TABLES_16 | ATTRIBUTE_TABLES_32
DATA_POINT_TABLES: frozenset[PayloadType] = frozenset(dp for dp, _, _, _ in DATA_POINT_FAMILIES)
EXEMPLAR_TABLES: frozenset[PayloadType] = frozenset(ex for _, _, ex, _ in DATA_POINT_FAMILIES if ex is not None)
ROOT_TABLES: frozenset[PayloadType] = frozenset(ROOT_PAYLOAD.values())
