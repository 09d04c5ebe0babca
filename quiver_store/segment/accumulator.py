"""The open segment: per-(slot, schema fingerprint) stream accumulators fed straight from the
ingested batches, plus the batch manifest that maps every bundle back to its chunks.

Nothing is serialized here. Chunks are kept as the ingested (zero-copy) batches. Each chunk is
placed at append time into a record batch of its stream: consecutive small chunks share one record
batch until it would exceed COALESCE_ROWS rows or COALESCE_BYTES bytes, and the writer concatenates
them (fewer IPC messages; the manifest addresses (stream, batch, row offset, row count)); a chunk of
ALONE_BYTES or more keeps a record batch to itself and is written without a copy.
``serialized_size`` follows that layout incrementally from ``pa.ipc.get_record_batch_size``: each
chunk adds its IPC body, each record batch its IPC metadata and alignment padding once, each
stream its schema and unified dictionaries once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from ..bundle import RecordBundle
from ..config import SegmentConfig
from ..errors import QuiverError
from .dictionary import DictionaryUnion, Path, dictionary_paths, leaf_dictionary

IPC_FILE_OVERHEAD = 8 + 8 + 10 + 63  # leading magic+pad, EOS, footer size+magic, alignment padding
IPC_BLOCK_BYTES = 24  # one footer Block entry per record batch or dictionary batch
IPC_MESSAGE_OVERHEAD = 136  # flatbuffer metadata of a dictionary batch holding one array (upper bound)
COALESCE_ROWS = 65_536  # a record batch takes no more chunks once it holds this many rows ...
COALESCE_BYTES = 4 << 20  # ... or this many IPC bytes
ALONE_BYTES = 256 << 10  # a chunk this large is a record batch of its own: concatenating it would copy it for nothing


@dataclass
class StreamAccumulator:
    """The chunks of one stream, in arrival order, and the running union of its dictionaries."""

    stream_id: int
    slot: int
    fingerprint: bytes
    schema: pa.Schema
    paths: list[Path]
    chunks: list[pa.RecordBatch] = field(default_factory=list)
    placements: list[tuple[int, int]] = field(default_factory=list)  # per chunk: (record batch, row offset)
    rows: int = 0
    batches: int = 0  # record batches the chunks are coalesced into
    _batch_rows: int = 0
    _batch_bytes: int = 0
    _message_bytes: int = -1  # IPC metadata size of one record batch of this schema (-1: not measured yet)
    _message_bytes_rows: int = 0  # rows of the batch _message_bytes was measured on (0 or 1)
    _padding: int = 0  # expected alignment padding of one chunk's buffers, absent once concatenated
    dictionaries: dict[Path, DictionaryUnion] = field(default_factory=dict)
    batch_bytes: int = 0
    dictionary_bytes: int = 0
    schema_epoch: int | None = None  # the ingest check epoch its first batch was verified in (None: not verified)

    def place(self, batch: pa.RecordBatch, size: int | None = None) -> int:
        """Record where `batch` goes; return the IPC bytes it adds: its IPC body (record batch
        message size minus metadata and the alignment padding concatenation removes; dictionaries
        are separate messages, written once per stream) plus, when it opens a record batch, that
        batch's IPC metadata and padding.

        `size` is the batch's `pa.ipc.get_record_batch_size` when the caller already knows it (the
        WAL encoder serialized the very same message)."""
        if self._message_bytes < 0 or (self._message_bytes_rows == 0 and batch.num_rows):
            # one-row metadata (flatbuffers omit zero-valued fields, so an empty batch's is smaller):
            # a one-row batch's size minus ~8 padded bytes per buffer
            buffers = sum(1 for c in batch.columns for b in c.buffers() if b is not None)
            probe = batch.slice(0, min(1, batch.num_rows))
            self._message_bytes = max(0, pa.ipc.get_record_batch_size(probe) - 8 * buffers * probe.num_rows)
            self._message_bytes_rows = probe.num_rows
            self._padding = 4 * buffers
        n = batch.num_rows
        if size is None:
            size = pa.ipc.get_record_batch_size(batch)
        added = max(0, size - self._message_bytes - self._padding)
        if (
            not self.batches
            or self._batch_rows + n > COALESCE_ROWS
            or self._batch_bytes + size > COALESCE_BYTES
            or max(size, self._batch_bytes) >= ALONE_BYTES
        ):
            self.batches += 1
            self._batch_rows = self._batch_bytes = 0
            added += self._message_bytes + IPC_BLOCK_BYTES + self._padding
        self.placements.append((self.batches - 1, self._batch_rows))
        self.chunks.append(batch)
        self.rows += n
        self._batch_rows += n
        self._batch_bytes += size
        return added

    @property
    def serialized_size(self) -> int:
        schema_bytes = self.schema.serialize().size
        return IPC_FILE_OVERHEAD + 2 * schema_bytes + self.batch_bytes + self.dictionary_bytes


@dataclass(frozen=True)
class ManifestEntry:
    """One bundle: when it was ingested and, per present slot (ascending), (stream_id, chunk index)."""

    ingestion_time_ns: int
    refs: tuple[tuple[int, int, int], ...]  # (slot, stream_id, chunk_index)


def _dictionary_bytes(unions: dict[Path, DictionaryUnion]) -> int:
    return sum(u.nbytes + IPC_MESSAGE_OVERHEAD + IPC_BLOCK_BYTES for u in unions.values())


class OpenSegment:
    """Bundles accumulated since the last finalize; `append` is all-or-nothing per bundle."""

    def __init__(self, config: SegmentConfig) -> None:
        self.config = config
        self.opened_at_ns = time.time_ns()
        self.min_ingestion_time_ns: int | None = None
        self.max_ingestion_time_ns: int | None = None
        self.serialized_size = 0
        self._streams: list[StreamAccumulator] = []
        self._current: dict[tuple[int, bytes], StreamAccumulator] = {}
        self._manifest: list[ManifestEntry] = []

    # -- read-only views (the writer consumes these) -----------------------------------------
    @property
    def bundle_count(self) -> int:
        return len(self._manifest)

    @property
    def stream_count(self) -> int:
        return len(self._streams)

    @property
    def is_empty(self) -> bool:
        return not self._manifest

    @property
    def streams(self) -> tuple[StreamAccumulator, ...]:
        """Streams in stream-id order (first appearance; a rotated stream follows its predecessor)."""
        return tuple(self._streams)

    @property
    def manifest(self) -> tuple[ManifestEntry, ...]:
        return tuple(self._manifest)

    # -- ingest ------------------------------------------------------------------------------
    def append(self, bundle: RecordBundle, ipc_sizes: Sequence[int | None] | None = None, schema_epoch: int | None = None) -> None:
        """Add one bundle's batches to their streams; raise QuiverError, changing nothing, on a
        batch whose schema contradicts the stream its (slot, fingerprint) names.

        Hints from the ingest path, both optional: `ipc_sizes`, per slot in ascending order, the
        batch's IPC message size if known (None: measure it); `schema_epoch`, the epoch of the
        ingest check (BundleEncoder.check) that verified every batch's schema against the schema
        its (slot, fingerprint) was first seen with. Two batches verified in one epoch have equal
        schemas, so a stream opened in that epoch skips the comparison."""
        ts = bundle.ingestion_time_ns
        if not isinstance(ts, int) or isinstance(ts, bool) or not -(1 << 63) <= ts < 1 << 63:
            raise QuiverError(f"bundle ingestion_time_ns must be an int64, got {ts!r}")
        limit = self.config.max_dictionary_size
        plan: list[tuple[int, bytes, pa.RecordBatch, StreamAccumulator | None, dict[Path, DictionaryUnion], int | None]] = []
        fingerprint = bundle.fingerprint
        current = self._current
        for i, (slot, batch) in enumerate(bundle.slots.items()):
            fp = fingerprint(slot)
            size = ipc_sizes[i] if ipc_sizes is not None else None
            stream = current.get((slot, fp))
            if stream is None:
                paths = [p for p, _ in dictionary_paths(batch.schema)]
                plan.append((slot, fp, batch, None, self._start_unions(batch, paths), size))
                continue
            if not stream.paths and schema_epoch is not None and stream.schema_epoch == schema_epoch:
                plan.append((slot, fp, batch, stream, {}, size))  # verified at ingest, no dictionaries
                continue
            if batch.schema is not stream.schema and not batch.schema.equals(stream.schema, check_metadata=False):
                raise QuiverError(
                    f"slot {slot}: batch schema contradicts stream {stream.stream_id} of fingerprint "
                    f"{fp.hex()[:16]}: expected\n{stream.schema.remove_metadata()}\ngot\n"
                    f"{batch.schema.remove_metadata()}\n(the embedder must give a different fingerprint "
                    "to a different schema); the bundle was not added"
                )
            unions = {p: stream.dictionaries[p].extend(leaf_dictionary(batch, p)) for p in stream.paths}
            grew_past = False
            for p, union in unions.items():
                if union.size > limit:  # an upper bound: make it exact before deciding
                    union = unions[p] = union.exact()
                    grew_past = grew_past or union.size > max(limit, stream.dictionaries[p].exact().size)
            if grew_past:  # rotate: this chunk starts a fresh stream with the same slot and fingerprint
                plan.append((slot, fp, batch, None, self._start_unions(batch, stream.paths), size))
            else:
                plan.append((slot, fp, batch, stream, unions, size))

        refs = []
        for slot, fp, batch, target, unions, size in plan:
            stream = target
            if stream is None:
                stream = StreamAccumulator(len(self._streams), slot, fp, batch.schema, list(unions), schema_epoch=schema_epoch)
                self._streams.append(stream)
                self._current[(slot, fp)] = stream
                self.serialized_size += stream.serialized_size
            before = stream.batch_bytes + stream.dictionary_bytes
            stream.batch_bytes += stream.place(batch, size)
            if unions:
                if any(unions[p] is not stream.dictionaries.get(p) for p in unions):
                    stream.dictionary_bytes = _dictionary_bytes(unions)
                stream.dictionaries = unions
            self.serialized_size += stream.batch_bytes + stream.dictionary_bytes - before
            refs.append((slot, stream.stream_id, len(stream.chunks) - 1))
        self._manifest.append(ManifestEntry(ts, tuple(refs)))
        if self.min_ingestion_time_ns is None or ts < self.min_ingestion_time_ns:
            self.min_ingestion_time_ns = ts
        if self.max_ingestion_time_ns is None or ts > self.max_ingestion_time_ns:
            self.max_ingestion_time_ns = ts

    @staticmethod
    def _start_unions(batch: pa.RecordBatch, paths: list[Path]) -> dict[Path, DictionaryUnion]:
        return {p: DictionaryUnion.start(leaf_dictionary(batch, p)) for p in paths}
