"""Subscribers: ordering, ack/nack/defer, independence, names, orphans, blocking delivery.

`FakeStore` stands in for QuiverStore's subscriber hooks (quiver.md) with real segment files, so
these tests pin the subscriber logic independently of the engine.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig, StoreConfig, SubscriberConfig, WalConfig
from quiver_store.errors import QuiverError, StoreClosedError
from quiver_store.fs import DEFAULT_FS
from quiver_store.segment import OpenSegment, SegmentReader, write_segment
from quiver_store.subscriber.hub import SubscriberHub


def make_bundle(value: int, rows: int = 3) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"v": pa.array([value] * rows, pa.int64())})})


def value_of(bundle: RecordBundle) -> int:
    return bundle.slots[0].column(0)[0].as_py()


class FakeStore:
    """The engine hooks the subscriber part relies on, over real segment files."""

    def __init__(self, root: str, config: StoreConfig | None = None) -> None:
        self.root = root
        self.config = config or StoreConfig(wal=WalConfig(durability="none"))
        self.seg_dir = os.path.join(root, "segments")
        os.makedirs(self.seg_dir, exist_ok=True)
        self.set_aside_segments: set[int] = set()  # damaged segments the engine moved aside at open
        self._segments = {}
        for name in sorted(os.listdir(self.seg_dir)):
            if name.endswith(".qseg"):
                with SegmentReader.open(os.path.join(self.seg_dir, name)) as reader:
                    self._segments[reader.info.seq] = reader.info
        floor_path = os.path.join(self.seg_dir, "next.seq")
        floor = int(Path(floor_path).read_text()) if os.path.exists(floor_path) else 0
        self._next_seq = max([floor, *(s + 1 for s in self._segments)])
        self._open = OpenSegment(self.config.segment)
        self.wal_bytes = 0
        self._listeners = []
        self._lock = threading.RLock()
        self.deleted: list[tuple[int, str]] = []
        self.hub = SubscriberHub.open(self, root, self.config)

    # QuiverStore-like API
    def ingest(self, bundle: RecordBundle) -> None:
        size = sum(b.nbytes for b in bundle.slots.values())
        self.hub.before_ingest(size)
        with self._lock:
            self._open.append(bundle)
            self.wal_bytes += size

    def flush(self) -> None:
        self.finalize_now("flush")

    def subscribe(self, name, start="earliest"):
        return self.hub.subscribe(name, start)

    def unsubscribe(self, name):
        self.hub.unsubscribe(name)

    def close(self) -> None:
        self.hub.close()

    # hooks
    def add_finalize_listener(self, fn) -> None:
        self._listeners.append(fn)

    def segments(self):
        with self._lock:
            return [self._segments[s] for s in sorted(self._segments)]

    def finalize_now(self, reason: str):
        with self._lock:
            if self._open.is_empty:
                return None
            seq = self._next_seq
            self._next_seq += 1
            with open(os.path.join(self.seg_dir, "next.seq"), "w") as f:
                f.write(str(self._next_seq))
            info = write_segment(self._open, os.path.join(self.seg_dir, f"{seq:016d}.qseg"), seq)
            self._segments[seq] = info
            self._open = OpenSegment(self.config.segment)
            self.wal_bytes = 0
        for fn in self._listeners:
            fn(info)
        return info

    def delete_segment(self, seq: int, reason: str) -> int:
        with self._lock:
            info = self._segments.pop(seq)
            os.unlink(info.path)
            DEFAULT_FS.fsync_dir(self.seg_dir)
            self.deleted.append((seq, reason))
            return info.size_bytes

    def disk_usage(self) -> int:
        with self._lock:
            return self.wal_bytes + sum(s.size_bytes for s in self._segments.values())

    def open_segment_bytes(self) -> int:
        with self._lock:
            return 0 if self._open.is_empty else self._open.serialized_size


def cfg(**sub) -> StoreConfig:
    return StoreConfig(
        segment=SegmentConfig(),
        wal=WalConfig(durability="none"),
        subscribers=SubscriberConfig(**{"nack_backoff_initial": 0.0, **sub}),
    )


def fill(store: FakeStore, segments: list[int]) -> None:
    """Ingest and finalize segments holding `n` bundles each (values count up)."""
    v = 0
    for n in segments:
        for _ in range(n):
            store.ingest(make_bundle(v))
            v += 1
        store.flush()


def drain(sub, *, ack=True) -> list[tuple[int, int, int]]:
    out = []
    while (d := sub.next(timeout=0)) is not None:
        out.append((d.segment_seq, d.bundle_index, value_of(d.bundle)))
        if ack:
            d.ack()
    return out


def test_delivery_order_and_bundle_contents(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    fill(store, [2, 3])
    sub = store.subscribe("a")
    got = drain(sub)
    assert got == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3), (1, 2, 4)]
    assert sub.stats()["mark"] == 1 and sub.stats()["lag_bundles"] == 0
    store.close()


def test_subscribers_progress_independently_and_segment_deleted_when_all_resolved(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    a, b = store.subscribe("a"), store.subscribe("b")
    fill(store, [2])
    drain(a)
    assert [s.seq for s in store.segments()] == [0]  # b still pins it
    assert b.stats()["lag_bundles"] == 2
    drain(b)
    assert store.segments() == [] and store.deleted == [(0, "processed")]
    store.close()


def test_nack_redelivers_after_backoff_and_defer_at_once(tmp_path):
    store = FakeStore(str(tmp_path), cfg(nack_backoff_initial=0.05, nack_backoff_max=0.05))
    fill(store, [3])
    sub = store.subscribe("a")
    d0 = sub.next(0)
    d0.nack()
    d1 = sub.next(0)
    assert (d1.segment_seq, d1.bundle_index) == (0, 1)
    d1.defer()
    again = sub.next(0)
    assert (again.segment_seq, again.bundle_index) == (0, 1)  # deferred: eligible immediately
    again.ack()
    d2 = sub.next(0)
    assert d2.bundle_index == 2
    d2.ack()
    assert sub.next(timeout=0) is None  # bundle 0 still backing off
    redo = sub.next(timeout=5)
    assert (redo.segment_seq, redo.bundle_index) == (0, 0)
    redo.ack()
    assert sub.stats()["mark"] == 0
    store.close()


def test_settling_twice_is_an_error(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    fill(store, [1])
    d = store.subscribe("a").next(0)
    d.ack()
    with pytest.raises(QuiverError, match="already settled with ack"):
        d.nack()
    store.close()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "non-empty"),
        ("a" * 65, "the limit is 64"),
        ("bad name", "may only contain"),
        ("é", "may only contain"),
    ],
)
def test_subscriber_names_are_validated(tmp_path, name, message):
    store = FakeStore(str(tmp_path), cfg())
    with pytest.raises(QuiverError, match=message):
        store.subscribe(name)
    store.close()


def test_start_latest_skips_existing_segments(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    fill(store, [2])
    late = store.subscribe("late", start="latest")
    assert late.next(timeout=0) is None
    fill(store, [1])
    d = late.next(0)
    assert (d.segment_seq, d.bundle_index) == (1, 0)
    store.close()


def test_next_blocks_until_a_segment_is_finalized(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    sub = store.subscribe("a")
    got = []
    t = threading.Thread(target=lambda: got.append(sub.next(timeout=30)))
    t.start()
    time.sleep(0.05)
    fill(store, [1])
    t.join(10)
    assert got and got[0] is not None and value_of(got[0].bundle) == 0
    store.close()


def test_iteration_ends_when_the_store_closes(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    fill(store, [2])
    sub = store.subscribe("a")
    seen = []

    def consume():
        for d in sub:
            seen.append(d.bundle_index)
            d.ack()

    t = threading.Thread(target=consume)
    t.start()
    deadline = time.time() + 10
    while len(seen) < 2 and time.time() < deadline:
        time.sleep(0.01)
    store.close()
    t.join(10)
    assert seen == [0, 1] and not t.is_alive()
    with pytest.raises(StoreClosedError):
        sub.next(0)


def test_restart_resumes_each_subscriber_exactly(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    fill(store, [3, 2])
    a, b = store.subscribe("a"), store.subscribe("b")
    da = [a.next(0) for _ in range(3)]
    da[0].ack()
    da[2].ack()  # out of order: gap at (0, 1)
    db = [b.next(0) for _ in range(4)]
    for d in db:
        d.ack()
    store.close()
    store = FakeStore(str(tmp_path), cfg())
    a, b = store.subscribe("a"), store.subscribe("b")
    assert a.stats()["mark"] == -1 and a.stats()["gaps"] == [(0, 0), (0, 2)]
    assert [(s, i) for s, i, _ in drain(a)] == [(0, 1), (1, 0), (1, 1)]
    assert [(s, i) for s, i, _ in drain(b)] == [(1, 1)]
    store.close()


def test_unsubscribe_releases_pinned_segments_and_is_durable(tmp_path):
    store = FakeStore(str(tmp_path), cfg())
    a = store.subscribe("a")
    store.subscribe("slow")
    fill(store, [2])
    drain(a)
    assert len(store.segments()) == 1
    store.unsubscribe("slow")
    assert store.segments() == []
    with pytest.raises(QuiverError, match="no subscriber named 'slow'"):
        store.unsubscribe("slow")
    store.close()
    store = FakeStore(str(tmp_path), cfg())
    assert store.hub.registry.names() == ["a"]
    store.close()


def test_orphaned_subscriber_stops_pinning_and_resumes_after_dropped(tmp_path):
    clock = {"now": 1_000_000_000_000}
    store = FakeStore(str(tmp_path), cfg(orphan_timeout=60.0))
    store.hub.registry._wall = lambda: clock["now"]
    a = store.subscribe("a")
    store.subscribe("gone")
    fill(store, [2])
    drain(a)
    assert len(store.segments()) == 1  # "gone" pins segment 0
    clock["now"] += 61 * 10**9
    a.next(timeout=0)  # a is active; gone is not
    store.hub.tick()
    assert store.segments() == [] and store.deleted == [(0, "processed")]
    gone = store.hub.describe()[1]
    assert gone["name"] == "gone" and gone["orphaned"] and gone["dropped_bundles"] == 2
    m = store.hub.metrics()
    assert m['quiver.subscriber.dropped_bundles_total{subscriber="gone"}'] == 2
    assert m["quiver.subscriber.orphaned_total"] == 1
    back = store.subscribe("gone")
    fill(store, [1])
    assert [(s, i) for s, i, _ in drain(back)] == [(1, 0)]
    store.close()


def test_quiver_inspect_shows_subscribers_marks_gaps_and_lag(tmp_path, capsys):
    from quiver_store.cli import main

    store = FakeStore(str(tmp_path), cfg())
    a, b = store.subscribe("parquet"), store.subscribe("otlp")
    fill(store, [3])
    got = [a.next(0) for _ in range(3)]
    got[0].ack()
    got[2].ack()
    drain(b)
    store.close()
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
        for line in out.splitlines()
        if line.startswith("│ ") and line.split("│")[1].strip() in ("parquet", "otlp")
    }
    assert rows["parquet"][:5] == ["-1", "2", "0:0, 0:2", "1", "1"]
    assert rows["otlp"][:5] == ["0", "0", "-", "0", "0"]


def fake_opentelemetry(monkeypatch, meter: type) -> None:
    """Install a stand-in `opentelemetry.metrics` whose meters are `meter()`; observations are tuples."""
    import sys
    import types

    api = types.ModuleType("opentelemetry.metrics")
    api.get_meter = lambda name: meter()
    api.Observation = lambda value, attributes: (value, attributes)
    pkg = types.ModuleType("opentelemetry")
    pkg.metrics = api
    monkeypatch.setitem(sys.modules, "opentelemetry", pkg)
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", api)


def test_opentelemetry_export_is_optional_and_reads_the_snapshot(tmp_path, monkeypatch):
    from quiver_store.subscriber import otel

    assert otel.split_key('quiver.gc.evictions_total{reason="size"}') == (
        "quiver.gc.evictions_total",
        {"reason": "size"},
    )
    store = FakeStore(str(tmp_path / "plain"), cfg())
    assert store.hub.otel_exported is False  # opentelemetry-api is not installed here: skipped silently
    store.close()

    instruments = {}

    class Meter:
        def create_observable_counter(self, name, callbacks):
            instruments[name] = ("counter", callbacks)

        def create_observable_gauge(self, name, callbacks):
            instruments[name] = ("gauge", callbacks)

    fake_opentelemetry(monkeypatch, Meter)
    store = FakeStore(str(tmp_path / "otel"), cfg())
    assert store.hub.otel_exported is True
    a = store.subscribe("a")
    fill(store, [2])
    a.next(0).ack()
    here = str(tmp_path / "otel")
    kind, (cb,) = instruments["quiver.subscriber.lag_bundles"]
    assert kind == "gauge" and list(cb(None)) == [(1, {"store": here, "subscriber": "a"})]
    kind, (cb,) = instruments["quiver.gc.evictions_total"]
    assert kind == "counter" and (0, {"store": here, "reason": "processed"}) in list(cb(None))
    store.close()
    assert list(cb(None)) == []


def test_opentelemetry_instruments_are_created_once_however_often_stores_reopen(tmp_path, monkeypatch):
    """A meter keeps every instrument created on it (the API's proxy meter in a list) and the SDK
    drops the callbacks of a second instrument of the same name: one set per open piled up 17 more
    instruments at each reopen, and only the first store's metrics were exported."""
    from quiver_store.subscriber import otel

    created = []

    class Meter:
        def create_observable_counter(self, name, callbacks):
            created.append((name, callbacks))

        create_observable_gauge = create_observable_counter

    fake_opentelemetry(monkeypatch, Meter)
    instruments = len(otel.COUNTERS) + len(otel.GAUGES)
    root = str(tmp_path / "store")
    for n in range(5):
        store = FakeStore(root, cfg())
        store.subscribe(f"s{n}")
        assert store.hub.otel_exported is True and len(created) == instruments
        if n < 4:
            store.close()
    (cb,) = next(callbacks for name, callbacks in created if name == "quiver.subscriber.lag_bundles")
    assert sorted(attrs["subscriber"] for _, attrs in cb(None)) == [f"s{n}" for n in range(5)]  # the open store's
    other = FakeStore(str(tmp_path / "other"), cfg())  # a second store open at once (another core) is read too
    other.subscribe("x")
    assert len(created) == instruments and {"store": str(tmp_path / "other"), "subscriber": "x"} in [attrs for _, attrs in cb(None)]
    other.close()
    store.close()
    assert list(cb(None)) == []


def test_two_stores_in_one_process_report_apart(tmp_path, monkeypatch):
    """An SDK keeps one value per instrument and attribute set: two stores with the same subscriber
    name (or any label-less counter) reported the same attributes, and one overwrote the other."""
    created = {}

    class Meter:
        def create_observable_counter(self, name, callbacks):
            created[name] = callbacks

        create_observable_gauge = create_observable_counter

    fake_opentelemetry(monkeypatch, Meter)
    stores = [FakeStore(str(tmp_path / name), cfg()) for name in ("core_0", "core_1")]
    for store, backlog in zip(stores, ([2], [2, 3, 4])):
        store.subscribe("exporter")
        fill(store, backlog)
    (lag,) = created["quiver.subscriber.lag_bundles"]
    (count,) = created["quiver.subscriber.count"]
    assert sorted((attrs["store"], value) for value, attrs in lag(None)) == [
        (str(tmp_path / "core_0"), 2), (str(tmp_path / "core_1"), 9)]
    assert sorted(attrs["store"] for _, attrs in count(None)) == [str(tmp_path / "core_0"), str(tmp_path / "core_1")]
    for store in stores:
        store.close()
