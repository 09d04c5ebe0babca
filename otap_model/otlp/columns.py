"""Scanner tokens -> numpy columns -> Arrow arrays, with field paths for error messages.

Every extraction is vectorised over all tokens of one (message type, field) pair; the only
per-row Python work is for nested map/slice AnyValues (converted to CBOR) and for building an
error message.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..errors import ConversionError
from . import anyvalue as av
from .wire import (
    DECLARED,
    ERR_MISTYPED,
    ERR_REJECTED,
    ERROR_TEXT,
    MAX_FIELD,
    N_TYPES,
    REP_MSG,
    WIRE_TYPE_NAMES,
    Scan,
    T,
    gather,
    group_by_key,
    last_per_row,
    message_depths,
    messages_for,
    slot,
)

_U32_MASK = np.int64(0xFFFFFFFF)


class Tokens:
    """Indexed access to one scan's tokens by (message type, field), in document order."""

    def __init__(self, scan: Scan, signal: str) -> None:
        self.scan = scan
        self.signal = signal
        self.order, self.bounds = group_by_key(scan.tok_key, N_TYPES * MAX_FIELD)
        self.node_order, self.node_bounds = group_by_key(scan.node_type, N_TYPES)
        self._messages = messages_for(signal)
        self._depths = message_depths(signal)

    # ---- structure -------------------------------------------------------------------------
    def nodes(self, t: T) -> np.ndarray:
        """Node ids of every message of type t, in document order."""
        return self.node_order[self.node_bounds[t] : self.node_bounds[t + 1]]

    def parents(self, nodes: np.ndarray) -> np.ndarray:
        return self.scan.node_parent[nodes]

    def rows_in(self, t: T, nodes: np.ndarray) -> np.ndarray:
        """Row index, among messages of type t, of each node (which must be of type t)."""
        return self.scan.node_rank[nodes].astype(np.int64)

    def toks(self, t: T, field: int) -> np.ndarray:
        key = int(t) * MAX_FIELD + field
        return self.order[self.bounds[key] : self.bounds[key + 1]]

    def last(self, t: T, field: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, token indices) of a singular field; a repeated occurrence wins, as in protobuf."""
        idx = self.toks(t, field)
        rows = self.rows_in(t, self.scan.tok_node[idx])
        if rows.size > 1 and not np.all(rows[1:] > rows[:-1]):
            keep = last_per_row(rows)
            idx, rows = idx[keep], rows[keep]
        return rows, idx

    # ---- scalar columns ----------------------------------------------------------------------
    def bits(self, t: T, field: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(int64 value bits per row, presence per row) of a singular scalar field."""
        rows, idx = self.last(t, field)
        out = np.zeros(n, np.int64)
        present = np.zeros(n, np.bool_)
        out[rows] = self.scan.tok_val[idx]
        present[rows] = True
        return out, present

    def value(self, t: T, field: int, n: int) -> np.ndarray:
        return self.bits(t, field, n)[0]

    def u32(self, t: T, field: int, n: int) -> np.ndarray:
        return (self.value(t, field, n) & _U32_MASK).astype(np.uint32)

    def sint32(self, t: T, field: int, n: int) -> np.ndarray:
        z = self.value(t, field, n) & _U32_MASK
        return ((z >> 1) ^ -(z & 1)).astype(np.int32)

    def enum(self, t: T, field: int, n: int, allowed: int, enum_name: str) -> np.ndarray:
        """An int32 enum field; values outside 0..allowed are rejected naming the field."""
        rows, idx = self.last(t, field)
        raw = self.scan.tok_val[idx]
        v32 = (raw & _U32_MASK).astype(np.uint32).view(np.int32)
        bad = np.flatnonzero((v32 < 0) | (v32 > allowed))
        if bad.size:
            i = int(idx[bad[0]])
            raise ConversionError(f"unknown {enum_name} value {int(v32[bad[0]])}", self.token_path(i))
        out = np.zeros(n, np.int32)
        out[rows] = v32
        return out

    def spans(self, t: T, field: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(start offsets, lengths) of a string/bytes field per row; length 0 when absent."""
        rows, idx = self.last(t, field)
        starts = np.zeros(n, np.int64)
        lens = np.zeros(n, np.int64)
        starts[rows] = self.scan.tok_val[idx]
        lens[rows] = self.scan.tok_len[idx]
        return starts, lens

    # ---- arrow builders ----------------------------------------------------------------------
    def string(self, t: T, field: int, n: int, *, required: bool = False) -> pa.Array:
        starts, lens = self.spans(t, field, n)
        return self.varbinary(
            starts, lens, None if required else lens > 0, pa.string(), lambda row: self.field_path(t, row, field)
        )

    def varbinary(
        self,
        starts: np.ndarray,
        lens: np.ndarray,
        valid: np.ndarray | None,
        type_: pa.DataType,
        path_of_row: Callable[[int], str] | None = None,
    ) -> pa.Array:
        """A string/binary array of data[starts:starts+lens] (null where not valid)."""
        n = starts.shape[0]
        if valid is not None:
            lens = np.where(valid, lens, 0)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        total = int(offsets[-1])
        if total >= 2**31:
            raise ConversionError(f"{total} bytes of strings in one column exceed Arrow's 2 GiB limit")
        out = np.empty(total, np.uint8)
        gather(self.scan.data, starts, lens, offsets, out)
        validity = None
        nulls = 0
        if valid is not None and not valid.all():
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
            nulls = n - int(valid.sum())
        arr = pa.Array.from_buffers(
            type_, n, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)], null_count=nulls
        )
        if type_ == pa.string():
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:
                _raise_utf8(arr, path_of_row)
        return arr


    def fixed_id(self, t: T, field: int, n: int, width: int, *, required: bool = False) -> pa.Array:
        """A trace/span id column: 0 bytes is absent (null, or all zeros when required), else `width` bytes."""
        rows, idx = self.last(t, field)
        lens = self.scan.tok_len[idx]
        bad = np.flatnonzero((lens != 0) & (lens != width))
        if bad.size:
            i = int(idx[bad[0]])
            raise ConversionError(f"expected {width} bytes, got {int(lens[bad[0]])}", self.token_path(i))
        valid = np.zeros(n, np.bool_)
        valid[rows[lens == width]] = True
        buf = np.zeros(n * width, np.uint8)
        starts = np.zeros(n, np.int64)
        starts[rows] = self.scan.tok_val[idx]
        wlens = np.where(valid, width, 0)
        gather(self.scan.data, starts, wlens, np.arange(n, dtype=np.int64) * width, buf)
        if required:
            return pa.Array.from_buffers(pa.binary(width), n, [None, pa.py_buffer(buf)])
        validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(
            pa.binary(width), n, [validity, pa.py_buffer(buf)], null_count=n - int(valid.sum())
        )

    def list_of(self, t: T, field: int, n: int, dtype: type, value_type: pa.DataType) -> pa.Array:
        """A repeated scalar field as a list column; an empty list is null."""
        idx = self.toks(t, field)
        rows = self.rows_in(t, self.scan.tok_node[idx])
        if rows.size > 1 and not np.all(rows[1:] >= rows[:-1]):
            order = np.argsort(rows, kind="stable")
            idx, rows = idx[order], rows[order]
        counts = np.bincount(rows, minlength=n)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        values = pa.array(self.scan.tok_val[idx].view(dtype), value_type)
        return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(counts == 0))

    # ---- AnyValue ----------------------------------------------------------------------------
    def any_values(self, any_t: T, n: int, owner_rows: np.ndarray) -> dict[str, pa.Array]:
        """The AnyValue columns (type, str, int, double, bool, bytes, ser) of n owner rows.

        `owner_rows` gives, per node of type `any_t`, the row it belongs to (-1 = not kept).
        """
        s = self.scan
        idx = np.concatenate([self.toks(any_t, f) for f in range(1, 8)])
        rows = owner_rows[self.rows_in(any_t, s.tok_node[idx])]
        kept = rows >= 0
        idx, rows = idx[kept], rows[kept]
        merged: dict[int, np.ndarray] = {}
        if rows.size and np.bincount(rows).max() > 1:  # several oneof members on the wire: the last wins
            order = np.argsort(idx)
            idx, rows = idx[order], rows[order]
            merged = self._merged_occurrences(any_t, idx, rows)
            keep = last_per_row(rows)
            idx, rows = idx[keep], rows[keep]
        fields = s.tok_key[idx] - int(any_t) * MAX_FIELD
        codes = _FIELD_TO_TYPE[fields]
        type_ = np.zeros(n, np.uint8)
        type_[rows] = codes
        vals = np.zeros(n, np.int64)
        vals[rows] = s.tok_val[idx]
        lens = np.zeros(n, np.int64)
        lens[rows] = s.tok_len[idx]
        is_str, is_bytes = type_ == av.STR, type_ == av.BYTES
        ser: list[bytes | None] = [None] * n
        depth = self._depths[any_t]
        for i in np.flatnonzero((codes == av.MAP) | (codes == av.SLICE)):
            row = int(rows[i])
            payload = b"".join(
                s.data[int(s.tok_val[t]) : int(s.tok_val[t]) + int(s.tok_len[t])].tobytes()
                for t in merged.get(row, (idx[i],))
            )
            path = self.token_path(int(idx[i]))
            ser[row] = (av.ser_of_kvlist if codes[i] == av.MAP else av.ser_of_array)(payload, path, depth)
        is_int, is_double, is_bool = type_ == av.INT, type_ == av.DOUBLE, type_ == av.BOOL
        return {
            "type": pa.array(type_),
            "str": self.varbinary(vals, lens, is_str, pa.string(), lambda row: self.token_path(_token_of(rows, idx, row))),
            "int": pa.array(vals, pa.int64(), mask=~is_int),
            "double": pa.array(vals.view(np.float64), pa.float64(), mask=~is_double),
            "bool": pa.array(vals != 0, pa.bool_(), mask=~is_bool),
            "bytes": self.varbinary(vals, lens, is_bytes, pa.binary()),
            "ser": pa.array(ser, pa.binary()),
        }

    def _merged_occurrences(self, any_t: T, idx: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
        """Rows whose last AnyValue member is an array_value / kvlist_value given several times in a
        row on the wire -> those tokens (document order; `idx` must be in document order).

        Protobuf merges a singular message field that occurs again while its oneof member is still
        set, and ArrayValue / KeyValueList hold one repeated field, so the merge is the
        concatenation of the serialized occurrences. Any other member in between starts afresh.
        """
        fields = self.scan.tok_key[idx] - int(any_t) * MAX_FIELD
        by_row = np.argsort(rows, kind="stable")  # grouped by row, document order inside a row
        r, f = rows[by_row], fields[by_row]
        run_start = np.ones(r.size, np.bool_)
        run_start[1:] = (r[1:] != r[:-1]) | (f[1:] != f[:-1])
        row_last = np.ones(r.size, np.bool_)
        row_last[:-1] = r[1:] != r[:-1]
        starts = np.flatnonzero(run_start)
        first_of_run = starts[np.cumsum(run_start) - 1]
        hits = np.flatnonzero(row_last & ~run_start & ((f == 5) | (f == 6)))
        return {int(r[p]): idx[by_row[first_of_run[p] : p + 1]] for p in hits.tolist()}

    # ---- error paths ------------------------------------------------------------------------
    def node_path(self, node: int) -> str:
        """Dotted path of a node, e.g. ``resource_logs[0].scope_logs[1].log_records[7]``."""
        s = self.scan
        parts: list[str] = []
        while node > 0:
            parent = int(s.node_parent[node])
            t, pt = T(int(s.node_type[node])), T(int(s.node_type[parent]))
            fields = [(number, f) for number, f in self._messages[pt].items() if f.child is t]
            f = fields[0][1]
            if len(fields) > 1:  # a ScopeX from ResourceX field 2 or from legacy field 1000: its token says
                made = s.tok_key[(s.tok_node == parent) & (s.tok_val == node) & (s.tok_len == -1)]
                f = next((g for number, g in fields if int(pt) * MAX_FIELD + slot(number) in made), f)
            name, repeated = f.name, f.kind == REP_MSG
            if repeated:
                siblings = (s.node_parent[:node] == parent) & (s.node_type[:node] == t)
                parts.append(f"{name}[{int(siblings.sum())}]")
            else:
                parts.append(name)
            node = parent
        return ".".join(reversed(parts))

    def field_path(self, t: T, row: int, field: int) -> str:
        node = int(self.nodes(t)[row])
        return self._join(self.node_path(node), self._messages[t][field].name)

    def token_path(self, tok: int) -> str:
        s = self.scan
        node = int(s.tok_node[tok])
        t = T(int(s.node_type[node]))
        field = int(s.tok_key[tok]) - int(t) * MAX_FIELD
        return self._join(self.node_path(node), self._messages[t][field].name)

    @staticmethod
    def _join(a: str, b: str) -> str:
        return f"{a}.{b}" if a else b


def _raise_utf8(arr: pa.Array, path_of_row: Callable[[int], str] | None) -> None:
    for row, raw in enumerate(arr.view(pa.binary()).to_pylist()):
        if raw is None:
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConversionError("string is not valid UTF-8", path_of_row(row) if path_of_row else None) from None
    raise ConversionError("string column is not valid UTF-8")


_FIELD_TO_TYPE = np.zeros(MAX_FIELD, np.uint8)
for _field, _code in av.TYPE_OF_FIELD.items():
    _FIELD_TO_TYPE[_field] = _code


def raise_scan_error(scan: Scan, signal: str) -> None:
    """Turn the scanner's error record into a ConversionError naming the field path."""
    assert scan.error is not None
    code, offset, node, field, wire_type = scan.error
    tokens = Tokens(scan, signal)
    path = tokens.node_path(node)
    t = T(int(scan.node_type[node]))
    known = tokens._messages.get(t, {})
    if field and field in known:
        f = known[field]
        path = Tokens._join(path, f.name)
        if f.kind == REP_MSG and f.child is not None:
            # the entries of this field read so far (one token each; a legacy copy skipped whole leaves none)
            index = int(((scan.tok_node == node) & (scan.tok_key == int(t) * MAX_FIELD + slot(field))).sum())
            path += f"[{index}]"
    elif field:
        path = Tokens._join(path, f"<field {field}>")
    text = ERROR_TEXT[code]
    if code == ERR_MISTYPED:
        declared = DECLARED[known[field].kind]
        text = text.format(wire_type=f"{wire_type} ({WIRE_TYPE_NAMES[wire_type]})", declared=declared)
    elif code == ERR_REJECTED and known[field].note:
        text = f"{text}: {known[field].note}"
    raise ConversionError(f"{text} (at byte {offset})", path or "<request>")


def _token_of(rows: np.ndarray, idx: np.ndarray, row: int) -> int:
    return int(idx[np.flatnonzero(rows == row)[0]])
