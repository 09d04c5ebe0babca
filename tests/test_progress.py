"""Producer progress (quiver_store.progress): an offset stored in the same bundle as its data, so a
writer that runs again stores every input item exactly once, also after kill -9."""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otap_model
from adaptive_arrow import Decoder, Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from quiver_store import (
    PROGRESS_SLOT,
    BundleError,
    ConfigError,
    CorruptionError,
    Layout,
    QuiverError,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    progress,
    progress_ledger,
    with_progress,
)
from quiver_store.cli import main as quiver_main
from quiver_store.progress import PROGRESS_SCHEMA

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))


def item(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"item": pa.array([i], pa.int64())})})


def stored_items(path: Path) -> list[int]:
    with QuiverStore.open(path, QUIET) as store:
        return [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()]


def test_the_offset_comes_back_live_after_close_and_after_a_crash(tmp_path: Path) -> None:
    store = QuiverStore.open(tmp_path, QUIET)
    assert store.committed_offset("job/partition-0") == 0
    for i in range(3):
        store.ingest(with_progress(item(i), "job/partition-0", i + 1))
    store.ingest(with_progress(item(100), "other", 7))
    store.ingest(item(101))  # no progress record: counted for nobody
    assert (store.committed_offset("job/partition-0"), store.committed_offset("other")) == (3, 7)
    store.flush()
    store.ingest(with_progress(item(3), "job/partition-0", 4))
    store.close()

    with QuiverStore.open(tmp_path, QUIET) as store:  # read from the finalized segments
        assert (store.committed_offset("job/partition-0"), store.committed_offset("other")) == (4, 7)
        assert store.committed_offset("job/partition-1") == 0
        store.ingest(with_progress(item(4), "job/partition-0", 5))
        store._abandon()  # crash: the last bundle is only in the WAL
    with QuiverStore.open(tmp_path, QUIET) as store:  # replayed
        assert store.stats()["replayed_entries"] == 1
        assert store.committed_offset("job/partition-0") == 5
    assert stored_items(tmp_path) == [0, 1, 2, 100, 101, 3, 4]


def test_offsets_only_grow(tmp_path: Path) -> None:
    """A writer that re-sends an older offset (a stale attempt) does not move the offset back."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(with_progress(item(0), "p", 10))
        store.ingest(with_progress(item(1), "p", 4))
        assert store.committed_offset("p") == 10
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.committed_offset("p") == 10


def test_progress_records_are_checked_before_anything_is_logged(tmp_path: Path) -> None:
    good = with_progress(item(0), "p", 1)
    wrong = [
        (pa.record_batch({"producer": ["p"], "offset": pa.array([1], pa.int32())}), "its batch must have the schema"),
        (pa.record_batch([pa.array(["p", "q"]), pa.array([1, 2], pa.int64())], schema=PROGRESS_SCHEMA), "exactly one row, got 2"),
        (pa.record_batch([pa.array([""]), pa.array([1], pa.int64())], schema=PROGRESS_SCHEMA), "non-empty producer"),
        (pa.record_batch([pa.array(["p"]), pa.array([-1], pa.int64())], schema=PROGRESS_SCHEMA), "an offset >= 0, got 'p', -1"),
    ]
    with QuiverStore.open(tmp_path, QUIET) as store:
        written = store.stats()["bytes_written"]
        for batch, message in wrong:
            with pytest.raises(BundleError, match=f"slot {PROGRESS_SLOT} is reserved for producer progress: .*{message}"):
                store.ingest(RecordBundle({0: item(0).slots[0], PROGRESS_SLOT: batch}))
        assert store.stats()["bytes_written"] == written
        with pytest.raises(BundleError, match="already carries a progress record"):
            with_progress(good, "p", 2)
        with pytest.raises(BundleError, match="non-empty producer"):
            with_progress(item(0), "", 2)
        with pytest.raises(QuiverError, match="not a producer name: 3"):
            store.committed_offset(3)  # type: ignore[arg-type]
        assert store.committed_offset("p") == 0
    assert stored_items(tmp_path) == []


BAD_RECORDS = [
    (b"\xff\xfe", 1, "the producer must be a str, not bytes"),  # was ArrowInvalid
    ("bad\udcff", 1, "the producer is not valid UTF-8 (surrogates not allowed at index 3)"),  # UnicodeEncodeError
    ("p", 2**63, "the offset is above 2**63-1 (9223372036854775807), the largest it can be"),  # OverflowError
    ("p", True, "the offset must be an int, not bool"),  # ArrowTypeError
    ("p", float("nan"), "the offset must be an int, not float"),  # ArrowInvalid
    ("p", "5", "the offset must be an int, not str"),  # ArrowInvalid
    ("p", 1.5, "the offset must be an int, not float"),  # was stored as 1
    ("", 1, "the producer is empty"),
    ("p", -1, "the offset is negative"),
    (None, 1, "the producer is None (null)"),
    ("p", None, "the offset is None (null)"),
]


@pytest.mark.parametrize(("producer", "offset", "problem"), BAD_RECORDS)
def test_with_progress_refuses_a_bad_producer_or_offset_before_building_anything(producer, offset, problem) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BundleError) as caught:
        with_progress(item(0), producer, offset)
    assert str(caught.value) == (
        f"with_progress needs a non-empty producer and an offset >= 0, got {producer!r}, {offset!r}: {problem}"
    )


def test_with_progress_takes_any_int64_offset_and_numpy_integers() -> None:
    import numpy as np

    for producer, offset in [("p", 0), ("é/partition-3", 2**63 - 1), ("p", np.int64(5)), ("p", np.uint8(7))]:
        record = with_progress(item(0), producer, offset).slots[PROGRESS_SLOT]
        assert record.to_pylist() == [{"producer": producer, "offset": int(offset)}]


def test_a_slot_63_batch_holding_nulls_is_refused_like_with_progress(tmp_path: Path) -> None:
    """check_progress, which checks a bundle built by hand, gives the same reasons."""
    nulls = [
        (pa.array(["p"]), pa.array([None], pa.int64()), "got 'p', None: the offset is None (null)"),
        (pa.array([None], pa.string()), pa.array([1], pa.int64()), "got None, 1: the producer is None (null)"),
    ]
    with QuiverStore.open(tmp_path, QUIET) as store:
        for producer, offset, message in nulls:
            batch = pa.record_batch([producer, offset], schema=PROGRESS_SCHEMA)
            with pytest.raises(BundleError) as caught:
                store.ingest(RecordBundle({0: item(0).slots[0], PROGRESS_SLOT: batch}))
            assert str(caught.value) == (
                f"slot {PROGRESS_SLOT} is reserved for producer progress: needs a non-empty producer and an offset >= 0, {message}"
            )
    assert stored_items(tmp_path) == []


# Slot 63 batches a foreign or buggy writer could store (their CRCs hold), and what the rules say
# of each in a WAL entry and in a segment stream (None: a segment stream may hold no rows).
NOT_PROGRESS = [
    (pa.record_batch({"x": pa.array([1, 2], pa.int32())}), "its batch must have the schema", "their batch must have the schema"),
    (pa.record_batch([pa.array(["p"]), pa.array([-5], pa.int64())], schema=PROGRESS_SCHEMA), "the offset is negative", "a negative offset (-5)"),
    (pa.record_batch([pa.array([""]), pa.array([5], pa.int64())], schema=PROGRESS_SCHEMA), "the producer is empty", "an empty producer"),
    (pa.record_batch([pa.array([None, "p"], pa.string()), pa.array([5, 6], pa.int64())], schema=PROGRESS_SCHEMA), "exactly one row, got 2", "1 null producers, 0 null offsets"),
    (pa.record_batch([pa.array([], pa.string()), pa.array([], pa.int64())], schema=PROGRESS_SCHEMA), "exactly one row, got 0", None),
]


def store_unchecked(store: QuiverStore, bundle: RecordBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingest `bundle` past the progress rules, as a foreign or buggy writer's store would hold it."""
    with monkeypatch.context() as m:
        m.setattr(progress, "check_progress", lambda batch: None)
        m.setattr(QuiverStore, "_note_progress", lambda self, bundle: None)
        m.setattr(RecordBundle, "check_slot_nulls", lambda self, slot, fields: None)
        store.ingest(bundle)


@pytest.mark.parametrize(("batch", "problem", "_"), NOT_PROGRESS)
def test_a_logged_entry_with_an_invalid_progress_record_is_damage_recovery_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], batch: pa.RecordBatch, problem: str, _: str) -> None:
    """Before, quiver verify passed the WAL, and replaying such an entry either failed
    QuiverStore.open with IndexError (a zero-row batch) or stored the bundle and counted whatever
    its first row held as an offset."""
    store = QuiverStore.open(tmp_path, QUIET)
    store.ingest(with_progress(item(0), "p", 1))
    store_unchecked(store, RecordBundle({0: item(1).slots[0], PROGRESS_SLOT: batch}), monkeypatch)
    store.ingest(with_progress(item(2), "p", 3))
    store._abandon()  # crash: all three only in the WAL
    capsys.readouterr()
    assert quiver_main(["verify", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"entry seq 1: slot {PROGRESS_SLOT} is reserved for producer progress:" in out and problem in out
    assert "(QuiverStore.open skips this entry)" in out
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.stats()["replayed_entries"] == 2
        assert store.committed_offset("p") == 3
    assert stored_items(tmp_path) == [0, 2]


@pytest.mark.parametrize(("batch", "_", "problem"), [case for case in NOT_PROGRESS if case[2]])
def test_a_segment_with_invalid_progress_records_stops_committed_offset_and_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], batch: pa.RecordBatch, _: str, problem: str) -> None:
    """Before, committed_offset leaked pyarrow's ArrowInvalid (another schema) or ignored the bad
    record, and quiver verify passed the segment."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(with_progress(item(0), "p", 1))
        store_unchecked(store, RecordBundle({0: item(1).slots[0], PROGRESS_SLOT: batch}), monkeypatch)
    segment = tmp_path / "segments" / "0000000000000000.qseg"
    with QuiverStore.open(tmp_path, QUIET) as store:
        with pytest.raises(CorruptionError) as caught:
            store.committed_offset("p")
        assert str(caught.value).startswith(f"{segment}: progress records")
        assert problem in str(caught.value) and "unknown until the segment is restored or removed" in str(caught.value)
    capsys.readouterr()
    assert quiver_main(["verify", str(tmp_path)]) == 1
    assert problem in " ".join(capsys.readouterr().out.split())
    assert stored_items(tmp_path) == [0, 1]


def test_slot_63_is_reserved_in_every_layout(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="slot 63 is reserved for producer progress"):
        Layout(name="mine", slots={1: "a", 63: "b"})
    with QuiverStore.open(tmp_path, QUIET, layout=OTAP_LAYOUT) as store:  # OTAP defines slots 1..45 only
        bundle = otap_model.generate("logs", 100, batch_size=100, seed=1).__next__()
        records = Encoder("logs").encode_records(bundle)
        store.ingest(with_progress(records, "p", 1))
        assert store.committed_offset("p") == 1
        store.flush()
        stored = [b for _, _, b in store.bundles()]
    assert sorted(stored[0].slots) == [*sorted(records.slots), PROGRESS_SLOT]
    assert OTAP_LAYOUT.label(PROGRESS_SLOT) == "progress"
    # The decoder leaves the progress slot out: the same tables as the records without it.
    assert Decoder().decode_records(stored[0]) == Decoder().decode_records(records)


def test_offsets_outlive_the_segments_retention_deletes(tmp_path: Path) -> None:
    """A writer that runs again after retention deleted its segments must not store its input a
    second time: the deleted segments' offsets are kept in segments/progress.ledger."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), retention=RetentionConfig(max_age=0.001))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(with_progress(item(0), "p", 1))
        store.ingest(with_progress(item(1), "q", 5))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(with_progress(item(2), "p", 2))
    time.sleep(0.01)
    with QuiverStore.open(tmp_path, config) as store:
        store.maintain()  # max_age: the segments go (the first maybe at the previous open)
        assert store.segments() == []
        assert (store.committed_offset("p"), store.committed_offset("q")) == (2, 5)
    assert (tmp_path / "segments" / progress_ledger.NAME).exists()
    with QuiverStore.open(tmp_path, config) as store:
        assert (store.committed_offset("p"), store.committed_offset("q"), store.committed_offset("r")) == (2, 5, 0)
        store.ingest(with_progress(item(3), "p", 3))
        assert store.committed_offset("p") == 3
    assert stored_items(tmp_path) == [3]


def test_a_damaged_ledger_stops_committed_offset_and_deletion_but_loses_nothing(tmp_path: Path) -> None:
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), retention=RetentionConfig(max_age=0.001))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(with_progress(item(0), "p", 1))
    time.sleep(0.01)
    with QuiverStore.open(tmp_path, config) as store:
        store.maintain()
    ledger = tmp_path / "segments" / progress_ledger.NAME
    data = bytearray(ledger.read_bytes())
    data[20] ^= 0x01  # inside the producer name
    ledger.write_bytes(bytes(data))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(with_progress(item(1), "p", 2))
        with pytest.raises(CorruptionError, match=rf"^{re.escape(str(ledger))} at offset {len(data) - 4}: progress ledger fails its CRC32C check: .* remove it to accept "):
            store.committed_offset("p")
        store.flush()
        time.sleep(0.01)
        with pytest.raises(CorruptionError, match=r": progress ledger fails its CRC32C check"):
            store.maintain()  # the new segment holds progress: it is kept, not deleted with its offset
        assert len(store.segments()) == 1
    assert stored_items(tmp_path) == [1]
    ledger.unlink()  # the operator accepts re-storing what the deleted segments held
    with QuiverStore.open(tmp_path, config) as store:
        assert store.committed_offset("p") == 2


@given(st.dictionaries(st.text(min_size=1, max_size=40), st.integers(0, 2**63 - 1), max_size=20))
@settings(max_examples=200, deadline=None)
def test_ledger_bytes_round_trip(offsets: dict[str, int]) -> None:
    assert progress_ledger.decode(progress_ledger.encode(offsets), "ledger") == offsets


@pytest.mark.parametrize(("entries", "why"), [
    ([("p", -1)], "entry 0 holds a negative offset"),
    ([("", 4)], "entry 0 holds an empty producer"),
    ([("p", 4), ("p", 9)], "entry 1 holds producer 'p' a second time"),
])
def test_a_ledger_with_values_its_writer_never_writes_is_damaged(entries: list[tuple[str, int]], why: str) -> None:
    """CRC-valid, so only a foreign or buggy writer could have made them; before, a negative offset
    read as "nothing stored" and a second entry replaced the first."""
    body = struct.pack("<8sHHI", progress_ledger.MAGIC, progress_ledger.VERSION, 0, len(entries))
    for producer, offset in entries:
        name = producer.encode()
        body += struct.pack("<I", len(name)) + name + struct.pack("<q", offset)
    data = body + struct.pack("<I", crc32c.crc32c(body))
    with pytest.raises(CorruptionError, match=rf"^ledger at offset \d+: progress ledger {re.escape(why)}: "):
        progress_ledger.decode(data, "ledger")


def test_a_ledger_with_a_non_zero_reserved_field_is_damaged() -> None:
    body = struct.pack("<8sHHI", progress_ledger.MAGIC, progress_ledger.VERSION, 1, 0)
    with pytest.raises(CorruptionError, match=r"^ledger at offset 10: progress ledger has reserved field 1, not 0: "):
        progress_ledger.decode(body + struct.pack("<I", crc32c.crc32c(body)), "ledger")


@given(st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "job/p-1", "é"]), st.integers(0, 2**63 - 1)), max_size=12), max_size=4))
@settings(max_examples=200, deadline=None)
def test_max_offsets_keeps_each_producers_largest_offset_across_batches(records: list[list[tuple[str, int]]]) -> None:
    batches = [
        pa.record_batch([pa.array([p for p, _ in chunk], pa.string()), pa.array([o for _, o in chunk], pa.int64())], schema=PROGRESS_SCHEMA)
        for chunk in records
    ]
    expected: dict[str, int] = {}
    for producer, offset in (r for chunk in records for r in chunk):
        expected[producer] = max(offset, expected.get(producer, -1))
    assert progress.max_offsets(batches) == expected


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bytes_as_a_ledger_raise_corruption_error(data: bytes) -> None:
    with pytest.raises(CorruptionError, match=r"^ledger at offset \d+: progress ledger "):
        progress_ledger.decode(data, "ledger")


def test_every_truncation_and_bit_flip_of_a_ledger_is_refused() -> None:
    data = progress_ledger.encode({"job/partition-0": 120, "ünïcode": 7})
    for cut in range(len(data)):
        with pytest.raises(CorruptionError, match=r"^ledger at offset \d+: progress ledger "):
            progress_ledger.decode(data[:cut], "ledger")
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptionError, match=r"^ledger at offset \d+: progress ledger "):
            progress_ledger.decode(bytes(flipped), "ledger")


WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig, with_progress

    path, total = sys.argv[1], int(sys.argv[2])
    store = QuiverStore.open(path, StoreConfig(segment=SegmentConfig(target_size=64 << 10)))
    done = store.committed_offset("writer")
    print(done, flush=True)
    for i in range(done, total):
        batch = pa.record_batch({"item": pa.array([i] * 50, pa.int64())})
        store.ingest(with_progress(RecordBundle({0: batch}), "writer", i + 1))
        print(i + 1, flush=True)  # acknowledged: durable
    store.close()
    print("complete", flush=True)
    """
)


def test_kill_9_at_random_points_then_resume_stores_every_item_exactly_once(tmp_path: Path) -> None:
    """A writer resuming from committed_offset after each kill -9 (sent after it acknowledged
    `step` more items, so it dies in or between later ingests, and segments are finalized on the
    way): after every crash the offset equals the items stored, and the store ends with items
    0..N-1, each once, in order."""
    total, steps = 400, [37, 1, 90, 64, 120]
    resumed_from = []
    for step in [*steps, None]:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(total)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        resumed_from.append(int(proc.stdout.readline()))
        if step is None:
            assert proc.wait(timeout=120) == 0 and proc.stdout.read().split()[-1] == "complete"
            break
        acknowledged = [int(proc.stdout.readline()) for _ in range(step)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with QuiverStore.open(tmp_path, QUIET) as store:
            offset = store.committed_offset("writer")
            store.flush()
            items = [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()]
        assert offset >= acknowledged[-1]  # nothing acknowledged is lost
        assert items == list(range(offset))  # the offset agrees with the data: no gap, no duplicate
    assert stored_items(tmp_path) == list(range(total))
    assert resumed_from[0] == 0
    for before, after, step in zip(resumed_from[:-1], resumed_from[1:], steps, strict=True):
        assert after >= before + step  # each attempt resumed past all it acknowledged
    assert resumed_from[-1] < total  # the last kill still left work for the final run


def test_committed_offset_refuses_a_producer_no_record_can_hold(tmp_path: Path) -> None:
    """A name with_progress refuses can have no offset: say so rather than answer 0."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        for producer, why in (("bad\udcff", "the producer is not valid UTF-8"), ("", "the producer is empty"), (7, "the producer must be a str, not int")):
            with pytest.raises(QuiverError, match=rf"^committed_offset: not a producer name: .*: {why}"):
                store.committed_offset(producer)  # type: ignore[arg-type]
