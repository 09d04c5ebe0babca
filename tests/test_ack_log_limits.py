"""Ack log and checkpoint values the store never writes are damage, not a crash or wrong progress.

Found by the `ack_frames` fuzz target and by reading the readers after it: CRC-valid records and
checkpoints whose numbers are impossible were taken as they were, and either exhausted memory
(a segment registered with 2**32-1 bundles, dropped bundle by bundle when it is gone), handed out
bundles that do not exist (a segment on disk registered with more bundles than it holds), or were
accepted and failed later with struct.error when the store wrote them back (a subscriber id of
2**32-1, a segment number, generation or drop count past 2**63-1), truncated the active log (a
checkpoint replay offset inside the log's header), were taken for something else (an outcome code
above 2 for a nack), kept a subscriber no subscribe() can name pinning segments (a name outside
the naming rules), or made the store unopenable in every recovery mode (a record contradicting
the bundle count registered before it)."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig, cli, engine
from quiver_store.errors import CorruptionError, QuiverError
from quiver_store.fs import DEFAULT_FS
from quiver_store.subscriber import ack_log as log
from quiver_store.subscriber.state import Outcome, SegmentCatalog, SubscriberState

from .test_ack_log import open_registry, write_records

SUBSCRIBE = log.encode_subscribe(0, -1, 1, "a")


def checkpoint(next_sub_id: int = 1) -> bytes:
    """Segments 5 (3 bundles) and 6 (2); subscriber "a" (id 0) resolved 6 and bundle 1 of 5."""
    catalog = SegmentCatalog()
    catalog.add(5, 3)
    catalog.add(6, 2)
    sub = SubscriberState("a", 0, -1, dropped_total=7, done={6}, partial={5: {1}})
    return log.encode_checkpoint(1, log.HEADER_SIZE, 1, catalog, [sub], next_sub_id)


# byte offsets in checkpoint(): header fields, the two segments, then subscriber "a"
SUB_AT = log._CP_HEAD.size + 4 + 2 * 12 + 4
DONE_AT = SUB_AT + log._CP_SUB.size + 1 + 4
PARTIAL_AT = DONE_AT + 8 + 4


def patched(payload: bytes, offset: int, fmt: str, value: int) -> bytes:
    """`payload` with one field changed and its CRC made right again."""
    body = bytearray(payload[:-4])
    struct.pack_into(fmt, body, offset, value)
    return bytes(body) + crc32c.crc32c(bytes(body)).to_bytes(4, "little")


def write_checkpoint(directory: Path, payload: bytes) -> None:
    directory.mkdir(exist_ok=True)
    log.write_atomically(DEFAULT_FS, str(directory), log.CHECKPOINT_NAME, payload)


# -- bundle counts and indexes (the fuzz target's finding: MemoryError) ---------------------------


@pytest.mark.parametrize(
    "record, message",
    [
        (log.encode_segment(5, 2**32 - 1), "bundle count 4294967295 is above 4194304"),
        (log.encode_outcome(0, 5, 2**32 - 1, Outcome.ACK, 1), "bundle index \\+ 1 4294967296 is above 4194304"),
    ],
    ids=["segment", "outcome"],
)
def test_a_bundle_count_or_index_no_segment_holds_is_a_malformed_record(tmp_path, record, message):
    path = write_records(tmp_path, [SUBSCRIBE, record])
    assert list(log.iter_records(Path(path).read_bytes())) == [(log.SUBSCRIBE, 0, -1, 1, "a")]
    with pytest.raises(CorruptionError, match=message) as err:
        log.AckLog.open(str(tmp_path), recovery="strict")
    assert (err.value.path, err.value.offset) == (path, log.HEADER_SIZE + len(SUBSCRIBE))


def test_a_gone_segment_registered_with_2_32_bundles_is_not_dropped_bundle_by_bundle(tmp_path):
    """Before, reconciling the gone segment listed and logged 2**32-1 dropped bundles (MemoryError)."""
    path = write_records(tmp_path, [SUBSCRIBE, log.encode_segment(5, 2**32 - 1)])
    assert len(list(log.iter_records(Path(path).read_bytes()))) == 1  # (fails fast without the fix)
    reg = open_registry(tmp_path)
    assert 5 not in reg.catalog and reg.describe()[0]["dropped_bundles"] == 0
    ((err, _, source),) = reg.recovery_reports
    assert source == "ack log" and "bundle count 4294967295" in str(err)
    reg.close()


def test_the_bundles_of_a_gone_segment_are_dropped_at_once(tmp_path, monkeypatch):
    """Found by the fuzz target within the bound: a checkpoint segment of 3,735,552 bundles that is
    gone was dropped bundle by bundle (a resolve and an encode_outcome each, ~7 s per open and a
    timeout under the fuzzer). Now in one framing, writing the records encode_outcome writes."""
    write_records(tmp_path, [SUBSCRIBE, log.encode_segment(5, 1000), log.encode_outcome(0, 5, 1, Outcome.ACK, 1)])
    before = len((tmp_path / log.LOG_NAME).read_bytes())
    monkeypatch.setattr(log, "encode_outcome", None)  # never called per bundle
    reg = open_registry(tmp_path)
    assert reg.describe()[0]["dropped_bundles"] == 999 and 5 not in reg.catalog
    reg.abandon()
    monkeypatch.undo()
    dropped = (tmp_path / log.LOG_NAME).read_bytes()[before:]
    ts = log.decode_body(log.OUTCOME, dropped[5:30])[5]  # type: ignore[index]
    assert dropped == b"".join(log.encode_outcome(0, 5, i, Outcome.DROPPED, ts) for i in [0, *range(2, 1000)])


def test_a_checkpoint_segment_of_2_32_bundles_is_malformed(tmp_path):
    payload = patched(checkpoint(), log._CP_HEAD.size + 4 + 8, "<I", 2**32 - 1)
    with pytest.raises(CorruptionError, match="bundle count 4294967295 is above 4194304"):
        log.decode_checkpoint(payload, "cp")


# -- a segment on disk registered with another bundle count (the fuzz target: a hang) ---------------


def test_a_segment_registered_with_more_bundles_than_it_holds_delivers_only_its_own(tmp_path):
    write_records(tmp_path, [log.encode_segment(5, 3_000_000), SUBSCRIBE, log.encode_outcome(0, 5, 2_999_999, Outcome.ACK, 1)])
    reg = open_registry(tmp_path, segments=[(5, 3)])
    assert reg.catalog.count(5) == 3
    ((err, _, source),) = reg.recovery_reports
    assert source == "ack log" and "segment 5 holds 3 bundles, but the ack log registered it with 3000000" in str(err)
    sub = reg._by_name("a")
    assert sub is not None and sub.partial == {5: set()}
    assert [sub.next_delivery(0.0, reg.catalog) for _ in range(4)] == [(5, 0), (5, 1), (5, 2), None]
    reg.close()


def test_a_segment_registered_with_fewer_bundles_than_it_holds_delivers_the_rest(tmp_path):
    """The mark had passed the segment (its one logged bundle acked): it steps back below it."""
    write_records(
        tmp_path,
        [log.encode_segment(5, 1), log.encode_segment(6, 1), SUBSCRIBE]
        + [log.encode_outcome(0, seq, 0, Outcome.ACK, 1) for seq in (5, 6)],
    )
    reg = open_registry(tmp_path, segments=[(5, 3), (6, 1)])
    sub = reg._by_name("a")
    assert sub is not None and (sub.mark, sub.done, sub.partial) == (4, {6}, {5: {0}})
    assert [sub.next_delivery(0.0, reg.catalog) for _ in range(3)] == [(5, 1), (5, 2), None]
    reg.close()


def one_segment_subscribed(path: Path) -> StoreConfig:
    """A closed store at `path` holding one segment of one bundle, and subscriber "a"; its config."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(path, config) as store:
        store.ingest(RecordBundle({0: pa.record_batch({"i": pa.array([1, 2])})}))
        store.flush()
        store.subscribe("a")
    return config


def test_quiver_verify_names_a_segment_registered_with_another_count(tmp_path, capsys):
    config = one_segment_subscribed(tmp_path)
    cp = tmp_path / log.CHECKPOINT_NAME
    assert log.decode_checkpoint(cp.read_bytes(), "cp").catalog.items() == [(0, 1)]
    cp.write_bytes(patched(cp.read_bytes(), log._CP_HEAD.size + 4 + 8, "<I", 5))
    assert cli.main(["verify", str(tmp_path)]) == 1
    assert "segment 0 holds 1 bundles, but the ack log registered it with 5; opening uses the segment's count" in " ".join(
        capsys.readouterr().out.split()
    )
    with QuiverStore.open(tmp_path, config) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["source"] == "ack log" and "registered it with 5" in report["error"]


# -- numbers the store would fail to write back (struct.error at close) ---------------------------


def test_a_subscriber_id_of_2_32_minus_1_is_a_malformed_record(tmp_path):
    """Before, replay set the next id to 2**32, which the checkpoint at close could not hold."""
    write_records(tmp_path, [log.encode_subscribe(2**32 - 1, -1, 1, "z")])
    with pytest.raises(CorruptionError, match="subscriber id 4294967295 is above 4294967294"):
        log.AckLog.open(str(tmp_path), recovery="strict")
    reg = open_registry(tmp_path)
    assert reg.names() == [] and len(reg.recovery_reports) == 1
    reg.subscribe("a")
    reg.close()  # writes a checkpoint


def test_an_outcome_code_other_than_ack_nack_or_dropped_is_a_malformed_record(tmp_path):
    """Before, replay took outcome 3 to 255 for a nack: the record's bundle stayed unresolved, silently."""
    write_records(tmp_path, [log.encode_segment(5, 3), SUBSCRIBE, log.encode_outcome(0, 5, 0, 3, 1)])
    with pytest.raises(CorruptionError, match="outcome 3 is none of 0 \\(ack\\), 1 \\(nack\\) and 2 \\(dropped\\)"):
        log.AckLog.open(str(tmp_path), recovery="strict")


@pytest.mark.parametrize("name", [b"", b"a b", b"x" * 65, "é".encode()])
def test_a_subscriber_name_subscribe_would_refuse_is_a_malformed_record(tmp_path, name):
    """Before, replay registered it: no subscribe() can name it, yet it pinned what it had not resolved."""
    head = log._SUBSCRIBE.pack(0, -1, 1, len(name) % 256)
    write_records(tmp_path, [log._frame(log.SUBSCRIBE, head + name)])
    with pytest.raises(CorruptionError, match=r"is not 1 to 64 of \[A-Za-z0-9_.-\]"):
        log.AckLog.open(str(tmp_path), recovery="strict")


def test_a_checkpoint_subscriber_name_subscribe_would_refuse_is_malformed(tmp_path):
    payload = patched(checkpoint(), SUB_AT + log._CP_SUB.size, "<B", ord(" "))
    with pytest.raises(CorruptionError, match="subscriber name ' ' is not 1 to 64") as err:
        log.decode_checkpoint(payload, "cp")
    assert err.value.offset == SUB_AT + log._CP_SUB.size  # the name


def test_a_mark_below_minus_1_is_a_malformed_record(tmp_path):
    write_records(tmp_path, [log.encode_subscribe(0, -2, 1, "a")])
    with pytest.raises(CorruptionError, match="subscriber mark -2 is below -1"):
        log.AckLog.open(str(tmp_path), recovery="strict")


@pytest.mark.parametrize(
    "offset, fmt, value, message",
    [
        (12, "<Q", 2**64 - 1, "replay generation 18446744073709551615 is above 2\\*\\*63-1"),
        (36, "<Q", 2**63, "highest segment seen -9223372036854775808 is not -1 or a segment number"),
        (log._CP_HEAD.size + 4, "<Q", 2**64 - 1, "segment sequence 18446744073709551615 is above 2\\*\\*63-1"),
        (44, "<I", 0, "subscriber id 0 is not below 0, the next id to hand out"),
        (SUB_AT, "<I", 2**32 - 1, "subscriber id 4294967295 is above 4294967294"),
        (SUB_AT + 5, "<q", -2, "subscriber mark -2 is below -1"),
        (SUB_AT + 21, "<Q", 2**64 - 1, "subscriber 0 dropped 18446744073709551615 bundles, above 2\\*\\*63-1"),
        (DONE_AT, "<Q", 2**64 - 1, "segment sequence 18446744073709551615 is above 2\\*\\*63-1"),
        (PARTIAL_AT, "<Q", 2**63, "segment sequence 9223372036854775808 is above 2\\*\\*63-1"),
        (PARTIAL_AT + 12, "<I", 2**32 - 1, "bundle index \\+ 1 4294967296 is above 4194304"),
    ],
)
def test_checkpoint_values_the_store_never_writes_are_malformed(tmp_path, offset, fmt, value, message):
    good = checkpoint()
    assert log.decode_checkpoint(good, "cp").subscribers[0].partial == {5: {1}}  # the offsets are right
    with pytest.raises(CorruptionError, match=message):
        log.decode_checkpoint(patched(good, offset, fmt, value), "cp")


def checkpoint_of(*subs: SubscriberState) -> bytes:
    """Segments 5 and 6 (3 and 2 bundles) and the given subscribers."""
    catalog = SegmentCatalog()
    catalog.add(5, 3)
    catalog.add(6, 2)
    return log.encode_checkpoint(1, log.HEADER_SIZE, 1, catalog, subs, 1 + max(s.sub_id for s in subs))


WIDE = checkpoint_of(SubscriberState("a", 0, -1, done={6, 8}, partial={5: {0, 1}, 9: {0}}))
WIDE_DONE = SUB_AT + log._CP_SUB.size + 1 + 4  # the done list of WIDE's subscriber, then its gap set
WIDE_GAPS = WIDE_DONE + 2 * 8 + 4


@pytest.mark.parametrize(
    "good, offset, fmt, value, message",
    [
        (checkpoint(), 10, "<H", 1, "reserved header field is 1, not 0"),
        (checkpoint(), SUB_AT + 4, "<B", 2, "subscriber 0 has flag bits 0x02; only bit 0 \\(orphaned\\) is defined"),
        (checkpoint(), SUB_AT + 4, "<B", 0x81, "subscriber 0 has flag bits 0x81"),
        (checkpoint(), log._CP_HEAD.size + 4 + 12, "<Q", 5, "known segments are not strictly ascending: 5 after 5"),
        (checkpoint(), log._CP_HEAD.size + 4, "<Q", 7, "known segments are not strictly ascending: 6 after 7"),
        (checkpoint(), PARTIAL_AT, "<Q", 6, "subscriber 0 lists segment 6 as resolved and in its gap set"),
        (WIDE, WIDE_DONE + 8, "<Q", 6, "subscriber 0's resolved segments are not strictly ascending: 6 after 6"),
        (WIDE, WIDE_GAPS + 12 + 4, "<I", 0, "resolved bundles of segment 5 are not strictly ascending: 0 after 0"),
        (WIDE, WIDE_GAPS + 12 + 8, "<Q", 5, "subscriber 0's gap segments are not strictly ascending: 5 after 5"),
    ],
    ids=["reserved", "flag", "flags", "segment-twice", "segments-unordered", "done-and-gap", "done-twice",
         "index-twice", "gap-twice"],
)
def test_checkpoint_lists_and_bits_the_store_never_writes_are_malformed(good, offset, fmt, value, message):
    """Before, a set or dict absorbed a repeated entry (a repeated gap segment replaced the first's
    resolved bundles), and unknown flag bits and the reserved field were ignored."""
    log.decode_checkpoint(good, "cp")  # the unpatched checkpoint is fine
    with pytest.raises(CorruptionError, match=message):
        log.decode_checkpoint(patched(good, offset, fmt, value), "cp")


@pytest.mark.parametrize(
    "subs, message",
    [
        ((SubscriberState("a", 0, -1), SubscriberState("b", 0, -1)), "subscriber id 0 appears twice"),
        ((SubscriberState("a", 0, -1), SubscriberState("a", 1, -1)), "subscriber name 'a' appears twice"),
    ],
    ids=["id", "name"],
)
def test_a_subscriber_twice_in_a_checkpoint_is_malformed(subs, message):
    """Before, a repeated id kept the last entry's progress and a repeated name left a second
    subscriber no unsubscribe() reaches, pinning every segment it had not resolved."""
    with pytest.raises(CorruptionError, match=message) as err:
        log.decode_checkpoint(checkpoint_of(*subs), "cp")
    assert err.value.offset >= SUB_AT + log._CP_SUB.size + 1 + 8  # the second subscriber's entry


def test_a_log_generation_past_2_63_is_a_damaged_header(tmp_path):
    """Before, the next rotation numbered the new file 2**64 and failed with struct.error."""
    write_checkpoint(tmp_path, checkpoint())
    (tmp_path / log.LOG_NAME).write_bytes(log.encode_header(2**64 - 1) + SUBSCRIBE)
    with pytest.raises(CorruptionError, match="ack log generation 18446744073709551615 is above 2\\*\\*63-1"):
        log.AckLog.open(str(tmp_path))


def test_subscribe_refuses_a_new_name_once_every_id_was_handed_out(tmp_path):
    write_checkpoint(tmp_path, checkpoint(next_sub_id=2**32 - 1))
    reg = open_registry(tmp_path, segments=[(5, 3), (6, 2)])
    with pytest.raises(QuiverError, match="every subscriber id was handed out"):
        reg.subscribe("b")
    reg.subscribe("a")  # a known name keeps its id
    reg.close()


# -- the checkpoint's replay offset -------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, log.HEADER_SIZE - 1])
def test_a_replay_offset_inside_the_log_header_is_a_damaged_checkpoint(tmp_path, offset):
    """Before, replay scanned the header as records, found none and truncated the active log to
    `offset`, destroying its header: the next open refused the store."""
    write_records(tmp_path, [SUBSCRIBE])
    before = (tmp_path / log.LOG_NAME).read_bytes()
    write_checkpoint(tmp_path, patched(checkpoint(), 20, "<Q", offset))
    with pytest.raises(CorruptionError, match=f"replay offset {offset} is inside the ack log's 24-byte header") as err:
        log.AckLog.open(str(tmp_path))
    assert err.value.offset == 20
    assert (tmp_path / log.LOG_NAME).read_bytes() == before


# -- records that contradict the ones before them -----------------------------------------------


@pytest.mark.parametrize(
    "record, why",
    [
        (log.encode_segment(5, 4), "segment 5 registered again with 4 bundles, first with 3"),
        (log.encode_outcome(0, 5, 7, Outcome.ACK, 1), "an outcome for bundle 7 of segment 5, registered with 3 bundles"),
    ],
    ids=["segment", "outcome"],
)
def test_a_record_contradicting_the_registered_count_is_reported_and_ignored(tmp_path, record, why):
    """Before, replay raised QuiverError and the store could not be opened in any recovery mode."""
    write_records(tmp_path, [log.encode_segment(5, 3), SUBSCRIBE, record])
    with pytest.raises(CorruptionError, match=f"a record contradicts the ones before it: {why}"):
        open_registry(tmp_path, segments=[(5, 3)], recovery="strict")
    reg = open_registry(tmp_path, segments=[(5, 3)])
    ((err, action, source),) = reg.recovery_reports
    assert why in str(err) and action == "the record is ignored" and source == "ack log"
    assert reg.catalog.count(5) == 3 and reg.describe()[0]["gap_set_size"] == 0
    reg.close()


def test_quiver_verify_names_a_contradicting_record_and_the_store_opens(tmp_path, capsys):
    config = one_segment_subscribed(tmp_path)
    with open(tmp_path / log.LOG_NAME, "ab") as f:
        f.write(log.encode_segment(0, 2))
    assert cli.main(["verify", str(tmp_path)]) == 1
    assert "a record contradicts the ones before it: segment 0 registered again with 2 bundles, first with 1" in " ".join(
        capsys.readouterr().out.split()
    )
    with QuiverStore.open(tmp_path, config) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["source"] == "ack log" and report["action"] == "the record is ignored"


def test_the_store_seals_a_segment_at_the_bundle_count_the_ack_log_reads(tmp_path, monkeypatch):
    """A segment of more bundles would be registered with a count the ack log refuses on replay
    (losing the outcomes after it); a large wal.max_size and target_size allowed one before."""
    monkeypatch.setattr(engine, "MAX_SEGMENT_BUNDLES", 3)
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        sub = store.subscribe("a")
        for i in range(7):
            store.ingest(RecordBundle({0: pa.record_batch({"i": pa.array([i])})}))
        store.flush()
        assert [(s.bundle_count, s.metadata["quiver.finalize_reason"]) for s in store.segments()] == [(3, "max_bundles"), (3, "max_bundles"), (1, "flush")]
        sub.next(timeout=0).ack()  # type: ignore[union-attr]
    with QuiverStore.open(tmp_path, config) as store:  # the ack log's SEGMENT records replay
        assert [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()] == list(range(7))
        sub = store.subscribe("a")
        delivered = []
        while (delivery := sub.next(timeout=0)) is not None:
            delivered.append(delivery.bundle.slots[0].column(0)[0].as_py())
            delivery.ack()
        assert delivered == list(range(1, 7))
