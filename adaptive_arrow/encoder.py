"""The adaptive encoder: validate -> transport optimisation -> feed / correct / build -> route.

One ``Encoder`` is one OTAP stream (stream mode): tables keep their transformation trees and IPC
streams across ``encode`` calls. A fresh encoder per batch is unary mode. A rejected batch
raises before any state changes, so the next batch encodes as if it never came.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from otap_model import SIGNAL_PAYLOADS, OtapBundle, PayloadType, Signal, reference_schema
from quiver_store.bundle import RecordBundle

from .config import EncoderConfig
from .envelope import ArrowPayload, BatchArrowRecords
from .errors import EncodingError, SchemaUpdateLimitError
from .events import EncoderStats, Event, EventKind
from .one_call import OneCallAtATime
from .signature import schema_fingerprint
from .stream import StreamWriter
from .table_encoder import TableEncoder, TablePlan
from .transport.optimizer import optimize_tables, sort_orders
from .validate import check_bundle

_Planned = tuple[PayloadType, TableEncoder, TablePlan, pa.RecordBatch]


class Encoder:
    """Encodes plain OTAP bundles of one signal into adaptive Arrow records."""

    def __init__(self, signal: Signal | str, config: EncoderConfig | None = None):
        try:
            self.signal = Signal(signal)
        except ValueError:
            raise EncodingError(f"unknown signal {signal!r}; expected one of {[s.value for s in Signal]}") from None
        if config is not None and not isinstance(config, EncoderConfig):
            raise EncodingError(f"config must be an EncoderConfig, got {type(config).__name__}")
        self.config = config or EncoderConfig()
        self.stats = EncoderStats()
        self.last_events: tuple[Event, ...] = ()
        self._tables: dict[PayloadType, TableEncoder] = {}
        self._writers: dict[PayloadType, StreamWriter] = {}
        self._next_schema_id = 0
        self._next_batch_id = 0
        self._orders: dict[PayloadType, tuple[str, ...]] | None = None
        self._one_call = OneCallAtATime("Encoder", EncodingError)

    # -- planning (no state change) --------------------------------------------------------
    def _table(self, pt: PayloadType) -> TableEncoder:
        return self._tables.get(pt) or TableEncoder(
            pt,
            reference_schema(pt),
            dictionary_limit=self.config.dictionary_limit,
            reset_threshold=self.config.dictionary_reset_threshold,
            repetition=self.config.repetition_rule,
        )

    def _prepare(self, bundle: OtapBundle) -> list[_Planned]:
        check_bundle(bundle, self.signal)
        tables = {pt: self._table(pt) for pt in SIGNAL_PAYLOADS[self.signal] if pt in bundle.tables}
        batches: dict[PayloadType, tuple[pa.RecordBatch, Callable[[str], pa.Array] | None]]
        if self.config.sort:
            batches = self._sorted(bundle, tables)
        else:
            batches = {pt: (batch, None) for pt, batch in bundle.tables.items()}
        planned: list[_Planned] = []
        for pt in SIGNAL_PAYLOADS[self.signal]:
            batch, plain = batches.get(pt, (None, None))
            if batch is None or batch.num_rows == 0:
                continue
            table = tables[pt]
            plan = table.plan(batch, plain)
            if plan.rounds > self.config.max_schema_updates:
                raise SchemaUpdateLimitError(
                    f"{pt.name}: this batch needs {plan.rounds} schema updates, more than max_schema_updates="
                    f"{self.config.max_schema_updates} ({', '.join(sorted({e.kind.value for e in plan.events}))}); "
                    "raise the limit or send smaller, steadier batches"
                )
            planned.append((pt, table, plan, table.build(plan)))
        return planned

    def _sorted(
        self, bundle: OtapBundle, tables: dict[PayloadType, TableEncoder]
    ) -> dict[PayloadType, tuple[pa.RecordBatch, Callable[[str], pa.Array] | None]]:
        """``transport.optimize`` fused with the dictionary transforms: each table's worthwhile
        dictionary columns are hashed once before sorting (``TableEncoder.hash_first``), so the
        sort gathers their indices instead of their values and the transforms reuse the hashing.
        Each sorted batch comes with the plain sorted column of any such column that goes plain."""
        if self._orders is None:
            self._orders = sort_orders(self.config)
        orders = self._orders
        plain: dict[PayloadType, pa.RecordBatch] = {}

        def hash_first(pt: PayloadType, batch: pa.RecordBatch) -> pa.RecordBatch:
            if batch.num_rows == 0 or pt not in tables:
                return batch
            prepared = tables[pt].hash_first(batch, orders[pt])
            if prepared is not batch:
                plain[pt] = batch
            return prepared

        optimized = optimize_tables(bundle, orders, hash_first)
        return {pt: (s.table, _plain_sorted(plain[pt], s.rows) if pt in plain else None) for pt, s in optimized.items()}

    def _commit(self, planned: list[_Planned], rows: int, *, wire: bool) -> list[ArrowPayload]:
        events: list[Event] = []
        payloads: list[ArrowPayload] = []
        for pt, table, plan, record in planned:
            table.commit(plan)
            self._tables[pt] = table
            events.extend(plan.events)
            if plan.new_stream and (old := self._writers.pop(pt, None)) is not None:
                old.close()
            writer = self._writers.get(pt)
            if wire:
                if writer is None:  # a new signature, or a stream so far only fed through encode_records
                    writer = StreamWriter(str(self._next_schema_id), record.schema, self.config.ipc_compression)
                    self._next_schema_id += 1
                    self._writers[pt] = writer
                    events.append(Event(EventKind.STREAM_OPENED, pt, "", writer.schema_id))
                payloads.append(ArrowPayload(writer.schema_id, int(pt), writer.write(record)))
            elif plan.new_stream:
                events.append(Event(EventKind.STREAM_OPENED, pt, "", plan.signature))
        self.stats.batches += 1
        self.stats.rows += rows
        self.stats.record(events)
        self.last_events = tuple(events)
        return payloads

    # -- public API -------------------------------------------------------------------------
    def encode(self, bundle: OtapBundle) -> BatchArrowRecords:
        """One OTAP envelope: the root payload first, then related tables parent before child."""
        with self._one_call("encode"):
            planned = self._prepare(bundle)
            payloads = self._commit(planned, bundle.num_rows, wire=True)
            bar = BatchArrowRecords(self._next_batch_id, tuple(payloads))
            self._next_batch_id += 1
            return bar

    def encode_records(self, bundle: OtapBundle) -> RecordBundle:
        """The adaptive records as a Quiver bundle (slot = payload type id), without IPC encoding."""
        with self._one_call("encode_records"):
            planned = self._prepare(bundle)
            self._commit(planned, bundle.num_rows, wire=False)
        slots = {int(pt): record for pt, _, _, record in planned}
        fingerprints = {int(pt): schema_fingerprint(record.schema) for pt, _, _, record in planned}
        return RecordBundle(slots, fingerprints)

    def schema_of(self, payload_type: PayloadType | int) -> pa.Schema | None:
        """The schema the last record of a payload type was emitted with (None if never emitted)."""
        table = self._tables.get(PayloadType(payload_type))
        if table is None or table.route_key is None:
            return None
        return table.last_schema


def _plain_sorted(batch: pa.RecordBatch, rows: np.ndarray | None) -> Callable[[str], pa.Array]:
    """The plain column at a path (top level or struct child, as ``TableEncoder`` inspects it)
    of ``batch`` gathered in ``rows`` order, as the sorted plain table would hold it."""

    def column(path: str) -> pa.Array:
        head, _, rest = path.partition(".")
        array = batch.column(head)
        if rows is not None:
            array = array.take(rows)
        if rest:
            array = array.flatten()[array.type.get_field_index(rest)]
        return array

    return column
