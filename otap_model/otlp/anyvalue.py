"""AnyValue <-> OTAP value columns: type codes, and CBOR for maps and slices.

Maps (``kvlist_value``) and slices (``array_value``) are stored in the ``ser`` column as CBOR
with indefinite-length containers, as the Go and Rust OTAP encoders write them; an empty
AnyValue inside a container is CBOR ``null``. Doubles are CBOR float64 (cbor2 writes ±inf and the quiet
NaN 7ff8000000000000 in their exact half-precision forms); any other NaN is written as float64 with
its own bits, so every double comes back bit-exact. Older ser values hold every NaN as f97e00 and
still decode (to the quiet NaN). Nested key/value lists must have unique keys (OTLP
requires it and a CBOR map cannot keep duplicates), so a duplicate is a ConversionError.

Nesting is bounded by what ``to_otlp`` can emit: protobuf (upb) refuses a message nested more than
``MAX_MESSAGE_DEPTH`` levels below the request, so a value that would put one deeper is refused here,
on the way in, rather than stored and then impossible to export.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import cbor2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValueList

from ..errors import ConversionError

EMPTY, STR, INT, DOUBLE, BOOL, MAP, SLICE, BYTES = range(8)

# upb's default decode depth limit (upb_DecodeOptions_MaxDepth): a message may sit at most this many
# levels below the root it is parsed from; the export request is level 0.
MAX_MESSAGE_DEPTH = 100

# AnyValue oneof field number -> OTAP type code.
TYPE_OF_FIELD = {1: STR, 2: BOOL, 3: INT, 4: DOUBLE, 5: SLICE, 6: MAP, 7: BYTES}


class _TooDeep(Exception):
    """Unwinds the recursion of _to_py once a message would sit deeper than MAX_MESSAGE_DEPTH."""


# Depths below are message levels of the request as to_otlp writes it: an AnyValue at `depth` holds
# its ArrayValue / KeyValueList at depth + 1, their AnyValue / KeyValue items at depth + 2 and a
# KeyValue's non-empty value at depth + 3 (an empty one is not written).


def _to_py(value: AnyValue, path: str, depth: int) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return _array_to_py(value.array_value, f"{path}.array_value", depth + 1)
    if kind == "kvlist_value":
        return _map_to_py(value.kvlist_value, f"{path}.kvlist_value", depth + 1)
    if kind == "string_value_strindex":
        raise ConversionError("string_value_strindex is only meaningful in profiles; OTAP has no column for it", path)
    if kind == "double_value":
        number = value.double_value
        if number != number:  # NaN: cbor2 would write every one as f97e00
            bits = struct.pack(">d", number)
            return number if bits == _QUIET_NAN else _NanBits(bits)
        return number
    return getattr(value, kind)


def _array_to_py(arr: ArrayValue, path: str, depth: int) -> list[Any]:
    if depth > MAX_MESSAGE_DEPTH or (len(arr.values) and depth + 1 > MAX_MESSAGE_DEPTH):
        raise _TooDeep
    return [_to_py(v, f"{path}.values[{i}]", depth + 1) for i, v in enumerate(arr.values)]


def _map_to_py(kvlist: KeyValueList, path: str, depth: int) -> dict[str, Any]:
    if depth > MAX_MESSAGE_DEPTH or (len(kvlist.values) and depth + 1 > MAX_MESSAGE_DEPTH):
        raise _TooDeep
    out: dict[str, Any] = {}
    for i, kv in enumerate(kvlist.values):
        if kv.key_strindex:
            raise ConversionError("key_strindex is only meaningful in profiles; OTAP has no column for it", f"{path}.values[{i}]")
        if kv.key in out:
            raise ConversionError(f"duplicate key {kv.key!r} in a key/value list (OTLP requires unique keys)", f"{path}.values[{i}]")
        if kv.value.WhichOneof("value") is not None and depth + 2 > MAX_MESSAGE_DEPTH:
            raise _TooDeep
        out[kv.key] = _to_py(kv.value, f"{path}.values[{i}].value", depth + 2)
    return out


def _deepest(container: ArrayValue | KeyValueList, depth: int) -> int:
    """The deepest message level to_otlp writes for an ArrayValue / KeyValueList at `depth`."""
    levels = [depth]
    for item in container.values:
        value = item if isinstance(container, ArrayValue) else item.value
        level = depth + 1 if isinstance(container, ArrayValue) else depth + 2
        kind = value.WhichOneof("value")
        if kind == "array_value":
            levels.append(_deepest(value.array_value, level + 1))
        elif kind == "kvlist_value":
            levels.append(_deepest(value.kvlist_value, level + 1))
        else:
            levels.append(depth + 1 if kind is None else level)
    return max(levels)


class _NanBits:
    """A NaN double whose sign or payload differs from the one cbor2 writes (f97e00 decodes to
    7ff8000000000000); it is written as a CBOR float64 so all 64 bits come back."""

    __slots__ = ("bits",)

    def __init__(self, bits: bytes) -> None:
        self.bits = bits


_QUIET_NAN = struct.pack(">d", float("nan"))


def _encode_nan(encoder: cbor2.CBOREncoder, value: Any) -> None:
    if not isinstance(value, _NanBits):
        raise ConversionError(f"{type(value).__name__} has no CBOR encoding")
    encoder.write(b"\xfb" + value.bits)  # major type 7, 64-bit float


def _dumps(obj: Any) -> bytes:
    return cbor2.dumps(obj, indefinite_containers=True, default=_encode_nan)


def ser_of_array(payload: bytes, path: str, depth: int) -> bytes:
    """CBOR of a serialized ArrayValue, the payload of ``AnyValue.array_value`` at `path`, whose
    AnyValue is at message level `depth` of the request."""
    return _ser_of(ArrayValue, _array_to_py, payload, path, depth)


def ser_of_kvlist(payload: bytes, path: str, depth: int) -> bytes:
    """CBOR of a serialized KeyValueList, the payload of ``AnyValue.kvlist_value`` at `path`, whose
    AnyValue is at message level `depth` of the request."""
    return _ser_of(KeyValueList, _map_to_py, payload, path, depth)


def _ser_of(message_type: Any, to_py: Callable[[Any, str, int], Any], payload: bytes, path: str, depth: int) -> bytes:
    message = _parse(message_type, payload, path, depth)
    try:
        return _dumps(to_py(message, path, depth + 1))
    except _TooDeep:
        raise _too_deep(_deepest(message, depth + 1), path) from None


def _too_deep(deepest: int | str, path: str) -> ConversionError:
    return ConversionError(
        f"nested Slice/Map value puts a message at depth {deepest} of the export request; protobuf "
        f"parses at most {MAX_MESSAGE_DEPTH} levels, so to_otlp could not emit it",
        path,
    )


def _parse(cls: Any, payload: bytes, path: str, depth: int) -> Any:
    try:
        return cls.FromString(payload)
    except Exception as exc:  # upb raises google.protobuf.message.DecodeError
        if "MaxDepth" in str(exc):  # deeper than upb parses even from this payload's own root
            raise _too_deep(f"{depth + 2 + MAX_MESSAGE_DEPTH} or more", path) from None
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
