"""OTLP/JSON <-> OTAP.

OTLP/JSON is the proto3 JSON mapping with one difference: trace and span ids are hex strings,
not base64. Keys may be lowerCamelCase or the original snake_case, int64 values strings or
numbers, enums integers or names; unknown fields are ignored, as the OTLP spec requires of
receivers. The request is parsed with ``google.protobuf.json_format`` after rewriting the ids,
then converted like any protobuf request.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..bundle import OtapBundle
from ..errors import ConversionError
from ..payload import Signal
from .anyvalue import MAX_MESSAGE_DEPTH
from .decode import REQUEST_TYPES, as_signal, from_otlp
from .encode import to_otlp

ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})
# enum fields by JSON key (both spellings): the value names json_format accepts
_ENUMS = {
    key: frozenset(enum.keys())
    for keys, enum in (
        (("severityNumber", "severity_number"), SeverityNumber),
        (("kind",), Span.SpanKind),
        (("code",), Status.StatusCode),
        (("aggregationTemporality", "aggregation_temporality"), AggregationTemporality),
    )
    for key in keys
}
_ROOT_KEYS = {
    "resourceLogs": Signal.LOGS,
    "resource_logs": Signal.LOGS,
    "resourceSpans": Signal.TRACES,
    "resource_spans": Signal.TRACES,
    "resourceMetrics": Signal.METRICS,
    "resource_metrics": Signal.METRICS,
}


def from_otlp_json(document: str | bytes | bytearray | dict[str, Any], signal: Signal | str | None = None) -> OtapBundle:
    """Convert an OTLP/JSON export request (its text, or the object `json.loads` made of it) to an
    OtapBundle (signal inferred from the root key)."""
    return from_otlp(otlp_json_to_message(document, signal))


def to_otlp_json(bundle: OtapBundle) -> str:
    """The bundle as an OTLP/JSON request (hex ids, camelCase keys, int64 as strings, enums as ints)."""
    doc = json_format.MessageToDict(to_otlp(bundle), use_integers_for_enums=True)
    _ids_to_hex(doc)
    return json.dumps(doc)


def load_json(document: Any, expected: str, too_deep: ConversionError | None = None) -> Any:
    """The parsed JSON of text or bytes; an already parsed document (dict or list) as it is.
    `expected` names the input in the error; `too_deep` replaces the error for nesting past
    Python's recursion limit."""
    if isinstance(document, (dict, list)):
        return document
    if not isinstance(document, (str, bytes, bytearray, memoryview)):
        path = ", a path: pass the file's contents (path.read_bytes())" if isinstance(document, os.PathLike) else ""
        raise ConversionError(
            f"expected {expected} as str or bytes (or the object json.loads made of it), got {type(document).__name__}{path}"
        )
    try:
        return json.loads(bytes(document) if isinstance(document, memoryview) else document)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConversionError(f"invalid JSON: {exc}{_path_hint(document)}") from None
    except RecursionError:
        raise too_deep or ConversionError(f"invalid {expected}: nested deeper than Python's JSON parser goes") from None


def _path_hint(document: str | bytes | bytearray | memoryview) -> str:
    """A str that is not JSON but names a file was most likely meant as the file (as
    pandas.read_json takes a path): say to pass its contents."""
    if isinstance(document, str) and len(document) < 4096 and "\n" not in document and os.path.isfile(document):
        return f"; the str names a file: pass its contents (pathlib.Path({document!r}).read_bytes())"
    return ""


def otlp_json_to_message(document: str | bytes | bytearray | dict[str, Any], signal: Signal | str | None = None) -> Any:
    """Parse OTLP/JSON (text or a parsed object) into the protobuf request message (hex ids accepted)."""
    doc = load_json(document, "OTLP/JSON", _too_deep())
    if doc is document:  # _prepare rewrites the ids in place: never the caller's object
        try:
            doc = copy.deepcopy(doc)
        except RecursionError:
            raise _too_deep() from None
    if not isinstance(doc, dict):
        raise ConversionError(f"an OTLP/JSON request is a JSON object, got {type(doc).__name__}")
    sig = _signal(doc, signal)
    try:
        _prepare(doc, "")
        # json_format's own limit (100, the request counting as 1) is one level below protobuf's; a
        # looser one lets from_otlp name the depth and the field of anything protobuf could not parse.
        return json_format.ParseDict(
            doc, REQUEST_TYPES[sig](), ignore_unknown_fields=True, max_recursion_depth=_JSON_DEPTH
        )
    except json_format.ParseError as exc:
        if "Message too deep" in str(exc):
            raise _too_deep() from None
        raise ConversionError(f"invalid OTLP/JSON: {exc}") from None
    except RecursionError:
        raise _too_deep() from None


_JSON_DEPTH = 2 * MAX_MESSAGE_DEPTH


def _too_deep() -> ConversionError:
    return ConversionError(
        f"invalid OTLP/JSON: messages nest deeper than {_JSON_DEPTH} levels (or the JSON deeper than Python's "
        f"parser goes); protobuf parses at most {MAX_MESSAGE_DEPTH} message levels below the request"
    )


def named_signals(document: str | bytes | bytearray | memoryview) -> set[Signal]:
    """The signals whose root keys (``resourceLogs``, ``resourceSpans``, ``resourceMetrics``, or
    their snake_case spellings) an OTLP/JSON request names, whatever the rest of it holds; empty
    for text that is no JSON object."""
    try:
        doc = load_json(document, "OTLP/JSON")
    except ConversionError:
        return set()
    return set(_roots(doc).values()) if isinstance(doc, dict) else set()


def _roots(doc: dict[str, Any]) -> dict[str, Signal]:
    return {k: _ROOT_KEYS[k] for k in doc if k in _ROOT_KEYS}


def _signal(doc: dict[str, Any], signal: Signal | str | None) -> Signal:
    """The request's signal: from its root key, which must agree with `signal` when given (unknown
    fields are ignored, so a root key of another signal would otherwise vanish without a word)."""
    roots = _roots(doc)
    if len(set(roots.values())) > 1:
        raise ConversionError(f"the request holds several signals ({', '.join(roots)}); an OTLP request holds one")
    if signal is not None:
        sig = as_signal(signal)
        other = sorted(k for k, s in roots.items() if s is not sig)
        if other:
            raise ConversionError(
                f"signal={sig.value} but the request holds {', '.join(other)} "
                f"({', '.join(sorted({roots[k].value for k in other}))}); its data would be dropped"
            )
        return sig
    if not roots:
        raise ConversionError(
            "cannot infer the signal: the request names none (no resourceLogs, resourceSpans or resourceMetrics); "
            "pass signal="
        )
    return next(iter(roots.values()))


def _prepare(node: Any, path: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else key
            if key in ID_KEYS and isinstance(value, str):
                try:
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise ConversionError(f"{value!r} is not a hex-encoded id", where) from None
            elif key in _ENUMS and isinstance(value, str) and value not in _ENUMS[key]:
                raise ConversionError(f"unknown enum value {value!r}", where)
            else:
                _prepare(value, where)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _prepare(item, f"{path}[{i}]")


def _ids_to_hex(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)
