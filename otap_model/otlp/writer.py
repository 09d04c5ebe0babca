"""Protobuf wire-format writer: OTAP columns -> serialized OTLP messages, one field at a time.

A *blob* is a column of serialized message contents, ``(offsets int64[n+1], data uint8)``, like
an Arrow binary array. Fields are encoded for all rows at once (``varint``, ``fixed``, ``length``
delimited, ``packed``), a message is the row-wise concatenation of its field blobs, and child
messages are nested with ``group`` (children grouped by parent row, each wrapped as a
length-delimited field). encode.py composes these bottom-up into the export request bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .wire import _jit

Blob = tuple[np.ndarray, np.ndarray]

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def tag(field: int, wire: int) -> np.ndarray:
    """The varint-encoded tag of a field."""
    value, out = field << 3 | wire, bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return np.frombuffer(bytes(out), np.uint8)


@_jit
def _varint_size(v):  # type: ignore[no-untyped-def]
    n = 1
    while v >= np.uint64(0x80):
        v >>= np.uint64(7)
        n += 1
    return n


@_jit
def _put_varint(out, pos, v):  # type: ignore[no-untyped-def]
    while v >= np.uint64(0x80):
        out[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


@_jit
def _k_scalar(values, present, tg, width):  # type: ignore[no-untyped-def]
    """width 0: varint; 4 / 8: little-endian fixed32 / fixed64."""
    n = values.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        size = 0
        if present[i]:
            size = tg.shape[0] + (_varint_size(values[i]) if width == 0 else width)
        offsets[i + 1] = offsets[i] + size
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        if not present[i]:
            continue
        pos = offsets[i]
        for j in range(tg.shape[0]):
            out[pos + j] = tg[j]
        pos += tg.shape[0]
        v = values[i]
        if width == 0:
            _put_varint(out, pos, v)
        else:
            for j in range(width):
                out[pos + j] = np.uint8((v >> np.uint64(8 * j)) & np.uint64(0xFF))
    return offsets, out


@_jit
def _k_len(src_offsets, src, present, tg):  # type: ignore[no-untyped-def]
    n = present.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        size = 0
        if present[i]:
            length = src_offsets[i + 1] - src_offsets[i]
            size = tg.shape[0] + _varint_size(np.uint64(length)) + length
        offsets[i + 1] = offsets[i] + size
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        if not present[i]:
            continue
        pos = offsets[i]
        for j in range(tg.shape[0]):
            out[pos + j] = tg[j]
        pos += tg.shape[0]
        start = src_offsets[i]
        length = src_offsets[i + 1] - start
        pos = _put_varint(out, pos, np.uint64(length))
        for b in range(length):
            out[pos + b] = src[start + b]
    return offsets, out


@_jit
def _k_concat(offsets2d, data):  # type: ignore[no-untyped-def]
    """Row-wise concatenation of k blobs whose data were appended into one buffer."""
    k, n1 = offsets2d.shape
    n = n1 - 1
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        size = 0
        for j in range(k):
            size += offsets2d[j, i + 1] - offsets2d[j, i]
        offsets[i + 1] = offsets[i] + size
    out = np.empty(offsets[n], np.uint8)
    pos = 0
    for i in range(n):
        for j in range(k):
            for b in range(offsets2d[j, i], offsets2d[j, i + 1]):
                out[pos] = data[b]
                pos += 1
    return offsets, out


@_jit
def _k_group(child_off, child, order, parent_sorted, n_parent, tg):  # type: ignore[no-untyped-def]
    """Per parent row, the children (in `order`, grouped by parent) each as a length-delimited field."""
    offsets = np.zeros(n_parent + 1, np.int64)
    for k in range(order.shape[0]):
        c = order[k]
        length = child_off[c + 1] - child_off[c]
        offsets[parent_sorted[k] + 1] += tg.shape[0] + _varint_size(np.uint64(length)) + length
    for p in range(n_parent):
        offsets[p + 1] += offsets[p]
    out = np.empty(offsets[n_parent], np.uint8)
    fill = offsets[:-1].copy()
    for k in range(order.shape[0]):
        c = order[k]
        p = parent_sorted[k]
        pos = fill[p]
        for j in range(tg.shape[0]):
            out[pos + j] = tg[j]
        pos += tg.shape[0]
        start = child_off[c]
        length = child_off[c + 1] - start
        pos = _put_varint(out, pos, np.uint64(length))
        for b in range(length):
            out[pos + b] = child[start + b]
        fill[p] = pos + length
    return offsets, out


@_jit
def _k_packed(row_off, values, tg, width):  # type: ignore[no-untyped-def]
    """Per row, values[row_off[i]:row_off[i+1]] as one packed field (nothing when empty)."""
    n = row_off.shape[0] - 1
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        count = row_off[i + 1] - row_off[i]
        if count == 0:
            continue
        payload = 0
        if width == 0:
            for k in range(row_off[i], row_off[i + 1]):
                payload += _varint_size(values[k])
        else:
            payload = count * width
        offsets[i + 1] = tg.shape[0] + _varint_size(np.uint64(payload)) + payload
    for i in range(n):
        offsets[i + 1] += offsets[i]
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        size = offsets[i + 1] - offsets[i]
        if size == 0:
            continue
        pos = offsets[i]
        for j in range(tg.shape[0]):
            out[pos + j] = tg[j]
        pos += tg.shape[0]
        payload = 0
        if width == 0:
            for k in range(row_off[i], row_off[i + 1]):
                payload += _varint_size(values[k])
        else:
            payload = (row_off[i + 1] - row_off[i]) * width
        pos = _put_varint(out, pos, np.uint64(payload))
        for k in range(row_off[i], row_off[i + 1]):
            v = values[k]
            if width == 0:
                pos = _put_varint(out, pos, v)
            else:
                for j in range(8):
                    out[pos + j] = np.uint8((v >> np.uint64(8 * j)) & np.uint64(0xFF))
                pos += 8
    return offsets, out


# ---- field encoders over numpy / Arrow columns --------------------------------------------------


def empty(n: int) -> Blob:
    return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)


def varint(values: np.ndarray, present: np.ndarray, field: int) -> Blob:
    return _k_scalar(np.ascontiguousarray(values).view(np.uint64), present, tag(field, VARINT), 0)  # type: ignore[no-any-return]


def fixed64(values: np.ndarray, present: np.ndarray, field: int) -> Blob:
    return _k_scalar(np.ascontiguousarray(values).view(np.uint64), present, tag(field, I64), 8)  # type: ignore[no-any-return]


def fixed32(values: np.ndarray, present: np.ndarray, field: int) -> Blob:
    return _k_scalar(values.astype(np.uint64), present, tag(field, I32), 4)  # type: ignore[no-any-return]


def length(blob: Blob, present: np.ndarray, field: int) -> Blob:
    """Each present row's blob as one length-delimited field (strings, bytes, sub-messages)."""
    return _k_len(blob[0], blob[1], present, tag(field, LEN))  # type: ignore[no-any-return]


def concat(*blobs: Blob) -> Blob:
    """Row-wise concatenation: each row's message holds the fields of every blob, in order."""
    bases = np.cumsum([0] + [b[1].size for b in blobs[:-1]])
    offsets2d = np.stack([b[0] + base for b, base in zip(blobs, bases)])
    return _k_concat(offsets2d, np.concatenate([b[1] for b in blobs]))  # type: ignore[no-any-return]


def group(child: Blob, parent_rows: np.ndarray, n_parent: int, field: int) -> Blob:
    """Children (rows of `child`) nested into their parent rows as a repeated message field.

    Every child has a parent row (0 <= parent_rows < n_parent); children keep their row order."""
    order = np.argsort(parent_rows, kind="stable")
    return _k_group(child[0], child[1], order, parent_rows[order], n_parent, tag(field, LEN))  # type: ignore[no-any-return]


def packed(row_offsets: np.ndarray, values: np.ndarray, field: int, width: int) -> Blob:
    return _k_packed(row_offsets, np.ascontiguousarray(values).view(np.uint64), tag(field, LEN), width)  # type: ignore[no-any-return]


# ---- Arrow column access -------------------------------------------------------------------------


def valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), np.bool_)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))


def numbers(arr: pa.Array) -> np.ndarray:
    """Values of a numeric / temporal / boolean column as a 64-bit numpy array, nulls as 0."""
    if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
        arr = arr.view(pa.int64())
    values = np.asarray(arr.fill_null(False if pa.types.is_boolean(arr.type) else 0).to_numpy(zero_copy_only=False))
    if values.dtype == np.bool_:
        return values.astype(np.uint64)
    if values.dtype.kind == "f":
        return values.astype(np.float64)
    return values.astype(np.int64) if values.dtype.kind == "i" else values.astype(np.uint64)


def binary(arr: pa.Array) -> Blob:
    """A string/binary/fixed-size-binary column as a blob (null rows are empty)."""
    n = len(arr)
    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, np.uint8)[arr.offset * width : (arr.offset + n) * width] if buf else np.zeros(0, np.uint8)
        return np.arange(n + 1, dtype=np.int64) * width, data
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def list_values(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(per-row offsets into the flattened values, flattened values) of a list column; null -> empty."""
    parents = np.asarray(pc.list_parent_indices(arr).to_numpy(zero_copy_only=False))
    offsets = np.zeros(len(arr) + 1, np.int64)
    np.cumsum(np.bincount(parents, minlength=len(arr)), out=offsets[1:])
    return offsets, pc.list_flatten(arr)


def data(blob: Blob) -> bytes:
    """The bytes of a one-row blob."""
    return blob[1][blob[0][0] : blob[0][1]].tobytes()
