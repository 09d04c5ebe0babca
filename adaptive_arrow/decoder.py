"""The decoder: OTAP envelopes (or Quiver bundles) back to plain OTAP tables.

One IPC reader per payload type, fed payload by payload across envelopes; a new ``schema_id``
for a payload type (a schema reset) replaces its reader. Each table is restored to its plain
reference shape, then ``transport.restore`` turns encoded ids back into plain ids.

Decoding an envelope is a transaction: the signal is checked before any reader is fed, and an
envelope rejected part way (bad IPC data, unrestorable ids, a child table without its parent)
rolls every reader it fed back to where the last decoded envelope left it, so the stream goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import pyarrow as pa

from otap_model import OtapBundle, PayloadType, Signal, reference_schema, signal_of
from quiver_store.bundle import RecordBundle
from quiver_store.progress import PROGRESS_SLOT

from . import transport
from .envelope import BatchArrowRecords
from .errors import AdaptiveArrowError, DecodingError, EnvelopeError
from .one_call import OneCallAtATime
from .restore import RestorePlan
from .signature import schema_fingerprint
from .stream import StreamReader
from .validate import check_parents, check_values

_T = TypeVar("_T")


def _payload_type(value: int, where: str) -> PayloadType:
    try:
        pt = PayloadType(value)
    except (ValueError, TypeError):
        raise DecodingError(f"{where}: unknown payload type {value!r}") from None
    if pt is PayloadType.UNKNOWN:
        raise DecodingError(f"{where}: payload type UNKNOWN (0) must not be sent")
    return pt


def _opens_stream(record: bytes) -> bool:
    """Whether a payload starts a new IPC stream (Schema message first).

    Schema ids are only unique within one OTAP stream; a decoder fed envelopes of several unary
    encoders sees the same id again, and the Schema message tells it a new stream begins.
    """
    return pa.ipc.read_message(pa.py_buffer(record)).type == "schema"


def _opens_stream_safely(record: bytes) -> bool:
    """`_opens_stream`, False for bytes that are no IPC message (reading them reports the damage)."""
    try:
        return _opens_stream(record)
    except (pa.ArrowException, ValueError, OSError, EOFError):
        return False


class Decoder:
    """Decodes a sequence of OTAP envelopes of one OTAP stream (keep one Decoder per stream).

    ``signal`` pins the signal (needed only to decode an envelope without payloads first);
    otherwise the first envelope's payload types set it, and envelopes of another signal are
    rejected. ``decode_records`` bundles carry no stream state and may be of any signal the
    Decoder was not pinned against.
    """

    def __init__(self, signal: Signal | str | None = None):
        try:
            self.signal = Signal(signal) if signal is not None else None
        except ValueError:
            raise DecodingError(f"unknown signal {signal!r}; expected one of {[s.value for s in Signal]}") from None
        self._readers: dict[PayloadType, StreamReader] = {}
        self._plans: dict[PayloadType, RestorePlan] = {}  # last restore plan per payload type
        self._last_batch_id: int | None = None
        self._one_call = OneCallAtATime("Decoder", DecodingError)

    def _signal_of(self, types: Iterable[PayloadType], where: str, *, empty: str) -> Signal:
        """The signal of a batch's payload types, checked against the decoder's (no state change)."""
        types = list(types)
        signals = {s for pt in types if (s := signal_of(pt)) is not None}
        if len(signals) > 1:
            raise DecodingError(f"{where}: payload types of several signals {sorted(s.value for s in signals)}")
        if signals:
            got = signals.pop()
            if self.signal is not None and got is not self.signal:
                raise DecodingError(
                    f"{where}: {got.value} payloads {[pt.name for pt in types]}, but this Decoder decodes "
                    f"{self.signal.value}; keep one Decoder per stream"
                )
            return got
        if self.signal is None:
            detail = empty if not types else "no signal-specific table"
            raise DecodingError(f"{where}: cannot tell the signal ({detail}); pass Decoder(signal=...)")
        return self.signal

    def _bundle(self, tables: dict[PayloadType, pa.RecordBatch], signal: Signal, where: str) -> OtapBundle:
        try:
            bundle = OtapBundle(signal, tables)
        except ValueError as exc:
            raise DecodingError(f"{where}: {exc}") from None
        try:
            restored = transport.restore(bundle)
        except DecodingError:
            raise
        except (AdaptiveArrowError, pa.ArrowException, ValueError) as exc:
            raise DecodingError(f"{where}: encoded ids cannot be restored: {exc}") from exc
        check_values(restored, DecodingError, f"{where}: ")
        check_parents(restored, DecodingError, f"{where}: ")
        return restored

    def decode(self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview) -> OtapBundle:
        """Decode one envelope; envelopes of a stream must come in order."""
        with self._one_call("decode"):
            return self._decode(bar_or_bytes)

    def _decode(self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview) -> OtapBundle:
        bar, where, signal = self._envelope(bar_or_bytes)

        def run() -> OtapBundle:
            records = self._read(bar, where)
            tables = {pt: self._restore(b, pt, f"{where} payload {i}") for i, (pt, b) in enumerate(records.items())}
            return self._bundle(tables, signal, where)

        bundle = self._atomically(run)
        self.signal, self._last_batch_id = signal, bar.batch_id
        return bundle

    def read_records(self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview) -> RecordBundle:
        """The adaptive records of one envelope as a Quiver bundle (slot = payload type id), the
        bundle ``Encoder.encode_records`` gives for the same batch: lets an envelope made
        elsewhere (a Spark task, a remote producer) be stored without restoring plain tables.
        Envelopes of a stream must come in order, as for ``decode``."""
        with self._one_call("read_records"):
            bar, where, signal = self._envelope(bar_or_bytes)
            records = self._atomically(lambda: self._read(bar, where))
            self.signal, self._last_batch_id = signal, bar.batch_id
        slots = {int(pt): batch for pt, batch in records.items()}
        return RecordBundle(slots, {slot: schema_fingerprint(batch.schema) for slot, batch in slots.items()})

    def _envelope(
        self, bar_or_bytes: BatchArrowRecords | bytes | bytearray | memoryview
    ) -> tuple[BatchArrowRecords, str, Signal]:
        """The parsed envelope, its name in messages and its signal (checked, nothing fed yet)."""
        if isinstance(bar_or_bytes, RecordBundle):  # what encode_records makes and a store holds
            raise EnvelopeError("expected a BatchArrowRecords envelope or its bytes, got RecordBundle: "
                                "decode a Quiver RecordBundle with Decoder.decode_records")
        bar = bar_or_bytes if isinstance(bar_or_bytes, BatchArrowRecords) else BatchArrowRecords.from_bytes(bar_or_bytes)
        where = f"batch {bar.batch_id}"
        types = [_payload_type(p.type, f"{where} payload {i}") for i, p in enumerate(bar.payloads)]
        seen: set[PayloadType] = set()
        for i, pt in enumerate(types):
            if pt in seen:
                raise DecodingError(f"{where} payload {i}: second payload of type {pt.name} in one batch")
            seen.add(pt)
        signal = self._signal_of(types, where, empty="an envelope without payloads")
        self._check_order(bar, where)
        return bar, where, signal

    def _check_order(self, bar: BatchArrowRecords, where: str) -> None:
        """A stream's batch ids increase: an envelope that continues this Decoder's streams with a
        batch id not above the last one decoded is a resent or reordered envelope, whose
        dictionary deltas would be applied a second time (or out of turn) and corrupt every later
        batch. An envelope that opens every stream it uses (a new stream, a unary encoder) may
        start again at any id."""
        last = self._last_batch_id
        if last is None or bar.batch_id > last or all(_opens_stream_safely(p.record) for p in bar.payloads):
            return
        raise DecodingError(
            f"{where}: continues this Decoder's stream, whose last decoded envelope was batch {last}: a resent, "
            "duplicated or reordered envelope (decode each envelope of a stream once, in order; nothing was fed)"
        )

    def _atomically(self, step: Callable[[], _T]) -> _T:
        """Run ``step`` (which feeds readers); if it raises, put every reader back as it was."""
        readers = dict(self._readers)
        try:
            out = step()
        except BaseException:
            for pt, reader in self._readers.items():
                if readers.get(pt) is reader:
                    reader.rollback()
            self._readers = readers
            raise
        for reader in self._readers.values():
            reader.commit()
        return out

    def _hint(self) -> str:
        last = "" if self._last_batch_id is None else f" (the last envelope this Decoder decoded was batch {self._last_batch_id})"
        return (
            f"an earlier envelope of this stream was skipped or went to another Decoder, or this envelope belongs "
            f"to another stream{last}; feed every envelope of a stream, in order, to one Decoder"
        )

    def _read(self, bar: BatchArrowRecords, where: str) -> dict[PayloadType, pa.RecordBatch]:
        """Each payload's Arrow record, read through the IPC stream of its schema_id."""
        records: dict[PayloadType, pa.RecordBatch] = {}
        for i, payload in enumerate(bar.payloads):
            at = f"{where} payload {i}"
            pt = PayloadType(payload.type)
            reader = self._readers.get(pt)
            new = reader is None or reader.schema_id != payload.schema_id
            try:
                opens = _opens_stream(payload.record)
                if new and not opens:
                    raise DecodingError(
                        f"{at} ({pt.name}, schema_id {payload.schema_id!r}): the payload continues an Arrow IPC stream "
                        f"whose start (its Schema message) this Decoder has not seen: {self._hint()}"
                    )
                if opens or reader is None:
                    reader = self._readers[pt] = StreamReader(payload.schema_id)
                batch = reader.read(payload.record)
            except (pa.ArrowException, StopIteration, ValueError, OSError, EOFError) as exc:
                detail = str(exc) or type(exc).__name__
                if "out of bounds" in detail and not new:
                    detail += f" (a dictionary index past its dictionary: {self._hint()})"
                raise DecodingError(f"{at} ({pt.name}, schema_id {payload.schema_id!r}): bad Arrow IPC data: {detail}") from None
            records[pt] = batch
        return records

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
        """Decode a Quiver bundle produced by ``Encoder.encode_records`` (slot = payload type id).

        The slots tell the signal; a bundle without slots (an empty batch) needs Decoder(signal=...).
        """
        with self._one_call("decode_records"):
            return self._decode_records(record_bundle)

    def _decode_records(self, record_bundle: RecordBundle) -> OtapBundle:
        if not isinstance(record_bundle, RecordBundle):
            envelope = isinstance(record_bundle, BatchArrowRecords | bytes | bytearray | memoryview)
            raise DecodingError(f"expected a quiver_store RecordBundle, got {type(record_bundle).__name__}"
                                + (": decode an OTAP envelope with Decoder.decode" if envelope else ""))
        slots = {slot: batch for slot, batch in record_bundle.slots.items() if slot != PROGRESS_SLOT}  # not telemetry
        types = {slot: _payload_type(slot, f"record bundle slot {slot}") for slot in slots}
        signal = self._signal_of(types.values(), "record bundle", empty="a bundle without slots")
        tables = {types[slot]: self._restore(batch, types[slot], f"slot {slot}") for slot, batch in slots.items()}
        return self._bundle(tables, signal, "record bundle")
