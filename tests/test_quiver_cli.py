"""`quiver inspect | verify | dump | replay` on real stores, including damaged ones."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

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
    progress_ledger,
)
from quiver_store.cli import main
from quiver_store.offline import StoredBundles
from quiver_store.staged_dir import StagedDir

QUIET = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))


def bundle(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * 5, pa.int64())}), 7: pa.record_batch({"s": [f"x{i}"]})})


@pytest.fixture
def store_dir(tmp_path) -> Path:
    with QuiverStore.open(tmp_path, QUIET) as store:
        for i in range(3):
            store.ingest(bundle(i))
        store.flush()
        for i in range(3, 5):
            store.ingest(bundle(i))
    return tmp_path


def crashed_store(tmp_path: Path) -> tuple[Path, list]:
    store = QuiverStore.open(tmp_path, QUIET)
    receipts = [store.ingest(bundle(i)) for i in range(5)]
    store._abandon()
    return tmp_path, receipts


def flip_wal_byte(root: Path, offset: int) -> Path:
    """Flip one bit of the active WAL file at `offset`; return the file's path."""
    wal = root / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    data[offset] ^= 1
    wal.write_bytes(bytes(data))
    return wal


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_inspect_lists_segments_streams_and_schemas(store_dir, capsys):
    assert main(["inspect", str(store_dir), "--streams", "--schemas"]) == 0
    out = capsys.readouterr().out
    assert "2 segments" in out and "quiver.wal" in out and "slot 7 representative schema" in out
    assert "close" in out and "flush" in out  # finalize reasons


def test_verify_clean_store(store_dir, capsys):
    assert main(["verify", str(store_dir)]) == 0
    assert "CORRUPT" not in capsys.readouterr().out


def test_verify_names_file_and_offset_of_a_flipped_wal_byte(tmp_path, capsys):
    root, receipts = crashed_store(tmp_path)
    wal = flip_wal_byte(root, receipts[1].wal_offset + 50)
    assert main(["verify", str(root)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"{wal} at offset {receipts[1].wal_offset}" in out and "CRC32C mismatch" in out


def test_verify_flags_a_flipped_sidecar_byte(store_dir, capsys):
    side = store_dir / "wal" / "truncate.offset"
    data = bytearray(side.read_bytes())
    data[20] ^= 0x10
    side.write_bytes(bytes(data))
    assert main(["verify", str(store_dir)]) == 1
    assert "truncate.offset at offset 0" in " ".join(capsys.readouterr().out.split())


def test_verify_checks_the_progress_ledger(store_dir, capsys):
    ledger = store_dir / "segments" / progress_ledger.NAME
    ledger.write_bytes(progress_ledger.encode({"job/p-0": 12, "job/p-1": 9}))
    assert main(["verify", str(store_dir)]) == 0
    assert "segments/progress.ledger │ 2 producers │ ok" in " ".join(capsys.readouterr().out.split())
    data = bytearray(ledger.read_bytes())
    data[-6] ^= 0x01  # inside the last offset
    ledger.write_bytes(bytes(data))
    assert main(["verify", str(store_dir)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"{ledger} at offset {len(data) - 4}: progress ledger fails its CRC32C check" in out


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9, -1])
def test_verify_flags_a_flipped_segment_byte(store_dir, capsys, where):
    seg = store_dir / "segments" / f"{0:016d}.qseg"
    data = bytearray(seg.read_bytes())
    at = len(data) - 1 if where == -1 else int(len(data) * where)
    data[at] ^= 0x01
    seg.write_bytes(bytes(data))
    assert main(["verify", str(store_dir)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"{seg}" in out and "offset" in out


def test_help_says_what_path_is_the_defaults_and_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("exit status: 0 fine 1 damage found (verify, replay, an unreadable segment or a WAL header that opening "
            "refuses in inspect: damaged, or of a format version this build cannot read; a damaged segment or WAL that stops "
            "dump), or standard output cannot be written 2 bad arguments, not a store, refused (replay: "
            "opening would refuse the store, as --recovery strict does on damage), or a file that cannot be read or "
            "written: one of the store's, or dump's --output directory or a file in it 130 Ctrl-C 141 the reader of a "
            "pipe went away") in text
    for command, shown in (("inspect", "segments, streams, schemas"), ("verify", "full checksum pass"),
                           ("dump", "(default: json)"), ("replay", "(default: point_in_time)")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "the store directory (the one holding wal/ and segments/)" in text and shown in text, command


def test_dump_json_and_arrow(store_dir, capsys, tmp_path_factory):
    assert main(["dump", str(store_dir)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["segment"], r["bundle"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert [r["slots"]["0"][0]["i"] for r in rows] == [0, 1, 2, 3, 4]
    assert main(["dump", str(store_dir), "--segment", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    out = tmp_path_factory.mktemp("arrow")
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 0
    files = sorted(os.listdir(out))
    assert len(files) == 10
    table = pa.ipc.open_file(str(out / files[0])).read_all()
    assert table.column("i").to_pylist() == [0] * 5
    assert main(["dump", str(store_dir), "--segment", "9"]) == 2
    assert "no segment 9" in capsys.readouterr().err


def test_replay_reports_without_modifying(tmp_path, capsys):
    root, receipts = crashed_store(tmp_path)
    wal = root / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    data[receipts[2].wal_offset + 40] ^= 0xFF
    data += b"\x99" * 7  # and a torn tail
    wal.write_bytes(bytes(data))
    before = digest(root)
    assert main(["replay", str(root)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"offset {receipts[2].wal_offset}" in out and "would quarantine" in out
    assert "entries to replay into the open segment: 2" in out
    assert main(["replay", str(root), "--recovery", "skip_corrupt"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "entries to replay into the open segment: 4" in out and "torn tail" in out
    assert main(["replay", str(root), "--recovery", "strict"]) == 2
    assert "would refuse to open" in capsys.readouterr().out
    assert digest(root) == before


def test_replay_of_a_clean_crash(tmp_path, capsys):
    root, _ = crashed_store(tmp_path)
    assert main(["replay", str(root)]) == 0
    out = capsys.readouterr().out
    assert "entries to replay into the open segment: 5" in out


HALF_CREATED = {  # an active WAL the power cut while it was being created: recreated on open
    "short garbage": b"garbage\n",
    "empty": b"",
    "garbage header, zeros after": b"\x5a" * 30 + bytes(4096),
}
DAMAGED_HEADER = {"garbage header, data after": b"\x5a" * 30 + b"\x01" * 64}  # open refuses


@pytest.mark.parametrize("content", [*HALF_CREATED.values(), *DAMAGED_HEADER.values()], ids=[*HALF_CREATED, *DAMAGED_HEADER])
@pytest.mark.parametrize("recovery", ["point_in_time", "strict"])
def test_replay_says_what_open_does_with_a_half_created_active_wal(tmp_path, capsys, content, recovery):
    """Was: replay said recovery 'would refuse to open: ... WAL header is truncated (8 of 30 bytes)'
    (exit 2) of a file QuiverStore.open recreates (docs/reliability.md)."""
    wal = tmp_path / "wal" / "quiver.wal"
    wal.parent.mkdir()
    wal.write_bytes(content)
    code = main(["replay", str(tmp_path), "--recovery", recovery])
    out = " ".join(capsys.readouterr().out.split())
    assert wal.read_bytes() == content  # read-only
    if content in HALF_CREATED.values():
        assert code == 0, out
        assert (
            f"would recreate: {wal} ({len(content)} bytes) — active WAL file was cut while being created (it holds "
            "no acknowledged entry)" in out
        )
        assert "refuse" not in out and "entries to replay into the open segment: 0" in out
        assert main(["verify", str(tmp_path)]) == 0  # was: CORRUPT, exit 1
        out = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the cell wraps
        assert "cut while being created (it holds no acknowledged entry): QuiverStore.open recreates it" in out
        assert "CORRUPT" not in out
        assert main(["inspect", str(tmp_path)]) == 0
        out = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the cell wraps
        assert "cut while being created (it holds no acknowledged entry); QuiverStore.open recreates it" in out
        with QuiverStore.open(tmp_path, StoreConfig(wal=WalConfig(recovery=recovery))) as store:
            assert list(store.bundles()) == []
        assert wal.read_bytes() != content  # a new log
    else:
        assert code == 2 and f"recovery mode {recovery!r} would refuse to open: {wal} at offset 0:" in out
        assert main(["verify", str(tmp_path)]) == 1
        assert "CORRUPT" in capsys.readouterr().out
        with pytest.raises(CorruptionError, match="at offset 0"):
            QuiverStore.open(tmp_path, StoreConfig(wal=WalConfig(recovery=recovery)))


def test_replay_and_dump_read_the_layout_hash_from_a_header_that_decodes(tmp_path, capsys):
    """A crashed store whose active WAL (rotated chunks before it) was then cut while recreated."""
    store = QuiverStore.open(tmp_path, StoreConfig(wal=WalConfig(rotation_size=4096), segment=QUIET.segment))
    for i in range(40):
        store.ingest(RecordBundle({0: pa.record_batch({"i": pa.array([i] * 100, pa.int64())})}))
    store._abandon()
    chunks = sorted(p.name for p in (tmp_path / "wal").glob("quiver.wal.*"))
    assert chunks, "the test needs rotated chunks"
    (tmp_path / "wal" / "quiver.wal").write_bytes(b"\x5a" * 12)
    assert main(["replay", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would recreate:" in out and "refuse" not in out
    assert main(["dump", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dumped = [r for r in rows if r["segment"] is None]  # from the WAL
    with QuiverStore.open(tmp_path, QUIET) as store:
        replayed = store.stats()["replayed_entries"]
        store.flush()
        assert [b.slots[0]["i"][0].as_py() for _, _, b in store.bundles()] == [r["slots"]["0"][0]["i"] for r in rows]
    assert len(dumped) == replayed > 0


def test_missing_store_is_a_clear_error(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_dump_json_of_otap_segments_renders_times_and_dictionaries(tmp_path, capsys):
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from otap_model import Signal, generate

    encoder = Encoder(Signal.TRACES)
    with QuiverStore.open(tmp_path, QUIET, layout=OTAP_LAYOUT) as store:
        for b in generate(Signal.TRACES, 40, batch_size=20, seed=5):
            store.ingest(encoder.encode_records(b))
    assert main(["dump", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2
    spans = rows[0]["slots"]["40"]
    assert len(spans) == 20
    assert all(isinstance(s["start_time_unix_nano"], int) and isinstance(s["name"], str) for s in spans)


def test_verify_accepts_a_wal_whose_prefix_was_reclaimed(tmp_path, capsys):
    """Once segments cover the WAL its prefix is punched out (or rewritten): zeros, not damage."""
    big = [RecordBundle({0: pa.record_batch({"v": pa.array(range(i, i + 40_000))})}) for i in range(40)]
    with QuiverStore.open(tmp_path, QUIET) as store:
        for b in big:
            store.ingest(b)
        store.flush()
        stats = store.stats()
    assert stats["holes_punched"] + stats["rewrites"] >= 1
    assert main(["verify", str(tmp_path)]) == 0
    assert "CORRUPT" not in capsys.readouterr().out


def crash_after_a_segment(root: Path, config: StoreConfig = QUIET) -> int:
    """Two bundles in segment 0, a third only in the WAL, then a crash; the sidecar's offset (where
    the third entry's commit starts: under durability "fsync" with a synced frame)."""
    from quiver_store.fs import DEFAULT_FS
    from quiver_store.wal import sidecar

    store = QuiverStore.open(root, config)
    for i in range(2):
        store.ingest(bundle(i))
    store.flush()
    store.ingest(bundle(2))
    store._abandon()
    point, problem = sidecar.read(DEFAULT_FS, str(root / "wal"))
    assert point is not None and problem is None
    return point.offset


def test_verify_finds_a_corrupt_entry_behind_a_reclaimed_prefix(tmp_path, capsys):
    """Was: with the covered prefix reading as zeros (punched out), verify took the zeros for a
    torn tail at the header and said ok, while opening the store quarantined the acknowledged
    entry after them. It now reads the WAL from where recovery does too. (Durability "os": no
    synced frame between the prefix and the entry, so the zeros run right up to it.)"""
    offset = crash_after_a_segment(tmp_path, StoreConfig(segment=QUIET.segment, wal=WalConfig(durability="os")))
    wal = tmp_path / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    data[30:offset] = bytes(offset - 30)  # as a punched hole reads
    data[offset + 40] ^= 0x5A
    wal.write_bytes(bytes(data))
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{wal} at offset {offset}: corrupt WAL entry (CRC32C mismatch" in out.replace("\n", "")
    checked = " ".join(out.replace("│", " ").split())
    assert f"bytes [30, {offset}) reclaimed into segments" in checked and "torn tail" not in checked  # was: torn tail at 30
    assert main(["replay", str(tmp_path)]) == 1


def test_a_store_reopened_under_another_layout_still_verifies_clean(tmp_path, capsys):
    """Every entry in segments, the store reopened under another layout: the old log's entries
    were punched out, so open recreates the file under the new layout. The sidecar goes back to
    the new file's header with it (it kept pointing past the new file's end before, which made the
    writer punch out new entries, tests/test_wal_sidecar.py), and verify and replay are clean."""
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from otap_model import generate
    from quiver_store.fs import DEFAULT_FS
    from quiver_store.wal import sidecar
    from quiver_store.wal.format import HEADER_LEN

    encoder = Encoder("logs")
    with QuiverStore.open(tmp_path, QUIET, layout=OTAP_LAYOUT) as store:
        for b in generate("logs", 4_000, batch_size=1_000, seed=3):
            store.ingest(encoder.encode_records(b))
        store.flush()
        if not store.stats()["wal_hole_punching"]:
            pytest.skip("no hole punching here: the old log is rewritten, not zeroed, and open refuses the other layout")
    QuiverStore.open(tmp_path, QUIET).close()  # the default layout
    assert sidecar.read(DEFAULT_FS, str(tmp_path / "wal")) == (sidecar.TruncatePoint(HEADER_LEN, 0), None)
    assert main(["verify", str(tmp_path)]) == 0, capsys.readouterr().out
    assert main(["replay", str(tmp_path)]) == 0


@pytest.mark.parametrize("keep", [0, 12, 100, None], ids=["emptied", "12 bytes", "100 bytes", "deleted"])
def test_a_wal_cut_below_the_sidecars_offset_is_corruption(tmp_path, capsys, keep):
    """Was: verify and replay said the cut file 'holds no acknowledged entry' (under a header's
    length: 'cut while being created') or merely ignored the sidecar, and open recreated or
    rescanned it in silence; the WAL-only bundle was gone without a word. The store keeps the
    sidecar in step with every file it starts afresh, so a file shorter than the sidecar's
    (checksummed) offset was cut."""
    offset = crash_after_a_segment(tmp_path)
    wal = tmp_path / "wal" / "quiver.wal"
    if keep is None:
        wal.unlink()
        expected = f"{wal} at offset 0: the file is missing, but the sidecar records that its first {offset} bytes were written"
    else:
        wal.write_bytes(wal.read_bytes()[:keep])
        expected = f"{wal} at offset {keep}: the file is {keep} bytes, but the sidecar records that its first {offset} bytes were written"
    assert main(["verify", str(tmp_path)]) == 1
    assert keep is None or expected in " ".join(capsys.readouterr().out.split()).replace("│", "")
    assert main(["replay", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert expected in out and "holds no acknowledged entry" not in out


# -- paths that are not a store ----------------------------------------------------------------------
COMMANDS = ("inspect", "verify", "dump", "replay")


def not_a_store(root: Path, kind: str) -> tuple[Path, str]:
    """A path of the given kind next to a real store `root/store`, and the phrase its error must hold."""
    with QuiverStore.open(root / "store", QUIET) as store:
        store.ingest(bundle(0))
    if kind == "missing":
        return root / "nope", "does not exist"
    if kind == "file":
        (root / "logs.pb").write_bytes(b"\x0a\x00")
        return root / "logs.pb", "is a file, not a Quiver store directory"
    if kind == "empty":
        (root / "empty").mkdir()
        return root / "empty", "is not a Quiver store: it has no wal/ or segments/ directory"
    if kind == "unrelated":
        (root / "other").mkdir()
        (root / "other" / "notes.txt").write_text("x")
        return root / "other", "is not a Quiver store: it has no wal/ or segments/ directory"
    if kind == "wal_file":
        (root / "odd").mkdir()
        (root / "odd" / "wal").write_text("x")
        return root / "odd", "is not a Quiver store: its wal is a file, not a directory"
    if kind == "unrelated_segments":  # was taken for a store: a segments/ directory was enough
        (root / "video" / "segments").mkdir(parents=True)
        (root / "video" / "segments" / "part-0001.ts").write_bytes(b"\x47" * 188)
        return root / "video", ("is not a Quiver store: it has segments/ but no LOCK file, no wal/ directory and no "
                                 "segment files in segments/ (<seq>.qseg, next.seq)")
    if kind == "unrelated_wal":  # so was a wal/ directory of another program
        (root / "db" / "wal").mkdir(parents=True)
        (root / "db" / "wal" / "000000010000000000000001").write_bytes(bytes(64))
        return root / "db", ("is not a Quiver store: it has wal/ but no LOCK file, no WAL file in wal/ (quiver.wal) "
                             "and no segments/ directory")
    if kind == "empty_store_dirs_among_files":  # empty wal/ and segments/ next to other files: no open made these
        for d in ("wal", "segments"):
            (root / "mixed" / d).mkdir(parents=True)
        (root / "mixed" / "notes.txt").write_text("x")
        return root / "mixed", ("is not a Quiver store: it has wal/ and segments/ but no LOCK file, no WAL file in wal/ "
                                "(quiver.wal) and no segment files in segments/ (<seq>.qseg, next.seq)")
    sub = root / "store" / kind  # the store's own segments/ or wal/
    return sub, f"is not a Quiver store: it has no wal/ or segments/ directory (it is the {kind}/ directory of the store {root / 'store'}: pass {root / 'store'})"


@pytest.mark.parametrize("kind", ["missing", "file", "empty", "unrelated", "wal_file", "segments", "wal",
                                  "unrelated_segments", "unrelated_wal", "empty_store_dirs_among_files"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_that_is_not_a_store_is_refused_in_one_line(tmp_path, capsys, command, kind):
    path, phrase = not_a_store(tmp_path, kind)
    before = digest(tmp_path)
    assert main([command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no empty table: verify never passes a directory that is not a store
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"quiver {command}: {path} ") and phrase in err
    assert digest(tmp_path) == before


def cut_short(root: Path, state: str) -> Path:
    """A store directory as a crash while QuiverStore.open created it left it (no data in it yet)."""
    (root / "wal").mkdir(parents=True)
    if state != "wal/":
        (root / "segments").mkdir()
    if state == "wal/ .punch_probe, segments/":  # LOCK's directory entry lost with the power
        (root / "wal" / ".punch_probe").write_bytes(b"\1" * 16384)
    if state == "LOCK, wal/, segments/":
        (root / "LOCK").write_text("123\n")
    return root


CUT_SHORT = ["wal/", "wal/, segments/", "wal/ .punch_probe, segments/", "LOCK, wal/, segments/"]


@pytest.mark.parametrize("state", CUT_SHORT)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_whose_creation_was_cut_short_is_still_a_store(tmp_path, capsys, command, state):
    root = cut_short(tmp_path / "s", state)
    before = digest(tmp_path)
    assert main([command, str(root)]) == 0
    assert capsys.readouterr().err == ""
    assert digest(tmp_path) == before
    with QuiverStore.open(root, QUIET) as store:  # and open finishes creating it
        assert list(store.bundles()) == []


def test_every_power_loss_image_of_a_new_store_is_a_store(tmp_path):
    """Crash images of the power-loss workload from its first operation (QuiverStore.open creating
    the store) to the first ingests: each that has wal/ or segments/ passes the check the quiver
    commands and pipeline --store apply. (Was found by this: wal/.punch_probe surviving a LOCK whose
    directory entry was lost.)"""
    import logging
    import random
    import shutil

    from quiver_store.store_dir import store_problem
    from tests.powerloss import PowerLossFS
    from tests.test_power_loss import run_workload

    logging.disable(logging.CRITICAL)
    checked = 0
    try:
        for crash_at in range(1, 40):
            for variant in range(2):
                live, image = tmp_path / "live", tmp_path / "image"
                fs = PowerLossFS(str(live), crash_at=crash_at)
                run_workload(str(live), fs)
                fs.durable_image(str(image), random.Random(crash_at * 2 + variant))
                if (image / "wal").is_dir() or (image / "segments").is_dir():
                    assert store_problem(image) is None, (crash_at, sorted(str(p.relative_to(image)) for p in image.rglob("*")))
                    checked += 1
                shutil.rmtree(live)
                shutil.rmtree(image, ignore_errors=True)
    finally:
        logging.disable(logging.NOTSET)
    assert checked > 40


def test_the_root_of_per_core_stores_is_refused_with_a_hint(tmp_path, capsys):
    from quiver_store import open_cores

    for store in open_cores(str(tmp_path), 2, QUIET):
        store.close()
    assert main(["verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "it holds the per-core stores core_0, core_1: pass one of them" in err
    assert main(["verify", str(tmp_path / "core_1")]) == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_without_segments_or_with_only_its_wal_still_works(tmp_path, capsys, command):
    """A fresh store (nothing ingested), and a crashed store whose segments/ directory is gone."""
    with QuiverStore.open(tmp_path / "fresh", QUIET):
        pass
    root, _ = crashed_store(tmp_path / "crashed")
    (root / "segments").rmdir()  # no flush ran: it was empty
    assert main([command, str(tmp_path / "fresh")]) == 0
    assert main([command, str(root)]) == 0
    out, err = capsys.readouterr()
    if command == "dump":  # every acknowledged bundle, read from the WAL, and it says so
        rows = [json.loads(line) for line in out.splitlines()]
        assert [(r["segment"], r["bundle"], r["wal_sequence"]) for r in rows] == [(None, None, i) for i in range(5)]
        assert [(r["slots"]["0"][0]["i"], r["slots"]["7"][0]["s"]) for r in rows] == [(i, f"x{i}") for i in range(5)]
        assert " ".join(err.split()) == (
            'quiver dump: the last 5 bundle(s) are only in the WAL (acknowledged, not in a segment yet): "segment" is '
            'null and "wal_sequence" numbers them'
        )
    else:
        assert err == ""
    if command == "replay":
        assert "entries to replay into the open segment: 5" in out
    if command == "verify":
        assert "5 entries" in out


def test_dump_of_a_damaged_wal_gives_the_bundles_before_the_damage_and_exits_1(tmp_path, capsys):
    """What point-in-time recovery keeps is dumped; the damage is named and the exit status says so."""
    root, receipts = crashed_store(tmp_path)
    wal = flip_wal_byte(root, receipts[2].wal_offset + 50)
    before = digest(root)
    assert main(["dump", str(root)]) == 1
    out, err = capsys.readouterr()
    assert [json.loads(line)["slots"]["0"][0]["i"] for line in out.splitlines()] == [0, 1]
    err = " ".join(err.split())
    assert "the last 2 bundle(s) are only in the WAL" in err
    assert f"the WAL is damaged ({wal} at offset {receipts[2].wal_offset}" in err and "CRC32C mismatch" in err
    assert "bundles after the damage are not dumped: see quiver verify" in err
    assert digest(root) == before  # read-only


def test_dump_of_rows_that_do_not_fit_their_schema_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    """Found by fuzzing CRC-valid WAL frames (session 21): nulls in a column whose schema says not
    null made the JSON conversion raise ValueError, and `quiver dump` printed a traceback. Ingest
    refuses such a batch now (test_bundle_nulls.py); stores written before that may hold one."""
    batch = pa.RecordBatch.from_arrays([pa.array([None, "a"])], schema=pa.schema([pa.field("s", pa.string(), nullable=False)]))
    monkeypatch.setattr(RecordBundle, "check_slot_nulls", lambda self, slot, paths: None)  # as before the check
    with QuiverStore.open(tmp_path / "s") as store:
        store.ingest(RecordBundle({0: batch}))
    assert main(["dump", str(tmp_path / "s")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert " ".join(err.split()) == (
        "quiver dump: segment 0 bundle 0: its rows do not fit their schema (Casting field 's' with null values to non-nullable)"
    )


# -- dump --output -----------------------------------------------------------------------------------
def test_dump_refuses_an_output_that_is_a_file_or_holds_an_earlier_dump(store_dir, tmp_path_factory, capsys):
    scratch = tmp_path_factory.mktemp("out")
    existing = scratch / "logs.pb"
    existing.write_bytes(b"keep me")
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(existing)]) == 2
    err = capsys.readouterr().err
    assert f"--output {existing} is an existing file, not a directory" in err and "Traceback" not in err
    assert existing.read_bytes() == b"keep me"

    out = scratch / "arrow"
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 0
    first = digest(out)
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out), "--segment", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--output {out} already holds 10 file(s) of an earlier dump" in err and "seg0000000000000000_bundle000000_slot00.arrow" in err
    assert digest(out) == first

    assert main(["dump", str(store_dir), "--output", str(scratch / "j")]) == 2
    assert "--output is for --format arrow" in capsys.readouterr().err
    assert not (scratch / "j").exists()
    (scratch / "plain").write_text("x")
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(scratch / "plain" / "sub")]) == 2
    assert f"--output {scratch / 'plain' / 'sub'}: cannot create the directory" in capsys.readouterr().err


def test_dump_of_a_damaged_segment_exits_1_in_one_line(store_dir, capsys):
    """Damage found is status 1 (the documented convention), with one line naming the file."""
    seg = store_dir / "segments" / f"{0:016d}.qseg"
    data = bytearray(seg.read_bytes())
    data[len(data) - 1] ^= 0x01  # the footer
    seg.write_bytes(bytes(data))
    assert main(["dump", str(store_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quiver dump: ") and str(seg) in err and err.count("\n") == 1


# -- subscribers table ---------------------------------------------------------------------------------
def test_inspect_lists_what_is_resolved_past_the_mark(tmp_path, capsys):
    """The gap set holds the bundles acked past the mark (not missing ones); a segment acked whole
    shows as `seq:*` and counts all its bundles."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.subscribe("idle")  # pins every segment, so retention deletes none
        for _ in range(3):
            for i in range(4):
                store.ingest(bundle(i))
            store.flush()
        sub = store.subscribe("exp")
        got = [sub.next(timeout=5) for _ in range(12)]
        for d in [*got[4:8], got[9], got[11]]:  # all of segment 1, bundles 1 and 3 of segment 2
            d.ack()
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "resolved > mark" in out and "seg:bundle (first 8)" in out and "gaps (first 8)" not in out
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:6]]
        for line in out.splitlines()
        if line.startswith("│ ") and line.split("│")[1].strip() in ("idle", "exp")
    }
    assert rows["exp"] == ["-1", "6", "1:*, 2:1, 2:3", "6"]  # mark, resolved > mark, which, lag bundles
    assert rows["idle"] == ["-1", "0", "-", "12"]


def test_inspect_schemas_covers_every_segment_and_names_a_disagreement(tmp_path, capsys):
    """Was: the newest segment's schema only, so a column of older segments was missing."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(RecordBundle({7: pa.record_batch({"s": ["a"]}), 8: pa.record_batch({"n": pa.array([1], pa.int64())})}))
        store.flush()
        store.ingest(RecordBundle({7: pa.record_batch({"t": pa.array([2], pa.int32())}), 8: pa.record_batch({"n": ["x"]})}))
    assert main(["inspect", str(tmp_path), "--schemas"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "slot 7 representative schema over 2 segments: s: string t: int32" in out
    assert "slot 8 representative schema over 2 segments; the segments disagree (" in out
    assert "first type kept: n: int64" in out


def test_inspect_schemas_names_streams_of_one_segment_that_disagree(tmp_path, capsys):
    """Was: `x: int64` and no word of the string stream, although load_table then failed."""
    with QuiverStore.open(tmp_path, QUIET) as store:
        store.ingest(RecordBundle({1: pa.record_batch({"x": pa.array([1], pa.int64())}), 2: pa.record_batch({"y": [1]})}))
        store.ingest(RecordBundle({1: pa.record_batch({"x": ["s"]}), 2: pa.record_batch({"y": pa.array([2], pa.int32())})}))
    segment = tmp_path / "segments" / "0000000000000000.qseg"
    assert main(["inspect", str(tmp_path), "--schemas"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"slot 1 representative schema over 1 segment; segment 0 ({segment}): the streams of slot 1 disagree: stream 2 "
        "cannot be merged with stream 0: column x: types int64 and string have no common representative type"
    ) in out
    assert "load_table raises QuiverError for this slot; first type kept: x: int64" in out
    assert "slot 2 representative schema over 1 segment: y: int64" in out  # int64 and int32 merge


OPEN_NOTE = "note: another process has this store open (its LOCK is held); the files may change while they are read"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_held_open_is_noted_on_stderr_and_the_writer_goes_on(tmp_path, capsys, command):
    """Was: silence, although the guide says to run verify on a closed store. flock conflicts
    between separately opened descriptors in one process too, so a QuiverStore here holds it."""
    store = QuiverStore.open(tmp_path, QUIET)
    try:
        store.ingest(bundle(0))
        store.flush()
        store.ingest(bundle(1))
        assert main([command, str(tmp_path)]) == 0
        err = capsys.readouterr().err
        assert err.splitlines().count(OPEN_NOTE) == 1
        store.ingest(bundle(2))  # the probe took nothing from the writer
    finally:
        store.close()
    with QuiverStore.open(tmp_path, QUIET) as store:  # and released everything
        assert len(list(store.bundles())) == 3
    assert main([command, str(tmp_path)]) == 0
    assert OPEN_NOTE not in capsys.readouterr().err


def _hold(path: Path, directory: bool):  # type: ignore[no-untyped-def]
    import fcntl

    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("held", ["directory", "LOCK"])
@pytest.mark.parametrize("command", COMMANDS)
def test_either_lock_held_is_noted_and_nothing_else_changes(tmp_path, capsys, command, held):
    """The writer locks the store directory and LOCK (an older writer LOCK only): each is enough.
    Output and exit code are those of the same store with no holder (a damaged one here)."""
    root, receipts = crashed_store(tmp_path)
    flip_wal_byte(root, receipts[1].wal_offset + 50)
    expected = main([command, str(root)])
    assert expected == (0 if command == "inspect" else 1)
    plain = capsys.readouterr()
    assert OPEN_NOTE not in plain.err
    fd = _hold(root if held == "directory" else root / "LOCK", held == "directory")
    try:
        assert main([command, str(root)]) == expected
        out, err = capsys.readouterr()
    finally:
        os.close(fd)
    assert err == OPEN_NOTE + "\n" + plain.err
    assert out == plain.out


def test_a_store_held_by_another_process_is_noted(tmp_path, capsys):
    import subprocess
    import sys
    import textwrap

    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from quiver_store import QuiverStore
            with QuiverStore.open({str(tmp_path)!r}) as store:
                print("open", flush=True)
                sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        assert main(["verify", str(tmp_path)]) == 0
        assert capsys.readouterr().err == OPEN_NOTE + "\n"
    finally:
        writer.communicate("\n", timeout=60)
    assert writer.returncode == 0
    assert main(["verify", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


FIFO_PLACES = ["wal/quiver.wal", "wal/truncate.offset", "segments/0000000000000000.qseg", "segments/next.seq", "ack.log",
               "ack.checkpoint"]


@pytest.mark.parametrize("place", FIFO_PLACES)
def test_a_fifo_in_a_stores_place_is_refused_not_waited_on(tmp_path, place):
    """Was: every reader opened it and waited for a writer forever. Each command runs in its own
    process under a timeout, so a hang fails the test instead of stopping the run."""
    import subprocess
    import sys

    with QuiverStore.open(tmp_path / "s", QUIET) as store:
        sub = store.subscribe("a")
        for i in range(3):
            store.ingest(bundle(i))
        store.flush()
        sub.next(timeout=0).ack()  # one of three: the segment stays, the ack log has a record
    target = tmp_path / "s" / place
    assert target.is_file()
    target.unlink()
    os.mkfifo(target)
    for command in (["quiver", "inspect"], ["quiver", "verify"], ["quiver", "replay"], ["quiver", "dump"],
                    ["adaptive-arrow", "decode", "--out", str(tmp_path / "d")]):
        module = "quiver_store.cli" if command[0] == "quiver" else "adaptive_arrow.cli"
        args = [*command[1:2], str(tmp_path / "s"), *command[2:]]
        done = subprocess.run([sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())", *args],
                              capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        if "not a regular file (a FIFO)" in done.stderr:  # one line naming it (replay: a note, it reads no segment)
            assert done.stderr.count("\n") == 1 and place in done.stderr, (command, done.stderr)
            assert done.returncode != 0 or command[1] == "replay", (command, done.returncode)
        if command[1] == "verify":
            assert done.returncode != 0, done.stdout
    with pytest.raises(QuiverError, match="not a regular file"):
        QuiverStore.open(tmp_path / "s", QUIET).close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["inspect", "verify", "dump", "replay"])
def test_a_full_standard_output_is_one_line_naming_it(store_dir, command):
    """Was: 'quiver dump: [Errno 28] No space left on device', exit 2 (the code for a bad
    argument). Now standard output is named and the status is 1, as for adaptive-arrow."""
    import subprocess
    import sys

    script = "import sys; from quiver_store.cli import main; sys.exit(main(sys.argv[1:]))"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", script, command, str(store_dir)], stdout=full,
                              stderr=subprocess.PIPE, text=True, check=False, timeout=60)
    assert (done.returncode, done.stderr) == (1, f"quiver {command}: cannot write standard output: No space left on device\n")


@pytest.mark.parametrize("inside", [".", "segments", "wal", "segments/new"])
def test_dump_refuses_an_output_inside_the_store_it_reads(store_dir, capsys, inside):
    before = digest(store_dir)
    out = store_dir / inside
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 2
    where = "the store" if inside == "." else "inside the store"
    assert capsys.readouterr().err.replace("\n", "") == (
        f"quiver dump: --output {out} is {where} {store_dir} being read; choose a directory outside it")
    assert digest(store_dir) == before


def acked_then_crashed(root: Path) -> Path:
    """A store whose subscriber acked 3 of 4 bundles before a crash: ack.log holds 5 records."""
    store = QuiverStore.open(root, QUIET)
    sub = store.subscribe("exp")
    for i in range(4):
        store.ingest(bundle(i))
    store.flush()
    for _ in range(3):
        sub.next(timeout=5).ack()
    store._abandon()
    return root / "ack.log"


def test_replay_says_what_opening_does_with_a_damaged_ack_log(tmp_path, capsys):
    """Was: replay spoke of the WAL only and exited 0 (also under --recovery strict) for ack log
    damage that makes opening move outcomes aside or refuse the store."""
    log_path = acked_then_crashed(tmp_path)
    data = bytearray(log_path.read_bytes())
    data[100] ^= 0x5A  # inside the third record; valid ones follow
    log_path.write_bytes(bytes(data))
    before = digest(tmp_path)
    assert main(["replay", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"ack log corruption: {log_path} at offset 78: ack log record failed its CRC32C" in out
    assert out.endswith("opening moves the records from here on aside, losing those outcomes")
    assert main(["replay", str(tmp_path), "--recovery", "strict"]) == 2
    assert "the ack log: recovery mode 'strict' would refuse to open:" in " ".join(capsys.readouterr().out.split())
    assert digest(tmp_path) == before
    with pytest.raises(CorruptionError, match=rf"{log_path} at offset 78"):
        QuiverStore.open(tmp_path, StoreConfig(segment=QUIET.segment, wal=WalConfig(recovery="strict")))


def test_replay_says_a_damaged_ack_checkpoint_refuses_the_store(store_dir, capsys):
    with QuiverStore.open(store_dir, QUIET) as store:
        store.subscribe("a")
    checkpoint = store_dir / "ack.checkpoint"
    assert checkpoint.exists()
    data = bytearray(checkpoint.read_bytes())
    data[40] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    assert main(["replay", str(store_dir)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert f"the ack log: opening would refuse the store: {checkpoint}" in out
    with pytest.raises(CorruptionError, match="ack checkpoint failed its CRC32C"):
        QuiverStore.open(store_dir, QUIET)


# -- dump --format arrow stages its files: a failed or interrupted dump leaves --output as it was ---------
def _failing_at_the_third_file(monkeypatch, error: BaseException) -> None:
    """pyarrow.ipc.new_file, which dump writes each Arrow file with, raising `error` at the third file."""
    new_file, calls = pa.ipc.new_file, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise error
        return new_file(*args, **kwargs)

    monkeypatch.setattr(pa.ipc, "new_file", failing)


@pytest.mark.parametrize("existing", [False, True])
def test_an_interrupted_dump_leaves_output_as_it_was(store_dir, tmp_path_factory, capsys, monkeypatch, existing):
    """Was: Ctrl-C at the third file left the first two in --output, and a directory it created."""
    scratch = tmp_path_factory.mktemp("out")
    out = scratch / "new" / "arrow"
    if existing:
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
    before = digest(scratch)
    _failing_at_the_third_file(monkeypatch, KeyboardInterrupt())
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 130
    assert capsys.readouterr().err == "quiver dump: interrupted\n"
    assert digest(scratch) == before and (scratch / "new").exists() == existing
    assert not existing or os.listdir(out) == ["notes.txt"]


def test_a_dump_that_cannot_write_leaves_output_as_it_was(store_dir, tmp_path_factory, capsys, monkeypatch):
    """Was: '[Errno 28] No space left on device' (no file named) and the first two files left in --output."""
    import errno

    out = tmp_path_factory.mktemp("out") / "arrow"
    _failing_at_the_third_file(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 2
    assert capsys.readouterr().err == (f"quiver dump: cannot write {out / 'seg0000000000000000_bundle000001_slot00.arrow'}: "
                                       "No space left on device\n")
    assert not out.exists()


def test_a_dump_of_a_damaged_segment_keeps_the_bundles_before_it_and_says_so(store_dir, tmp_path_factory, capsys):
    """As for JSON lines and adaptive-arrow decode: what was read before the damage is dumped."""
    seg = store_dir / "segments" / f"{1:016d}.qseg"
    data = bytearray(seg.read_bytes())
    data[len(data) - 1] ^= 0x01  # the footer
    seg.write_bytes(bytes(data))
    out = tmp_path_factory.mktemp("out") / "arrow"
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"quiver dump: {seg}") and err.count("\n") == 1
    assert err.endswith(f"; the 3 bundle(s) before it were dumped into {out}\n")
    assert sorted(os.listdir(out)) == [f"seg0000000000000000_bundle{b:06d}_slot{s:02d}.arrow" for b in range(3) for s in (0, 7)]


def test_dump_names_a_staging_directory_a_killed_dump_left(store_dir, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("out") / "arrow"
    (out / ".staging-0123456789abcdef").mkdir(parents=True)
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 0
    assert capsys.readouterr().err == (f"quiver dump: note: {out / '.staging-0123456789abcdef'} was left by an "
                                       f"interrupted run; delete it if no other quiver dump is writing into {out}\n")
    assert len(os.listdir(out)) == 11


def test_a_dump_whose_files_cannot_be_moved_in_leaves_output_as_it_was(store_dir, tmp_path_factory, capsys, monkeypatch):
    """Was: the fourth move failing left three Arrow files in --output (a directory the dump
    created), deleted the other seven with the staging directory, and said only 'cannot move the
    dumped files into it (Input/output error)'."""
    import errno

    scratch = tmp_path_factory.mktemp("out")
    out = scratch / "arrow"
    replace, calls = os.replace, []

    def failing_at_the_fourth(src, dst):
        calls.append(src)
        if len(calls) == 4:
            raise OSError(errno.EIO, "Input/output error", src, None, dst)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_at_the_fourth)
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"quiver dump: --output {out}: cannot move the dumped files into it (seg0000000000000000_bundle000001_slot07.arrow: "
        "Input/output error); --output is left as it was\n")
    assert os.listdir(scratch) == []


@pytest.mark.parametrize("command", ["inspect", "verify", "dump", "replay"])
def test_a_store_file_that_cannot_be_read_exits_as_the_help_says(store_dir, capsys, monkeypatch, command):
    """The statuses the help lists for files that cannot be read: 2 for a WAL file (every command),
    and for a segment 2 too, except inspect, which lists it as damage (1), and replay, which reads
    a segment only to find where the WAL starts and notes it (0)."""
    import errno

    from quiver_store.fs import FileSystem

    def eio(self, *args):
        raise OSError(errno.EIO, "Input/output error", str(store_dir / "wal" / "quiver.wal"))

    with monkeypatch.context() as patched:
        patched.setattr(FileSystem, "pread", eio)
        assert main([command, str(store_dir)]) == 2
        assert capsys.readouterr().err == f"quiver {command}: [Errno 5] Input/output error: '{store_dir / 'wal' / 'quiver.wal'}'\n"
    monkeypatch.setattr(FileSystem, "mmap", eio)
    assert main([command, str(store_dir)]) == {"inspect": 1, "verify": 2, "dump": 2, "replay": 0}[command]
    capsys.readouterr()


def test_dumps_output_that_cannot_be_written_exits_2_as_the_help_says(store_dir, tmp_path_factory, capsys, monkeypatch):
    """--output that cannot be created, a file in it that cannot be written, files that cannot be
    moved into it: 2, the status of a file that cannot be read or written (standard output: 1)."""
    import errno

    def failing(error):
        def fail(*_):
            raise error
        return fail

    scratch = tmp_path_factory.mktemp("out")
    (scratch / "plain").write_text("x")
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(scratch / "plain" / "sub")]) == 2
    with monkeypatch.context() as patched:
        _failing_at_the_third_file(patched, OSError(errno.ENOSPC, "No space left on device"))
        assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(scratch / "a")]) == 2
    monkeypatch.setattr(os, "replace", failing(OSError(errno.EIO, "Input/output error")))
    assert main(["dump", str(store_dir), "--format", "arrow", "--output", str(scratch / "b")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[1] for line in err] == [f"--output {scratch / 'plain' / 'sub'}", "cannot write "
                                                     f"{scratch / 'a' / 'seg0000000000000000_bundle000001_slot00.arrow'}",
                                                     f"--output {scratch / 'b'}"]
    assert os.listdir(scratch) == ["plain"]


def test_dump_streams_each_arrow_file_into_its_staged_file_with_the_same_bytes(tmp_path, monkeypatch):
    """Each Arrow file is written by an IPC writer opened on its staged file, not built in memory
    first (was: pa.BufferOutputStream, then StagedDir.write; both fail here), and holds byte for
    byte what that wrote: zstd segments whose batches hold several bundles (each file a slice),
    dictionary, list and null values, and bundles only the WAL holds."""
    root = tmp_path / "s"
    store = QuiverStore.open(root, StoreConfig(segment=SegmentConfig(max_open_duration=3600.0, compression="zstd")))
    for i in range(12):
        store.ingest(RecordBundle({
            0: pa.record_batch({"i": pa.array(range(i * 7, i * 7 + 7), pa.int64()),
                                "kind": pa.array([["a", "b", None][j % 3] for j in range(7)]).dictionary_encode(),
                                "tags": pa.array([[j, i] if j % 2 else None for j in range(7)], pa.list_(pa.int32()))}),
            5: pa.record_batch({"s": [f"bundle {i}" * (i + 1)]}),
        }))
        if i == 7:
            store.flush()
    store._abandon()  # bundles 8..11 only in the WAL

    def in_memory(*_):
        raise AssertionError("an Arrow file built in memory")

    out = tmp_path / "arrow"
    with monkeypatch.context() as patched:
        patched.setattr(pa, "BufferOutputStream", in_memory)
        patched.setattr(StagedDir, "write", in_memory)
        assert main(["dump", str(root), "--format", "arrow", "--output", str(out)]) == 0
    expected = {}
    for item in StoredBundles(str(root)):
        stem = (f"seg{item.segment_seq:016d}_bundle{item.bundle_index:06d}" if item.segment_seq is not None
                else f"wal{item.wal_sequence:020d}")
        for slot, batch in item.bundle.slots.items():
            sink = pa.BufferOutputStream()  # what dump wrote before
            with pa.ipc.new_file(sink, batch.schema) as writer:
                writer.write_batch(batch)
            expected[f"{stem}_slot{slot:02d}.arrow"] = (sink.getvalue().to_pybytes(), batch)
    assert len(expected) == 24 and sum(name.startswith("wal") for name in expected) == 8
    assert sorted(os.listdir(out)) == sorted(expected)
    for name, (data, batch) in expected.items():
        assert (out / name).read_bytes() == data, name
        assert pa.ipc.open_file(out / name).read_all().equals(pa.Table.from_batches([batch])), name


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGXFSZ"), reason="needs RLIMIT_FSIZE and SIGXFSZ")
def test_a_real_write_error_in_a_streamed_arrow_file_names_it(store_dir, tmp_path_factory):
    """write(2) failing for real (a file size limit, SIGXFSZ ignored: EFBIG) while the IPC writer
    streams into the staged file, or as it is closed: one line naming the file, exit 2, nothing
    left in --output."""
    import resource
    import signal
    import subprocess
    import sys

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    out = tmp_path_factory.mktemp("out") / "arrow"
    script = "import sys; from quiver_store.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", script, "dump", str(store_dir), "--format", "arrow", "--output", str(out)],
                          preexec_fn=small_files, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        2, f"quiver dump: cannot write {out / 'seg0000000000000000_bundle000000_slot00.arrow'}: File too large\n")
    assert not out.exists()


@pytest.mark.parametrize("header", ["magic", "version", "reserved"])
@pytest.mark.parametrize("damaged", ["active", "rotated"])
def test_inspect_exits_1_for_a_damaged_wal_header_as_verify_does(tmp_path, capsys, damaged, header):
    """Was: inspect showed the damaged header in red and exited 0, where verify reports it CORRUPT
    (exit 1) and QuiverStore.open refuses the store (replay.py _check_header; replay: exit 2). A
    header of another format version (or a reserved field set) decodes, and inspect showed it as
    a normal row with exit 0; open refuses that too, and verify exits 1."""
    cfg = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0), wal=WalConfig(rotation_size=64 * 1024, preallocate=0))
    store = QuiverStore.open(tmp_path, cfg)
    for i in range(12):
        store.ingest(RecordBundle({0: pa.record_batch({"i": pa.array([i] * 4000, pa.int64())})}))
    store._abandon()
    wal = tmp_path / "wal" / ("quiver.wal" if damaged == "active" else "quiver.wal.1")
    data = bytearray(wal.read_bytes())
    data[{"magic": 0, "version": 10, "reserved": 12}[header]] ^= 1  # header: magic, u16 version, u16 reserved
    wal.write_bytes(bytes(data))
    assert main(["verify", str(tmp_path)]) == 1
    verified = capsys.readouterr().out
    assert main(["inspect", str(tmp_path)]) == 1
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert main(["replay", str(tmp_path)]) == 2
    capsys.readouterr()
    if header == "magic":
        assert f"error: {wal} at offset 0: not a Quiver WAL file" in verified
        assert f"{wal.name} " in out and f"{wal} at offset 0: not a Quiver WAL file" in out
        with pytest.raises(CorruptionError, match="not a Quiver WAL file"):
            QuiverStore.open(tmp_path, cfg)
    else:
        version, reserved = (0, 0) if header == "version" else (1, 1)
        assert f"error: {wal} at offset 10: unsupported WAL version {version} / reserved {reserved}" in verified
        assert (f"{wal.name} " in out and f": format version {version} (reserved {reserved}) is not readable by this "
                "build (version 1)" in out)
        with pytest.raises(QuiverError, match="is not readable by this build"):
            QuiverStore.open(tmp_path, cfg)


def test_inspect_of_an_active_wal_cut_while_being_created_still_exits_0(tmp_path, capsys):
    """A damaged header with nothing but zeros after it is a log QuiverStore.open recreates, losing
    nothing: yellow, exit 0 (verify: 0 too)."""
    wal = tmp_path / "wal" / "quiver.wal"
    wal.parent.mkdir()
    wal.write_bytes(b"\x5a" * 30 + bytes(64))
    assert main(["verify", str(tmp_path)]) == 0
    assert main(["inspect", str(tmp_path)]) == 0
    assert "QuiverStore.open recreates it" in " ".join(capsys.readouterr().out.replace("│", " ").split())
