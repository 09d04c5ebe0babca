"""Our OTAP bytes read by an independent implementation: Apache Arrow JS and protobufjs (Node.js).

Each test encodes a stream, writes an OTAP envelope file, has ``node interop/js/read_otap.mjs FILE tests/fixtures/arrow_service.proto``
read it, and compares its JSON with the same JSON built here from the same bytes with our envelope
parser and ``pyarrow.ipc.open_stream``: every envelope, payload, row and value, and every stream's
schema (names, types, nullability, metadata). Value conventions are in read_otap.mjs.

Every generated-stream and sample case runs twice: with uncompressed IPC and with zstd IPC body
compression (``adaptive-arrow encode``'s and the Spark path's setting). Arrow JS has no zstd codec
of its own: read_otap.mjs registers the pure-JS decoder fzstd (pinned in interop/js/package.json).
Each case first checks, from the IPC messages' flatbuffer metadata, that every record and
dictionary batch carries (zstd) or lacks (uncompressed) the BodyCompression field.

Node.js is required: without ``node`` on PATH (or without interop/js/node_modules, which
``make test`` installs with ``npm ci``) these tests fail, they do not skip.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import struct
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import otap_model
from adaptive_arrow import Encoder, EncoderConfig
from adaptive_arrow.envelope import BatchArrowRecords
from adaptive_arrow.envelope_file import write_envelopes
from otap_model import OtapBundle, Signal
from otap_model.generator import generate_otlp

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "interop" / "js"
PROTO = ROOT / "tests" / "fixtures" / "arrow_service.proto"
DATA = ROOT.parent / "shared" / "data"


# -- the JSON view, built from the bytes with our parser and pyarrow ------------------------------
_UNITS = {"s": "SECOND", "ms": "MILLISECOND", "us": "MICROSECOND", "ns": "NANOSECOND"}


def _type_name(t: pa.DataType) -> str:
    """Arrow JS's name of a type (``DataType.toString``); structs and lists list their children."""
    if pa.types.is_dictionary(t):
        return f"Dictionary<{_type_name(t.index_type)}, {_type_name(t.value_type)}>" + (" ordered" if t.ordered else "")
    if pa.types.is_integer(t):
        return f"{'I' if pa.types.is_signed_integer(t) else 'Ui'}nt{t.bit_width}"
    if pa.types.is_floating(t):
        return f"Float{t.bit_width}"
    if pa.types.is_timestamp(t):
        return f"Timestamp<{_UNITS[t.unit]}{', ' + t.tz if t.tz else ''}>"
    if pa.types.is_duration(t):
        return f"Duration<{_UNITS[t.unit]}>"
    if pa.types.is_fixed_size_binary(t):
        return f"FixedSizeBinary[{t.byte_width}]"
    names = {pa.string(): "Utf8", pa.large_string(): "LargeUtf8", pa.binary(): "Binary",
             pa.large_binary(): "LargeBinary", pa.bool_(): "Bool"}
    if t in names:
        return names[t]
    if pa.types.is_struct(t):
        return "Struct"
    if pa.types.is_list(t):
        return "List"
    raise AssertionError(f"no Arrow JS name for {t}")


def _field(f: pa.Field) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": f.name,
        "type": _type_name(f.type),
        "nullable": f.nullable,
        "metadata": {k.decode(): v.decode() for k, v in (f.metadata or {}).items()},
    }
    if pa.types.is_struct(f.type):
        out["children"] = [_field(f.type.field(i)) for i in range(f.type.num_fields)]
    elif pa.types.is_list(f.type):
        out["children"] = [_field(f.type.value_field)]
    return out


def _float(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return "-0" if x == 0 and math.copysign(1.0, x) < 0 else x


def _each(fn: Any, arr: pa.Array) -> list[Any]:
    return [None if v is None else fn(v) for v in arr.to_pylist()]


def _values(arr: pa.Array) -> list[Any]:
    """The column's values as read_otap.mjs prints them."""
    t = arr.type
    out: list[Any]
    if pa.types.is_dictionary(t):
        values = _values(arr.dictionary)
        out = [None if k is None else values[k] for k in arr.indices.to_pylist()]
    elif pa.types.is_struct(t):
        children = {t.field(i).name: _values(arr.field(i)) for i in range(t.num_fields)}
        out = [{name: column[r] for name, column in children.items()} for r in range(len(arr))]
    elif pa.types.is_list(t):
        items, offsets = _values(arr.values), arr.offsets.to_pylist()
        out = [items[offsets[r]:offsets[r + 1]] for r in range(len(arr))]
    elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
        out = _each(str, arr.view(pa.int64()))
    elif pa.types.is_integer(t):
        out = _each(str, arr)
    elif pa.types.is_floating(t):
        out = _each(_float, arr)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        out = _each(bytes.hex, arr)
    elif t in (pa.string(), pa.large_string(), pa.bool_()):
        out = arr.to_pylist()
    else:
        raise AssertionError(f"no JSON form for {t}")
    valid = arr.is_valid().to_pylist()
    return [v if ok else None for v, ok in zip(out, valid, strict=True)]


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    columns = {name: _values(batch.column(c)) for c, name in enumerate(batch.schema.names)}
    return [{name: column[r] for name, column in columns.items()} for r in range(batch.num_rows)]


@dataclasses.dataclass
class PyView:
    json: dict[str, Any]
    dictionary_deltas: int
    dictionary_replacements: int
    schema_ids_per_type: dict[int, list[str]]


def python_view(messages: list[bytes]) -> PyView:
    """The JSON read_otap.mjs prints, built with adaptive_arrow.envelope and pyarrow.ipc.open_stream."""
    parsed = [BatchArrowRecords.from_bytes(m) for m in messages]
    records: dict[str, list[bytes]] = defaultdict(list)
    ids: dict[int, list[str]] = defaultdict(list)
    for message in parsed:
        for p in message.payloads:
            records[p.schema_id].append(p.record)
            if p.schema_id not in ids[p.type]:
                ids[p.type].append(p.schema_id)
    batches: dict[str, list[pa.RecordBatch]] = {}
    schemas: list[dict[str, Any]] = []
    deltas = replacements = 0
    for schema_id, parts in records.items():
        reader = pa.ipc.open_stream(b"".join(parts))
        batches[schema_id] = list(reader)
        assert len(batches[schema_id]) == len(parts), schema_id
        deltas += reader.stats.num_dictionary_deltas
        replacements += reader.stats.num_replaced_dictionaries
        schemas.append({
            "schema_id": schema_id,
            "fields": [_field(f) for f in reader.schema],
            "metadata": {k.decode(): v.decode() for k, v in (reader.schema.metadata or {}).items()},
        })
    seen: dict[str, int] = defaultdict(int)
    envelopes = []
    for message in parsed:
        payloads = []
        for p in message.payloads:
            k, seen[p.schema_id] = seen[p.schema_id], seen[p.schema_id] + 1
            payloads.append({"schema_id": p.schema_id, "type": p.type, "rows": _rows(batches[p.schema_id][k])})
        envelopes.append({"batch_id": str(message.batch_id), "payloads": payloads})
    return PyView({"envelopes": envelopes, "schemas": schemas}, deltas, replacements, dict(ids))


# -- IPC body compression, read from each message's flatbuffer metadata (pyarrow does not expose it) --
_RECORD_BATCH, _DICTIONARY_BATCH = 3, 2  # Message.header_type (MessageHeader union)
_CODECS = {0: "lz4_frame", 1: "zstd"}  # BodyCompression.codec (CompressionType)


def _fb_field(buf: bytes, table: int, index: int) -> int | None:
    """Where field `index` of the flatbuffer table at `table` is stored, or None if it is absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    if 4 + 2 * index >= struct.unpack_from("<H", buf, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", buf, vtable + 4 + 2 * index)[0]
    return table + offset if offset else None


def _fb_table(buf: bytes, table: int, index: int) -> int | None:
    at = _fb_field(buf, table, index)
    return None if at is None else at + struct.unpack_from("<I", buf, at)[0]


def body_compressions(record: bytes) -> list[str | None]:
    """Each record or dictionary batch message of an IPC stream: its BodyCompression codec, None if uncompressed."""
    out: list[str | None] = []
    for message in pa.ipc.MessageReader.open_stream(record):
        buf = message.metadata.to_pybytes()
        root = struct.unpack_from("<I", buf, 0)[0]
        at = _fb_field(buf, root, 1)  # Message.header_type
        header_type = 0 if at is None else buf[at]
        if header_type not in (_RECORD_BATCH, _DICTIONARY_BATCH):
            continue
        batch = _fb_table(buf, root, 2)  # Message.header
        assert batch is not None
        if header_type == _DICTIONARY_BATCH:
            batch = _fb_table(buf, batch, 1)  # DictionaryBatch.data: a RecordBatch
            assert batch is not None
        compression = _fb_table(buf, batch, 3)  # RecordBatch.compression
        if compression is None:
            out.append(None)
        else:
            at = _fb_field(buf, compression, 0)  # BodyCompression.codec (default LZ4_FRAME)
            out.append(_CODECS[0 if at is None else buf[at]])
    return out


def assert_ipc_compression(messages: list[bytes], compression: str | None) -> None:
    """Every record and dictionary batch of every payload is compressed with `compression` (None: none is)."""
    records: dict[str, list[bytes]] = defaultdict(list)
    for message in messages:
        for p in BatchArrowRecords.from_bytes(message).payloads:
            records[p.schema_id].append(p.record)
    codecs = [c for parts in records.values() for c in body_compressions(b"".join(parts))]
    assert codecs, "no record batches"
    assert set(codecs) == {compression}, f"{len(codecs)} batches, codecs {sorted(set(codecs), key=str)}"


COMPRESSIONS = pytest.mark.parametrize("compression", [None, "zstd"], ids=["uncompressed", "zstd"])


# -- the comparison --------------------------------------------------------------------------------
def first_difference(want: Any, got: Any, path: str = "") -> str | None:
    """Where `got` (Arrow JS) first differs from `want` (pyarrow), or None if they are equal."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) != set(got):  # (key order is no evidence: JS objects list integer-like keys first)
            return f"{path or '/'}: keys {sorted(want)} (pyarrow) != {sorted(got)} (Arrow JS)"
        for key in want:
            if (diff := first_difference(want[key], got[key], f"{path}.{key}" if path else key)) is not None:
                return diff
        return None
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return f"{path}: {len(want)} items (pyarrow) != {len(got)} (Arrow JS)"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            where = f"{path}[{i}]"
            if isinstance(w, dict) and "schema_id" in w:  # name the payload's or schema's stream in the path
                where += f"(schema_id {w['schema_id']}" + (f", type {w['type']})" if "type" in w else ")")
            if (diff := first_difference(w, g, where)) is not None:
                return diff
        return None
    same_kind = isinstance(want, bool) == isinstance(got, bool) and type(want) in (type(got), int, float)
    if same_kind and want == got:
        return None
    return f"{path}: {want!r} (pyarrow) != {got!r} (Arrow JS)"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "node is not on PATH: tests/test_interop_js.py reads our OTAP bytes with Apache Arrow JS and needs "
            "Node.js 18+ (then `make test` installs interop/js/node_modules with npm ci)",
            pytrace=False,
        )
    if not (JS / "node_modules" / "apache-arrow").is_dir() or not (JS / "node_modules" / "protobufjs").is_dir():
        pytest.fail("interop/js/node_modules is missing: run `npm ci --prefix interop/js` (make test does)", pytrace=False)
    return node


def interop_mismatch(path: Path, want: dict[str, Any]) -> str | None:
    """Run read_otap.mjs on `path`; None if its JSON equals `want`, else what went wrong."""
    proc = subprocess.run(
        [_node(), str(JS / "read_otap.mjs"), str(path), str(PROTO)], capture_output=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        return f"node read_otap.mjs exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    return first_difference(want, json.loads(proc.stdout))


def _write(path: Path, messages: list[bytes]) -> Path:
    with path.open("wb") as out:
        write_envelopes(out, messages)
    return path


def _encode(signal: Signal | str, bundles: list[OtapBundle], *, sort: bool = True,
            compression: str | None = None) -> list[bytes]:
    encoder = Encoder(signal, EncoderConfig(ipc_compression=compression, sort=sort))
    return [encoder.encode(bundle).to_bytes() for bundle in bundles]


def _generated(signal: str, compression: str | None = None, **config: Any) -> list[bytes]:
    requests = generate_otlp(signal, 4000, batch_size=1000, seed=1)
    encoder = Encoder(signal, EncoderConfig(ipc_compression=compression, **config))
    return [encoder.encode(otap_model.from_otlp(r)).to_bytes() for r in requests]


# -- the tests -------------------------------------------------------------------------------------
@COMPRESSIONS
@pytest.mark.parametrize("signal", [s.value for s in Signal])
def test_generated_stream_reads_the_same_in_arrow_js(signal: str, compression: str | None, tmp_path: Path) -> None:
    messages = _generated(signal, compression)
    assert_ipc_compression(messages, compression)
    view = python_view(messages)
    # the stream exercises what a one-batch file would not: dictionary deltas and a schema change
    assert len(messages) == 4
    assert view.dictionary_deltas > 0
    assert any(len(ids) > 1 for ids in view.schema_ids_per_type.values()), view.schema_ids_per_type
    assert (diff := interop_mismatch(_write(tmp_path / f"{signal}.otap", messages), view.json)) is None, diff


@COMPRESSIONS
def test_replaced_dictionaries_read_the_same_in_arrow_js(compression: str | None, tmp_path: Path) -> None:
    """A dictionary past its limit is reset: the next DictionaryBatch replaces it (isDelta false)
    instead of extending it, which the default settings above never do."""
    messages = _generated("logs", compression, dictionary_limit=200, dictionary_max_distinct_ratio=None,
                          dictionary_reset_threshold=1.0)
    assert_ipc_compression(messages, compression)
    view = python_view(messages)
    assert view.dictionary_replacements > 0 and view.dictionary_deltas > 0
    assert (diff := interop_mismatch(_write(tmp_path / "logs.otap", messages), view.json)) is None, diff


def _samples() -> dict[str, list[OtapBundle]]:
    by_signal: dict[str, list[OtapBundle]] = defaultdict(list)
    for path in sorted((DATA / "otlp-examples").glob("*.json")):
        bundle = otap_model.from_otlp_json(path.read_bytes())
        by_signal[str(bundle.signal)].append(bundle)
    by_signal["traces"] += [otap_model.from_zipkin_json(p.read_bytes()) for p in sorted((DATA / "zipkin").glob("*.json"))]
    return by_signal


@COMPRESSIONS
@pytest.mark.parametrize("sort", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("signal", [s.value for s in Signal])
def test_shared_samples_read_the_same_in_arrow_js(signal: str, sort: bool, compression: str | None,
                                                  tmp_path: Path) -> None:
    """The real samples of ../shared/data, one stream per signal (OTLP/JSON examples; for traces
    also every Zipkin file), sorted and unsorted."""
    bundles = _samples()[signal]
    assert bundles, f"no samples of {signal} in {DATA}"
    messages = _encode(signal, bundles, sort=sort, compression=compression)
    assert_ipc_compression(messages, compression)
    view = python_view(messages)
    assert (diff := interop_mismatch(_write(tmp_path / f"{signal}.otap", messages), view.json)) is None, diff


def _replace_payload(message: bytes, index: int, **changes: Any) -> bytes:
    parsed = BatchArrowRecords.from_bytes(message)
    payloads = list(parsed.payloads)
    payloads[index] = dataclasses.replace(payloads[index], **changes)
    return dataclasses.replace(parsed, payloads=tuple(payloads)).to_bytes()


def test_a_flipped_dictionary_value_byte_is_caught(tmp_path: Path) -> None:
    messages = _generated("logs")
    want = python_view(messages).json
    # the resource attribute key "service.namespace" lives once in the key column's dictionary batch
    first = BatchArrowRecords.from_bytes(messages[0])
    index = next(i for i, p in enumerate(first.payloads) if p.type == 1)  # RESOURCE_ATTRS
    record = first.payloads[index].record
    assert record.count(b"service.namespace") == 1
    bad = messages.copy()
    bad[0] = _replace_payload(messages[0], index, record=record.replace(b"service.namespace", b"service.namesp4ce"))
    path = _write(tmp_path / "bad.otap", bad)
    diff = interop_mismatch(path, want)
    assert diff is not None and "'service.namespace' (pyarrow) != 'service.namesp4ce' (Arrow JS)" in diff, diff
    assert diff.startswith(f"envelopes[0].payloads[{index}](schema_id "), diff
    assert interop_mismatch(path, python_view(bad).json) is None  # the two readers agree on the bad bytes


def test_a_changed_schema_id_is_caught(tmp_path: Path) -> None:
    messages = _generated("logs")
    want = python_view(messages).json
    counts: dict[str, int] = defaultdict(int)
    for message in messages:
        for p in BatchArrowRecords.from_bytes(message).payloads:
            counts[p.schema_id] += 1
    # a stream of one payload renamed: still a readable file, but not the stream we wrote
    m, i = next((m, i) for m, message in enumerate(messages)
                for i, p in enumerate(BatchArrowRecords.from_bytes(message).payloads) if counts[p.schema_id] == 1)
    bad = messages.copy()
    bad[m] = _replace_payload(messages[m], i, schema_id="99")
    path = _write(tmp_path / "bad.otap", bad)
    diff = interop_mismatch(path, want)
    assert diff is not None and f"envelopes[{m}].payloads[{i}]" in diff and ".schema_id:" in diff, diff
    assert interop_mismatch(path, python_view(bad).json) is None

    # moved onto the stream that replaced it: a second Schema message inside one stream, which
    # Arrow JS refuses (as pyarrow does)
    bad[m] = _replace_payload(messages[m], i, schema_id=BatchArrowRecords.from_bytes(messages[-1]).payloads[0].schema_id)
    diff = interop_mismatch(_write(tmp_path / "worse.otap", bad), want)
    assert diff is not None and diff.startswith("node read_otap.mjs exited 1"), diff
    assert "schemas must be equivalent" in diff, diff


def test_without_node_the_test_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="node is not on PATH"):
        interop_mismatch(tmp_path / "x.otap", {})
