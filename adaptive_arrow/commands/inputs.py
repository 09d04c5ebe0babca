"""Telemetry input files of `encode` and `bench`: the export requests a file holds.

A file holds one request or several:

* OTLP protobuf: one ``Export{Logs,Trace,Metrics}ServiceRequest`` (as ``generate`` writes them);
* OTLP/JSON: one request, or JSON Lines, one request per line (the OTLP file exporter
  specification; the Collector's ``file`` exporter with ``format: json``);
* Zipkin v2 JSON: one span list (traces);
* the Collector's ``file`` exporter with ``format: proto`` or with ``compression: zstd``: each
  request preceded by its length as a big-endian u32 (each one zstd-compressed under
  ``compression``); with its native compression the whole file is one zstd stream.

A file starting with the zstd magic is decompressed first. A file that length-prefixed frames
tile exactly, each holding a request (protobuf: first byte 0x0a; OTLP/JSON: ``{``; a zstd frame;
or nothing, the empty request), is read frame by frame; no single request parses as such frames
(a protobuf request starts with 0x0a, so its first frame would claim over 160 MiB). Otherwise
``--input-format auto`` picks the format by suffix (``.json``, ``.jsonl``: JSON, ``.pb``:
protobuf), then by content (a first non-blank byte ``{`` is OTLP/JSON, ``[`` Zipkin JSON, anything
else protobuf); JSON is OTLP/JSON unless it is a list (Zipkin). No OTLP request starts with ``{``
or ``[``, so a protobuf parse failure of such a file says it looks like JSON; a JSON parse failure
of bytes that parse as a protobuf request says that, and a protobuf parse failure of an OTAP
envelope file (encode's output) says so. An OTLP/JSON file of two or more non-blank lines whose
first line is a whole JSON object is JSON Lines (a pretty-printed request's first line never is).
"""

from __future__ import annotations

import argparse
import io
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import zstandard

from otap_model import ConversionError, OtapBundle, Signal, from_otlp, from_otlp_json, from_zipkin_json

INPUT_FORMATS = ("auto", "otlp-proto", "otlp-json", "zipkin-json")
LABELS = {"otlp-proto": "OTLP protobuf", "otlp-json": "OTLP/JSON", "zipkin-json": "Zipkin JSON"}
JSON_SUFFIXES = (".json", ".jsonl")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LENGTH = struct.Struct(">I")
_REQUEST_STARTS = (b"\x0a", b"{", ZSTD_MAGIC[:1])  # first byte of a framed request: protobuf field 1, JSON, zstd


class InputError(Exception):
    """An input file is missing, not a regular file, or not telemetry of the format and signal asked
    for; the message starts with the file name."""


class OtherSignal(InputError):
    """A request of another signal than the one asked for (--signal, or that of an earlier request);
    `held` is the signal it holds. The command says what to do about it."""

    def __init__(self, message: str, held: str) -> None:
        super().__init__(message)
        self.held = held


class UnknownSignal(InputError):
    """An empty request and no signal given: nothing in it tells its signal. The command says what
    to do about it (encode has --signal, bench has none)."""


class UnrecognisedRequest(InputError):
    """No signal given, and the request reads as that of none: protobuf that parses cleanly as no
    request type or as several, or an OTLP/JSON object naming no signal whose content does not read
    as a request either. The command says what to do about it (encode has --signal, bench has none)."""


@dataclass(frozen=True)
class Request:
    """One export request of an input file, as bytes of its format."""

    fmt: str  # otlp-proto, otlp-json or zipkin-json
    data: bytes
    where: str  # the file, and the line or message within it when it holds several
    read_as: str  # the format and how it was cut out of the file, for error messages

    @property
    def label(self) -> str:
        return f"{self.where} (read as {self.read_as})"


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-format", choices=INPUT_FORMATS, default="auto",
                        help="format of the input files' requests; auto: by suffix (.json, .jsonl, .pb), then by "
                             "content. Collector file-exporter files (length-prefixed, zstd) are recognised by content")


def check_files(paths: list[Path]) -> None:
    """Every path names an existing regular file (checked before any work starts)."""
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not path.is_file():
            what = f" (a directory); pass the files in it, such as {path / '*'}" if path.is_dir() else ""
            raise InputError(f"{path}: not a regular file{what}")


def read_input(path: Path) -> bytes:
    """The file's bytes. An OSError from reading (not opening) carries no file name of its own;
    it gets this one, so the message names the input and not the output."""
    try:
        return path.read_bytes()
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


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


def requests(path: Path, data: bytes, input_format: str) -> Iterator[Request]:
    """The export requests of one input file, in file order (see the module docstring)."""
    compressed = data[:4] == ZSTD_MAGIC
    zstd = ", zstd file" if compressed else ""
    if compressed:
        data = unzstd(data, str(path))
    frames = length_prefixed(data)
    if frames is not None:
        for number, payload in enumerate(frames, 1):
            where = f"{path} message {number}"
            if payload[:4] == ZSTD_MAGIC:
                payload = unzstd(payload, where)
            fmt = input_format if input_format != "auto" else ("otlp-json" if _first(payload) == b"{" else "otlp-proto")
            yield Request(fmt, payload, where, f"{LABELS[fmt]}{zstd}, length-prefixed")
        return
    fmt = detect_format(path, data, input_format)
    lines = json_lines(data) if fmt == "otlp-json" else None
    if lines is None:
        yield Request(fmt, data, str(path), f"{LABELS[fmt]}{zstd}")
        return
    for number, line in lines:
        yield Request(fmt, line, f"{path} line {number}", f"OTLP/JSON Lines{zstd}")


def unzstd(data: bytes, where: str) -> bytes:
    """Every zstd frame of `data`, decompressed; InputError for damaged or truncated data."""
    decompressor = zstandard.ZstdDecompressor()
    out = []
    while data:
        frame = decompressor.decompressobj()
        try:
            out.append(frame.decompress(data))
        except zstandard.ZstdError as exc:
            raise InputError(f"{where}: zstd-compressed data that does not decompress ({exc})") from None
        if not frame.eof:
            raise InputError(f"{where}: zstd-compressed data that ends inside a frame (truncated?)")
        data = frame.unused_data
    return b"".join(out)


def length_prefixed(data: bytes) -> list[bytes] | None:
    """The requests of a file written as big-endian u32 length + request, the Collector file
    exporter's framing; None unless such frames tile `data` exactly, each holding a request."""
    frames, at = [], 0
    while at < len(data):
        if at + _LENGTH.size > len(data):
            return None
        (length,) = _LENGTH.unpack_from(data, at)
        payload = data[at + _LENGTH.size : at + _LENGTH.size + length]
        if len(payload) < length or (payload and payload[:1] not in _REQUEST_STARTS):
            return None
        frames.append(payload)
        at += _LENGTH.size + length
    return frames or None


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


def to_bundles(path: Path, data: bytes, input_format: str, signal: str | None) -> Iterator[tuple[Request, OtapBundle]]:
    """Each request of the file with its records as an OtapBundle, all of one signal (`signal`, or
    without it that of the file's first request). InputError naming the file (and the line or
    message), the format it was read as and, where one is likely, the mistake."""
    first = None  # the request whose content named the signal, when `signal` did not
    for request in requests(path, data, input_format):
        try:
            bundle = to_bundle(request, signal)
        except OtherSignal as exc:
            if first is None:
                raise
            raise OtherSignal(f"{exc} (every request must hold {signal}, the signal of {first.where}); "
                              f"split {path} into one file per signal", exc.held) from None
        if signal is None:
            signal, first = bundle.signal.value, request
        yield request, bundle


def to_bundle(request: Request, signal: str | None) -> OtapBundle:
    """One request's records; InputError naming where it is, the format it was read as and, where
    one is likely, the mistake (a JSON file read as protobuf; OtherSignal: a request of another
    signal, in the command's words, not the converters' ``signal=`` argument)."""
    fmt, data, where = request.fmt, request.data, request.label
    if not (data if fmt == "otlp-proto" else _first(data)):  # empty (JSON: or blank) = empty request
        if signal is None:
            raise UnknownSignal(f"{where}: an empty request holds no records to tell its signal by")
        return from_otlp(b"", signal=signal)
    try:
        if fmt == "otlp-json":
            return from_otlp_json(data, signal=signal)
        if fmt == "zipkin-json":
            bundle = from_zipkin_json(data)
            if signal is not None and Signal(signal) is not bundle.signal:
                raise OtherSignal(f"{where}: Zipkin spans are traces, not {signal}", bundle.signal.value)
            return bundle
        if signal is None:
            return _infer(data, where)
        return from_otlp(data, signal=signal)
    except ConversionError as exc:
        if signal is None and fmt == "otlp-json" and _names_no_signal(data):
            problem = _unnamed_problem(data)
            if problem is None:  # such as {}, as decode writes it
                raise UnknownSignal(f"{where}: an empty request holds no records to tell its signal by") from None
            raise UnrecognisedRequest(f"{where}: the request names no signal (no resourceLogs, resourceSpans or "
                                      f"resourceMetrics key) and does not read as an OTLP/JSON request ({problem})") from None
        held = _signal_held(request) if signal is not None else None
        if held is not None and held != signal:
            raise OtherSignal(f"{where}: the request holds {held}, not {signal}", held) from None
        raise InputError(f"{where}: {exc}{_hint(data, fmt)}") from None


def _signal_held(request: Request) -> str | None:
    """The one signal a request that failed to convert as another one holds: for OTLP/JSON the one
    its root keys name (its content may be bad too: --signal is the first thing to put right),
    otherwise the one it converts as without a signal; None when it tells none."""
    from otap_model.otlp.json import named_signals

    if request.fmt == "otlp-json":
        named = named_signals(request.data)
        return named.pop().value if len(named) == 1 else None
    try:
        return to_bundle(request, None).signal.value
    except InputError:
        return None


def _names_no_signal(data: bytes) -> bool:
    """An OTLP/JSON object without a resourceLogs, resourceSpans or resourceMetrics key (nor their
    snake_case spellings), which the converter asks a signal for."""
    from otap_model.otlp.json import named_signals

    try:
        return isinstance(json.loads(data), dict) and not named_signals(data)
    except (ValueError, RecursionError):  # no JSON: the converter's own message says so
        return False


def _unnamed_problem(data: bytes) -> ConversionError | None:
    """Why an OTLP/JSON object naming no signal does not read as a request, or None when it reads
    as one without records. Read as logs: without a root key the signal changes nothing."""
    try:
        from_otlp_json(data, signal="logs")
    except ConversionError as exc:
        return exc
    return None


def _infer(data: bytes, where: str) -> OtapBundle:
    from otap_model.otlp.decode import infer_signal

    try:
        signal = infer_signal(data)
    except ConversionError:
        message = f"{where}: not one Export{{Logs,Trace,Metrics}}ServiceRequest of a single signal"
        hint = _hint(data, "otlp-proto")
        if hint:
            raise InputError(message + hint) from None
        raise UnrecognisedRequest(f"{message} (requests of several signals joined in one file read as none: give "
                                  "each its own file)") from None
    return from_otlp(data, signal=signal)


def _hint(data: bytes, fmt: str) -> str:
    """A file read in the wrong format fails on some odd field or byte; say what it looks like: JSON
    read as protobuf, a protobuf request read as JSON, or an OTAP envelope file (encode's output)
    given as input. (A request of another signal is OtherSignal, raised by to_bundle.)"""
    from otap_model.otlp.decode import infer_signal

    first = _first(data)
    if fmt == "otlp-proto" and first in (b"{", b"["):
        return f"; the file looks like JSON: pass --input-format {'otlp-json' if first == b'{' else 'zipkin-json'}"
    if fmt != "otlp-proto" and data[:1] == b"\x0a":  # field 1, what every serialized non-empty request starts with
        try:
            signal = infer_signal(data)
        except ConversionError:
            return ""
        return f"; the file looks like an OTLP {signal.value} request in protobuf: pass --input-format otlp-proto"
    if fmt == "otlp-proto" and is_envelope_file(data):
        return "; the file is an OTAP envelope file (adaptive-arrow encode's output): read it with adaptive-arrow decode"
    return ""


def is_envelope_file(data: bytes) -> bool:
    """Whether `data` is a whole OTAP envelope file (adaptive_arrow.envelope_file) whose first message
    carries payloads: a likelier reading than a damaged request when protobuf parsing failed."""
    from ..envelope import BatchArrowRecords
    from ..envelope_file import read_envelopes
    from ..errors import AdaptiveArrowError

    try:
        messages = list(read_envelopes(io.BytesIO(data)))
        return bool(messages) and bool(BatchArrowRecords.from_bytes(messages[0]).payloads)
    except AdaptiveArrowError:
        return False
