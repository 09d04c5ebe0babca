"""Simulated power loss at every operation of a bounded workload (tests/powerloss.py): the machine
reboots with only what was fsynced (plus torn and partly landed unsynced writes), and the store
must open and return every bundle whose `ingest` had returned, unchanged, in order, once.

The workload ingests small bundles with a tiny segment target and WAL rotation size, so it crosses
every durable step of the store: WAL appends and group commit, rotation, segment finalize (temp
file, fsync, rename, directory fsync), the sequence floor, sidecar updates and WAL truncation.
Every third bundle is larger; under DIRECT it skips the WAL for a segment file of its own, so the
sweeps run once with every bundle logged and once with logged and direct bundles interleaved. A
third workload adds a column over one large shared dictionary (a stream-mode encoder's shape), so
its WAL entries hold compacted dictionaries (quiver_store/compaction.py).
"""

from __future__ import annotations

import random
import shutil
import threading

import numpy as np
import pyarrow as pa
import pytest

from quiver_store import (
    DEFAULT_LAYOUT,
    QuiverError,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    WalConfig,
    absent,
    with_progress,
)
from quiver_store.wal.bundle_codec import BundleEncoder

from .powerloss import PowerLossFS

CONFIG = StoreConfig(
    segment=SegmentConfig(target_size=4_000, max_open_duration=3600.0),
    wal=WalConfig(rotation_size=8_192, max_size=1 << 20),
)
DIRECT = StoreConfig(segment=CONFIG.segment, wal=WalConfig(rotation_size=8_192, max_size=1 << 20, direct_bundle_size=3_000))
CONFIGS = pytest.mark.parametrize("config", [CONFIG, DIRECT], ids=["logged", "direct"])
BUNDLES = 10


def bundle(i: int) -> RecordBundle:
    rows = 20 + 7 * i + (200 if i % 3 == 2 else 0)  # bundles 2, 5, 8: over 4,000 Arrow bytes
    return RecordBundle(
        {
            30: pa.record_batch({"id": pa.array(np.arange(rows, dtype=np.uint16)), "v": pa.array(np.full(rows, i, np.int64))}),
            31: pa.record_batch({"parent_id": pa.array(np.arange(rows, dtype=np.uint16)), "key": [f"k{i % 3}"] * rows}),
        },
        ingestion_time_ns=1_000 + i,
    )


WORDS = pa.array([f"stream-dictionary-value-{i:05d}" for i in range(3_000)])  # about 100 KB


def dictionary_bundle(i: int) -> RecordBundle:
    """`bundle(i)` with a column over WORDS of which it references five entries: logged compacted."""
    plain = bundle(i)
    rows = plain.slots[31].num_rows
    words = pa.DictionaryArray.from_arrays(pa.array((np.arange(rows) % 5 + 7 * i).astype(np.uint16)), WORDS)
    slots = {30: plain.slots[30], 31: plain.slots[31].append_column("word", words)}
    return RecordBundle(slots, ingestion_time_ns=plain.ingestion_time_ns)


def decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with dictionary columns decoded (segments may store columns dictionary-encoded)."""
    plain = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns]
    return pa.record_batch(plain, names=batch.schema.names)


def run_workload(path: str, fs: PowerLossFS, config: StoreConfig = CONFIG, make=bundle) -> list[int]:
    """Ingest BUNDLES bundles and close; return the indices whose ingest returned (acknowledged)."""
    acknowledged: list[int] = []
    try:
        store = QuiverStore.open(path, config, fs=fs)
    except (OSError, QuiverError):  # the power went out while opening
        return acknowledged
    try:
        for i in range(BUNDLES):
            store.ingest(make(i))
            acknowledged.append(i)
        store.close()
    except (OSError, QuiverError):  # the disk is gone: every later operation fails
        store._abandon()
    return acknowledged


def recovered(path: str, config: StoreConfig = CONFIG) -> list[RecordBundle]:
    """Open the rebooted store (replaying its WAL), close it, and read every stored bundle. A power
    loss never leaves frames missing between intact ones (unsynced writes land in order or torn,
    and a direct bundle's marker is synced with the first frame after it): no sequence gap, and no
    segment records WAL sequences as lost (what `quiver verify` would report)."""
    with QuiverStore.open(path, config) as store:
        gaps = [r for r in store.stats()["corruption_reports"] if "missing before the frame" in r["error"]]
        assert gaps == [], f"a power loss reported as lost frames: {gaps}"
    with QuiverStore.open(path, config) as store:
        assert_nothing_recorded_lost(store)
        return [b for _, _, b in store.bundles()]


def assert_nothing_recorded_lost(store: QuiverStore) -> None:
    lost = [(s.seq, r) for s in store.segments() for r in absent.decode(s.metadata.get(absent.META_KEY, "")) if r[2] == absent.LOST]
    assert lost == [], f"a power loss recorded as lost WAL sequences: {lost}"


def check_reboot(
    root, crash_at: int, seed: int, torn: bool = True, config: StoreConfig = CONFIG, make=bundle
) -> tuple[int, bool]:
    """Crash at operation `crash_at`, reboot, verify; return (operations run, whether it crashed)."""
    live, image = root / f"live-{crash_at}-{seed}", root / f"image-{crash_at}-{seed}"
    fs = PowerLossFS(str(live), crash_at=crash_at)
    acknowledged = run_workload(str(live), fs, config, make)
    fates = fs.durable_image(str(image), random.Random(seed), torn=torn)
    try:
        got = recovered(str(image), config)
    except AssertionError as exc:  # it opened, and reported a sequence gap
        raise AssertionError(f"crash at op {crash_at} (seed {seed}): {exc}; files: {fates}") from exc
    except Exception as exc:  # the message below says what the reboot found
        raise AssertionError(f"crash at op {crash_at} (seed {seed}): the store did not open: {exc!r}; files: {fates}") from exc
    values = [b.slots[30]["v"][0].as_py() for b in got]
    context = f"crash at op {crash_at} (seed {seed}), acknowledged {acknowledged}, recovered {values}, files: {fates}"
    assert values == sorted(set(values)), f"duplicates or reordering: {context}"
    assert set(acknowledged) <= set(values), f"acknowledged bundles lost: {context}"
    assert all(v < len(acknowledged) + 1 for v in values), f"a bundle that was never ingested came back: {context}"
    for b in got:
        want = make(b.slots[30]["v"][0].as_py())
        for slot in (30, 31):
            same = decoded(b.slots[slot]).equals(decoded(want.slots[slot]))
            assert same, f"bundle {b.slots[30]['v'][0]} slot {slot} changed: {context}"
    shutil.rmtree(live, ignore_errors=True)
    shutil.rmtree(image, ignore_errors=True)
    return fs.ops, fs.crashed


def workload_ops(root, config: StoreConfig = CONFIG, make=bundle) -> int:
    fs = PowerLossFS(str(root / "count"))
    assert run_workload(str(root / "count"), fs, config, make) == list(range(BUNDLES))
    return fs.ops


@CONFIGS
def test_the_workload_crosses_every_durable_step(tmp_path, config):
    """The workload really rotates the WAL, finalizes segments and truncates (else the sweep below
    proves little), and under DIRECT the large bundles bypass the WAL between logged ones."""
    fs = PowerLossFS(str(tmp_path / "s"))
    store = QuiverStore.open(str(tmp_path / "s"), config, fs=fs)
    receipts = [store.ingest(bundle(i)) for i in range(BUNDLES)]
    store.close()
    stats = store.stats()
    direct = [i for i, r in enumerate(receipts) if r.segment_sequence is not None]
    assert direct == ([2, 5, 8] if config is DIRECT else []), stats
    assert stats["rotations"] >= 1 and stats["segments_written"] >= 3 + len(direct), stats
    assert fs.ops > 100


@CONFIGS
def test_power_loss_at_every_operation_loses_no_acknowledged_bundle(tmp_path, config):
    total = workload_ops(tmp_path, config)
    crashed = 0
    for crash_at in range(total + 1):
        _, did_crash = check_reboot(tmp_path, crash_at, seed=crash_at, config=config)
        crashed += did_crash
    assert crashed >= total * 0.9  # background timing moves a few operations between runs


def progress_bundle(i: int) -> RecordBundle:
    """`bundle(i)` carrying its writer's progress: i + 1 bundles written."""
    return with_progress(bundle(i), "writer", i + 1)


@CONFIGS
def test_power_loss_keeps_each_producer_offset_equal_to_the_data_it_covers(tmp_path, config):
    """Exactly-once writers resume from committed_offset: at every crash point the rebooted store's
    offset must be exactly the number of bundles it holds (the record is in the same WAL entry, or
    the same direct segment, as its data), never behind an acknowledged bundle."""
    total = workload_ops(tmp_path, config, progress_bundle)
    for crash_at in range(total + 1):
        acknowledged, offset, values, context = reboot_with_offset(
            tmp_path, crash_at, config, lambda path, fs: run_workload(path, fs, config, progress_bundle)
        )
        assert values == list(range(offset)), context
        assert offset >= len(acknowledged), context


def reboot_with_offset(root, crash_at: int, config: StoreConfig, workload) -> tuple[list[int], int, list[int], str]:  # type: ignore[no-untyped-def]
    """Run `workload(path, fs)` until the power fails at `crash_at`, reboot; return the acknowledged
    bundles, the rebooted store's offset for "writer", the bundles it holds and a failure context."""
    live, image = root / f"live-{crash_at}", root / f"image-{crash_at}"
    fs = PowerLossFS(str(live), crash_at=crash_at)
    acknowledged = workload(str(live), fs)
    fates = fs.durable_image(str(image), random.Random(crash_at), torn=True)
    with QuiverStore.open(str(image), config) as store:
        offset = store.committed_offset("writer")
        store.flush()
        values = [b.slots[30]["v"][0].as_py() for _, _, b in store.bundles()]
    shutil.rmtree(live, ignore_errors=True)
    shutil.rmtree(image, ignore_errors=True)
    return acknowledged, offset, values, f"crash at op {crash_at}, acknowledged {acknowledged}, held {values}, offset {offset}, files: {fates}"


EXPIRING = StoreConfig(
    segment=CONFIG.segment, wal=CONFIG.wal, retention=RetentionConfig(max_age=0.001, maintenance_interval=3600.0)
)


def run_expiring_workload(path: str, fs: PowerLossFS) -> list[int]:
    """Ingest progress bundles; after the 4th and the 10th, finalize and let max_age delete every
    segment (each bundle's ingestion time is in 1970). Return the acknowledged indices."""
    acknowledged: list[int] = []
    try:
        store = QuiverStore.open(path, EXPIRING, fs=fs)
    except (OSError, QuiverError):
        return acknowledged
    try:
        for i in range(BUNDLES):
            store.ingest(progress_bundle(i))
            acknowledged.append(i)
            if i in (3, BUNDLES - 1):
                store.flush()
                store.maintain()
        store.close()
    except (OSError, QuiverError):
        store._abandon()
    return acknowledged


def test_power_loss_while_retention_deletes_keeps_every_offset(tmp_path):
    """Deleting a segment first merges its offsets into segments/progress.ledger: at every crash
    point the rebooted store's offset covers every acknowledged bundle, though their segments are
    gone, and the bundles it still holds are the newest ones below that offset."""
    fs = PowerLossFS(str(tmp_path / "count"))
    assert run_expiring_workload(str(tmp_path / "count"), fs) == list(range(BUNDLES))
    with QuiverStore.open(str(tmp_path / "count"), EXPIRING) as store:
        assert store.segments() == [] and store.committed_offset("writer") == BUNDLES  # the workload deletes
    for crash_at in range(fs.ops + 1):
        acknowledged, offset, values, context = reboot_with_offset(tmp_path, crash_at, EXPIRING, run_expiring_workload)
        assert len(acknowledged) <= offset <= BUNDLES, context
        assert values == list(range(offset - len(values), offset)), context


def test_power_loss_with_compacted_dictionaries_loses_no_acknowledged_bundle(tmp_path):
    """The same sweep over bundles whose WAL entries hold compacted dictionaries, while the open
    segment keeps (and finalizes) the whole ones: every acknowledged bundle comes back with its
    values, from a segment or from replayed compacted entries."""
    logged = BundleEncoder(DEFAULT_LAYOUT).check(dictionary_bundle(4))[0]
    assert len(logged[1][2].column("word").dictionary) == 5  # the entry holds 5 of the 3,000 values
    total = workload_ops(tmp_path, make=dictionary_bundle)
    crashed = 0
    for crash_at in range(total + 1):
        _, did_crash = check_reboot(tmp_path, crash_at, seed=crash_at, make=dictionary_bundle)
        crashed += did_crash
    assert crashed >= total * 0.9


def run_subscribed_workload(path: str, fs: PowerLossFS, config: StoreConfig = CONFIG) -> tuple[list[int], list[int], list[int]]:
    """Ingest bundles while a subscriber takes each delivered bundle and acks it; return the
    acknowledged ingests, the bundles whose ack() returned True (durable in the ack log), and the
    bundle whose ack() was cut short by the crash, if any (its outcome is unknown, as a commit's
    whose fsync failed: it may or may not come back)."""
    ingested: list[int] = []
    acked: list[int] = []
    attempted: list[int] = []
    try:
        store = QuiverStore.open(path, config, fs=fs)
    except (OSError, QuiverError):
        return ingested, acked, attempted
    try:
        subscription = store.subscribe("exporter")
        for i in range(BUNDLES):
            store.ingest(bundle(i))
            ingested.append(i)
            while (delivery := subscription.next(timeout=0.0 if i < BUNDLES - 1 else 0.05)) is not None:
                value = delivery.bundle.slots[30]["v"][0].as_py()
                attempted[:] = [value]
                if delivery.ack():
                    acked.append(value)
                attempted.clear()
        store.close()
    except (OSError, QuiverError):
        store._abandon()
    return ingested, acked, attempted


def reopened(path, config: StoreConfig = CONFIG) -> tuple[list[int], list[int]]:
    """Every stored bundle after a reopen on a healthy disk, and what subscriber "exporter" is delivered next (each acked)."""
    with QuiverStore.open(path, config) as store:
        subscription = store.subscribe("exporter")
        store.flush()
        assert_nothing_recorded_lost(store)
        stored = [b.slots[30]["v"][0].as_py() for _, _, b in store.bundles()]
        delivered = []
        while (delivery := subscription.next(timeout=0.02)) is not None:
            delivered.append(delivery.bundle.slots[30]["v"][0].as_py())
            delivery.ack()
    return stored, delivered


@CONFIGS
def test_power_loss_redelivers_exactly_the_unacknowledged_bundles(tmp_path, config):
    """After every crash point, with random fates and with every unsynced file reordered (odd pages
    landed, even ones not): an acked bundle (ack() returned) is never delivered again, and every
    acknowledged ingest that was not acked is delivered (at-least-once, no gaps)."""
    count_fs = PowerLossFS(str(tmp_path / "count"))
    ingested, acked, _ = run_subscribed_workload(str(tmp_path / "count"), count_fs, config)
    assert ingested == list(range(BUNDLES)) and len(acked) >= 3, acked
    for crash_at in range(count_fs.ops + 1):
        live = tmp_path / f"live-{crash_at}"
        fs = PowerLossFS(str(live), crash_at=crash_at)
        ingested, acked, attempted = run_subscribed_workload(str(live), fs, config)
        for reordered in (False, True):
            image = tmp_path / f"image-{crash_at}-{reordered}"
            fates = fs.durable_image(str(image), random.Random(crash_at), reordered=reordered)
            context = f"crash at op {crash_at}: ingested {ingested}, acked {acked}, ack cut short {attempted}, files {fates}"
            _, redelivered = reopened(image, config)
            assert not set(acked) & set(redelivered), f"acked bundles delivered again: {context}, redelivered {redelivered}"
            missing = set(ingested) - set(acked) - set(attempted) - set(redelivered)
            assert not missing, f"unacked bundles {sorted(missing)} never delivered: {context}, redelivered {redelivered}"
            shutil.rmtree(image, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


GROUPED = StoreConfig(segment=CONFIG.segment, wal=WalConfig(rotation_size=64 << 10, max_size=1 << 20, flush_interval=0.003))
PRODUCERS, EACH = 8, 4


def small_bundle(i: int) -> RecordBundle:
    """One slot, a few rows: a frame of about 600 bytes, so several share a 4 KiB page."""
    return RecordBundle({30: pa.record_batch({"id": pa.array(np.arange(3, dtype=np.uint16)), "v": pa.array(np.full(3, i, np.int64))})})


def run_grouped_workload(path: str, fs: PowerLossFS) -> set[int]:
    """PRODUCERS threads ingest EACH bundles each; the leader of each group commit waits 3 ms
    (`wal.flush_interval`), so a commit holds several frames, across 4 KiB pages. Return the
    bundles whose ingest returned."""
    acknowledged: set[int] = set()
    try:
        store = QuiverStore.open(path, GROUPED, fs=fs)
    except (OSError, QuiverError):
        return acknowledged

    def produce(first: int) -> None:
        for i in range(first, first + EACH):
            try:
                store.ingest(small_bundle(i))
            except (OSError, QuiverError):
                return
            acknowledged.add(i)

    threads = [threading.Thread(target=produce, args=(p * EACH,)) for p in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        store.close()
    except (OSError, QuiverError):
        store._abandon()
    return acknowledged


def check_grouped_reboot(root, crash_at: int, ops: int) -> int:
    """Crash the grouped workload at `crash_at`, reboot with every unsynced file reordered and
    then with a random fate; check that no acknowledged bundle is lost and nothing is recorded
    lost; return how many ranges the reboots recorded as damaged."""
    fs = PowerLossFS(str(root / "live"), crash_at=crash_at)
    acknowledged = run_grouped_workload(str(root / "live"), fs)
    damaged = 0
    for reordered in (True, False):
        image = root / f"image-{reordered}"
        fates = fs.durable_image(str(image), random.Random(crash_at), reordered=reordered)
        context = f"crash at op {crash_at} of {ops}, reordered {reordered}, acknowledged {sorted(acknowledged)}, files {fates}"
        try:
            got = recovered(str(image), GROUPED)
        except AssertionError as exc:
            raise AssertionError(f"{context}: {exc}") from exc
        values = {b.slots[30]["v"][0].as_py() for b in got}
        assert acknowledged <= values, f"acknowledged bundles lost: {sorted(acknowledged - values)}; {context}"
        with QuiverStore.open(str(image), GROUPED) as store:
            damaged += sum(r[2] == absent.DAMAGED for s in store.segments() for r in absent.decode(s.metadata.get(absent.META_KEY, "")))
    shutil.rmtree(root, ignore_errors=True)
    return damaged


def test_power_loss_inside_commits_of_several_frames_records_no_loss(tmp_path):
    """Where a power loss writes back the pages of a commit of several frames out of order, zeros
    or a torn frame come before intact frames of the same commit, none of them acknowledged. The
    synced frame that opens the commit vouches only for earlier commits, so recovery records
    them as damaged, never as lost, and loses no acknowledged bundle. A crash at every operation
    (their number varies with the threads' interleaving); every unsynced file is reordered (odd
    pages landed), and once more with a random fate."""
    damaged = 0
    for sweep in range(3):  # which crash points leave such damage depends on the interleaving: sweep again if none did
        count = PowerLossFS(str(tmp_path / f"count-{sweep}"))
        assert run_grouped_workload(str(tmp_path / f"count-{sweep}"), count) == set(range(PRODUCERS * EACH))
        for crash_at in range(3, count.ops):
            damaged += check_grouped_reboot(tmp_path / f"{sweep}-{crash_at}", crash_at, count.ops)
        if damaged:
            break
    assert damaged > 0, "no crash point left damage before intact frames: the test would prove nothing"


@pytest.mark.torture
def test_power_loss_inside_commits_of_several_frames_torture(tmp_path):
    """The same sweep over 30 more interleavings (make torture, about 2 minutes)."""
    for sweep in range(30):
        count = PowerLossFS(str(tmp_path / f"count-{sweep}"))
        assert run_grouped_workload(str(tmp_path / f"count-{sweep}"), count) == set(range(PRODUCERS * EACH))
        for crash_at in range(3, count.ops):
            check_grouped_reboot(tmp_path / f"{sweep}-{crash_at}", crash_at, count.ops)


@pytest.mark.torture
@CONFIGS
@pytest.mark.parametrize("seed", range(20))
def test_power_loss_torture(tmp_path, seed, config):
    """Every crash point again with other random fates for the unsynced writes (make torture)."""
    total = workload_ops(tmp_path, config)
    for crash_at in range(total + 1):
        check_reboot(tmp_path, crash_at, seed=seed * 100_000 + crash_at, config=config)


@pytest.mark.torture
@pytest.mark.parametrize("seed", range(5))
def test_power_loss_torture_with_compacted_dictionaries(tmp_path, seed):
    """Five more random fates per crash point for the dictionary workload (about 40 s each)."""
    total = workload_ops(tmp_path, make=dictionary_bundle)
    for crash_at in range(total + 1):
        check_reboot(tmp_path, crash_at, seed=seed * 100_000 + crash_at, make=dictionary_bundle)


@pytest.mark.parametrize("header", [b"QUIV\x8e\x01garbage!", b"QUIVER\x00W" + bytes(7) + b"\xff" * 13, bytes(30)])
@pytest.mark.parametrize("zero_tail", [0, 4096])
def test_new_active_wal_whose_header_the_power_cut_short_is_recreated(tmp_path, header, zero_tail):
    """Rotation renamed the active file and created a new one, whose header (and pre-extended
    zeros) never became durable: nothing acknowledged can be in it, so it is recreated and the
    rotated chunk's bundles replay. The same bytes followed by anything but zeros stay corruption."""
    from quiver_store.wal.rotation import chunk_name

    store = QuiverStore.open(tmp_path, CONFIG)
    for i in range(3):
        store.ingest(bundle(i))
    store._abandon()
    wal = tmp_path / "wal"
    (wal / "quiver.wal").rename(wal / chunk_name(0))
    (wal / "quiver.wal").write_bytes(header + bytes(zero_tail))
    assert [b.slots[30]["v"][0].as_py() for b in recovered(str(tmp_path))] == [0, 1, 2]
    if len(header) >= 30 and header != bytes(30):
        (wal / "quiver.wal").write_bytes(header + b"\x01" + bytes(zero_tail))
        with pytest.raises(QuiverError):
            QuiverStore.open(tmp_path, CONFIG)
