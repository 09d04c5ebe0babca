"""Memory-mapped, zero-copy segment reader.

open() validates only metadata (header, trailer, footer, directory, manifest, metadata section:
checksums, bounds and cross-references), so opening costs the same for any stream size. Stream
bytes are checked (CRC32C) the first time a stream is hydrated and each record batch is validated
in full the first time it is read, so a corrupted payload is never returned, even one whose CRC
was computed over the damage; verify() checks every byte of the file. Batches returned are slices
of record batches read by ``pa.ipc.open_file`` straight from the mapping: no copy for
uncompressed data.

Dictionary columns come back with the stream's unified dictionary and the stored index type,
which is the ingested one unless unification had to widen it; the values equal the ingested ones.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType

import numpy as np
import pyarrow as pa

from ..bundle import MAX_SLOTS, RecordBundle
from ..errors import CorruptionError, QuiverError, disk_error
from ..fs import DEFAULT_FS, FileSystem
from ..wal.format import decimal
from . import format as fmt
from .codec import stream_codec
from .info import SegmentInfo, StreamInfo
from .stats import event_time_range

_MIN_SIZE = fmt.HEADER_SIZE + fmt.FOOTER_SIZE + fmt.TRAILER_SIZE
_MIN_STREAM = 8 + 8 + 4 + 6  # magic+pad, EOS, footer length, magic of an Arrow IPC file


def _align(n: int, alignment: int) -> int:
    return n + fmt.pad_to(n, alignment)


class SegmentReader:
    """Read bundles of one segment file; a context manager. bundle() may be called from several
    threads; verify() and close() must not run concurrently with reads."""

    def __init__(self, path: str, mm: object, size: int, *, verify_streams: bool = True) -> None:
        self.path = path
        self._mm = mm
        self._size = size
        self._verify_streams = verify_streams
        self._readers: dict[int, pa.ipc.RecordBatchFileReader] = {}
        self._batches: dict[tuple[int, int], pa.RecordBatch] = {}
        self._lock = threading.RLock()
        self._parse()
        self._buffer: pa.Buffer | None = pa.py_buffer(mm)  # exported only once the metadata is valid

    @classmethod
    def open(cls, path: str, *, fs: FileSystem = DEFAULT_FS, verify_streams: bool = True) -> SegmentReader:
        """Map `path` and validate its metadata; raises CorruptionError naming file and offset, and
        QuiverError (with `errno` and `filename`) for a path that cannot be opened or mapped."""
        if os.path.isdir(path):
            raise QuiverError(f"{path} is a directory, not a segment file (segments/<n>.qseg)")
        try:
            fd = fs.open(path, os.O_RDONLY)
        except OSError as exc:
            raise disk_error(exc, "opening the segment file", path, "nothing was read") from exc
        try:
            size = fs.size(fd)
            if size < _MIN_SIZE:
                raise CorruptionError(
                    f"file is {size} bytes, shorter than the smallest segment ({_MIN_SIZE} bytes): truncated?",
                    path,
                    size,
                )
            try:
                mm = fs.mmap(fd)
            except OSError as exc:
                raise disk_error(exc, "mapping the segment file", path, "nothing was read") from exc
        finally:
            fs.close(fd)
        try:
            return cls(path, mm, size, verify_streams=verify_streams)
        except BaseException:
            with contextlib.suppress(BufferError):
                mm.close()
            raise

    # -- metadata ----------------------------------------------------------------------------
    def _bytes(self, start: int, length: int) -> bytes:
        return self._mm[start : start + length]  # type: ignore[index]

    def _parse(self) -> None:
        path, size = self.path, self._size
        t_off = size - fmt.TRAILER_SIZE
        footer_length, footer_crc, _ = fmt.decode_trailer(self._bytes(t_off, fmt.TRAILER_SIZE), path, t_off)
        if footer_length != fmt.FOOTER_SIZE:
            raise CorruptionError(f"footer length {footer_length} (version 1 footers are {fmt.FOOTER_SIZE})", path, t_off)
        f_off = t_off - footer_length
        footer_bytes = self._bytes(f_off, footer_length)
        if fmt.crc(footer_bytes) != footer_crc:
            raise CorruptionError("footer checksum mismatch", path, f_off)
        footer = fmt.Footer.decode(footer_bytes, path, f_off)
        seq = fmt.check_header(self._bytes(0, fmt.HEADER_SIZE), path)
        if seq != footer.seq:
            raise CorruptionError(f"header seq {seq} differs from footer seq {footer.seq}", path, 16)
        named = decimal(os.path.basename(path).removesuffix(".qseg")) if path.endswith(".qseg") else None
        if named is not None and named != seq:
            # The store numbers segments by file name and subscribers by this number: they must agree.
            raise CorruptionError(f"the file is named for segment {named} but holds segment {seq} (renamed by hand?)", path, 16)

        # canonical section placement: directory, manifest, metadata, footer, each 8-aligned back to back
        d_off, d_len = footer.directory_offset, footer.directory_length
        m_off, m_len = footer.manifest_offset, footer.manifest_length
        x_off, x_len = footer.metadata_offset, footer.metadata_length
        if not (
            fmt.HEADER_SIZE <= d_off <= f_off
            and d_off % fmt.ALIGNMENT == 0
            and m_off == _align(d_off + d_len, fmt.SECTION_ALIGNMENT)
            and x_off == _align(m_off + m_len, fmt.SECTION_ALIGNMENT)
            and f_off == _align(x_off + x_len, fmt.SECTION_ALIGNMENT)
        ):
            raise CorruptionError(
                f"footer section offsets are inconsistent (directory {d_off}+{d_len}, manifest {m_off}+{m_len}, "
                f"metadata {x_off}+{x_len}, footer at {f_off})",
                path,
                f_off,
            )
        sections = []
        for name, off, length, stored in (
            ("directory", d_off, d_len, footer.directory_crc32c),
            ("manifest", m_off, m_len, footer.manifest_crc32c),
            ("metadata", x_off, x_len, footer.metadata_crc32c),
        ):
            data = self._bytes(off, length)
            if fmt.crc(data) != stored:
                raise CorruptionError(f"{name} checksum mismatch", path, off)
            sections.append(data)
        metadata, event_cols, schemas = fmt.decode_metadata(sections[2], path, x_off)
        entries, bitmaps = fmt.decode_directory(sections[0], footer.stream_count, path, d_off)
        bundles, refs = fmt.decode_manifest(sections[1], path, m_off)
        streams = self._check_directory(entries, bitmaps, schemas, d_off)
        self._check_manifest(footer, entries, bundles, refs, m_off)
        self._footer, self._entries, self._bundles, self._refs = footer, entries, bundles, refs
        self._gaps = self._padding_regions(entries, footer, f_off)
        self.info = SegmentInfo(
            seq=footer.seq,
            path=path,
            size_bytes=size,
            bundle_count=footer.bundle_count,
            stream_count=footer.stream_count,
            ingestion_time_min_ns=footer.ingestion_time_min_ns,
            ingestion_time_max_ns=footer.ingestion_time_max_ns,
            metadata=metadata,
            streams=streams,
            representative_schemas=schemas,
            event_time_columns=event_cols,
            opened_at_ns=footer.opened_at_ns,
            created_at_ns=footer.created_at_ns,
            format_version=fmt.VERSION,
        )
        self._fingerprints = [s.fingerprint for s in streams]

    def _check_directory(
        self, entries: np.ndarray, bitmaps: bytes, schemas: dict[int, pa.Schema], d_off: int
    ) -> tuple[StreamInfo, ...]:
        path = self.path
        expected_offset = fmt.HEADER_SIZE
        bitmap_pos = 0
        out = []
        for i, e in enumerate(entries):
            at = d_off + i * fmt.DIRECTORY_ENTRY.itemsize
            offset, length, slot = int(e["offset"]), int(e["length"]), int(e["slot"])
            if int(e["stream_id"]) != i:
                raise CorruptionError(f"directory entry {i} names stream {int(e['stream_id'])}", path, at)
            if slot >= MAX_SLOTS or slot not in schemas:
                raise CorruptionError(f"stream {i}: slot {slot} is out of range or has no representative schema", path, at)
            if offset != expected_offset or length < _MIN_STREAM or offset + length > d_off:
                raise CorruptionError(
                    f"stream {i}: slice {offset}+{length} is misplaced (expected at {expected_offset}, "
                    f"before the directory at {d_off})",
                    path,
                    at,
                )
            flags = int(e["flags"])
            if flags & ~fmt.EVENT_TIME_FLAG:
                raise CorruptionError(f"stream {i}: unknown flags {flags:#x}", path, at + 6)
            names = schemas[slot].names
            n_bytes = (len(names) + 7) // 8
            if int(e["present_offset"]) != bitmap_pos or bitmap_pos + n_bytes > len(bitmaps):
                raise CorruptionError(f"stream {i}: present-column bitmap out of place", path, at + 76)
            bits = np.unpackbits(np.frombuffer(bitmaps, np.uint8, n_bytes, bitmap_pos), bitorder="little")
            if bits[len(names) :].any():
                raise CorruptionError(f"stream {i}: present-column bitmap has bits past the schema", path, at + 76)
            bitmap_pos += n_bytes
            expected_offset = _align(offset + length, fmt.ALIGNMENT)
            has_event = bool(flags & fmt.EVENT_TIME_FLAG)
            if has_event and int(e["event_time_min"]) > int(e["event_time_max"]):
                raise CorruptionError(f"stream {i}: event-time range is inverted", path, at + 80)
            if not has_event and (int(e["event_time_min"]) or int(e["event_time_max"])):
                raise CorruptionError(f"stream {i}: event-time fields set without the flag", path, at + 80)
            out.append(
                StreamInfo(
                    stream_id=i,
                    slot=slot,
                    fingerprint=bytes(e["fingerprint"]),
                    rows=int(e["rows"]),
                    chunks=int(e["chunks"]),
                    bytes=length,
                    present_columns=tuple(n for n, b in zip(names, bits[: len(names)]) if b),
                    offset=offset,
                    batches=int(e["batches"]),
                    crc32c=int(e["crc32c"]),
                    event_time_min_ns=int(e["event_time_min"]) if has_event else None,
                    event_time_max_ns=int(e["event_time_max"]) if has_event else None,
                )
            )
        if bitmap_pos != len(bitmaps):
            raise CorruptionError("directory has trailing bytes after the column bitmaps", path, d_off)
        if _align(expected_offset, fmt.ALIGNMENT) != d_off or not out:
            raise CorruptionError(f"directory at {d_off} does not follow the last stream (ends {expected_offset})", path, d_off)
        return tuple(out)

    def _check_manifest(self, footer: fmt.Footer, entries: np.ndarray, bundles: np.ndarray, refs: np.ndarray, m_off: int) -> None:
        path = self.path
        if len(bundles) != footer.bundle_count or len(bundles) == 0:
            raise CorruptionError(f"manifest holds {len(bundles)} bundles, footer says {footer.bundle_count}", path, m_off)
        bitmaps = bundles["slot_bitmap"]
        bits = ((bitmaps[:, None] >> np.arange(MAX_SLOTS, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        counts = bits.sum(axis=1)
        if int(counts.sum()) != len(refs):
            raise CorruptionError(f"manifest has {len(refs)} refs, its slot bitmaps name {int(counts.sum())}", path, m_off)
        sid = refs["stream_id"].astype(np.int64)
        if len(sid) and int(sid.max()) >= len(entries):
            raise CorruptionError(f"manifest refers to stream {int(sid.max())} of {len(entries)}", path, m_off)
        ref_slots = np.nonzero(bits)[1]
        if not np.array_equal(entries["slot"][sid].astype(np.int64), ref_slots):
            raise CorruptionError("manifest refs do not match their streams' slots", path, m_off)
        if np.any(refs["batch"] >= entries["batches"][sid]):
            raise CorruptionError("manifest refers to a record batch past its stream's batch count", path, m_off)
        rows = np.zeros(len(entries), np.uint64)
        np.add.at(rows, sid, refs["row_count"].astype(np.uint64))
        chunks = np.bincount(sid, minlength=len(entries))
        if not (np.array_equal(rows, entries["rows"]) and np.array_equal(chunks, entries["chunks"])):
            raise CorruptionError("manifest row or chunk counts disagree with the stream directory", path, m_off)
        # Chunks sharing a record batch tile it in manifest order: each starts where the previous ended.
        order = np.lexsort((np.arange(len(refs)), refs["batch"], sid))
        group = sid[order] * (1 << 32) + refs["batch"][order].astype(np.int64)
        counts_sorted = refs["row_count"][order].astype(np.int64)
        ends = np.cumsum(counts_sorted)
        first = np.ones(len(order), bool)
        first[1:] = group[1:] != group[:-1]
        group_base = np.maximum.accumulate(np.where(first, ends - counts_sorted, 0))
        if not np.array_equal(refs["row_offset"][order].astype(np.int64), ends - counts_sorted - group_base):
            raise CorruptionError("manifest chunks do not tile their record batches (row offsets overlap or leave gaps)", path, m_off)
        # Every chunk has a ref, so a record batch holds exactly the rows of its chunks (_batch checks).
        last = np.ones(len(order), bool)
        last[:-1] = group[1:] != group[:-1]
        self._batch_rows = {(int(g) >> 32, int(g) & 0xFFFFFFFF): int(n) for g, n in zip(group[last], (ends - group_base)[last])}
        ts = bundles["ingestion_time_ns"]
        if int(ts.min()) != footer.ingestion_time_min_ns or int(ts.max()) != footer.ingestion_time_max_ns:
            raise CorruptionError("manifest ingestion times disagree with the footer's range", path, m_off)
        self._ref_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._ref_slots = ref_slots

    def _padding_regions(self, entries: np.ndarray, footer: fmt.Footer, f_off: int) -> list[tuple[int, int]]:
        """Byte ranges the format fills with zeros (checked by verify)."""
        ends = [(int(e["offset"]) + int(e["length"]), int(n)) for e, n in zip(entries, [*entries["offset"][1:], footer.directory_offset])]
        ends += [
            (footer.directory_offset + footer.directory_length, footer.manifest_offset),
            (footer.manifest_offset + footer.manifest_length, footer.metadata_offset),
            (footer.metadata_offset + footer.metadata_length, f_off),
        ]
        return [(a, b) for a, b in ends if b > a]

    # -- bundles -----------------------------------------------------------------------------
    @property
    def bundle_count(self) -> int:
        return self.info.bundle_count

    def _require_open(self) -> pa.Buffer:
        if self._buffer is None:
            raise QuiverError(f"{self.path}: segment reader is closed")
        return self._buffer

    def _stream_reader(self, sid: int) -> pa.ipc.RecordBatchFileReader:
        reader = self._readers.get(sid)
        if reader is not None:
            return reader
        stream = self.info.streams[sid]
        view = self._require_open().slice(stream.offset, stream.bytes)
        if self._verify_streams and fmt.crc(memoryview(view)) != stream.crc32c:
            raise CorruptionError(f"stream {sid} (slot {stream.slot}) checksum mismatch", self.path, stream.offset)
        try:
            reader = pa.ipc.open_file(view)
            fmt.decode_names(reader.schema)
        except fmt.IPC_ERRORS as e:
            raise CorruptionError(f"stream {sid} is not a valid Arrow IPC file: {e}", self.path, stream.offset) from None
        if reader.num_record_batches != stream.batches:
            raise CorruptionError(
                f"stream {sid} holds {reader.num_record_batches} record batches, directory says {stream.batches}",
                self.path,
                stream.offset,
            )
        names = reader.schema.names
        if sorted(names) != sorted(stream.present_columns):  # another slot's slice: its columns would pass as these
            raise CorruptionError(
                f"stream {sid}: directory lists columns {stream.present_columns}, the data has {names}",
                self.path,
                self._footer.directory_offset + sid * fmt.DIRECTORY_ENTRY.itemsize,
            )
        self._readers[sid] = reader
        return reader

    def _batch(self, sid: int, index: int) -> pa.RecordBatch:
        key = (sid, index)
        batch = self._batches.get(key)
        if batch is not None:
            return batch
        with self._lock:  # an IPC file reader loads its dictionaries on first use: not concurrently
            batch = self._batches.get(key)
            if batch is None:
                try:
                    batch = self._stream_reader(sid).get_batch(index)
                except fmt.IPC_ERRORS as e:
                    raise CorruptionError(
                        f"stream {sid}: record batch {index} does not decode: {e}", self.path, self.info.streams[sid].offset
                    ) from None
                expected = self._batch_rows.get(key, 0)
                if batch.num_rows != expected:  # another stream's slice: its rows would pass as these bundles'
                    raise CorruptionError(
                        f"stream {sid}: record batch {index} holds {batch.num_rows} rows, the manifest's chunks {expected}",
                        self.path,
                        self.info.streams[sid].offset,
                    )
                if self._verify_streams:
                    # A CRC written over bad bytes passes: offsets or dictionary indices past their
                    # buffers would make readers of the batch read outside them (or crash).
                    try:
                        batch.validate(full=True)
                    except pa.ArrowException as e:
                        raise CorruptionError(
                            f"stream {sid}: record batch {index} is invalid: {e}", self.path, self.info.streams[sid].offset
                        ) from None
                self._batches[key] = batch
        return batch

    def bundle(self, index: int, slots: Iterable[int] | None = None) -> RecordBundle:
        """Bundle `index` (manifest order), hydrating only `slots` (all when None); zero-copy."""
        if not 0 <= index < self.info.bundle_count:
            raise QuiverError(f"{self.path}: bundle index {index} is out of range [0, {self.info.bundle_count})")
        wanted = None if slots is None else set(slots)
        out: dict[int, pa.RecordBatch] = {}
        fps: dict[int, bytes] = {}
        start, end = int(self._ref_start[index]), int(self._ref_start[index + 1])
        for k in range(start, end):
            slot = int(self._ref_slots[k])
            if wanted is not None and slot not in wanted:
                continue
            sid, batch_index, row_offset, row_count = (int(v) for v in self._refs[k])
            out[slot] = self._batch(sid, batch_index).slice(row_offset, row_count)  # inside: the chunks tile the batch
            fps[slot] = self._fingerprints[sid]
        return RecordBundle(out, fps, ingestion_time_ns=int(self._bundles["ingestion_time_ns"][index]))

    def bundles(self, slots: Iterable[int] | None = None) -> Iterator[RecordBundle]:
        wanted = None if slots is None else tuple(slots)
        for i in range(self.info.bundle_count):
            yield self.bundle(i, wanted)

    def slot_refs(self, slot: int) -> Iterator[tuple[int, int, int, int]]:
        """(stream_id, batch, row_offset, row_count) of every chunk of `slot`, in bundle order."""
        for k in np.flatnonzero(self._ref_slots == slot):
            sid, batch, row_offset, row_count = (int(v) for v in self._refs[k])
            yield sid, batch, row_offset, row_count

    def record_batch(self, stream_id: int, index: int) -> pa.RecordBatch:
        """Record batch `index` of a stream, as stored (zero-copy)."""
        if not 0 <= stream_id < self.info.stream_count or not 0 <= index < self.info.streams[stream_id].batches:
            raise QuiverError(f"{self.path}: no record batch {index} in stream {stream_id}")
        return self._batch(stream_id, index)

    def stream_codec(self, stream_id: int) -> str:
        """How the stream's bodies are compressed ("zstd", "lz4" or "none"), read from its first
        batch message without checking the stream's CRC ("?" if that message does not parse)."""
        stream = self.info.streams[stream_id]
        return stream_codec(self._require_open().slice(stream.offset, stream.bytes))

    def stream_schema(self, stream_id: int) -> pa.Schema:
        """The schema a stream was written with (its IPC file's; no batch is decoded)."""
        if not 0 <= stream_id < self.info.stream_count:
            raise QuiverError(f"{self.path}: no stream {stream_id}")
        return self._stream_reader(stream_id).schema

    def stream_batches(self, stream_id: int) -> list[pa.RecordBatch]:
        """Every record batch of one stream, as stored (zero-copy)."""
        reader = self._stream_reader(stream_id)
        return [self._batch(stream_id, i) for i in range(reader.num_record_batches)]

    def regions(self) -> list[tuple[str, int, int]]:
        """(name, offset, length) of every region of the file in order, padding included."""
        f = self._footer
        out = [("header", 0, fmt.HEADER_SIZE)]
        out += [(f"stream {s.stream_id}", s.offset, s.bytes) for s in self.info.streams]
        out += [("padding", a, b - a) for a, b in self._gaps]
        out += [
            ("directory", f.directory_offset, f.directory_length),
            ("manifest", f.manifest_offset, f.manifest_length),
            ("metadata", f.metadata_offset, f.metadata_length),
            ("footer", self._size - fmt.TRAILER_SIZE - fmt.FOOTER_SIZE, fmt.FOOTER_SIZE),
            ("trailer", self._size - fmt.TRAILER_SIZE, fmt.TRAILER_SIZE),
        ]
        return sorted((r for r in out if r[2] > 0), key=lambda r: r[1])

    # -- verification ------------------------------------------------------------------------
    def verify(self) -> None:
        """Check every byte: metadata again, each stream's CRC32C and IPC structure, zero padding."""
        self._require_open()
        self._parse()
        for a, b in self._gaps:
            nonzero = np.flatnonzero(np.frombuffer(self._bytes(a, b - a), np.uint8))
            if len(nonzero):
                raise CorruptionError("padding byte is not zero", self.path, a + int(nonzero[0]))
        self._readers.clear()
        self._batches.clear()
        verify_streams, self._verify_streams = self._verify_streams, True
        try:
            for stream in self.info.streams:
                batches = self.stream_batches(stream.stream_id)
                self._check_statistics(stream, batches)  # rows: each batch's were checked as it was read
            for i in range(self.info.bundle_count):
                self.bundle(i)
        finally:
            self._verify_streams = verify_streams

    def _check_statistics(self, stream: StreamInfo, batches: list[pa.RecordBatch]) -> None:
        """The directory's event-time range agrees with the stream's data (its present columns were
        checked when the stream was opened)."""
        at = self._footer.directory_offset + stream.stream_id * fmt.DIRECTORY_ENTRY.itemsize
        column = self.info.event_time_columns.get(stream.slot)
        recorded = (stream.event_time_min_ns, stream.event_time_max_ns)
        actual = event_time_range(batches, column) if column else None
        if recorded != (actual or (None, None)):
            raise CorruptionError(
                f"stream {stream.stream_id}: directory event-time range {recorded} differs from the data's {actual}",
                self.path,
                at,
            )

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the mapping. Batches already returned keep their pages mapped until they are freed."""
        self._readers.clear()
        self._batches.clear()
        self._buffer = None
        # batches handed out may still reference the mapping; it is unmapped when they are freed
        with contextlib.suppress(BufferError):
            self._mm.close()  # type: ignore[attr-defined]

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
