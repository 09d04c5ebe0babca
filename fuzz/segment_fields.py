"""Segment files whose checksums are right but whose fields are wrong (see fuzz/__init__.py).

`store_files` replaces a whole file, so nearly every segment it makes fails a checksum or a magic
and the reader never trusts a field's contents. Here the input is a recipe of edits to the parts
of the crashed template store's segment: directory entries (stream ids, slots, flags,
fingerprints, slice offsets and lengths, rows, chunks, batch counts, bitmaps, event times),
manifest bundles and refs (ingestion times, slot bitmaps, stream ids, batch indexes, row offsets
and counts), footer fields (sequence, counts, time ranges), metadata strings, event-time columns,
the JSON document and the representative schemas; streams, bundles, refs and schemas duplicated,
dropped or swapped; bytes changed inside an IPC slice. The file is then rebuilt with the writer's
encoders, so every checksum, length and alignment is right again, and the store goes through the
same tools and opens as in `store_files`. A field the reader cross-checks against others (slice
placement, present-bitmap offsets, rows and chunks per stream, the footer's counts and time range,
the header's sequence) follows the edits, unless an edit set it, so the checks behind it are reached.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import atheris
import numpy as np

from quiver_store.segment import format as fmt

from .harness import fuzz, seed_each_kind
from .store_files import SEGMENTS, check_with
from .store_files import template as store_template
from .wal_frames import EXTREMES, number

SEGMENT = SEGMENTS[2]  # zstd
EDITS = 10  # at most, per input
# Numeric fields of a directory entry (the fingerprint is edited as bytes).
ENTRY_FIELDS = tuple(n for n in fmt.DIRECTORY_ENTRY.names or () if n != "fingerprint")
# Directory and footer fields the rebuild derives from the other parts, unless an edit set them.
DERIVED = ("offset", "length", "crc32c", "present_offset", "rows", "chunks")
FOOTER_FIELDS = ("seq", "stream_count", "bundle_count", "ingestion_time_min_ns", "ingestion_time_max_ns",
                 "created_at_ns", "opened_at_ns")  # fmt: skip
# Values of metadata strings: numbers at the edges, signs, non-ASCII digits, absence records.
STRINGS = (
    *(str(v) for v in EXTREMES), "-1", str(-(2**63)), "9" * 5000, "", " 1", "1_000", "\u00b2", "\u0663", "1e3",
    "0-2 lost", f"0-{2**64 - 1} lost", f"{2**63}-{2**63} damaged", "5-3 lost", "\u00b2-\u00b3 lost", "0-0 x;1-1 unacknowledged",
)  # fmt: skip
KEYS = ("quiver.wal.first_sequence", "quiver.wal.last_sequence", "quiver.wal.absent", "quiver.layout", "quiver.signals",
        "quiver.finalize_reason", "signal")  # fmt: skip
KINDS = 18


@dataclass
class Stream:
    """One stream: its directory entry, present-column bitmap and IPC slice."""

    entry: np.ndarray  # one DIRECTORY_ENTRY record, shape (1,)
    bitmap: bytearray
    data: bytearray
    pinned: set[str] = field(default_factory=set)  # derived fields an edit set


@dataclass
class Bundle:
    """One manifest row and its refs."""

    row: np.ndarray  # one MANIFEST_BUNDLE record, shape (1,)
    refs: np.ndarray  # MANIFEST_REF records


@dataclass
class Segment:
    footer: dict[str, int]
    header_seq: int | None  # None: the footer's
    streams: list[Stream]
    bundles: list[Bundle]
    metadata: dict[str, str]
    event_time_columns: dict[int, str]
    document: bytearray | None  # None: encoded from metadata and event_time_columns
    schemas: list[tuple[int, bytes]]
    pinned: set[str] = field(default_factory=set)  # footer fields an edit set


@functools.cache
def template() -> bytes:
    with open(os.path.join(store_template(), SEGMENT), "rb") as f:
        return f.read()


def decompose(data: bytes) -> Segment:
    """The parts of a valid segment, read with the format's own decoders."""
    path, t_off = SEGMENT, len(data) - fmt.TRAILER_SIZE
    footer_length, _, _ = fmt.decode_trailer(data[t_off:], path, t_off)
    footer = fmt.Footer.decode(data[t_off - footer_length : t_off], path, t_off - footer_length)
    f = footer.__dict__
    section = {name: data[f[f"{name}_offset"] : f[f"{name}_offset"] + f[f"{name}_length"]] for name in ("directory", "manifest", "metadata")}
    entries, bitmaps = fmt.decode_directory(section["directory"], footer.stream_count, path, 0)
    bounds = [*entries["present_offset"].tolist(), len(bitmaps)]
    streams = [
        Stream(entries[i : i + 1].copy(), bytearray(bitmaps[bounds[i] : bounds[i + 1]]),
               bytearray(data[int(e["offset"]) : int(e["offset"]) + int(e["length"])]))
        for i, e in enumerate(entries)
    ]  # fmt: skip
    rows, refs = fmt.decode_manifest(section["manifest"], path, 0)
    starts = np.concatenate([[0], np.cumsum([bin(int(b)).count("1") for b in rows["slot_bitmap"]])])
    bundles = [Bundle(rows[i : i + 1].copy(), refs[starts[i] : starts[i + 1]].copy()) for i in range(len(rows))]
    metadata, event_cols, schemas = fmt.decode_metadata(section["metadata"], path, 0)
    return Segment(
        {k: f[k] for k in FOOTER_FIELDS}, None, streams, bundles, metadata, event_cols, None,
        [(slot, schema.serialize().to_pybytes()) for slot, schema in sorted(schemas.items())],
    )  # fmt: skip


def rebuild(seg: Segment) -> bytes:
    """The segment file of `seg`, every checksum, length and alignment right."""
    out = bytearray(fmt.encode_header(seg.footer["seq"] if seg.header_seq is None else seg.header_seq))
    entries, bitmaps = [], bytearray()
    refs = np.concatenate([b.refs for b in seg.bundles]) if seg.bundles else np.zeros(0, fmt.MANIFEST_REF)
    for s in seg.streams:
        out += bytes(fmt.pad_to(len(out), fmt.ALIGNMENT))
        mine = refs["stream_id"] == s.entry["stream_id"][0]
        derived = {"offset": len(out), "length": len(s.data), "crc32c": fmt.crc(bytes(s.data)), "present_offset": len(bitmaps),
                   "rows": int(refs["row_count"][mine].astype(np.uint64).sum()), "chunks": int(mine.sum())}  # fmt: skip
        entry = s.entry.copy()
        for name in DERIVED:
            if name not in s.pinned:
                entry[name] = derived[name] % (1 << (8 * entry.dtype[name].itemsize))
        entries.append(entry)
        bitmaps += s.bitmap
        out += s.data
    directory = fmt.encode_directory(np.concatenate(entries) if entries else np.zeros(0, fmt.DIRECTORY_ENTRY), bytes(bitmaps))
    rows = np.concatenate([b.row for b in seg.bundles]) if seg.bundles else np.zeros(0, fmt.MANIFEST_BUNDLE)
    times = rows["ingestion_time_ns"]
    footer = {
        **seg.footer,
        "stream_count": len(seg.streams), "bundle_count": len(seg.bundles),
        "ingestion_time_min_ns": int(times.min()) if len(times) else 0, "ingestion_time_max_ns": int(times.max()) if len(times) else 0,
    }  # fmt: skip
    footer.update({k: seg.footer[k] for k in seg.pinned})
    document = fmt.encode_document(seg.metadata, seg.event_time_columns) if seg.document is None else bytes(seg.document)
    metadata = fmt.encode_metadata_section(document, seg.schemas)
    return bytes(out) + fmt.encode_tail(len(out), directory, fmt.encode_manifest(rows, refs), metadata, **footer)


def pick(fdp: atheris.FuzzedDataProvider, items: list) -> int:  # type: ignore[type-arg]
    return fdp.ConsumeIntInRange(0, len(items) - 1)


def reorder(fdp: atheris.FuzzedDataProvider, items: list) -> None:  # type: ignore[type-arg]
    """Duplicate (anywhere), drop or swap an item, as the input says."""
    if not items:
        return
    k, how = pick(fdp, items), fdp.ConsumeIntInRange(0, 2)
    if how == 0:
        items.insert(fdp.ConsumeIntInRange(0, len(items)), items[k])
    elif how == 1:
        del items[k]
    else:
        j = pick(fdp, items)
        items[k], items[j] = items[j], items[k]


def change_bytes(fdp: atheris.FuzzedDataProvider, data: bytearray) -> None:
    """1 to 8 bytes changed, or a cut, or bytes appended, or a run of one byte."""
    how = fdp.ConsumeIntInRange(0, 3)
    if how == 0:
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if data:
                data[pick(fdp, data)] = fdp.ConsumeIntInRange(0, 255)  # type: ignore[arg-type]
    elif how == 1:
        del data[fdp.ConsumeIntInRange(0, len(data)) :]
    elif how == 2:
        data += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
    else:
        at = fdp.ConsumeIntInRange(0, len(data))
        data[at:at] = bytes([fdp.ConsumeIntInRange(0, 255)]) * fdp.ConsumeIntInRange(1, 100_000)


def signed(value: int, width: int) -> int:
    """`value` (unsigned) as the field's signed reading."""
    return value - (1 << (8 * width)) if value >= 1 << (8 * width - 1) else value


def set_number(fdp: atheris.FuzzedDataProvider, record: np.ndarray, name: str) -> None:
    dtype = record.dtype[name]
    value = number(fdp, dtype.itemsize)
    record[name] = signed(value, dtype.itemsize) if dtype.kind == "i" else value


def edit(fdp: atheris.FuzzedDataProvider, seg: Segment) -> None:
    """One edit to one part of the segment, chosen by the input."""
    kind = fdp.ConsumeIntInRange(0, KINDS - 1)
    streams, bundles = seg.streams, seg.bundles
    if kind == 0 and streams:  # a numeric directory field
        s = streams[pick(fdp, streams)]
        name = ENTRY_FIELDS[fdp.ConsumeIntInRange(0, len(ENTRY_FIELDS) - 1)]
        set_number(fdp, s.entry, name)
        s.pinned.add(name)
    elif kind == 1 and streams:  # the fingerprint
        s = streams[pick(fdp, streams)]
        s.entry["fingerprint"] = fdp.ConsumeBytes(32).ljust(32, b"\0")
    elif kind == 2 and streams:
        change_bytes(fdp, streams[pick(fdp, streams)].bitmap)
    elif kind == 3:  # a stream (entry, bitmap and slice) duplicated, dropped or swapped, maybe renumbered
        reorder(fdp, streams)
        if fdp.ConsumeBool():
            for i, s in enumerate(streams):
                s.entry = s.entry.copy()
                s.entry["stream_id"] = i
    elif kind == 4 and len(streams) > 1:  # two streams' slices swapped, their entries kept
        i, j = pick(fdp, streams), pick(fdp, streams)
        streams[i].data, streams[j].data = streams[j].data, streams[i].data
    elif kind == 5 and streams:  # bytes inside an IPC slice
        s = streams[pick(fdp, streams)]
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if s.data:
                s.data[pick(fdp, s.data)] = fdp.ConsumeIntInRange(0, 255)  # type: ignore[arg-type]
    elif kind == 6 and streams:
        change_bytes(fdp, streams[pick(fdp, streams)].data)
    elif kind == 7 and bundles:  # a manifest bundle field
        set_number(fdp, bundles[pick(fdp, bundles)].row, ("ingestion_time_ns", "slot_bitmap")[fdp.ConsumeIntInRange(0, 1)])
    elif kind == 8 and bundles:  # a manifest ref field
        b = bundles[pick(fdp, bundles)]
        if len(b.refs):
            k = fdp.ConsumeIntInRange(0, len(b.refs) - 1)
            set_number(fdp, b.refs[k : k + 1], ("stream_id", "batch", "row_offset", "row_count")[fdp.ConsumeIntInRange(0, 3)])
    elif kind == 9:  # a bundle (row and refs) duplicated, dropped or swapped
        reorder(fdp, bundles)
        for i, b in enumerate(bundles):
            bundles[i] = Bundle(b.row.copy(), b.refs.copy())
    elif kind == 10 and bundles:  # a ref duplicated, dropped or swapped, within a bundle or between two
        a, b = bundles[pick(fdp, bundles)], bundles[pick(fdp, bundles)]
        refs = list(a.refs)
        if a is b or not len(a.refs) or not len(b.refs):
            reorder(fdp, refs)
            a.refs = np.array(refs, fmt.MANIFEST_REF)
        else:
            i, j = fdp.ConsumeIntInRange(0, len(a.refs) - 1), fdp.ConsumeIntInRange(0, len(b.refs) - 1)
            a.refs[i], b.refs[j] = b.refs[j].copy(), a.refs[i].copy()
    elif kind == 11:  # a footer field, or the header's sequence
        name = FOOTER_FIELDS[fdp.ConsumeIntInRange(0, len(FOOTER_FIELDS) - 1)]
        value = number(fdp, 4 if name.endswith("_count") else 8)  # the counts are u32, the times i64
        seg.footer[name] = signed(value, 8) if name.endswith("_ns") else value
        seg.pinned.add(name)
        if fdp.ConsumeBool():
            seg.header_seq = number(fdp, 8)
    elif kind == 12:  # a metadata string
        key = KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)] if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(16)
        seg.metadata[key] = STRINGS[fdp.ConsumeIntInRange(0, len(STRINGS) - 1)] if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(32)
    elif kind == 13:  # an event-time column for any slot
        slot = signed(number(fdp, 8), 8) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, 64)
        names = [n for s in streams for n in ("time_unix_nano", "observed_time_unix_nano", "int", "str", "resource.id")]
        seg.event_time_columns[slot] = names[pick(fdp, names)] if names and fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(16)
    elif kind == 14:  # the JSON document's bytes
        if seg.document is None:
            seg.document = bytearray(fmt.encode_document(seg.metadata, seg.event_time_columns))
        change_bytes(fdp, seg.document)
    elif kind == 15 and seg.schemas:  # a representative schema's bytes or slot
        k = pick(fdp, seg.schemas)
        slot, blob = seg.schemas[k]
        if fdp.ConsumeBool():
            changed = bytearray(blob)
            change_bytes(fdp, changed)
            seg.schemas[k] = (slot, bytes(changed))
        else:
            seg.schemas[k] = (number(fdp, 2), blob)
    elif kind == 16:
        reorder(fdp, seg.schemas)
    elif kind == 17 and streams:  # the event-time flag and range of a stream together
        s = streams[pick(fdp, streams)]
        s.entry["flags"] = fmt.EVENT_TIME_FLAG
        set_number(fdp, s.entry, "event_time_min")
        set_number(fdp, s.entry, "event_time_max")


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    seg = decompose(template())
    for _ in range(fdp.ConsumeIntInRange(1, EDITS)):
        edit(fdp, seg)
    check_with(SEGMENT, rebuild(seg))


def first_kind(data: bytes) -> int:
    """The kind of the first edit `data` asks for (as `one` reads it)."""
    fdp = atheris.FuzzedDataProvider(data)
    fdp.ConsumeIntInRange(1, EDITS)
    return fdp.ConsumeIntInRange(0, KINDS - 1)


def seed(directory: str) -> None:
    seed_each_kind(directory, KINDS, first_kind, 64)


if __name__ == "__main__":
    fuzz(one)
