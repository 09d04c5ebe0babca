"""Arrow IPC streams of the OTAP wire: one writer per live (payload type, signature) on the
encoder side, one incrementally fed reader per ``schema_id`` on the decoder side."""

from __future__ import annotations

import collections
import io

import pyarrow as pa


class StreamWriter:
    """An Arrow IPC stream whose bytes are taken out after every batch (one payload each).

    Every batch carries the stream's cumulative dictionaries, so with dictionary deltas on the
    writer emits only the new entries; a dictionary that is not an extension (a reset) is
    written as a replacement.
    """

    def __init__(self, schema_id: str, schema: pa.Schema, compression: str | None):
        self.schema_id = schema_id
        self._sink = io.BytesIO()
        options = pa.ipc.IpcWriteOptions(emit_dictionary_deltas=True, compression=compression)
        self._writer = pa.ipc.new_stream(self._sink, schema, options=options)

    def write(self, batch: pa.RecordBatch) -> bytes:
        """IPC messages of this batch (schema first on a new stream, then dictionaries, record)."""
        self._writer.write_batch(batch)
        data = self._sink.getvalue()
        self._sink.seek(0)
        self._sink.truncate()
        return data

    @property
    def stats(self) -> pa.ipc.WriteStats:
        return self._writer.stats

    def close(self) -> None:
        """End the stream (its end-of-stream marker is never sent: a new schema_id replaces it)."""
        self._writer.close()
        self._sink = io.BytesIO()


class _Feed:
    """A read-only file whose content grows as payloads arrive.

    Reads within one payload return memoryview slices of it (payloads are immutable bytes, so
    pyarrow wraps them without copying the record bodies); consumed payloads are dropped.
    """

    def __init__(self) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._pos = 0  # read position in the first chunk
        self.closed = False

    def append(self, data: bytes) -> None:
        if len(data):
            self._chunks.append(data if isinstance(data, bytes) else bytes(data))

    def read(self, n: int | None = -1) -> bytes | memoryview:
        if n is None or n < 0:
            n = self.pending
        if not self._chunks or n == 0:
            return b""
        first = self._chunks[0]
        if self._pos + n <= len(first):  # the usual case: a message inside one payload
            out = memoryview(first)[self._pos : self._pos + n]
            self._pos += n
        else:  # spans payloads: join the pieces
            parts = [memoryview(first)[self._pos :]]
            got = len(parts[0])
            for chunk in list(self._chunks)[1:]:
                if got >= n:
                    break
                parts.append(memoryview(chunk)[: n - got])
                got += len(parts[-1])
            out = memoryview(b"".join(parts))
            self._pos += got
        while self._chunks and self._pos >= len(self._chunks[0]):
            self._pos -= len(self._chunks.popleft())
        return out

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    @property
    def pending(self) -> int:
        return sum(len(c) for c in self._chunks) - self._pos


class StreamReader:
    """The reader of one ``schema_id``: fed one payload at a time, yields one batch per payload.

    ``commit`` marks the state after the batches read so far as good; ``rollback`` returns to
    the last committed state, so a rejected envelope leaves the stream as it was. The state of
    an IPC stream is its schema and its dictionaries, and the last committed batch holds both
    (each dictionary column carries the stream's whole dictionary): a fresh reader primed with
    that batch, written as a stream of its own, continues with the next deltas as the old one
    would have.
    """

    def __init__(self, schema_id: str):
        self.schema_id = schema_id
        self._feed = _Feed()
        self._reader: pa.ipc.RecordBatchStreamReader | None = None
        self._last: pa.RecordBatch | None = None
        self._committed: pa.RecordBatch | None = None
        self._dirty = False

    def read(self, record: bytes) -> pa.RecordBatch:
        self._dirty = True
        self._feed.append(record)
        if self._reader is None:
            self._reader = pa.ipc.open_stream(self._feed)
        batch = self._reader.read_next_batch()
        batch.validate(full=True)  # corrupt buffers must fail here, not crash a compute kernel later
        if self._feed.pending:
            raise ValueError(f"{self._feed.pending} trailing bytes after the record batch")
        self._last = batch
        return batch

    def commit(self) -> None:
        self._committed = self._last
        self._dirty = False

    def rollback(self) -> None:
        """Back to the state right after the last committed batch (nothing to do if not fed since)."""
        if not self._dirty:
            return
        self._dirty = False
        self._feed = _Feed()
        self._reader = None
        self._last = self._committed
        if self._committed is None:
            return
        sink = io.BytesIO()
        pa.ipc.new_stream(sink, self._committed.schema).write_batch(self._committed)  # no end-of-stream marker
        self._feed.append(sink.getvalue())
        self._reader = pa.ipc.open_stream(self._feed)
        self._reader.read_next_batch()
