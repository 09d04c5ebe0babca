"""RecordBundle <-> WAL slot blocks. Each slot's batch becomes one Arrow IPC stream, serialized once,
its large dictionaries first compacted to the entries its rows reference (`compaction.py`).

The fast path concatenates the cached schema message, the batch message and the end-of-stream
marker (a valid IPC stream, ~4x cheaper than a stream writer per batch); batches with dictionary
columns go through `pyarrow.ipc.new_stream`, which emits their dictionary messages.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from ..bundle import NotNullFields, RecordBundle, not_null_fields
from ..compaction import compact_batch, compactable_paths
from ..errors import BundleError, CorruptionError, QuiverError
from ..layout import Layout
from ..progress import PROGRESS_SLOT, check_progress
from .format import SLOT_META, SLOT_META_LEN, Entry

EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"
EOS_LEN = len(EOS)
_SCHEMA_CACHE_LIMIT = 4096

# Per present slot, in ascending slot order: (slot, fingerprint, the batch as it is logged (its
# dictionaries compacted), its schema message or None).
Checked = list[tuple[int, bytes, pa.RecordBatch, pa.Buffer | None]]


def _plain(schema: pa.Schema) -> bool:
    """Can the fast path write it (no dictionary or nested field, so no dictionary messages)?"""
    return not any(pa.types.is_dictionary(f.type) or pa.types.is_nested(f.type) for f in schema)


class BundleEncoder:
    """Checks bundles against the schemas their fingerprints name and serializes them into the
    slot-block section of a WAL entry.

    One cache, keyed by (slot, fingerprint), serves both: the schema last seen under that key, its
    serialized message and its compactable dictionary positions. A batch whose schema is that
    very object costs one `is` test; an equal one (metadata included) one `equals`, which proves
    both the fingerprint contract and that the cached message and positions are its own. (Serializing the schema and comparing messages costs less CPU, but
    both calls release the GIL: with 8 producers that added 2-4 context switches per bundle.)

    `epoch` counts cache resets: every schema accepted within one epoch under a (slot, fingerprint)
    equals (metadata aside) the first one accepted under it, so the open segment need not compare
    two batches verified in the same epoch again (OpenSegment.append's `schema_epoch`).
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        # (slot, fingerprint) -> (schema, its message or None, compactable paths, not-null paths)
        self._known: dict[tuple[int, bytes], tuple[pa.Schema, pa.Buffer | None, tuple, NotNullFields | None]] = {}
        self._claim = threading.Lock()  # serializes changes to _known (hits only read it)
        self.epoch = 0

    def check(self, bundle: RecordBundle) -> tuple[Checked, int | None]:
        """Refuse (QuiverError, nothing logged) a batch whose schema contradicts its fingerprint:
        the schema first seen with the same (slot, fingerprint), metadata aside; and (BundleError)
        one with a repeated column or field name, checked when its schema is first seen, or with a
        null where its schema says not null (`RecordBundle.check_slot_nulls`). Returns the
        per-slot result for `encode`, with each batch as it will be logged (large dictionaries
        compacted, same values), and the epoch every slot was verified in (None if the cache was
        reset part-way)."""
        epoch = self.epoch
        known_schemas = self._known
        fingerprint = bundle.fingerprint
        out: Checked = []
        for slot, batch in bundle.slots.items():  # RecordBundle keeps slots sorted
            fp = fingerprint(slot)
            key = (slot, fp)
            schema = batch.schema
            known = known_schemas.get(key)
            if known is not None and (known[0] is schema or known[0].equals(schema, check_metadata=True)):
                if known[3] is not None:
                    bundle.check_slot_nulls(slot, known[3])
                out.append((slot, fp, compact_batch(batch, known[2]) if known[2] else batch, known[1]))
                continue
            bundle.check_slot_names(slot)  # a schema equal to a known one passed it when it became known
            plain = _plain(schema)
            head = schema.serialize() if plain else None  # (releases the GIL)
            paths = () if plain else compactable_paths(schema)
            not_null = not_null_fields(schema)
            if not_null is not None:
                bundle.check_slot_nulls(slot, not_null)
            with self._claim:  # first sight or new metadata: one producer at a time, against the current entry
                current = known_schemas.get(key)
                if current is not None and current[0] is not schema and not current[0].equals(schema, check_metadata=False):
                    raise QuiverError(
                        f"slot {slot}: schema fingerprint {fp.hex()[:16]} was first seen with schema\n{current[0]}\n"
                        f"and now names\n{schema}\na different schema needs a different fingerprint; nothing was written"
                    )
                if current is None and len(known_schemas) >= _SCHEMA_CACHE_LIMIT:
                    known_schemas.clear()
                    self.epoch += 1
                known_schemas[key] = (schema, head, paths, not_null)  # metadata may differ from the previous holder's
            out.append((slot, fp, compact_batch(batch, paths) if paths else batch, head))
        return out, epoch if self.epoch == epoch else None

    def encode(self, bundle: RecordBundle, checked: Checked | None = None) -> tuple[int, list, int, list[int | None]]:
        """(slot bitmap, slot blocks in ascending slot order as buffers, their total length, and per
        slot the record batch's IPC message size, `pa.ipc.get_record_batch_size`, where it was
        serialized alone (None for batches with dictionaries)).

        `checked` is `check(bundle)`'s result when the caller already ran it."""
        parts: list = []
        sizes: list[int | None] = []
        total = 0
        type_id = self.layout.payload_type_id
        pack = SLOT_META.pack
        for slot, fp, batch, head in checked if checked is not None else self.check(bundle)[0]:
            if head is not None:  # [schema message, batch message, end-of-stream]: a valid IPC stream
                body = batch.serialize()
                size = body.size
                sizes.append(size)
                plen = head.size + size + EOS_LEN
                parts += (pack(type_id(slot), fp, batch.num_rows, plen), head, body, EOS)
            else:  # dictionaries: the stream writer emits their messages
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, batch.schema) as writer:
                    writer.write_batch(batch)
                stream = sink.getvalue()
                sizes.append(None)
                plen = stream.size
                parts += (pack(type_id(slot), fp, batch.num_rows, plen), stream)
            total += plen + SLOT_META_LEN
        return bundle.slot_bitmap, parts, total, sizes

    def encode_bytes(self, bundle: RecordBundle) -> tuple[int, bytes]:
        """(slot bitmap, slot blocks joined): for tools and tests that build frames by hand."""
        bitmap, parts, _, _ = self.encode(bundle)
        return bitmap, b"".join(bytes(p) for p in parts)


_SCHEMAS: dict[bytes, pa.Schema] = {}


def _decode_payload(payload: memoryview) -> pa.RecordBatch:
    """One IPC stream -> one batch. Fast path for our own [schema, batch, EOS] layout (schemas
    cached by their message bytes, ~3x cheaper than a stream reader); anything else (dictionaries,
    several batches) goes through `pyarrow.ipc.open_stream`."""
    buf = pa.py_buffer(payload)
    if len(payload) > len(EOS) and payload[-len(EOS) :] == EOS:
        reader = pa.BufferReader(buf)
        first = pa.ipc.read_message(reader)
        if first.type == "schema":
            key = first.metadata.to_pybytes()
            schema = _SCHEMAS.get(key)
            if schema is None:
                if len(_SCHEMAS) >= _SCHEMA_CACHE_LIMIT:
                    _SCHEMAS.clear()
                schema = _SCHEMAS[key] = pa.ipc.read_schema(first)
            second = pa.ipc.read_message(reader)
            if second.type == "record batch" and reader.tell() == len(payload) - len(EOS):
                return pa.ipc.read_record_batch(second, schema)
    batches = list(pa.ipc.open_stream(buf))
    if len(batches) == 1:
        return batches[0]
    if batches:
        return pa.concat_batches(batches)
    return pa.RecordBatch.from_pylist([], schema=pa.ipc.open_stream(buf).schema)


def decode_bundle(entry: Entry, layout: Layout | None, path: str) -> RecordBundle:
    """Rebuild the bundle of a CRC-verified entry; CorruptionError if its content is inconsistent.
    With no layout (a reader that does not know the embedder's, such as `quiver dump`) the payload
    type ids are not checked."""
    slots: dict[int, pa.RecordBatch] = {}
    fingerprints: dict[int, bytes] = {}
    for rec in entry.slots(path):
        if layout is not None and rec.payload_type_id != (expected := layout.payload_type_id(rec.slot)):
            raise CorruptionError(
                f"entry seq {entry.sequence}: slot {rec.slot} has payload type id {rec.payload_type_id}, "
                f"layout {layout.name!r} says {expected}",
                path,
                entry.offset,
            )
        try:
            batch = _decode_payload(rec.payload)
            # A CRC-valid frame can still hold offsets past its buffers (a foreign or buggy writer):
            # checked here (about 7 GB/s), before a kernel reads them out of bounds.
            batch.validate(full=True)
        except (pa.ArrowException, OSError) as exc:  # ArrowKeyError, ArrowNotImplementedError too
            raise CorruptionError(
                f"entry seq {entry.sequence}: slot {rec.slot} payload is not a valid Arrow IPC stream ({exc})",
                path,
                entry.offset,
            ) from exc
        if batch.num_rows != rec.rows:
            raise CorruptionError(
                f"entry seq {entry.sequence}: slot {rec.slot} holds {batch.num_rows} rows, metadata says {rec.rows}",
                path,
                entry.offset,
            )
        slots[rec.slot] = batch
        fingerprints[rec.slot] = rec.fingerprint
    if PROGRESS_SLOT in slots:  # its offset would make a writer skip input: ingest's rules hold
        try:
            check_progress(slots[PROGRESS_SLOT])
        except BundleError as exc:
            raise CorruptionError(f"entry seq {entry.sequence}: {exc}", path, entry.offset) from None
    return RecordBundle(slots, fingerprints, entry.ingestion_ts_nanos)
