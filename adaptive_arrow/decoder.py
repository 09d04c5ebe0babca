"""The decoder: OTAP envelopes (or Quiver bundles) back to plain OTAP tables.

One IPC reader per payload type, fed payload by payload across envelopes; a new ``schema_id``
for a payload type (a schema reset) replaces its reader. Each table is restored to its plain
reference shape, then ``transport.restore`` turns encoded ids back into plain ids.
"""

from __future__ import annotations

import pyarrow as pa

from otap_model import ROOT_PAYLOAD, OtapBundle, PayloadType, Signal, reference_schema, signal_of
from quiver_store.bundle import RecordBundle

from . import transport
from .envelope import BatchArrowRecords
from .errors import AdaptiveArrowError, DecodingError
from .restore import RestorePlan
from .signature import schema_fingerprint
from .stream import StreamReader

_ROOT_SIGNAL = {int(pt): s for s, pt in ROOT_PAYLOAD.items()}


def _payload_type(value: int, where: str) -> PayloadType:
    try:
        pt = PayloadType(value)
    except ValueError:
        raise DecodingError(f"{where}: unknown payload type {value}") from None
    if pt is PayloadType.UNKNOWN:
        raise DecodingError(f"{where}: payload type UNKNOWN (0) must not be sent")
    return pt


def _opens_stream(record: bytes) -> bool:
    """Whether a payload starts a new IPC stream (Schema message first).

    Schema ids are only unique within one OTAP stream; a decoder fed envelopes of several unary
    encoders sees the same id again, and the Schema message tells it a new stream begins.
    """
    return pa.ipc.read_message(pa.py_buffer(record)).type == "schema"


class Decoder:
    """Decodes a sequence of OTAP envelopes of one OTAP stream (keep one Decoder per stream)."""

    def __init__(self, signal: Signal | str | None = None):
        self.signal = Signal(signal) if signal is not None else None
        self._readers: dict[PayloadType, StreamReader] = {}
        self._plans: dict[PayloadType, RestorePlan] = {}  # last restore plan per payload type

    def _infer_signal(self, tables: dict[PayloadType, pa.RecordBatch], where: str) -> Signal:
        signals = {s for pt in tables if (s := signal_of(pt)) is not None}
        if len(signals) > 1:
            raise DecodingError(f"{where}: payload types of several signals {sorted(s.value for s in signals)}")
        if signals:
            self.signal = signals.pop()
        if self.signal is None:
            raise DecodingError(f"{where}: cannot tell the signal (no signal-specific table); pass Decoder(signal=...)")
        return self.signal

    def _bundle(self, tables: dict[PayloadType, pa.RecordBatch], signal: Signal, where: str) -> OtapBundle:
        try:
            bundle = OtapBundle(signal, tables)
        except ValueError as exc:
            raise DecodingError(f"{where}: {exc}") from None
        try:
            return transport.restore(bundle)
        except DecodingError:
            raise
        except (AdaptiveArrowError, pa.ArrowException, ValueError) as exc:
            raise DecodingError(f"{where}: encoded ids cannot be restored: {exc}") from exc

    def decode(self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview) -> OtapBundle:
        """Decode one envelope; envelopes of a stream must come in order."""
        where, records = self._read(bar_or_bytes)
        tables = {pt: self._restore(batch, pt, f"{where} payload {i}") for i, (pt, batch) in enumerate(records.items())}
        return self._bundle(tables, self._infer_signal(tables, where), where)

    def read_records(self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview) -> RecordBundle:
        """The adaptive records of one envelope as a Quiver bundle (slot = payload type id), the
        bundle ``Encoder.encode_records`` gives for the same batch: lets an envelope made
        elsewhere (a Spark task, a remote producer) be stored without restoring plain tables.
        Envelopes of a stream must come in order, as for ``decode``."""
        _, records = self._read(bar_or_bytes)
        slots = {int(pt): batch for pt, batch in records.items()}
        return RecordBundle(slots, {slot: schema_fingerprint(batch.schema) for slot, batch in slots.items()})

    def _read(
        self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview
    ) -> tuple[str, dict[PayloadType, pa.RecordBatch]]:
        """Each payload's Arrow record, read through the IPC stream of its schema_id."""
        bar = bar_or_bytes if isinstance(bar_or_bytes, BatchArrowRecords) else BatchArrowRecords.from_bytes(bar_or_bytes)
        where = f"batch {bar.batch_id}"
        records: dict[PayloadType, pa.RecordBatch] = {}
        for i, payload in enumerate(bar.payloads):
            at = f"{where} payload {i}"
            pt = _payload_type(payload.type, at)
            if pt in records:
                raise DecodingError(f"{at}: second payload of type {pt.name} in one batch")
            reader = self._readers.get(pt)
            try:
                if reader is None or reader.schema_id != payload.schema_id or _opens_stream(payload.record):
                    reader = StreamReader(payload.schema_id)
                    self._readers[pt] = reader
                batch = reader.read(payload.record)
            except (pa.ArrowException, StopIteration, ValueError, OSError, EOFError) as exc:
                self._readers.pop(pt, None)
                detail = str(exc) or type(exc).__name__
                raise DecodingError(f"{at} ({pt.name}, schema_id {payload.schema_id!r}): bad Arrow IPC data: {detail}") from None
            records[pt] = batch
        return where, records

    def _restore(self, batch: pa.RecordBatch, pt: PayloadType, where: str) -> pa.RecordBatch:
        plan = self._plans.get(pt)
        try:
            if plan is None or not batch.schema.equals(plan.source, check_metadata=True):
                plan = self._plans[pt] = RestorePlan(batch.schema, reference_schema(pt), pt.name)
            return plan.apply(batch, pt.name)
        except DecodingError:
            raise
        except (pa.ArrowException, ValueError, TypeError, KeyError, IndexError) as exc:
            raise DecodingError(f"{where} ({pt.name}): record does not fit the reference schema: {exc}") from None

    def decode_records(self, record_bundle: RecordBundle) -> OtapBundle:
        """Decode a Quiver bundle produced by ``Encoder.encode_records`` (slot = payload type id)."""
        if not isinstance(record_bundle, RecordBundle):
            raise DecodingError(f"expected a quiver_store RecordBundle, got {type(record_bundle).__name__}")
        roots = [s for s in record_bundle.slots if s in _ROOT_SIGNAL]
        if len(roots) != 1:
            raise DecodingError(
                f"record bundle has root slots {roots}; exactly one of 30 (logs), 40 (spans), 10 (metrics) is needed"
            )
        signal = _ROOT_SIGNAL[roots[0]]
        tables = {}
        for slot, batch in record_bundle.slots.items():
            pt = _payload_type(slot, f"slot {slot}")
            tables[pt] = self._restore(batch, pt, f"slot {slot}")
        return self._bundle(tables, signal, "record bundle")
