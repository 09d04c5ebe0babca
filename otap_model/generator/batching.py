"""Grouping a batch of records into the resource -> scope -> records nesting of an OTLP request."""

from __future__ import annotations

from collections.abc import Sequence
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
