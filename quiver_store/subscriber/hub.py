"""The one object the engine holds for subscribers, the ack log and retention.

The engine calls it at open, before each ingest, on its timer and at close; everything else
(ordering, durability of outcomes, deletion protocol) lives in the registry and retention.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from ..config import StoreConfig
from ..errors import QuiverError
from ..fs import DEFAULT_FS, FileSystem
from ..handoff import Handoff
from ..retention import Retention, core_label
from . import otel
from .registry import BundleReader, SegmentRef, Start, SubscriberRegistry
from .subscription import Subscription

log = logging.getLogger("quiver_store")


def _open_reader(fs: FileSystem):  # type: ignore[no-untyped-def]
    def open_reader(path: str) -> BundleReader:
        from ..segment.reader import SegmentReader

        return SegmentReader.open(path, fs=fs)

    return open_reader


def _live_metrics(hub: SubscriberHub) -> dict[str, Any]:
    if hub.closed:
        return {}
    return hub.metrics()


class SubscriberHub:
    """Subscribers + retention of one core's store."""

    def __init__(self, registry: SubscriberRegistry, retention: Retention, interval: float) -> None:
        self.registry = registry
        self.retention = retention
        self._closed = False
        self._close_lock = threading.Lock()
        self._stop: Handoff[None] = Handoff()  # not an Event: Event.set() takes a Condition (handoff.py)
        self._interval = interval
        self._thread: threading.Thread | None = None
        self.maintenance_errors = 0
        self.last_maintenance_error: str | None = None
        self.otel_exported = False

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self, name: str = "quiver-maintenance") -> None:
        """Run `tick` every `retention.maintenance_interval` seconds on a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.tick()
            except Exception as exc:  # keep maintaining; the error shows in metrics
                self.maintenance_errors += 1
                self.last_maintenance_error = repr(exc)
                log.exception("subscriber maintenance failed")

    @classmethod
    def open(
        cls,
        store: Any,
        directory: str,
        config: StoreConfig,
        *,
        fs: FileSystem = DEFAULT_FS,
        reader_factory: Any = None,
    ) -> SubscriberHub:
        """Replay the ack log in `directory`, reconcile with `store.segments()`, wire the listener.

        The finalize listener is registered before the segment list is read, and its calls are
        held until the registry exists, so no segment finalized meanwhile is missed.
        """
        pending: list[Any] = []
        target: list[SubscriberRegistry] = []
        gate = threading.Lock()

        def listener(info: Any) -> None:
            with gate:
                if not target:
                    pending.append(info)
                    return
            registry = target[0]
            try:
                registry.on_segment_finalized(info)
            except QuiverError as exc:
                if not registry.log_stopped:
                    raise
                # The ack log was closed (a close() cut short by a signal handler's exception) or
                # stopped by a failed or interrupted write: the next open registers the segment, as
                # it does any segment the ack log does not know.
                log.warning("segment %d was finalized after the ack log stopped taking records (%s); "
                            "the next open registers it", info.seq, exc)

        store.add_finalize_listener(listener)
        refs = [SegmentRef(s.seq, s.bundle_count, s.path) for s in store.segments()]
        registry, stale = SubscriberRegistry.open(
            directory,
            refs,
            fs=fs,
            config=config.subscribers,
            reader_factory=reader_factory or _open_reader(fs),
            sync=config.wal.durability == "fsync",
            recovery=config.wal.recovery,
            set_aside=frozenset(store.set_aside_segments),
        )
        for err, action, source in registry.recovery_reports:
            store.record_corruption(err, action, source)
        with gate:
            target.append(registry)
            for info in pending:
                registry.on_segment_finalized(info)
        retention = Retention(config, store, registry, core_id=core_label(directory))
        registry.on_processed = retention.on_processed
        retention.delete_stale(stale)
        hub = cls(registry, retention, config.retention.maintenance_interval)
        retention.sweep()
        hub.otel_exported = otel.register(hub, _live_metrics, os.path.abspath(directory))
        return hub

    def subscribe(self, name: str, start: Start = "earliest") -> Subscription:
        return self.registry.subscribe(name, start)

    def unsubscribe(self, name: str) -> None:
        self.registry.unsubscribe(name)

    def before_ingest(self, incoming_bytes: int) -> None:
        """Size-cap enforcement; call before the WAL append, holding no engine lock."""
        self.retention.make_room(incoming_bytes)

    def tick(self) -> None:
        """Maintenance (engine timer): orphans, time retention, steady-state cleanup, checkpoint."""
        if self._closed:
            return
        self.retention.sweep()
        self.registry.maybe_checkpoint()

    def metrics(self) -> dict[str, Any]:
        out = self.registry.metrics()
        out.update(self.retention.metrics())
        out["quiver.maintenance.errors_total"] = self.maintenance_errors
        return out

    def describe(self) -> list[dict[str, Any]]:
        return self.registry.describe()

    def close(self) -> None:
        """Stop retention, flush + checkpoint the ack log (acks are never lost on a clean close).
        Every call closes the registry (the second time it does nothing): a signal handler's exit
        landing right after the claim used to leave it open for good, and a subscriber blocked in
        next() on another thread never woke (the process hung at its exit)."""
        try:
            if self._mark_closed():
                self._stop_retention()
        finally:  # even when Ctrl-C cut the claim or the wait for the thread: blocked subscribers must wake
            self.registry.close()

    def abandon(self) -> None:
        """Test support (a crash): stop without a final checkpoint; acks already returned are durable."""
        if self._mark_closed():
            try:
                self._stop_retention()
            finally:
                self.registry.abandon()

    def _mark_closed(self) -> bool:
        """True for the one caller that closes the hub; False when it was closed already."""
        with self._close_lock:
            if self._closed:
                return False
            self._closed = True
        return True

    def _stop_retention(self) -> None:
        self.retention.closed = True
        self.stop_thread()

    def stop_thread(self, timeout: float | None = None) -> None:
        """Stop the maintenance thread and wait for it (up to `timeout` seconds); the ack log stays open."""
        self._stop.set_result(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
