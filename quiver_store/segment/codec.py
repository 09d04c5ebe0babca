"""Which codec compresses a stored stream's bodies, read from the stream itself.

pyarrow decompresses IPC bodies without saying how they were compressed, and a segment records
its codec nowhere else (`segment.compression` may have changed between segments), so `quiver
inspect` reads it from the first dictionary or record batch message of the stream: the
`compression` field (a `BodyCompression` table, codec LZ4_FRAME = 0 or ZSTD = 1) of its
RecordBatch header, in the flatbuffer layout of Arrow's Message.fbs. Absent means uncompressed.
"""

from __future__ import annotations

import struct

import pyarrow as pa

# Message.fbs: union MessageHeader { Schema = 1, DictionaryBatch, RecordBatch, ... }
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3
_CODECS = {0: "lz4", 1: "zstd"}


def _at(pos: int) -> int:
    """`pos` if it can be a position (struct would read a negative one from the end)."""
    if pos < 0:
        raise struct.error(f"negative position {pos}")
    return pos


class _Table:
    """A flatbuffer table at `pos` of `buf`; every read is bounds-checked (struct.error)."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        (back,) = struct.unpack_from("<i", buf, _at(pos))
        self.vtable = pos - back
        (self.vtable_size,) = struct.unpack_from("<H", buf, _at(self.vtable))

    def _field(self, index: int) -> int | None:
        slot = 4 + 2 * index
        if slot + 2 > self.vtable_size:
            return None
        (offset,) = struct.unpack_from("<H", self.buf, self.vtable + slot)
        return self.pos + offset if offset else None

    def byte(self, index: int, default: int) -> int:
        at = self._field(index)
        return default if at is None else struct.unpack_from("<B", self.buf, at)[0]

    def table(self, index: int) -> _Table | None:
        at = self._field(index)
        return None if at is None else _Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0])


def message_codec(metadata: bytes) -> str | None:
    """The codec ("zstd", "lz4" or "none") of a dictionary or record batch message, from its
    flatbuffer metadata; None for another kind of message; "?" when the flatbuffer does not parse."""
    try:
        message = _Table(metadata, struct.unpack_from("<I", metadata, 0)[0])
        kind = message.byte(1, 0)  # header_type
        header = message.table(2)
        if kind not in (_DICTIONARY_BATCH, _RECORD_BATCH) or header is None:
            return None
        batch = header.table(1) if kind == _DICTIONARY_BATCH else header  # DictionaryBatch.data
        compression = None if batch is None else batch.table(3)  # RecordBatch.compression
        return "none" if compression is None else _CODECS.get(compression.byte(0, 0), "?")
    except struct.error:
        return "?"


def stream_codec(ipc_file: pa.Buffer) -> str:
    """The codec of an Arrow IPC file's first dictionary or record batch message ("none" if it
    has none; "?" when its messages do not parse)."""
    reader = pa.BufferReader(ipc_file.slice(8))  # after the file's magic and padding
    try:
        while True:
            codec = message_codec(pa.ipc.read_message(reader).metadata.to_pybytes())
            if codec is not None:
                return codec
    except EOFError:
        return "none"
    except (pa.ArrowException, ValueError, OSError):
        return "?"
