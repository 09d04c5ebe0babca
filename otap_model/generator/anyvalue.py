"""Writing Python values into OTLP ``AnyValue`` / ``KeyValue`` messages in place.

Values map by Python type: str, bool, int, float, bytes, dict (Map), list/tuple (Slice).
Messages are filled through ``add()`` and attribute assignment, the fastest path with upb.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Attrs = tuple[tuple[str, Any], ...] | list[tuple[str, Any]]


def set_value(av: Any, value: Any) -> None:
    """Store `value` in the AnyValue message `av`."""
    t = type(value)
    if t is str:
        av.string_value = value
    elif t is bool:
        av.bool_value = value
    elif t is int:
        av.int_value = value
    elif t is float:
        av.double_value = value
    elif t is bytes:
        av.bytes_value = value
    elif t is dict:
        kvlist = av.kvlist_value
        kvlist.SetInParent()
        add_attributes(kvlist.values, value.items())
    elif t is list or t is tuple:
        array = av.array_value
        array.SetInParent()
        for item in value:
            set_value(array.values.add(), item)
    else:
        raise TypeError(f"no AnyValue kind for {t.__name__}")


def add_attributes(repeated: Any, items: Iterable[tuple[str, Any]]) -> None:
    """Append (key, value) pairs to a repeated KeyValue field."""
    for key, value in items:
        kv = repeated.add()
        kv.key = key
        if type(value) is str:
            kv.value.string_value = value
        else:
            set_value(kv.value, value)
