"""AnyValue <-> OTAP value columns: type codes, and CBOR for maps and slices.

Maps (``kvlist_value``) and slices (``array_value``) are stored in the ``ser`` column as CBOR
with indefinite-length containers, as the Go and Rust OTAP encoders write them; an empty
AnyValue inside a container is CBOR ``null``. Nested key/value lists must have unique keys (OTLP
requires it and a CBOR map cannot keep duplicates), so a duplicate is a ConversionError.
"""

from __future__ import annotations

from typing import Any

import cbor2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValueList

from ..errors import ConversionError

EMPTY, STR, INT, DOUBLE, BOOL, MAP, SLICE, BYTES = range(8)

# AnyValue oneof field number -> OTAP type code.
TYPE_OF_FIELD = {1: STR, 2: BOOL, 3: INT, 4: DOUBLE, 5: SLICE, 6: MAP, 7: BYTES}
ONEOF_OF_TYPE = {
    STR: "string_value",
    INT: "int_value",
    DOUBLE: "double_value",
    BOOL: "bool_value",
    BYTES: "bytes_value",
}
TYPE_OF_ONEOF = {
    "string_value": STR,
    "int_value": INT,
    "double_value": DOUBLE,
    "bool_value": BOOL,
    "bytes_value": BYTES,
    "kvlist_value": MAP,
    "array_value": SLICE,
}


def _to_py(value: AnyValue, path: str) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_to_py(v, f"{path}.array_value.values[{i}]") for i, v in enumerate(value.array_value.values)]
    if kind == "kvlist_value":
        return _map_to_py(value.kvlist_value, f"{path}.kvlist_value")
    if kind == "string_value_strindex":
        raise ConversionError("string_value_strindex is only meaningful in profiles; OTAP has no column for it", path)
    return getattr(value, kind)


def _map_to_py(kvlist: KeyValueList, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(kvlist.values):
        if kv.key_strindex:
            raise ConversionError("key_strindex is only meaningful in profiles; OTAP has no column for it", f"{path}.values[{i}]")
        if kv.key in out:
            raise ConversionError(f"duplicate key {kv.key!r} in a key/value list (OTLP requires unique keys)", f"{path}.values[{i}]")
        out[kv.key] = _to_py(kv.value, f"{path}.values[{i}].value")
    return out


def _dumps(obj: Any) -> bytes:
    return cbor2.dumps(obj, indefinite_containers=True)


def ser_of_array(payload: bytes, path: str) -> bytes:
    """CBOR of a serialized ArrayValue (the payload of ``AnyValue.array_value``)."""
    arr = _parse(ArrayValue, payload, path)
    return _dumps([_to_py(v, f"{path}.values[{i}]") for i, v in enumerate(arr.values)])


def ser_of_kvlist(payload: bytes, path: str) -> bytes:
    """CBOR of a serialized KeyValueList (the payload of ``AnyValue.kvlist_value``)."""
    return _dumps(_map_to_py(_parse(KeyValueList, payload, path), path))


def ser_of_value(value: AnyValue, path: str) -> bytes:
    """CBOR of a map or slice AnyValue message."""
    return _dumps(_to_py(value, path))


def _parse(cls: Any, payload: bytes, path: str) -> Any:
    try:
        return cls.FromString(payload)
    except Exception as exc:  # upb raises google.protobuf.message.DecodeError
        raise ConversionError(f"invalid nested value: {exc}", path) from None


def _fill(target: AnyValue, obj: Any, path: str) -> None:
    if obj is None:
        return
    if isinstance(obj, bool):
        target.bool_value = obj
    elif isinstance(obj, int):
        if not -(2**63) <= obj < 2**63:
            raise ConversionError(f"integer {obj} does not fit in int64", path)
        target.int_value = obj
    elif isinstance(obj, float):
        target.double_value = obj
    elif isinstance(obj, str):
        target.string_value = obj
    elif isinstance(obj, bytes):
        target.bytes_value = obj
    elif isinstance(obj, list):
        target.array_value.SetInParent()
        for item in obj:
            _fill(target.array_value.values.add(), item, path)
    elif isinstance(obj, dict):
        target.kvlist_value.SetInParent()
        for key, item in obj.items():
            if not isinstance(key, str):
                raise ConversionError(f"CBOR map key {key!r} is not a text string", path)
            kv = target.kvlist_value.values.add(key=key)
            if item is not None:
                _fill(kv.value, item, path)
    else:
        raise ConversionError(f"CBOR item of type {type(obj).__name__} has no AnyValue equivalent", path)


def fill_from_ser(target: AnyValue, ser: bytes, type_code: int, path: str) -> None:
    """Set a map/slice AnyValue from its CBOR encoding."""
    try:
        obj = cbor2.loads(ser)
    except Exception as exc:
        raise ConversionError(f"invalid CBOR in ser: {exc}", path) from None
    if type_code == MAP and not isinstance(obj, dict):
        raise ConversionError(f"type is Map but ser holds a CBOR {type(obj).__name__}", path)
    if type_code == SLICE and not isinstance(obj, list):
        raise ConversionError(f"type is Slice but ser holds a CBOR {type(obj).__name__}", path)
    _fill(target, obj, path)
