"""Byte layout of segment files (version 1): constants and encoders/decoders of every
metadata region. docs/formats.md "Segment files" documents each byte; keep the two in step.

File: header(64) | stream slices (64-aligned Arrow IPC files) | directory | manifest |
metadata | footer | trailer(24). Decoders raise CorruptionError naming the file and the offset.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from ..errors import CorruptionError

MAGIC = b"QUIVER\x00S"
VERSION = 1
SUPPORTED_VERSIONS = (1,)
ALIGNMENT = 64  # stream slices start at multiples of this
SECTION_ALIGNMENT = 8  # directory, manifest, metadata and footer start at multiples of this
EVENT_TIME_FLAG = 0x1  # directory entry flags bit 0: event-time range present

# header: magic | u16 version | u16 header_size | u32 flags | u64 seq | [36] zero | u32 crc32c
HEADER = struct.Struct("<8sHHIQ36sI")
HEADER_SIZE = HEADER.size  # 64
# trailer (same layout in every version): u32 footer_length | u32 footer_crc32c | u16 version |
# u16 reserved | u32 crc32c(trailer[0:12]) | magic
TRAILER = struct.Struct("<IIHHI8s")
TRAILER_SIZE = TRAILER.size  # 24
# footer v1
FOOTER = struct.Struct("<QIIqqqqQQQQQQIIII")
FOOTER_SIZE = FOOTER.size  # 112

DIRECTORY_ENTRY = np.dtype(
    [
        ("stream_id", "<u4"),
        ("slot", "<u2"),
        ("flags", "<u2"),
        ("fingerprint", "V32"),
        ("offset", "<u8"),
        ("length", "<u8"),
        ("rows", "<u8"),
        ("chunks", "<u4"),
        ("batches", "<u4"),
        ("crc32c", "<u4"),
        ("present_offset", "<u4"),
        ("event_time_min", "<i8"),
        ("event_time_max", "<i8"),
    ]
)
assert DIRECTORY_ENTRY.itemsize == 96
MANIFEST_BUNDLE = np.dtype([("ingestion_time_ns", "<i8"), ("slot_bitmap", "<u8")])
MANIFEST_REF = np.dtype([("stream_id", "<u4"), ("batch", "<u4"), ("row_offset", "<u4"), ("row_count", "<u4")])
MANIFEST_COUNTS = struct.Struct("<II")  # bundle_count, ref_count
SCHEMA_ENTRY = struct.Struct("<HHI")  # slot, reserved, length
# Bundles of one segment: the store seals an open segment when it holds this many, and the ack log
# takes a larger count (or an index at or above it) for damage. Reconciling a segment that is gone
# writes one `dropped` record per unresolved bundle (4 Mi of them take ~2.5 s and ~600 MB), so a
# larger count read from a damaged record would exhaust memory and time.
MAX_SEGMENT_BUNDLES = 1 << 22
# What pyarrow raises for IPC bytes it cannot read: OSError (ArrowIOError) too, for a flatbuffer
# that fails verification.
IPC_ERRORS = (pa.ArrowException, ValueError, OSError)


def decode_names(schema: pa.Schema) -> None:
    """Decode every field name, at every depth (UnicodeDecodeError, a ValueError, if one is not
    UTF-8): pyarrow reads a schema without decoding its names and decodes each only when it is
    asked for it, so a schema that reads can still fail whoever uses it."""
    pending = list(schema)
    while pending:
        field = pending.pop()
        _ = field.name
        kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        pending += [kind.field(i) for i in range(kind.num_fields)]


def crc(data: bytes | memoryview) -> int:
    return _crc32c.crc32c(data)


def pad_to(n: int, alignment: int) -> int:
    return (-n) % alignment


@dataclass(frozen=True)
class Footer:
    seq: int
    stream_count: int
    bundle_count: int
    ingestion_time_min_ns: int
    ingestion_time_max_ns: int
    created_at_ns: int
    opened_at_ns: int
    directory_offset: int
    directory_length: int
    manifest_offset: int
    manifest_length: int
    metadata_offset: int
    metadata_length: int
    directory_crc32c: int
    manifest_crc32c: int
    metadata_crc32c: int

    def encode(self) -> bytes:
        return FOOTER.pack(
            self.seq, self.stream_count, self.bundle_count, self.ingestion_time_min_ns,
            self.ingestion_time_max_ns, self.created_at_ns, self.opened_at_ns,
            self.directory_offset, self.directory_length, self.manifest_offset, self.manifest_length,
            self.metadata_offset, self.metadata_length,
            self.directory_crc32c, self.manifest_crc32c, self.metadata_crc32c, 0,
        )  # fmt: skip

    @classmethod
    def decode(cls, data: bytes, path: str, offset: int) -> Footer:
        v = FOOTER.unpack(data)
        if v[16] != 0:
            raise CorruptionError("footer reserved field is not zero", path, offset + 108)
        return cls(*v[:16])


def encode_header(seq: int) -> bytes:
    body = HEADER.pack(MAGIC, VERSION, HEADER_SIZE, 0, seq, bytes(36), 0)[:-4]
    return body + struct.pack("<I", crc(body))


def check_header(data: bytes, path: str) -> int:
    """Validate the 64-byte header; return the seq it records."""
    magic, version, size, flags, seq, zero, stored = HEADER.unpack(data)
    if magic != MAGIC:
        raise CorruptionError(f"bad header magic {magic!r} (expected {MAGIC!r})", path, 0)
    if stored != crc(data[:-4]):
        raise CorruptionError("header checksum mismatch", path, 0)
    if version not in SUPPORTED_VERSIONS or size != HEADER_SIZE or flags != 0 or zero != bytes(36):
        raise CorruptionError(f"header fields invalid (version {version}, size {size}, flags {flags})", path, 8)
    return seq


def encode_trailer(footer: bytes) -> bytes:
    head = struct.pack("<IIHH", len(footer), crc(footer), VERSION, 0)
    return head + struct.pack("<I", crc(head)) + MAGIC


def encode_tail(
    at: int, directory: bytes, manifest: bytes, metadata: bytes, *, seq: int, bundle_count: int, stream_count: int,
    ingestion_time_min_ns: int, ingestion_time_max_ns: int, created_at_ns: int, opened_at_ns: int,
) -> bytes:
    """Everything after the stream slices, which end at offset `at`: the directory, manifest and
    metadata sections, each with the padding before it that places it where the reader requires,
    then the footer that locates and checksums them, and the trailer."""
    out = bytearray(pad_to(at, ALIGNMENT))
    offsets = []
    for section in (directory, manifest, metadata):
        out += bytes(pad_to(at + len(out), SECTION_ALIGNMENT))
        offsets.append(at + len(out))
        out += section
    out += bytes(pad_to(at + len(out), SECTION_ALIGNMENT))
    footer = Footer(
        seq, stream_count, bundle_count, ingestion_time_min_ns, ingestion_time_max_ns, created_at_ns, opened_at_ns,
        offsets[0], len(directory), offsets[1], len(manifest), offsets[2], len(metadata),
        crc(directory), crc(manifest), crc(metadata),
    ).encode()  # fmt: skip
    return bytes(out) + footer + encode_trailer(footer)


def decode_trailer(data: bytes, path: str, offset: int) -> tuple[int, int, int]:
    """Return (footer_length, footer_crc32c, version); checks magic, checksum and version."""
    footer_length, footer_crc, version, reserved, stored, magic = TRAILER.unpack(data)
    if magic != MAGIC:
        raise CorruptionError(
            f"not a Quiver segment: bad trailer magic {magic!r} (expected {MAGIC!r})", path, offset + 16
        )
    if stored != crc(data[:12]):
        raise CorruptionError("trailer checksum mismatch", path, offset)
    if version not in SUPPORTED_VERSIONS:
        raise CorruptionError(
            f"unsupported segment format version {version} (this reader supports "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}); upgrade quiver_store to read it",
            path,
            offset + 8,
        )
    if reserved != 0:
        raise CorruptionError("trailer reserved field is not zero", path, offset + 10)
    return footer_length, footer_crc, version


# -- directory ---------------------------------------------------------------------------------


def encode_directory(entries: np.ndarray, bitmaps: bytes) -> bytes:
    return entries.astype(DIRECTORY_ENTRY, copy=False).tobytes() + bitmaps


def decode_directory(data: bytes, stream_count: int, path: str, offset: int) -> tuple[np.ndarray, bytes]:
    fixed = stream_count * DIRECTORY_ENTRY.itemsize
    if len(data) < fixed:
        raise CorruptionError(f"directory holds {len(data)} bytes, {stream_count} entries need {fixed}", path, offset)
    entries = np.frombuffer(data, DIRECTORY_ENTRY, count=stream_count)
    return entries, data[fixed:]


# -- manifest ----------------------------------------------------------------------------------


def encode_manifest(bundles: np.ndarray, refs: np.ndarray) -> bytes:
    return (
        MANIFEST_COUNTS.pack(len(bundles), len(refs))
        + bundles.astype(MANIFEST_BUNDLE, copy=False).tobytes()
        + refs.astype(MANIFEST_REF, copy=False).tobytes()
    )


def decode_manifest(data: bytes, path: str, offset: int) -> tuple[np.ndarray, np.ndarray]:
    if len(data) < MANIFEST_COUNTS.size:
        raise CorruptionError("manifest shorter than its counts", path, offset)
    n_bundles, n_refs = MANIFEST_COUNTS.unpack_from(data)
    need = MANIFEST_COUNTS.size + n_bundles * MANIFEST_BUNDLE.itemsize + n_refs * MANIFEST_REF.itemsize
    if need != len(data):
        raise CorruptionError(
            f"manifest length {len(data)} does not match {n_bundles} bundles and {n_refs} refs ({need} bytes)",
            path,
            offset,
        )
    pos = MANIFEST_COUNTS.size
    bundles = np.frombuffer(data, MANIFEST_BUNDLE, count=n_bundles, offset=pos)
    refs = np.frombuffer(data, MANIFEST_REF, count=n_refs, offset=pos + n_bundles * MANIFEST_BUNDLE.itemsize)
    return bundles, refs


# -- metadata ----------------------------------------------------------------------------------


def encode_metadata(
    metadata: Mapping[str, str], event_time_columns: Mapping[int, str], schemas: Mapping[int, pa.Schema]
) -> bytes:
    blobs = [(slot, schema.serialize().to_pybytes()) for slot, schema in sorted(schemas.items())]
    return encode_metadata_section(encode_document(metadata, event_time_columns), blobs)


def encode_document(metadata: Mapping[str, str], event_time_columns: Mapping[int, str]) -> bytes:
    """The section's JSON document."""
    doc = {
        "metadata": dict(sorted(metadata.items())),
        "event_time_columns": {str(k): v for k, v in sorted(event_time_columns.items())},
    }
    return json.dumps(doc, separators=(",", ":")).encode()  # ASCII escapes: any str round-trips


def encode_metadata_section(document: bytes, schemas: Sequence[tuple[int, bytes]]) -> bytes:
    """The section from its encoded parts, taken as they are: the JSON document and each (slot,
    serialized schema) in order (the segment_fields fuzz target passes wrong ones)."""
    out = bytearray(struct.pack("<I", len(document)) + document)
    out += bytes(pad_to(len(out), SECTION_ALIGNMENT))
    out += struct.pack("<II", len(schemas), 0)
    for slot, blob in schemas:
        out += SCHEMA_ENTRY.pack(slot, 0, len(blob)) + blob
        out += bytes(pad_to(len(out), SECTION_ALIGNMENT))
    return bytes(out)


def decode_metadata(
    data: bytes, path: str, offset: int
) -> tuple[dict[str, str], dict[int, str], dict[int, pa.Schema]]:
    def fail(msg: str, at: int) -> CorruptionError:
        return CorruptionError(f"metadata section: {msg}", path, offset + at)

    def check_padding(start: int, end: int) -> None:  # the writer pads with zeros; anything else is damage
        nonzero = next((i for i in range(start, min(end, len(data))) if data[i]), None)
        if nonzero is not None:
            raise fail(f"padding byte is {data[nonzero]}, not 0", nonzero)

    if len(data) < 4:
        raise fail("shorter than its JSON length", 0)
    (n,) = struct.unpack_from("<I", data)
    if 4 + n > len(data):
        raise fail(f"JSON length {n} runs past the section ({len(data)} bytes)", 0)
    try:
        doc = json.loads(data[4 : 4 + n].decode())
        metadata = {str(k): str(v) for k, v in doc["metadata"].items()}
        event_cols = {int(k): str(v) for k, v in doc["event_time_columns"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # RecursionError: deep nesting
        raise fail(f"invalid JSON document ({e})", 4) from None
    pos = 4 + n + pad_to(4 + n, SECTION_ALIGNMENT)
    check_padding(4 + n, pos)
    if pos + 8 > len(data):
        raise fail("missing schema table", pos)
    count, reserved = struct.unpack_from("<II", data, pos)
    if reserved:
        raise fail(f"schema table reserved field is {reserved}, not 0", pos + 4)
    pos += 8
    schemas: dict[int, pa.Schema] = {}
    for _ in range(count):
        if pos + SCHEMA_ENTRY.size > len(data):
            raise fail("schema table runs past the section", pos)
        slot, reserved, length = SCHEMA_ENTRY.unpack_from(data, pos)
        if reserved:
            raise fail(f"schema entry of slot {slot}: reserved field is {reserved}, not 0", pos + 2)
        if schemas and slot <= max(schemas):  # written in ascending slot order; a repeat would replace
            raise fail(f"schema of slot {slot} follows slot {max(schemas)}: slots must be strictly ascending", pos)
        start = pos + SCHEMA_ENTRY.size
        if start + length > len(data):
            raise fail(f"schema of slot {slot} ({length} bytes) runs past the section", pos)
        try:
            schemas[slot] = pa.ipc.read_schema(pa.py_buffer(data[start : start + length]))
            decode_names(schemas[slot])
        except IPC_ERRORS as e:
            raise fail(f"schema of slot {slot} does not decode ({e})", start) from None
        pos = start + length
        check_padding(pos, pos + pad_to(pos, SECTION_ALIGNMENT))
        pos += pad_to(pos, SECTION_ALIGNMENT)
    if pos != len(data):
        raise fail(f"{len(data) - pos} unexpected bytes after the schema table", pos)
    return metadata, event_cols, schemas
