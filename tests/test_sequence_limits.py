"""Sequence numbers a store never hands out are damage wherever they are read.

Found by the `wal_frames` fuzz target (session 22): a CRC-valid WAL frame whose sequence was
2**64-1 was replayed as a bundle after a gap; the store then had to number the next one 2**64,
and the first subscriber ack that let retention delete a segment raised struct.error ("argument out
of range") packing the sequence floor. The same holds for the sequence floor file, a segment's
recorded last WAL sequence, a segment file name and the ack log's segment numbers: each is now
read as damage (or ignored) above 2**63-1, so every later write fits."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa
import pytest

from quiver_store import (
    CorruptionError,
    QuiverError,
    QuiverStore,
    RecordBundle,
    SegmentConfig,
    StoreConfig,
    WalConfig,
    cli,
    seq_floor,
)
from quiver_store.engine import list_segment_seqs, newest_covered_sequence
from quiver_store.fs import DEFAULT_FS
from quiver_store.subscriber import ack_log
from quiver_store.wal import format as wal
from quiver_store.wal.reader import SEQUENCE_TOO_LARGE, frame_at, scan

TOO_LARGE = (wal.MAX_SEQUENCE + 1, (1 << 64) - 1)


def bundle(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array(np.full(3, i, dtype=np.int64))})})


def config(recovery: str = "point_in_time") -> StoreConfig:
    return StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(recovery=recovery))


def crashed_with_sequence(root: Path, frame: int, sequence: int) -> None:
    """A store that crashed with 5 bundles in its WAL, frame `frame` renumbered `sequence`, CRC right."""
    store = QuiverStore.open(root, config())
    receipts = [store.ingest(bundle(i)) for i in range(5)]
    store._abandon()
    path = root / "wal" / "quiver.wal"
    data = bytearray(path.read_bytes())
    at = receipts[frame].wal_offset
    (length,) = wal.LEN.unpack_from(data, at)
    body = at + wal.LEN.size
    struct.pack_into("<Q", data, body + 9, sequence)
    wal.CRC.pack_into(data, body + length, crc32c.crc32c(bytes(data[body : body + length])))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("sequence", TOO_LARGE)
def test_a_frame_numbered_past_2_63_is_corruption_not_a_bundle(sequence: int) -> None:
    frame = wal.encode_entry(wal.ENTRY_RECORD_BUNDLE, 1, sequence, 0, b"")
    assert frame_at(memoryview(frame), 0) == SEQUENCE_TOO_LARGE
    ok = wal.encode_entry(wal.ENTRY_RECORD_BUNDLE, 1, wal.MAX_SEQUENCE, 0, b"")
    assert frame_at(memoryview(ok), 0).sequence == wal.MAX_SEQUENCE  # type: ignore[union-attr]
    # the final frame of a file: damage (whole and intact as written), not a torn write
    (damage,) = scan(memoryview(frame), 0, resync=True)
    assert (damage.kind, damage.offset, damage.length, damage.reason) == (  # type: ignore[union-attr]
        "corrupt", 0, len(frame), f"{SEQUENCE_TOO_LARGE}, the final entry"
    )


@pytest.mark.parametrize("frame", [2, 4])
def test_recovery_quarantines_it_and_the_store_goes_on(tmp_path: Path, frame: int) -> None:
    crashed_with_sequence(tmp_path, frame, (1 << 64) - 1)
    assert cli.main(["verify", str(tmp_path)]) == 1
    with pytest.raises(CorruptionError, match="sequence above 2\\*\\*63-1"):
        QuiverStore.open(tmp_path, config("strict"))
    with QuiverStore.open(tmp_path, config()) as store:
        assert store.stats()["corrupt_entries"] == 1
        store.flush()
        kept = [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()]
        assert kept == list(range(frame))  # point in time: the log up to the damage
        # numbering goes on after the frames recovery could read, quarantined ones included (3, 4)
        following = 5 if frame == 2 else 4
        assert store.ingest(bundle(9)).sequence == following
        store.flush()
        subscription = store.subscribe("a")
        while (delivery := subscription.next(timeout=0)) is not None:
            delivery.ack()  # lets retention delete processed segments: writes the sequence floor
    with QuiverStore.open(tmp_path, config()) as store:
        assert store.ingest(bundle(10)).sequence == following + 1


@pytest.mark.parametrize("values", [(0, (1 << 64) - 1), ((1 << 64) - 1, 0), (0, (1 << 63) + 1)])
def test_a_sequence_floor_past_2_63_is_read_as_damaged(tmp_path: Path, values: tuple[int, int]) -> None:
    body = seq_floor.BODY.pack(seq_floor.MAGIC, seq_floor.VERSION, 0, *values)
    (tmp_path / seq_floor.NAME).write_bytes(body + struct.pack("<I", crc32c.crc32c(body)))
    floor, problem = seq_floor.read(DEFAULT_FS, str(tmp_path))
    assert floor == seq_floor.SequenceFloor()
    assert problem == f"{tmp_path / seq_floor.NAME}: a floor above 2**63 {values}, more than any store numbers; using segment file names"
    seq_floor.write(DEFAULT_FS, str(tmp_path), seq_floor.SequenceFloor(1 << 63, 1 << 63))  # the largest it holds
    assert seq_floor.read(DEFAULT_FS, str(tmp_path)) == (seq_floor.SequenceFloor(1 << 63, 1 << 63), None)


def test_a_sequence_floor_with_a_non_zero_reserved_field_is_read_as_damaged(tmp_path: Path) -> None:
    body = seq_floor.BODY.pack(seq_floor.MAGIC, seq_floor.VERSION, 1, 5, 5)
    (tmp_path / seq_floor.NAME).write_bytes(body + struct.pack("<I", crc32c.crc32c(body)))
    floor, problem = seq_floor.read(DEFAULT_FS, str(tmp_path))
    assert floor == seq_floor.SequenceFloor()
    assert problem == f"{tmp_path / seq_floor.NAME}: unknown magic/version or a non-zero reserved field; using segment file names"


def test_segment_numbers_and_recorded_sequences_past_2_63_are_not_taken(tmp_path: Path) -> None:
    for name in ("0000000000000003.qseg", f"{1 << 63}.qseg", f"{(1 << 64) + 5}.qseg"):
        (tmp_path / name).write_bytes(b"")
    assert list_segment_seqs(DEFAULT_FS, str(tmp_path)) == [3]

    class Info:
        def __init__(self, last: int) -> None:
            self.metadata = {"quiver.wal.last_sequence": str(last)}

    infos = {3: Info((1 << 64) - 1)}
    assert newest_covered_sequence(DEFAULT_FS, str(tmp_path), lambda seq: infos[seq]) == -1  # type: ignore[arg-type, return-value]
    infos[3] = Info(wal.MAX_SEQUENCE)
    assert newest_covered_sequence(DEFAULT_FS, str(tmp_path), lambda seq: infos[seq]) == wal.MAX_SEQUENCE  # type: ignore[arg-type, return-value]


@pytest.mark.parametrize(
    "record", [ack_log.encode_segment(1 << 63, 1), ack_log.encode_outcome(0, (1 << 64) - 1, 0, 1, 0)]
)
def test_ack_log_records_naming_a_segment_past_2_63_are_corrupt(record: bytes) -> None:
    """(The scanner reports a ValueError of decode_body as a CorruptionError at the record.)"""
    rtype, body = record[4], record[5:-4]  # u32 length, u8 type, body, u32 CRC32C
    with pytest.raises(ValueError, match=r"^segment sequence \d+ is above 2\*\*63-1, more than any store numbers$"):
        ack_log.decode_body(rtype, body)
    ok = ack_log.encode_segment((1 << 63) - 1, 1)
    assert ack_log.decode_body(ok[4], ok[5:-4]) == (ack_log.SEGMENT, (1 << 63) - 1, 1)


@pytest.mark.parametrize("suffix", ["\u00b2", "99999999999999999999", str(wal.MAX_SEQUENCE + 1), "1x"])
def test_wal_file_names_the_store_never_writes_are_not_wal_chunks(tmp_path: Path, suffix: str) -> None:
    """Before, `quiver.wal.\u00b2` raised ValueError from int() in every open and quiver command, and
    a generation past 2**64 became the active file's, which the sidecar (u64) cannot hold."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(bundle(0))
    stranger = tmp_path / "wal" / f"quiver.wal.{suffix}"
    stranger.write_bytes(b"not ours")
    for command in (["verify"], ["inspect"], ["replay"], ["dump"]):
        assert cli.main([*command, str(tmp_path)]) == 0, command
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(bundle(1))
        store.flush()
    with QuiverStore.open(tmp_path, config) as store:
        assert [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()] == [0, 1]
    assert stranger.read_bytes() == b"not ours"


@pytest.mark.parametrize("generation", [wal.MAX_SEQUENCE, 10**6])
def test_a_damaged_wal_chunk_far_past_the_others_is_reported_without_listing_every_generation(tmp_path: Path, capsys: pytest.CaptureFixture[str], generation: int) -> None:
    """A file named like a chunk is the store's, so a damaged one far past the others is damage with
    every generation between missing; before, verify and open built the list of those generations
    (MemoryError, or the OOM killer, for a name near 2**63)."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(bundle(0))
    stranger = tmp_path / "wal" / f"quiver.wal.{generation}"
    stranger.write_bytes(b"not ours")
    capsys.readouterr()
    assert cli.main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{stranger} at offset 0: WAL header is truncated (8 of 30 bytes)" in out
    assert f"rotated WAL generation(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 ... missing: every rotated generation from the truncate point's (0) to the newest ({generation})" in " ".join(out.split())
    with pytest.raises(CorruptionError, match=rf"^{re.escape(str(stranger))} at offset 0: WAL header is truncated"):
        QuiverStore.open(tmp_path, config)  # a damaged chunk's entries cannot be vouched for


def test_a_floor_that_leaves_no_segment_numbers_stops_finalizing_and_loses_nothing(tmp_path: Path) -> None:
    """A CRC-valid next.seq (or segment name, or ack log record) just below 2**63 was taken; the
    store then wrote segments up to 2**63-1 and a next one whose name no open reads back, losing its
    bundles. Now finalize refuses, the bundles stay in the WAL, and they are stored once the floor
    is repaired."""
    config = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config) as store:
        store.ingest(bundle(1))
    segments = str(tmp_path / "segments")
    floor, _ = seq_floor.read(DEFAULT_FS, segments)
    seq_floor.write(DEFAULT_FS, segments, seq_floor.SequenceFloor(wal.MAX_SEQUENCE - 3, floor.wal_covered))
    store = QuiverStore.open(tmp_path, config)
    store.ingest(bundle(2))
    with pytest.raises(QuiverError, match=r"segment numbers are used up: the next would be 9223372036854775804, and no number past 9223372036854775807 is read back"):
        store.flush()
    assert [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()] == [1]
    with pytest.raises(QuiverError, match="closed without finalizing its open segment"):
        store.close()
    (tmp_path / "segments" / seq_floor.NAME).unlink()  # the repair
    with QuiverStore.open(tmp_path, config) as store:
        store.flush()
        assert [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()] == [1, 2]
        assert [s.seq for s in store.segments()] == [0, 1]
