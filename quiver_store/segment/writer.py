"""Finalize an OpenSegment into an immutable segment file (layout: format.py, docs/formats.md).

Each stream's chunks are unified against one dictionary per dictionary column, consecutive
chunks are concatenated into the record batches the accumulator placed them in (fewer IPC
messages; the manifest addresses (stream, batch, row offset, row count)), and the
stream is written as one Arrow IPC *file* at a 64-byte aligned offset. The file is written to
``path + ".tmp"``, fsynced, renamed and its directory fsynced. The OpenSegment is only read.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from ..errors import QuiverError
from ..fs import DEFAULT_FS, FileSystem
from . import format as fmt
from .accumulator import OpenSegment, StreamAccumulator
from .dictionary import decode_chunks, unify_chunks
from .info import SegmentInfo, StreamInfo
from .schema_view import representative_schema
from .stats import event_time_range


def _coalesce(chunks: list[pa.RecordBatch], placements: list[tuple[int, int]]) -> list[pa.RecordBatch]:
    """Concatenate the chunks that share a record batch (placements come from the accumulator)."""
    groups: list[list[pa.RecordBatch]] = []
    for chunk, (batch, _) in zip(chunks, placements):
        if batch == len(groups):
            groups.append([])
        groups[batch].append(chunk)
    return [g[0] if len(g) == 1 else pa.concat_batches(g) for g in groups]


class _Out:
    """Sequential writer over a FileSystem fd that tracks the offset."""

    def __init__(self, fs: FileSystem, fd: int) -> None:
        self.fs, self.fd, self.offset = fs, fd, 0

    def write(self, data: bytes | memoryview) -> int:
        at = self.offset
        self.fs.write(self.fd, data)
        self.offset += len(data)
        return at

    def align(self, alignment: int) -> None:
        pad = fmt.pad_to(self.offset, alignment)
        if pad:
            self.write(bytes(pad))

    def rewind(self, offset: int) -> None:
        """Drop everything written from `offset` on (a stream whose IPC writing failed midway)."""
        self.fs.truncate(self.fd, offset)
        self.fs.seek(self.fd, offset)
        self.offset = offset


IPC_BUFFER = 256 << 10  # writes smaller than this are gathered in C++ before they reach Python


class _IpcSink:
    """The file object the IPC file writer's buffered stream writes a stream through, computing the
    stream's CRC32C and size on the way.

    In front of it sits a `pyarrow.BufferedOutputStream` of IPC_BUFFER bytes: the IPC writer emits
    every metadata block, buffer and padding separately, and each call into this Python object
    takes the GIL (about 3,100 calls per 32 MiB metrics segment, each a hand-over with a producer
    encoding on another thread); buffered, about 220. Column buffers of IPC_BUFFER or more still
    come through zero-copy, so a stream is never assembled in memory as a whole.
    """

    closed = False

    def __init__(self, out: _Out) -> None:
        self.out: _Out | None = out
        self.crc, self.size = 0, 0

    def write(self, data: bytes | pa.Buffer) -> int:
        view = memoryview(data)
        if self.out is None:  # abandoned after an error: bytes a late flush still pushes are dropped
            return len(view)
        self.crc = _crc32c.crc32c(view, self.crc)
        self.size += len(view)
        self.out.write(view)
        return len(view)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _write_ipc_file(
    out: _Out, schema: pa.Schema, batches: list[pa.RecordBatch], options: pa.ipc.IpcWriteOptions | None
) -> tuple[int, int]:
    """Write one Arrow IPC file at the current (aligned) offset; return its (size, crc32c)."""
    sink = _IpcSink(out)
    buffered = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), buffer_size=IPC_BUFFER)
    try:
        with pa.ipc.new_file(buffered, schema, options=options) as writer:
            for batch in batches:
                writer.write_batch(batch)
        buffered.close()  # flushes the last gathered bytes into the sink
    finally:
        # Detached, so that a stream abandoned by an error cannot write what its buffer still holds
        # when it is closed or garbage-collected later (the caller has rewound or removed the file,
        # and the descriptor may be reused).
        sink.out = None
        with contextlib.suppress(Exception):
            buffered.close()
    return sink.size, sink.crc


def write_segment(
    segment: OpenSegment,
    path: str,
    seq: int,
    *,
    fs: FileSystem = DEFAULT_FS,
    metadata: Mapping[str, str] | None = None,
    event_time_columns: Mapping[int, str] | None = None,
    compression: pa.Codec | None = None,
) -> SegmentInfo:
    """Write `segment` durably to `path`; return what was written. `compression` compresses every
    stream's record and dictionary bodies (Arrow IPC body compression: readers need nothing else).
    Raises QuiverError on an empty segment or bad arguments; OSError from the file system
    propagates after the temp file is removed."""
    if segment.is_empty:
        raise QuiverError(f"segment {seq}: nothing to write (the open segment holds no bundle)")
    if not 0 <= seq < 1 << 64:
        raise QuiverError(f"segment sequence number {seq} is out of range [0, 2**64)")
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    event_cols = {int(k): str(v) for k, v in (event_time_columns or {}).items()}
    tmp = path + ".tmp"
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        out = _Out(fs, fd)
        out.write(fmt.encode_header(seq))
        streams, schemas, placements = [], {}, []
        options = None if compression is None else pa.ipc.IpcWriteOptions(compression=compression)
        for acc in segment.streams:
            info, schema, where = _write_stream(out, acc, event_cols.get(acc.slot), options)
            streams.append(info)
            schemas[acc.stream_id] = schema
            placements.append(where)
        rep = _representative(segment.streams, schemas)
        streams = [_with_present(s, schemas[s.stream_id], rep[s.slot]) for s in streams]
        directory = _directory(streams, rep)
        manifest = _manifest(segment, placements)
        meta_bytes = fmt.encode_metadata(meta, event_cols, rep)
        created = time.time_ns()
        out.write(fmt.encode_tail(
            out.offset, directory, manifest, meta_bytes, seq=seq, stream_count=len(streams),
            bundle_count=segment.bundle_count, ingestion_time_min_ns=segment.min_ingestion_time_ns or 0,
            ingestion_time_max_ns=segment.max_ingestion_time_ns or 0, created_at_ns=created,
            opened_at_ns=segment.opened_at_ns,
        ))  # fmt: skip
        fs.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.close(fd)
        with contextlib.suppress(OSError):
            fs.unlink(tmp)
        raise
    fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(os.path.abspath(path)))
    return SegmentInfo(
        seq=seq,
        path=path,
        size_bytes=out.offset,
        bundle_count=segment.bundle_count,
        stream_count=len(streams),
        ingestion_time_min_ns=segment.min_ingestion_time_ns or 0,
        ingestion_time_max_ns=segment.max_ingestion_time_ns or 0,
        metadata=meta,
        streams=tuple(streams),
        representative_schemas=rep,
        event_time_columns=event_cols,
        opened_at_ns=segment.opened_at_ns,
        created_at_ns=created,
        format_version=fmt.VERSION,
    )


def _write_stream(
    out: _Out, acc: StreamAccumulator, event_column: str | None, options: pa.ipc.IpcWriteOptions | None
) -> tuple[StreamInfo, pa.Schema, list[tuple[int, int]]]:
    out.align(fmt.ALIGNMENT)
    offset = out.offset
    try:
        schema, chunks = unify_chunks(acc.schema, acc.chunks, acc.dictionaries)
        batches = _coalesce(chunks, acc.placements)
        size, crc = _write_ipc_file(out, schema, batches, options)
    except pa.ArrowException:
        # dictionaries pyarrow cannot unify or write (exotic nesting, value types): store the
        # stream's dictionary columns decoded rather than fail the finalize on every retry
        out.rewind(offset)
        try:
            schema, chunks = decode_chunks(acc.schema, acc.chunks)
            batches = _coalesce(chunks, acc.placements)
            size, crc = _write_ipc_file(out, schema, batches, options)
        except pa.ArrowException as e:
            raise QuiverError(f"stream {acc.stream_id} (slot {acc.slot}) cannot be written as Arrow IPC: {e}") from e
    event = event_time_range(batches, event_column) if event_column else None
    info = StreamInfo(
        stream_id=acc.stream_id,
        slot=acc.slot,
        fingerprint=acc.fingerprint,
        rows=acc.rows,
        chunks=len(acc.chunks),
        bytes=size,
        present_columns=tuple(schema.names),
        offset=offset,
        batches=len(batches),
        crc32c=crc,
        event_time_min_ns=event[0] if event else None,
        event_time_max_ns=event[1] if event else None,
    )
    return info, schema, acc.placements


def _representative(streams: tuple[StreamAccumulator, ...], schemas: dict[int, pa.Schema]) -> dict[int, pa.Schema]:
    by_slot: dict[int, list[pa.Schema]] = {}
    for acc in streams:
        by_slot.setdefault(acc.slot, []).append(schemas[acc.stream_id])
    return {slot: representative_schema(group, strict=False) for slot, group in sorted(by_slot.items())}


def _with_present(info: StreamInfo, schema: pa.Schema, rep: pa.Schema) -> StreamInfo:
    order = {name: i for i, name in enumerate(rep.names)}
    present = tuple(sorted(schema.names, key=order.__getitem__))
    return StreamInfo(**{**info.__dict__, "present_columns": present})


def _directory(streams: list[StreamInfo], rep: dict[int, pa.Schema]) -> bytes:
    entries = np.zeros(len(streams), fmt.DIRECTORY_ENTRY)
    bitmaps = bytearray()
    for i, s in enumerate(streams):
        names = rep[s.slot].names
        bits = np.isin(np.array(names, dtype=object), np.array(s.present_columns, dtype=object))
        packed = np.packbits(bits, bitorder="little").tobytes()
        has_event = s.event_time_min_ns is not None
        entries[i] = (
            s.stream_id, s.slot, fmt.EVENT_TIME_FLAG if has_event else 0, s.fingerprint, s.offset, s.bytes,
            s.rows, s.chunks, s.batches, s.crc32c, len(bitmaps),
            s.event_time_min_ns if has_event else 0, s.event_time_max_ns if has_event else 0,
        )  # fmt: skip
        bitmaps += packed
    return fmt.encode_directory(entries, bytes(bitmaps))


def _manifest(segment: OpenSegment, placements: list[list[tuple[int, int]]]) -> bytes:
    manifest = segment.manifest
    bundles = np.zeros(len(manifest), fmt.MANIFEST_BUNDLE)
    n_refs = sum(len(e.refs) for e in manifest)
    refs = np.zeros(n_refs, fmt.MANIFEST_REF)
    streams = segment.streams
    k = 0
    for i, entry in enumerate(manifest):
        bitmap = 0
        for slot, stream_id, chunk in entry.refs:
            bitmap |= 1 << slot
            batch, row_offset = placements[stream_id][chunk]
            refs[k] = (stream_id, batch, row_offset, streams[stream_id].chunks[chunk].num_rows)
            k += 1
        bundles[i] = (entry.ingestion_time_ns, bitmap)
    return fmt.encode_manifest(bundles, refs)
