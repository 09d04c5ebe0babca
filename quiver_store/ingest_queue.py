"""Pipelined ingest: one writer thread calls `QuiverStore.ingest` while the producer prepares the next
bundle, so the WAL fdatasync of one bundle overlaps the work (encoding, conversion) of the next.

`ingest` blocks until its entry is durable; a single producer that calls it inline pays every
fdatasync on its own critical path. Handing bundles to a writer thread hides that wait (fdatasync
releases the GIL) without weakening the promise: a bundle is stored once its receipt is in
`receipts`, which happens only after `ingest` returned for it, in submission order.
"""

from __future__ import annotations

import queue
import threading
from types import TracebackType

from .bundle import RecordBundle
from .engine import BundleReceipt, QuiverStore
from .errors import ConfigError, QuiverError

_STOP = object()


class IngestQueue:
    """Feeds bundles to `store.ingest` on one writer thread, at most `depth` waiting at a time.

    `submit` returns as soon as the bundle is queued (it blocks while `depth` bundles wait: the
    producer can never run ahead of the disk by more than that). The first failing ingest stops
    the writer: nothing submitted after it is ingested, and the error is raised again by the next
    `submit` or by `close`. `close` waits until every queued bundle is durable and returns the
    receipts in submission order.
    """

    def __init__(self, store: QuiverStore, depth: int = 1) -> None:
        if not isinstance(store, QuiverStore):
            raise ConfigError(f"IngestQueue needs an open QuiverStore (QuiverStore.open(path)), got {type(store).__name__}")
        if depth < 1:
            raise QuiverError(f"IngestQueue depth must be at least 1, got {depth}")
        self._store = store
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._closed = False
        self.receipts: list[BundleReceipt] = []
        self._writer = threading.Thread(target=self._run, name="quiver-ingest-queue", daemon=True)
        self._writer.start()

    def submit(self, bundle: RecordBundle) -> None:
        """Queue `bundle` for ingest; raises the writer's error if an earlier ingest failed."""
        if self._closed:
            raise QuiverError("IngestQueue is closed; open a new one to ingest more bundles")
        self._raise_failure()
        self._queue.put(bundle)

    def close(self) -> list[BundleReceipt]:
        """Wait until every submitted bundle is durable; return all receipts in submission order."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._writer.join()
        self._raise_failure()
        return self.receipts

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise QuiverError(
                f"an earlier ingest failed after {len(self.receipts)} stored bundles; "
                f"later bundles were not ingested: {self._error}"
            ) from self._error

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._error is not None:
                continue  # drain without ingesting: nothing after a failure is stored
            try:
                self.receipts.append(self._store.ingest(item))  # type: ignore[arg-type]
            except BaseException as exc:
                self._error = exc

    def __enter__(self) -> IngestQueue:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
            return
        # the producer failed: still wait for what was queued, but let the producer's error win
        self._closed = True
        self._queue.put(_STOP)
        self._writer.join()
