"""Grouping a batch of records into the resource -> scope -> records nesting of an OTLP request."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from .resources import Scope


class _Origin(Protocol):
    inst: Any  # the resource: a pod (Instance) or a metric Source
    scope: Scope


R = TypeVar("R", bound=_Origin)


def group_by_origin(records: Sequence[R]) -> list[tuple[Any, list[tuple[Scope, list[R]]]]]:
    """Records grouped by resource, then scope, in first-appearance order, record order kept within
    a group (an exporter batches per resource and scope in the order records arrive)."""
    resources: dict[int, tuple[Any, dict[int, tuple[Scope, list[Any]]]]] = {}
    for rec in records:
        inst = rec.inst
        entry = resources.get(id(inst))
        if entry is None:
            entry = resources[id(inst)] = (inst, {})
        scopes = entry[1]
        scope = rec.scope
        bucket = scopes.get(id(scope))
        if bucket is None:
            bucket = scopes[id(scope)] = (scope, [])
        bucket[1].append(rec)
    return [(inst, list(scopes.values())) for inst, scopes in resources.values()]


def write_origins(
    resources: Any, scope_field: str, items_field: str, records: Sequence[R], *, resource_schema_url: bool = True
) -> Iterator[tuple[Callable[[], Any], list[R]]]:
    """Add one ResourceX per resource and one ScopeX per scope to the repeated field `resources`;
    yield (the ScopeX's item adder, its records) for the caller to fill in."""
    for inst, scopes in group_by_origin(records):
        rx = resources.add()
        rx.resource.CopyFrom(inst.resource)
        if inst.schema_url and resource_schema_url:
            rx.schema_url = inst.schema_url
        for scope, group in scopes:
            sx = getattr(rx, scope_field).add()
            sx.scope.CopyFrom(scope.msg)
            if scope.schema_url:
                sx.schema_url = scope.schema_url
            yield getattr(sx, items_field).add, group
