"""The truncate sidecar stays in step with the WAL file it names.

The sidecar (wal/truncate.offset) says how far the WAL's entries are in segments; the writer
reclaims (punches out or rewrites away) everything before that point. Whenever recovery starts a
file afresh, the sidecar must go back to that file's header: a sidecar left past the new file's
end made the writer punch out new, acknowledged entries the first time the WAL reached its cap.
And since the sidecar is in step, a file shorter than its offset is one that was cut.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store import (
    CorruptionError,
    QuiverError,
    QuiverStore,
    RecordBundle,
    SegmentConfig,
    StoreConfig,
    WalConfig,
)
from quiver_store.fs import DEFAULT_FS
from quiver_store.layout import Layout
from quiver_store.wal import sidecar
from quiver_store.wal.format import HEADER_LEN
from quiver_store.wal.replay import WalCutError

from .test_quiver_cli import crash_after_a_segment

NO_TIMER = SegmentConfig(target_size=1 << 30, max_open_duration=3600.0)
QUIET = StoreConfig(segment=NO_TIMER)
OTHER_LAYOUT = Layout(name="other", slots={0: "rows"})


def bundle(i: int, rows: int = 5) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i] * rows, pa.int64())})})


def values(store: QuiverStore) -> list[int]:
    return [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()]


def point_of(root: Path) -> sidecar.TruncatePoint | None:
    point, problem = sidecar.read(DEFAULT_FS, str(root / "wal"))
    assert problem is None
    return point


def reclaimed_under_another_layout(root: Path) -> None:
    """Four 240 KB bundles stored under OTHER_LAYOUT and flushed: every WAL entry is in a segment
    and punched out, so the WAL is a header and zeros, and the sidecar points 1 MB past it."""
    with QuiverStore.open(root, QUIET, layout=OTHER_LAYOUT) as store:
        for i in range(4):
            store.ingest(bundle(i, 30_000))
        store.flush()
        if not store.stats()["wal_hole_punching"]:
            pytest.skip("no hole punching here: the old log is rewritten, not zeroed, and open refuses the other layout")


def test_a_reclaimed_wal_reopened_under_another_layout_keeps_every_later_acknowledged_bundle(tmp_path):
    """Was: the open recreated the punched-out log under the new layout but left the sidecar at
    the old log's end (1 MB on); at the WAL cap the writer punched the new file up to there, so a
    crash then lost all 40 acknowledged bundles (recovery found the zeroed chunk and quarantined it)."""
    reclaimed_under_another_layout(tmp_path)
    old_end = point_of(tmp_path).offset
    assert old_end > 900_000
    capped = StoreConfig(segment=NO_TIMER, wal=WalConfig(max_size=400_000, rotation_size=400_000))
    store = QuiverStore.open(tmp_path, capped)  # the default layout: a fresh log
    assert point_of(tmp_path) == sidecar.TruncatePoint(HEADER_LEN, 0)
    for i in range(100, 140):  # 40 x ~16 KB: past the 400 KB cap, all before the old end
        store.ingest(bundle(i, 2_000))
    store._abandon()  # a crash: the 40 bundles are acknowledged, some only in the WAL
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.stats()["corruption_reports"] == []
        store.flush()
        assert values(store) == [0, 1, 2, 3, *range(100, 140)]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> tuple[Path, int]:
    """Two bundles in segment 0, a third only in the WAL, then a crash; and the sidecar's offset."""
    root = tmp_path_factory.mktemp("crashed")
    offset = crash_after_a_segment(root)
    assert offset > HEADER_LEN
    return root, offset


def cut_copy(crashed: tuple[Path, int], target: Path, keep: int | None) -> Path:
    root, _ = crashed
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(root, target)
    wal = target / "wal" / "quiver.wal"
    if keep is None:
        wal.unlink()
    else:
        wal.write_bytes(wal.read_bytes()[:keep])
    return target


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_wal_cut_below_the_sidecar_is_reported_once_and_new_bundles_survive(crashed, tmp_path, data):
    """Was: recreated ('cut while being created') or rescanned in silence, the WAL-only bundle gone
    without a word, and the sidecar left past the new file's end."""
    _, offset = crashed
    keep = data.draw(st.one_of(st.none(), st.integers(0, offset - 1)), label="bytes kept (None: deleted)")
    root = cut_copy(crashed, tmp_path / "store", keep)
    with pytest.raises(WalCutError, match="refuses to open") as refused:
        QuiverStore.open(root, StoreConfig(segment=NO_TIMER, wal=WalConfig(recovery="strict")))
    assert isinstance(refused.value, CorruptionError)
    store = QuiverStore.open(root, QUIET)
    reports = store.stats()["corruption_reports"]
    gone = "deleted" if keep is None else "cut"
    assert [(r["source"], r["path"]) for r in reports] == [("WAL", str(root / "wal" / "quiver.wal"))]
    assert f"but the sidecar records that its first {offset} bytes were written" in reports[0]["error"]
    assert f"it was {gone} since, and any acknowledged entry after that point is lost" in reports[0]["error"]
    assert values(store) == [0, 1]
    assert point_of(root) == sidecar.TruncatePoint(HEADER_LEN, 0)  # in step with the log that goes on
    store.ingest(bundle(3))
    store._abandon()
    with QuiverStore.open(root, QUIET) as store:  # nothing to report the second time
        assert store.stats()["corruption_reports"] == [] and store.stats()["sidecar_fallbacks"] == 0
        store.flush()
        assert values(store) == [0, 1, 3]


@pytest.mark.parametrize("durability", ["os", "none"])
def test_without_fsync_a_short_wal_is_what_a_power_loss_leaves(crashed, tmp_path, durability):
    """Under durability 'os' or 'none' the WAL's bytes were never synced, so a power loss may leave
    the file shorter than the (synced) sidecar's offset: not corruption; the sidecar follows."""
    root = cut_copy(crashed, tmp_path / "store", 100)
    with QuiverStore.open(root, StoreConfig(segment=NO_TIMER, wal=WalConfig(durability=durability))) as store:
        assert store.stats()["corruption_reports"] == []
        assert store.stats()["sidecar_fallbacks"] == 1
        assert values(store) == [0, 1]
    assert point_of(root) == sidecar.TruncatePoint(HEADER_LEN, 0)


def test_power_loss_while_recovery_puts_the_sidecar_back_loses_nothing(tmp_path):
    """The recreate of the reclaimed other-layout log and the sidecar's return to its header, under
    simulated power loss at every operation of open + three ingests + close: each reboot opens
    without a corruption report, holds every acknowledged bundle, and leaves the sidecar within the
    file it names (the sidecar is written first, so no crash leaves a fresh file behind a stale one)."""
    from .powerloss import PowerLossFS

    template = tmp_path / "template"
    reclaimed_under_another_layout(template)

    def workload(root: Path, crash_at: int | None) -> tuple[list[int], PowerLossFS]:
        shutil.copytree(template, root)
        fs = PowerLossFS(str(root), crash_at=crash_at)
        acknowledged: list[int] = []
        try:
            store = QuiverStore.open(root, QUIET, fs=fs)
        except (OSError, QuiverError):  # the power went out while opening
            return acknowledged, fs
        try:
            for i in range(100, 103):
                store.ingest(bundle(i))
                acknowledged.append(i)
            store.close()
        except (OSError, QuiverError):  # the disk is gone: every later operation fails
            store._abandon()
        return acknowledged, fs

    acknowledged, fs = workload(tmp_path / "count", None)
    assert acknowledged == [100, 101, 102]
    crashes = 0
    for crash_at in range(fs.ops + 1):
        acknowledged, fs = workload(tmp_path / f"live-{crash_at}", crash_at)
        image = tmp_path / f"image-{crash_at}"
        fates = fs.durable_image(str(image), random.Random(crash_at))
        crashes += fs.crashed
        context = f"crash at op {crash_at}, acknowledged {acknowledged}, files: {fates}"
        with QuiverStore.open(image, QUIET) as store:
            assert store.stats()["corruption_reports"] == [], context
            store.flush()
            got = values(store)
        assert got[:4] == [0, 1, 2, 3] and set(acknowledged) <= set(got[4:]) <= {100, 101, 102}, f"{got}: {context}"
        point = point_of(image)
        named = image / "wal" / ("quiver.wal" if not (image / "wal" / f"quiver.wal.{point.generation}").exists() else f"quiver.wal.{point.generation}")
        assert point.offset <= named.stat().st_size, context
        shutil.rmtree(tmp_path / f"live-{crash_at}")
        shutil.rmtree(image)
    assert crashes >= fs.ops * 0.9


def test_the_writer_refuses_a_truncate_point_past_the_end_of_its_log(tmp_path):
    """The last line of defence: a point past the log's end would make the writer punch out
    entries it never saw go into segments."""
    from quiver_store.wal.writer import WalWriter

    with pytest.raises(QuiverError, match=r"quiver.wal: the truncate point .*offset=5000.* lies past the end of the log \(0 bytes\)"):
        WalWriter(
            DEFAULT_FS, str(tmp_path), WalConfig(), bytes(16), active_generation=0, active_size=0, chunks={},
            truncate_point=sidecar.TruncatePoint(5_000, 0), punch_supported=True, backpressure_timeout=1.0,
        )
    assert list(tmp_path.iterdir()) == []  # refused before it created anything


def test_a_stale_sidecar_left_by_an_older_build_is_reported_once_and_every_entry_replays(tmp_path):
    """Before 191ac2d, reopening under another layout left the sidecar past the fresh WAL's end
    (docs/user-guide.md). Such a store: one report, every entry of the fresh log replayed (it is
    read from its header), the sidecar reset, the next open clean."""
    store = QuiverStore.open(tmp_path, QUIET)
    for i in range(3):
        store.ingest(bundle(i))
    store._abandon()
    wal_size = (tmp_path / "wal" / "quiver.wal").stat().st_size
    sidecar.write(DEFAULT_FS, str(tmp_path / "wal"), sidecar.TruncatePoint(wal_size + 1_000_000, 0))  # the old log's end
    with pytest.raises(WalCutError):
        QuiverStore.open(tmp_path, StoreConfig(segment=NO_TIMER, wal=WalConfig(recovery="strict")))
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert len(store.stats()["corruption_reports"]) == 1
        store.flush()
        assert values(store) == [0, 1, 2]
    with QuiverStore.open(tmp_path, QUIET) as store:
        assert store.stats()["corruption_reports"] == [] and values(store) == [0, 1, 2]
