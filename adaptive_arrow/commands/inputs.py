"""Telemetry input files of `encode` and `bench`: OTLP protobuf, OTLP/JSON or Zipkin v2 JSON.

``--input-format auto`` picks the format by suffix (``.json``, ``.jsonl``: JSON, ``.pb``: protobuf),
then by content (a first non-blank byte ``{`` is OTLP/JSON, ``[`` Zipkin JSON, anything else
protobuf); JSON is OTLP/JSON unless it is a list (Zipkin). No OTLP request starts with ``{`` or
``[``, so a protobuf parse failure of such a file says it looks like JSON.

A protobuf or Zipkin file is one request. An OTLP/JSON file is one request, or JSON Lines: one
request per line, as the OpenTelemetry Collector's ``file`` exporter writes them and its
``otlpjsonfile`` receiver reads them (a file of two or more non-blank lines whose first line is a
whole JSON object on its own; a pretty-printed request's first line never is).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from otap_model import ConversionError, OtapBundle, Signal, from_otlp, from_otlp_json, from_zipkin_json

INPUT_FORMATS = ("auto", "otlp-proto", "otlp-json", "zipkin-json")
LABELS = {"otlp-proto": "OTLP protobuf", "otlp-json": "OTLP/JSON", "zipkin-json": "Zipkin JSON"}
JSON_SUFFIXES = (".json", ".jsonl")


class InputError(Exception):
    """An input file is missing, not a regular file, or not telemetry of the format and signal asked
    for; the message starts with the file name."""


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-format", choices=INPUT_FORMATS, default="auto",
                        help="format of the input files; auto: by suffix (.json, .pb), then by content")


def check_files(paths: list[Path]) -> None:
    """Every path names an existing regular file (checked before any work starts)."""
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not path.is_file():
            raise InputError(f"{path}: not a regular file" + (" (a directory)" if path.is_dir() else ""))


def _first(data: bytes) -> bytes:
    stripped = data.lstrip(b" \t\r\n\xef\xbb\xbf")
    return stripped[:1]


def detect_format(path: Path, data: bytes, input_format: str) -> str:
    """The format `input_format` means for this file (``auto`` resolved)."""
    if input_format != "auto":
        return input_format
    suffix = path.suffix.lower()
    if suffix == ".pb":
        return "otlp-proto"
    first = _first(data)
    if suffix in JSON_SUFFIXES or first in (b"{", b"["):
        return "zipkin-json" if first == b"[" else "otlp-json"
    return "otlp-proto"


def to_bundles(path: Path, data: bytes, input_format: str, signal: str | None) -> Iterator[tuple[str, OtapBundle]]:
    """Each request of the file as an OtapBundle, with the file's format: one, or one per line of an
    OTLP/JSON Lines file, all of one signal (`signal`, or without it that of the first request).
    InputError as to_bundle raises it, naming the line of a JSON Lines file."""
    fmt = detect_format(path, data, input_format)
    lines = json_lines(data) if fmt == "otlp-json" else None
    if lines is None:
        yield to_bundle(path, data, fmt, signal)
        return
    first = None  # line number whose request named the signal, when `signal` did not
    for number, line in lines:
        where = f"{path} line {number} (read as OTLP/JSON Lines)"
        try:
            bundle = from_otlp_json(line, signal=signal)
        except ConversionError as exc:
            mismatch = first is not None and str(exc).startswith(f"signal={signal} but")
            origin = f" (every line must hold {signal}, the signal of line {first})" if mismatch else ""
            raise InputError(f"{where}: {exc}{origin}") from None
        if signal is None:
            signal, first = bundle.signal.value, number
        yield fmt, bundle


def json_lines(data: bytes) -> list[tuple[int, bytes]] | None:
    """The non-blank lines (1-based number, text) of an OTLP/JSON file written as JSON Lines; None
    for a file holding a single JSON document."""
    lines = [(number, line) for number, line in enumerate(data.split(b"\n"), 1) if line.strip(b" \t\r\xef\xbb\xbf")]
    if len(lines) < 2:
        return None
    try:
        return lines if isinstance(json.loads(lines[0][1]), dict) else None
    except (ValueError, UnicodeDecodeError):
        return None


def to_bundle(path: Path, data: bytes, input_format: str, signal: str | None) -> tuple[str, OtapBundle]:
    """The file's format and its records as an OtapBundle; InputError naming the file, the format it
    was read as and, where one is likely, the mistake (a JSON file read as protobuf, another signal)."""
    fmt = detect_format(path, data, input_format)
    where = f"{path} (read as {LABELS[fmt]})"
    if not (data if fmt == "otlp-proto" else _first(data)):  # empty (JSON: or blank) = empty request
        if signal is None:
            raise InputError(f"{where}: an empty request holds no records to tell its signal by; pass --signal")
        return fmt, from_otlp(b"", signal=signal)
    try:
        if fmt == "otlp-json":
            return fmt, from_otlp_json(data, signal=signal)
        if fmt == "zipkin-json":
            bundle = from_zipkin_json(data)
            if signal is not None and Signal(signal) is not bundle.signal:
                raise InputError(f"{where}: Zipkin spans are traces, not {signal}")
            return fmt, bundle
        if signal is None:
            return fmt, _infer(data, where)
        return fmt, from_otlp(data, signal=signal)
    except ConversionError as exc:
        raise InputError(f"{where}: {exc}{_hint(data, fmt)}") from None


def _infer(data: bytes, where: str) -> OtapBundle:
    from otap_model.otlp.decode import infer_signal

    try:
        signal = infer_signal(data)
    except ConversionError:
        hint = _hint(data, "otlp-proto")
        raise InputError(f"{where}: not one Export{{Logs,Trace,Metrics}}ServiceRequest of a single signal{hint}") from None
    return from_otlp(data, signal=signal)


def _hint(data: bytes, fmt: str) -> str:
    """A JSON file read as protobuf fails on some odd field; say what it is. (from_otlp itself says
    when the bytes hold another signal than --signal names.)"""
    first = _first(data)
    if fmt != "otlp-proto" or first not in (b"{", b"["):
        return ""
    return f"; the file looks like JSON: pass --input-format {'otlp-json' if first == b'{' else 'zipkin-json'}"
