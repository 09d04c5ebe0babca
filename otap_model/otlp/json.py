"""OTLP/JSON <-> OTAP.

OTLP/JSON is the proto3 JSON mapping with one difference: trace and span ids are hex strings,
not base64. Keys may be lowerCamelCase or the original snake_case, int64 values strings or
numbers, enums integers or names; unknown fields are ignored, as the OTLP spec requires of
receivers. The request is parsed with ``google.protobuf.json_format`` after rewriting the ids,
then converted like any protobuf request.

Keys of fields older OTLP versions had and the current protos reserve are not ignored, as the
protobuf decoder does not ignore their field numbers (wire.py): ``instrumentationLibrarySpans`` /
``Logs`` / ``Metrics`` (before OTLP 0.19) are read as the ScopeX list, their
``instrumentationLibrary`` as its ``scope`` and, in logs before OTLP 0.12, ``logs`` as its
``logRecords``, when the resource has no ScopeX; they are dropped as its duplicate copy
otherwise (OTLP 0.15-0.18 ask that of JSON receivers). A log record's ``name`` and a metric's
``intGauge`` / ``intSum`` / ``intHistogram`` are refused with the decoder's message. A span
status's ``deprecatedCode`` (OTLP 0.6-0.11) is read by the receiver rule of those protos: with
``code`` UNSET, any value but ``DEPRECATED_STATUS_CODE_OK`` (0) makes the code ERROR.
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
from .wire import ERR_REJECTED, ERROR_TEXT, MESSAGES, T

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


# per signal: the ScopeX keys, the legacy InstrumentationLibraryX keys (ResourceX field 1000 in
# OTLP 0.15-0.18, the ScopeX list's own name before), the item list keys
_SCOPE_KEYS = {
    Signal.LOGS: (("scopeLogs", "scope_logs"), ("instrumentationLibraryLogs", "instrumentation_library_logs"),
                  ("logRecords", "log_records")),
    Signal.TRACES: (("scopeSpans", "scope_spans"), ("instrumentationLibrarySpans", "instrumentation_library_spans"),
                    ("spans",)),
    Signal.METRICS: (("scopeMetrics", "scope_metrics"),
                     ("instrumentationLibraryMetrics", "instrumentation_library_metrics"), ("metrics",)),
}
_LIBRARY_KEYS = ("instrumentationLibrary", "instrumentation_library")
# keys of a log record / metric that the current protos reserve -> the wire.py field (its note says what it was)
_REMOVED_KEYS = {
    Signal.LOGS: {"name": MESSAGES[T.LOG][4]},
    Signal.METRICS: {
        key: MESSAGES[T.METRIC][number]
        for number, keys in ((4, ("intGauge", "int_gauge")), (6, ("intSum", "int_sum")), (8, ("intHistogram", "int_histogram")))
        for key in keys
    },
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
    _legacy(doc, sig)
    try:
        _prepare(doc, "")
        _adopt_legacy(doc, sig)
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


def _resources(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, object) of every ResourceX object of the request; anything not shaped like a request
    is left to json_format to refuse."""
    return [
        (f"{root}[{i}]", rx)
        for root, resources in doc.items()
        if root in _ROOT_KEYS and isinstance(resources, list)
        for i, rx in enumerate(resources)
        if isinstance(rx, dict)
    ]


def _legacy(doc: dict[str, Any], sig: Signal) -> None:
    """The legacy keys of the module docstring, in place: an InstrumentationLibraryX list beside a
    ScopeX list is dropped (the other one stays for `_adopt_legacy`), and a removed field's key is
    refused in the lists that are read."""
    scope_keys, legacy_keys, item_keys = _SCOPE_KEYS[sig]
    for where, rx in _resources(doc):
        present = [k for k in legacy_keys if k in rx]
        if len(present) > 1:
            raise ConversionError(f"invalid OTLP/JSON: {' and '.join(present)} name the same field", where)
        scopes = [(k, rx[k], item_keys) for k in scope_keys if k in rx]
        if present:
            key, entries = present[0], rx[present[0]]
            if entries is None or any(v is not None and v != [] for _, v, _ in scopes):
                del rx[key]  # the duplicate copy of a double-publishing sender, or nothing
            elif not isinstance(entries, list):
                raise ConversionError(f"invalid OTLP/JSON: expected a list, got {type(entries).__name__}", f"{where}.{key}")
            else:
                scopes = [(key, entries, (*item_keys, "logs") if sig is Signal.LOGS else item_keys)]
        for key, entries, keys in scopes:
            for j, sx in enumerate(entries if isinstance(entries, list) else ()):
                _refuse_removed(sx, sig, keys, f"{where}.{key}[{j}]")
                if sig is Signal.TRACES:
                    _deprecated_status_codes(sx, f"{where}.{key}[{j}]")


def _adopt_legacy(doc: dict[str, Any], sig: Signal) -> None:
    """The InstrumentationLibraryX lists `_legacy` kept become the ScopeX lists (after `_prepare`,
    so that its error paths name the keys of the request)."""
    scope_keys, legacy_keys, item_keys = _SCOPE_KEYS[sig]
    for where, rx in _resources(doc):
        for key in legacy_keys:
            if key in rx:
                entries = rx.pop(key)
                for k in scope_keys:
                    rx.pop(k, None)  # null or empty
                rx[scope_keys[0]] = [_scope_of_library(e, item_keys, f"{where}.{key}[{j}]") for j, e in enumerate(entries)]


def _scope_of_library(entry: Any, item_keys: tuple[str, ...], where: str) -> Any:
    """An InstrumentationLibraryX JSON object as the ScopeX it is on the wire: its
    `instrumentationLibrary` is the `scope`, and for logs before OTLP 0.12 `logs` the `logRecords`."""
    if not isinstance(entry, dict):
        return entry
    out = dict(entry)
    renames: list[tuple[tuple[str, ...], tuple[str, ...]]] = [(_LIBRARY_KEYS, ("scope",))]
    if item_keys[0] == "logRecords":
        renames.append((("logs",), item_keys))
    for old_keys, new_keys in renames:
        present = [k for k in (*old_keys, *new_keys) if k in entry]
        if len(present) > 1:
            raise ConversionError(f"invalid OTLP/JSON: {' and '.join(present)} name the same field", where)
        if present and present[0] in old_keys:
            out[new_keys[0]] = out.pop(present[0])
    return out


def _refuse_removed(sx: Any, sig: Signal, item_keys: tuple[str, ...], where: str) -> None:
    """A log record's or metric's key of a removed field (not null) is refused, saying what it was;
    `item_keys` are the keys the scope's items may be under."""
    removed = _REMOVED_KEYS.get(sig)
    if not removed or not isinstance(sx, dict):
        return
    for key in item_keys:
        items = sx.get(key)
        for k, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, dict):
                continue
            for name, field in removed.items():
                if item.get(name) is not None:
                    raise ConversionError(f"{ERROR_TEXT[ERR_REJECTED]}: {field.note}", f"{where}.{key}[{k}].{name}")


def _deprecated_status_codes(sx: Any, where: str) -> None:
    """The receiver rule of the OTLP 0.6-0.11 protos for `Status.deprecated_code` (a key the
    current protos no longer have), in place: if `code` is STATUS_CODE_UNSET (absent, null, 0 or
    the name) and `deprecatedCode` is not DEPRECATED_STATUS_CODE_OK, `code` becomes
    STATUS_CODE_ERROR; a code other than UNSET is the sole carrier of the status."""
    spans = sx.get("spans") if isinstance(sx, dict) else None
    for k, span in enumerate(spans if isinstance(spans, list) else ()):
        status = span.get("status") if isinstance(span, dict) else None
        if not isinstance(status, dict):
            continue
        present = [key for key in _DEPRECATED_CODE_KEYS if status.get(key) is not None]
        if len(present) > 1:
            raise ConversionError(
                f"invalid OTLP/JSON: {' and '.join(present)} name the same field", f"{where}.spans[{k}].status"
            )
        if not present:
            continue
        deprecated = _enum_number(status[present[0]], _DEPRECATED_STATUS_CODES, f"{where}.spans[{k}].status.{present[0]}")
        if deprecated != 0 and _is_unset(status.get("code")):
            status["code"] = Status.STATUS_CODE_ERROR


_DEPRECATED_CODE_KEYS = ("deprecatedCode", "deprecated_code")
# Status.DeprecatedStatusCode of OTLP 0.6-0.11 (the gRPC codes): only OK (0) is not an error
_DEPRECATED_STATUS_CODES = {
    "DEPRECATED_STATUS_CODE_" + name: number
    for number, name in enumerate(
        (
            "OK", "CANCELLED", "UNKNOWN_ERROR", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
            "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
            "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL_ERROR", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
        )
    )
}


def _enum_number(value: Any, names: dict[str, int], where: str) -> int:
    """An enum value given by its name or as an int32 number (an integral JSON number);
    ConversionError otherwise (a numeric string too, as `_prepare` refuses for the current enums)."""
    number = None
    if isinstance(value, str):
        number = names.get(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or not -(1 << 31) <= number < 1 << 31:
        raise ConversionError(f"unknown enum value {value!r}", where)
    return number


def _is_unset(code: Any) -> bool:
    """Whether a status `code` value reads as STATUS_CODE_UNSET to json_format (its name, or a
    number int() makes 0); any other value, invalid ones included, is left to `_prepare` and
    json_format."""
    if code is None or code == "STATUS_CODE_UNSET":
        return True
    try:
        return not isinstance(code, str) and int(code) == 0
    except (TypeError, ValueError, OverflowError):
        return False


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
