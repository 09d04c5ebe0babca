"""Stateful property test of the real store's subscribers against a plain in-memory model.

Random ingest, finalize, subscribe (earliest / latest), unsubscribe, deliveries settled with
ack / nack / defer out of order, clean restarts, and size-cap pressure under both policies.
Invariants checked after every step and at the end:

- no bundle a subscriber acknowledged is ever delivered to it again (across clean restarts and
  simulated process crashes too);
- every bundle is delivered with the data it was ingested with;
- backpressure never deletes a segment some eligible subscriber has not fully acknowledged;
- drop_oldest reports exactly what it dropped (per subscriber, per segment) and leaves no gap;
- at the end, every finalized bundle that was neither acknowledged nor dropped is delivered
  (at-least-once) and afterwards every subscriber's mark covers every segment.
"""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from quiver_store.bundle import RecordBundle
from quiver_store.config import RetentionConfig, SegmentConfig, StoreConfig, SubscriberConfig, WalConfig
from quiver_store.engine import QuiverStore
from quiver_store.errors import StoreFullError

NAMES = ("a", "b", "c")


def bundle(value: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"v": pa.array([value] * 100, pa.int64())})})


class SubModel:
    def __init__(self, start_seq: int) -> None:
        self.start_seq = start_seq  # first segment this subscriber is owed
        self.acked: set[int] = set()  # values acknowledged
        self.dropped = 0


class StoreMachine(RuleBasedStateMachine):
    policy = "backpressure"

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="quiver-stateful-")
        self.config = StoreConfig(
            segment=SegmentConfig(max_open_duration=3600.0),
            wal=WalConfig(durability="os", rotation_size=4096, max_size=1 << 20),
            retention=RetentionConfig(
                size_cap=10 * 1024,
                size_cap_policy=self.policy,
                backpressure_timeout=0.0,
                maintenance_interval=3600.0,
            ),
            subscribers=SubscriberConfig(
                nack_backoff_initial=0.0,
                nack_backoff_max=0.0,
                orphan_timeout=None,
                ack_log_checkpoint_interval=7,
            ),
        )
        self.next_value = 0
        self.pending: list[int] = []  # ingested, not yet in a finalized segment
        self.segments: dict[int, list[int]] = {}  # every segment ever finalized: seq -> values
        self.live: set[int] = set()
        self.max_seq = -1
        self.subs: dict[str, SubModel] = {}
        self.handles: dict = {}
        self.inflight: list = []
        self.dropped_segments = 0
        self.store = self._open()

    def _open(self) -> QuiverStore:
        store = QuiverStore.open(self.dir, self.config)
        store.add_finalize_listener(self._on_finalize)
        self.dropped_segments = 0  # quiver.segment.dropped_total counts since open
        self.live = {s.seq for s in store.segments()}
        self.handles = {name: store.subscribe(name) for name in self.subs}
        return store

    def _on_finalize(self, info) -> None:
        values, self.pending = self.pending[: info.bundle_count], self.pending[info.bundle_count :]
        assert len(values) == info.bundle_count
        self.segments[info.seq] = values
        self.live.add(info.seq)
        assert info.seq > self.max_seq  # never reused
        self.max_seq = info.seq

    def _account_deletions(self) -> None:
        now = {s.seq for s in self.store.segments()}
        for seq in sorted(self.live - now):
            lost = 0
            for model in self.subs.values():
                if seq < model.start_seq:
                    continue
                missing = [v for v in self.segments[seq] if v not in model.acked]
                if self.policy == "backpressure":
                    assert not missing, (
                        f"backpressure deleted segment {seq} with unacknowledged bundles {missing}"
                    )
                model.dropped += len(missing)
                lost += len(missing)
            self.dropped_segments += lost > 0
            event(
                "segment dropped with unacknowledged bundles" if lost else "segment deleted after processing"
            )
        self.live = now
        self.inflight = [d for d in self.inflight if d[0].segment_seq in now]

    # -- rules ------------------------------------------------------------------------------
    @rule(n=st.integers(1, 4))
    def ingest(self, n):
        for _ in range(n):
            value = self.next_value
            self.pending.append(value)
            try:
                self.store.ingest(bundle(value))
            except StoreFullError as exc:
                self.pending.remove(value)
                assert "size cap" in str(exc)
                event("ingest refused at the size cap")
                break
            finally:
                self._account_deletions()
            self.next_value += 1

    @rule()
    def finalize(self):
        self.store.finalize_now("test")
        self._account_deletions()

    @rule(name=st.sampled_from(NAMES), latest=st.booleans())
    def subscribe(self, name, latest):
        self._account_deletions()
        if name not in self.subs:
            start = self.max_seq + 1 if latest or not self.live else min(self.live)
            self.subs[name] = SubModel(start)
        self.handles[name] = self.store.subscribe(name, "latest" if latest else "earliest")
        self._account_deletions()  # a "latest" subscriber may complete retained segments

    @precondition(lambda self: self.subs)
    @rule(data=st.data())
    def unsubscribe(self, data):
        name = data.draw(st.sampled_from(sorted(self.subs)))
        self.store.unsubscribe(name)
        del self.subs[name]
        del self.handles[name]
        self.inflight = [d for d in self.inflight if d[1] != name]
        self._account_deletions()

    @precondition(lambda self: self.subs)
    @rule(data=st.data())
    def deliver(self, data):
        name = data.draw(st.sampled_from(sorted(self.subs)))
        d = self.handles[name].next(timeout=0)
        if d is None:
            return
        model = self.subs[name]
        value = d.bundle.slots[0].column(0)[0].as_py()
        assert value == self.segments[d.segment_seq][d.bundle_index]
        assert value not in model.acked, f"{name} got acknowledged bundle {value} again"
        assert d.segment_seq >= model.start_seq
        self.inflight.append((d, name, value))

    @precondition(lambda self: self.inflight)
    @rule(data=st.data(), how=st.sampled_from(["ack", "ack", "nack", "defer"]))
    def settle(self, data, how):
        i = data.draw(st.integers(0, len(self.inflight) - 1))
        d, name, value = self.inflight.pop(i)
        if how == "ack":
            assert d.ack()
            self.subs[name].acked.add(value)
            self._account_deletions()
        else:
            getattr(d, how)()

    @rule()
    def restart(self):
        self.store.close()
        self.inflight = []
        self.store = self._open()
        self._account_deletions()

    @rule()
    def crash(self):
        """Stop as a crash would (process state lost, page cache kept): returned acks survive."""
        self.store._abandon()
        self.inflight = []
        self.store = self._open()
        self._account_deletions()

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def drops_are_reported_exactly(self):
        stats = self.store.stats()
        for name, model in self.subs.items():
            assert stats[f'quiver.subscriber.dropped_bundles_total{{subscriber="{name}"}}'] == model.dropped
            if self.policy == "backpressure":
                assert model.dropped == 0
        assert stats["quiver.segment.dropped_total"] == self.dropped_segments
        by_name = {s["name"]: s for s in stats["subscribers"]}
        assert set(by_name) == set(self.subs)

    def teardown(self):
        try:
            self.store.finalize_now("teardown")
            self._account_deletions()
            for d, _, _ in self.inflight:
                d.defer()
            self.inflight = []
            for name, model in self.subs.items():
                sub = self.handles[name]
                while (d := sub.next(timeout=0)) is not None:
                    value = d.bundle.slots[0].column(0)[0].as_py()
                    assert value not in model.acked
                    assert d.ack()
                    model.acked.add(value)
                    self._account_deletions()
            for name, model in self.subs.items():
                owed = {v for seq in self.live if seq >= model.start_seq for v in self.segments[seq]}
                assert owed <= model.acked, f"{name} never received {sorted(owed - model.acked)}"
            if self.subs:
                assert self.store.segments() == []  # everything processed was cleaned up
                for s in self.store.stats()["subscribers"]:
                    assert s["gap_set_size"] == 0 and s["lag_bundles"] == 0
        finally:
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)


class DropOldestMachine(StoreMachine):
    policy = "drop_oldest"


SETTINGS = settings(
    max_examples=25, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestBackpressure = StoreMachine.TestCase
TestBackpressure.settings = SETTINGS
TestDropOldest = DropOldestMachine.TestCase
TestDropOldest.settings = SETTINGS
