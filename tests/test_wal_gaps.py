"""Frames missing from the WAL between intact ones are reported, not silently skipped.

Every WAL sequence number has a frame (a bundle's entry, or the marker of a bundle written
straight into a segment file), so recovery checks that each frame's sequence follows the one
before it. A deleted rotated chunk, a rotated chunk cut at a frame boundary, or frames spliced out
of a file used to lose their acknowledged bundles with no report at all (a deleted middle chunk:
10 of 40 bundles gone, `corruption_reports` empty); the frames after the gap are intact and still
replayed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import CorruptionError, QuiverStore, absent
from quiver_store.cli import main
from quiver_store.fs import DEFAULT_FS
from quiver_store.wal import sidecar
from quiver_store.wal.format import ENTRY_SYNCED, HEADER_LEN, MAX_SEQUENCE, Entry
from quiver_store.wal.reader import scan
from quiver_store.wal.replay import WalCutError, WalGapError

from .test_quiver_cli import digest
from .test_wal_rotation import bundle, config, values

ALL = set(range(40))


def rotated_config(mode: str = "point_in_time"):
    return config(rotation_size=8 * 1024, max_size=1 << 20, max_chunks=100, recovery=mode)


@pytest.fixture(scope="module")
def rotated(tmp_path_factory) -> Path:
    """Bundles 0-4 in a segment, 5-39 only in the WAL (sequence i = bundle i), then a crash: the
    sidecar names quiver.wal.0 (inside it), and chunks 1 and 2 and the active file follow."""
    root = tmp_path_factory.mktemp("rotated")
    store = QuiverStore.open(root, rotated_config())
    for i in range(5):
        store.ingest(bundle(i))
    store.flush()
    for i in range(5, 40):
        store.ingest(bundle(i))
    store._abandon()
    assert sorted(p.name for p in (root / "wal").iterdir()) == ["quiver.wal", "quiver.wal.0", "quiver.wal.1", "quiver.wal.2", "truncate.offset"]
    point, _ = sidecar.read(DEFAULT_FS, str(root / "wal"))
    assert point is not None and point.generation == 0 and point.offset > HEADER_LEN
    return root


def copy_of(rotated: Path, target: Path) -> Path:
    shutil.copytree(rotated, target)
    return target


def frames(path: Path) -> list[tuple[int, int, int]]:
    """(offset, size, sequence) of every valid frame of a WAL file that has a sequence of its own
    (not the synced frames between them)."""
    data = path.read_bytes()
    return [(e.offset, e.size, e.sequence) for e in scan(memoryview(data), HEADER_LEN, resync=False)
            if isinstance(e, Entry) and e.entry_type != ENTRY_SYNCED]


def reopen_clean(root: Path, cfg) -> list[int]:
    """Values after one more open: nothing reported, nothing left to replay."""
    with QuiverStore.open(root, cfg) as store:
        assert store.stats()["corruption_reports"] == [] and store.stats()["replayed_entries"] == 0
        return values(store)


@pytest.mark.parametrize("mode", ["point_in_time", "skip_corrupt"])
@pytest.mark.parametrize("deleted", [1, 2], ids=["middle chunk", "newest chunk"])
def test_a_deleted_rotated_chunk_is_reported_and_every_later_frame_replayed(rotated, tmp_path, capsys, mode, deleted):
    root = copy_of(rotated, tmp_path / "store")
    chunk = root / "wal" / f"quiver.wal.{deleted}"
    lost = {seq for _, _, seq in frames(chunk)}
    after = root / "wal" / ("quiver.wal.2" if deleted == 1 else "quiver.wal")
    chunk.unlink()
    # Offline first: verify names the loss (the missing generation itself when the numbering
    # shows it; a newest chunk's absence shows only as the gap before the active file).
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out.replace("\n", "")
    if deleted == 1:
        assert "rotated WAL generation(s) 1 missing" in out and "missing before the frame" not in out
    else:
        assert f"WAL sequence(s) {min(lost)}..{max(lost)} missing before the frame of sequence {max(lost) + 1}" in out
    assert main(["replay", str(root)]) == 1
    assert f"would record in the next segment: WAL sequence(s) {min(lost)}..{max(lost)} lost" in capsys.readouterr().out
    cfg = rotated_config(mode)
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["path"] == str(after) and report["offset"] == frames(after)[0][0]  # after its synced frame
        assert f"WAL sequence(s) {min(lost)}..{max(lost)} missing before the frame of sequence {max(lost) + 1}" in report["error"]
        assert ("generation(s) 1 between the two are missing" in report["error"]) == (deleted == 1)
        assert report["action"] == "every intact frame after the gap is replayed"
        assert store.stats()["replayed_entries"] == 35 - len(lost)
    assert reopen_clean(root, cfg) == sorted(ALL - lost)
    assert verify_errors(root, capsys) == [loss_recorded(root, min(lost), max(lost))]
    assert main(["inspect", str(root)]) == 0  # the segments table's caption says so too
    assert f"WAL sequence(s) {min(lost)}..{max(lost)} are lost, as segments/" in " ".join(capsys.readouterr().out.split())


def verify_errors(root: Path, capsys) -> list[str]:
    """The error lines of `quiver verify` (exit 1 exactly when there are some), whitespace collapsed."""
    code = main(["verify", str(root)])
    errors = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines() if line.startswith("error:")]
    assert code == (1 if errors else 0)
    return errors


def loss_recorded(root: Path, lo: int, hi: int) -> str:
    """verify's line for a loss that open reported and the next segment recorded (the newest one here)."""
    newest = sorted((root / "segments").glob("*.qseg"))[-1].name
    return (f"error: {root}: WAL sequence(s) {lo}..{hi} are lost, as segments/{newest} records: QuiverStore.open found "
            "them gone from the WAL before any segment held them and reported it (stats()['corruption_reports'])")


def verified_lost(root: Path, capsys) -> set[int]:
    """The WAL sequences `quiver verify` names as lost, as recorded by a segment; any other error fails."""
    lost: set[int] = set()
    for line in verify_errors(root, capsys):
        m = re.fullmatch(rf"error: {re.escape(str(root))}: WAL sequence\(s\) (\d+)(?:\.\.(\d+))? are lost, as segments/\d+\.qseg "
                         r"records: QuiverStore\.open found them gone .*", line)
        assert m is not None, line
        lost |= set(range(int(m[1]), int(m[2] or m[1]) + 1))
    return lost


def test_strict_refuses_a_gap_and_changes_nothing(rotated, tmp_path):
    root = copy_of(rotated, tmp_path / "store")
    (root / "wal" / "quiver.wal.1").unlink()
    before = digest(root)
    with pytest.raises(WalGapError, match=rf"quiver.wal.2 at offset {frames(root / 'wal' / 'quiver.wal.2')[0][0]}: WAL sequence\(s\) 10..19 missing .*'strict' refuses to open") as info:
        QuiverStore.open(root, rotated_config("strict"))
    assert isinstance(info.value, CorruptionError) and list(info.value.missing_generations) == [1]
    assert digest(root) == before


def test_a_chunk_renamed_near_2_63_is_a_gap_of_that_many_generations_not_a_list_of_them(rotated, tmp_path, capsys):
    """Before, the gap's missing generations were built as a tuple (and verify's as a list): a
    chunk named quiver.wal.<2**63-1> made both exhaust memory."""
    root = copy_of(rotated, tmp_path / "store")
    (root / "wal" / "quiver.wal.1").unlink()
    far = MAX_SEQUENCE
    (root / "wal" / "quiver.wal.2").rename(root / "wal" / f"quiver.wal.{far}")
    with pytest.raises(WalGapError, match=r"generation\(s\) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 ... between the two are missing") as info:
        QuiverStore.open(root, rotated_config("strict"))
    assert info.value.missing_generations == range(1, far)
    errors = verify_errors(root, capsys)
    assert f"error: {root}/wal/quiver.wal.1: rotated WAL generation(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 ... missing: every rotated generation from the truncate point's (0) to the newest ({far}) holds entries recovery still needs" in errors


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_rotated_chunk_cut_at_a_frame_boundary_is_reported(rotated, tmp_path_factory, capsys, data):
    """The cut leaves a well-formed, shorter chunk: only the sequence numbers show the loss."""
    root = copy_of(rotated, tmp_path_factory.mktemp("cut") / "store")
    chunk = root / "wal" / "quiver.wal.1"
    found = frames(chunk)
    keep = data.draw(st.integers(0, len(found) - 1), label="frames kept")
    end = found[keep][0]  # the kept frames end where frame `keep` starts
    chunk.write_bytes(chunk.read_bytes()[:end])
    lost = {seq for _, _, seq in found[keep:]}
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert f"WAL sequence(s) {min(lost)}..{max(lost)} missing" in report["error"]
        assert "its last frames were cut off" in report["error"]
    assert reopen_clean(root, cfg) == sorted(ALL - lost)
    assert verified_lost(root, capsys) == lost


def test_frames_spliced_out_of_a_file_are_reported(rotated, tmp_path, capsys):
    root = copy_of(rotated, tmp_path / "store")
    active = root / "wal" / "quiver.wal"
    found = frames(active)
    (start, _, first), (stop, _, last) = found[3], found[5]  # frames 3 and 4 go
    data = active.read_bytes()
    active.write_bytes(data[:start] + data[stop:])
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["path"] == str(active) and report["offset"] == start
        assert f"WAL sequence(s) {first}..{last - 1} missing before the frame of sequence {last} (the frame before it has sequence {first - 1}" in report["error"]
    assert reopen_clean(root, cfg) == sorted(ALL - {first, first + 1})
    assert verified_lost(root, capsys) == {first, first + 1}


@pytest.mark.parametrize("cut", ["deleted", "frame boundary", "mid-frame"])
def test_a_chunk_the_sidecar_names_deleted_or_cut_below_its_point_is_reported_once(rotated, tmp_path, capsys, cut):
    """The sidecar's point lies inside quiver.wal.0 (a point at a chunk's end moves to the next
    file), so that chunk still held entries after it: a chunk gone or cut below the point is a cut
    WAL, reported once. What is left of it lies below the point, in segments; the sidecar moves to
    the next file, every later file is replayed (was, for a cut mid-frame: 'rotated chunk ends in
    invalid bytes', a second report, and every later file moved into quarantine)."""
    root = copy_of(rotated, tmp_path / "store")
    point, _ = sidecar.read(DEFAULT_FS, str(root / "wal"))
    assert point is not None
    chunk = root / "wal" / "quiver.wal.0"
    found = frames(chunk)
    lost = {seq for offset, _, seq in found if offset >= point.offset}
    below = [offset for offset, _, _ in found if offset < point.offset]
    if cut == "deleted":
        chunk.unlink()
    else:
        assert len(below) >= 2
        chunk.write_bytes(chunk.read_bytes()[: below[-1] + (0 if cut == "frame boundary" else 40)])
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["path"] == str(chunk) and ("the file is missing" if cut == "deleted" else "it was cut since") in report["error"]
        assert report["action"] == "the sidecar points at the start of the log that is left"
        assert sidecar.read(DEFAULT_FS, str(root / "wal"))[0] == sidecar.TruncatePoint(HEADER_LEN, 1)
        assert store.stats()["quarantined_bytes"] == 0
    assert reopen_clean(root, cfg) == sorted(ALL - lost)
    assert verified_lost(root, capsys) == lost
    strict = copy_of(rotated, tmp_path / "strict")
    (strict / "wal" / "quiver.wal.0").unlink()
    with pytest.raises(WalCutError, match=r"quiver\.wal\.0 at offset 0: the file is missing"):
        QuiverStore.open(strict, rotated_config("strict"))


@pytest.mark.parametrize("crash", [False, True], ids=["segment written", "crash first"])
def test_a_region_skip_corrupt_zeroed_is_recorded_once(rotated, tmp_path, capsys, crash):
    """skip_corrupt reports a damaged frame and zeroes it (a hole from then on); the frames after
    the hole follow a gap, already reported: no second report. A later synced frame says the
    damaged one was fdatasynced, so its sequence is recorded as lost in the segment the open
    writes. A crash before that segment: the next open finds zeros where a vouched frame stood,
    reports that, and records it then."""
    root = copy_of(rotated, tmp_path / "store")
    active = root / "wal" / "quiver.wal"
    offset, size, seq = frames(active)[4]
    data = bytearray(active.read_bytes())
    data[offset + size // 2] ^= 0xFF
    active.write_bytes(bytes(data))
    cfg = rotated_config("skip_corrupt")
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert "corrupt WAL entry" in report["error"]
        if crash:
            store._abandon()  # before the replayed entries reach a segment
    if crash:
        with QuiverStore.open(root, cfg) as store:
            (report,) = store.stats()["corruption_reports"]
            assert f"WAL sequence(s) {seq}..{seq} missing before the frame of sequence {seq + 1} (zeros where" in report["error"]
            assert store.stats()["wal_hole_bytes"] > 0
    assert reopen_clean(root, cfg) == sorted(ALL - {seq})
    assert verified_lost(root, capsys) == {seq}


def zero_frames(path: Path, first: int, stop: int) -> None:
    data = bytearray(path.read_bytes())
    data[first:stop] = bytes(stop - first)
    path.write_bytes(bytes(data))


def test_zeros_in_place_of_a_synced_frame_are_reported_and_recorded_as_lost(rotated, tmp_path, capsys):
    """A disk that turns an acknowledged frame into zeros leaves what a power loss leaves in a
    commit it interrupted (zeros before an intact frame); the synced frames of later commits tell
    the two apart. This frame was fdatasynced before the next commit began, so it is lost."""
    root = copy_of(rotated, tmp_path / "store")
    active = root / "wal" / "quiver.wal"
    offset, size, seq = frames(active)[4]
    zero_frames(active, offset, offset + size)
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert report["offset"] == frames(active)[4][0]  # the frame after the zeros
        assert (f"WAL sequence(s) {seq}..{seq} missing before the frame of sequence {seq + 1} (zeros where their frames "
                "stood, which a later synced frame says were fdatasynced)") in report["error"]
        assert store.stats()["wal_hole_bytes"] == size
    assert reopen_clean(root, cfg) == sorted(ALL - {seq})
    assert verified_lost(root, capsys) == {seq}


@pytest.mark.parametrize("mode", ["point_in_time", "skip_corrupt"])
@pytest.mark.parametrize("damage", ["zeros", "torn"])
def test_damage_in_the_last_commit_is_recorded_as_damaged_not_lost(rotated, tmp_path, capsys, mode, damage):
    """Zeros or a torn frame before the last intact frame, with no synced frame after them: what a
    power loss leaves when it writes back the pages of an unsynced commit out of order (frames never
    acknowledged), or a disk's damage to the last acknowledged commit. The log cannot tell which,
    so verify notes the sequence as damaged instead of calling it lost (exit 0)."""
    root = copy_of(rotated, tmp_path / "store")
    active = root / "wal" / "quiver.wal"
    (offset, size, seq), (last_offset, _, last) = frames(active)[-2:]
    if damage == "zeros":  # this frame and the synced frame that vouched for it: one commit of two frames
        zero_frames(active, offset, last_offset)
    else:  # the second half never landed, the next frame did
        zero_frames(active, offset + size // 2, last_offset)
    cfg = rotated_config(mode)
    with QuiverStore.open(root, cfg) as store:
        reports = store.stats()["corruption_reports"]
        assert [r["error"] for r in reports if "missing before the frame" in r["error"]] == []
        assert len(reports) == (0 if damage == "zeros" else 1)  # a torn frame before an intact one is damage
    kept = {last} if damage == "zeros" or mode == "skip_corrupt" else set()  # point_in_time quarantines the rest
    assert reopen_clean(root, cfg) == sorted(ALL - {seq, last} | kept)
    assert verify_errors(root, capsys) == []
    assert recorded(root) == [(seq, last if not kept else seq, absent.DAMAGED)]
    assert main(["verify", str(root)]) == 0 and "their WAL frames were" in " ".join(capsys.readouterr().out.split())


def recorded(root: Path) -> list[absent.Range]:
    """The WAL sequences the store's segments record as absent."""
    with QuiverStore.open(root, rotated_config()) as store:
        return [r for info in store.segments() for r in absent.decode(info.metadata.get(absent.META_KEY, ""))]


def test_point_in_time_records_the_synced_frames_it_quarantines_and_never_reuses_their_sequences(rotated, tmp_path, capsys):
    """Point-in-time recovery stops at damage and moves every later frame into wal/quarantine/.
    Synced frames there say the damaged frame and the next ones were fdatasynced (acknowledged):
    they are recorded as lost, the last commit's frames as damaged, and the next bundle takes a
    sequence after all of them (it used to reuse the damaged frame's)."""
    root = copy_of(rotated, tmp_path / "store")
    active = root / "wal" / "quiver.wal"
    listed = frames(active)
    offset, size, seq = listed[4]
    data = bytearray(active.read_bytes())
    data[offset + size // 2] ^= 0xFF
    active.write_bytes(bytes(data))
    last = listed[-1][2]
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert "corrupt WAL entry" in report["error"]
        receipt = store.ingest(bundle(99))
    assert receipt.sequence == last + 1
    assert reopen_clean(root, cfg) == sorted(ALL - set(range(seq, last + 1)) | {99})
    assert verified_lost(root, capsys) == set(range(seq, last))
    assert recorded(root) == [(seq, last - 1, absent.LOST), (last, last, absent.DAMAGED)]  # nothing vouches for the last


def test_the_chunk_the_sidecar_names_cut_exactly_at_its_point_is_reported(rotated, tmp_path, capsys):
    """Nothing is left to read after the point, and the file is not shorter than it: the first
    frame recovery reads (in the next file) is then more than one past what the segments hold."""
    root = copy_of(rotated, tmp_path / "store")
    point, _ = sidecar.read(DEFAULT_FS, str(root / "wal"))
    assert point is not None
    chunk = root / "wal" / "quiver.wal.0"
    lost = {seq for offset, _, seq in frames(chunk) if offset >= point.offset}
    chunk.write_bytes(chunk.read_bytes()[: point.offset])
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert f"WAL sequence(s) {min(lost)}..{max(lost)} missing before the frame of sequence {max(lost) + 1} (the first frame recovery reads" in report["error"]
    assert reopen_clean(root, cfg) == sorted(ALL - lost)
    assert verified_lost(root, capsys) == lost


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_frames_removed_before_the_last_one_are_reported_and_nothing_else_is_lost(rotated, tmp_path_factory, capsys, data):
    """Delete rotated chunks, cut them at frame boundaries, splice frames out of any file but the
    chunk the sidecar names (whose offsets it records), never the active file's last frame: every
    bundle not removed comes back, exactly when a removed frame was not yet in a segment the open
    reports it, and `quiver verify` then names exactly those sequences as lost."""
    root = copy_of(rotated, tmp_path_factory.mktemp("edit") / "store")
    wal = root / "wal"
    point, _ = sidecar.read(DEFAULT_FS, str(wal))
    assert point is not None
    removed: set[int] = set()
    for name in data.draw(st.lists(st.sampled_from(["quiver.wal.0", "quiver.wal.1", "quiver.wal.2", "quiver.wal"]),
                                   min_size=1, max_size=3, unique=True), label="files"):
        path = wal / name
        found = frames(path)
        content = path.read_bytes()
        ops = ["splice"] if name == "quiver.wal" else ["delete", "cut"] if name == "quiver.wal.0" else ["delete", "cut", "splice"]
        op = data.draw(st.sampled_from(ops), label=f"{name} op")
        if op == "delete":
            path.unlink()
            removed |= {seq for _, _, seq in found}
            continue
        limit = len(found) - 1 if name == "quiver.wal" else len(found)  # the active file keeps its last frame
        i = data.draw(st.integers(0, limit - 1), label=f"{name} from")
        k = limit if op == "cut" else data.draw(st.integers(i + 1, limit), label=f"{name} to")
        end = found[k][0] if k < len(found) else len(content)
        path.write_bytes(content[: found[i][0]] + content[end:])
        removed |= {seq for _, _, seq in found[i:k]}
    lost = {s for s in removed if s >= 5}  # bundles 0-4 are in the segment
    cfg = rotated_config(data.draw(st.sampled_from(["point_in_time", "skip_corrupt"]), label="mode"))
    with QuiverStore.open(root, cfg) as store:
        reports = store.stats()["corruption_reports"]
        assert bool(reports) == bool(lost), reports
        assert store.stats()["quarantined_bytes"] == 0
    assert reopen_clean(root, cfg) == sorted(ALL - lost)
    assert verified_lost(root, capsys) == lost


def test_with_every_rotated_chunk_gone_the_active_file_is_read_whole(rotated, tmp_path, capsys):
    """The sidecar names quiver.wal.0; with no chunk left the active file took its generation by
    name, and recovery used to read it from the sidecar's offset: its first frames (bundles
    30-34) were skipped as if in a segment, with no word. The frame at that offset does not follow
    the segments, so the file is read from its header: 30-34 come back, 5-29 are reported."""
    root = copy_of(rotated, tmp_path / "store")
    for g in range(3):
        (root / "wal" / f"quiver.wal.{g}").unlink()
    cfg = rotated_config()
    with QuiverStore.open(root, cfg) as store:
        (report,) = store.stats()["corruption_reports"]
        assert "WAL sequence(s) 5..29 missing before the frame of sequence 30 (the first frame recovery reads" in report["error"]
        assert store.stats()["sidecar_fallbacks"] == 1 and store.stats()["replayed_entries"] == 10
    assert reopen_clean(root, cfg) == [*range(5), *range(30, 40)]
    assert verified_lost(root, capsys) == set(range(5, 30))
