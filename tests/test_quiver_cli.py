"""`quiver inspect | verify | dump | replay` on real stores, including damaged ones."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
from quiver_store.cli import main

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
    wal = root / "wal" / "quiver.wal"
    data = bytearray(wal.read_bytes())
    data[receipts[1].wal_offset + 50] ^= 1
    wal.write_bytes(bytes(data))
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


def test_missing_store_is_a_clear_error(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


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
