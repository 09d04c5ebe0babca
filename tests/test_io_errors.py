"""EIO and ENOSPC injected at every I/O operation of a bounded workload (tests/powerloss.py
IoErrorFS), once and persistently: the store raises a clear error (never hangs), loses no
acknowledged bundle, writes nothing corrupt, and a reopen on a healthy disk returns every bundle
whose `ingest` returned, in order, once, with subscriber deliveries resuming without gaps.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import shutil

import pytest

from quiver_store import QuiverError, QuiverStore, SegmentConfig, StoreConfig, StoreFullError
from quiver_store.fs import FileSystem

from .powerloss import IoErrorFS, PowerLossFS
from .test_power_loss import BUNDLES, CONFIG, DIRECT, bundle, reopened, run_subscribed_workload


def run(path, fs: IoErrorFS, config: StoreConfig = CONFIG) -> tuple[list[int], list[int], list[int], list[str]]:
    """The workload of test_power_loss with a subscriber that acks what it gets; returns the
    acknowledged ingests, the acked bundles, a bundle whose ack() failed (unknown outcome) and
    the errors the caller saw."""
    ingested: list[int] = []
    acked: list[int] = []
    unsure: list[int] = []
    errors: list[str] = []
    try:
        store = QuiverStore.open(path, config, fs=fs)
    except QuiverError as exc:  # a bare OSError escaping fails the test
        return ingested, acked, unsure, [repr(exc)]
    try:
        subscription = store.subscribe("exporter")
    except QuiverError as exc:  # a bare OSError escaping fails the test
        store._abandon()
        return ingested, acked, unsure, [repr(exc)]
    for i in range(BUNDLES):
        try:
            store.ingest(bundle(i))
            ingested.append(i)
        except QuiverError as exc:  # a bare OSError escaping fails the test
            errors.append(repr(exc))
        try:
            while (delivery := subscription.next(timeout=0.0)) is not None:
                value = delivery.bundle.slots[30]["v"][0].as_py()  # read before the ack: then it may be deleted
                unsure.append(value)  # until ack() returns, the outcome is unknown
                if delivery.ack():
                    acked.append(value)
                unsure.pop()
        except QuiverError as exc:  # a bare OSError escaping fails the test
            errors.append(repr(exc))
    try:
        store.close()
    except QuiverError as exc:  # a bare OSError escaping fails the test
        errors.append(repr(exc))
        store._abandon()
    return ingested, acked, unsure, errors


@pytest.mark.parametrize(
    ("code", "config"), [(errno.EIO, CONFIG), (errno.ENOSPC, CONFIG), (errno.EIO, DIRECT)], ids=["EIO", "ENOSPC", "EIO-direct"]
)
@pytest.mark.parametrize("persistent", [False, True], ids=["once", "persistent"])
def test_an_error_at_every_operation_loses_nothing_acknowledged(tmp_path, code, config, persistent, caplog):
    """Under DIRECT a large bundle whose segment write failed was never acknowledged (its ingest
    raised): it is not in `ingested`, and may or may not be stored."""
    caplog.set_level(logging.WARNING)
    clean = IoErrorFS(None, code)
    assert run(tmp_path / "count", clean, config)[0] == list(range(BUNDLES))
    injected_errors = 0
    for fail_at in range(clean.ops + 1):
        path = tmp_path / f"s{fail_at}"
        fs = IoErrorFS(fail_at, code, persistent)
        ingested, acked, unsure, errors = run(path, fs, config)
        injected_errors += fs.failed > 0
        context = f"{errno.errorcode[code]} at op {fail_at} ({'persistent' if persistent else 'once'}): ingested {ingested}, acked {acked}, ack failed {unsure}, errors {errors}"
        if fs.failed:  # a clear error: raised to the caller, or logged where the store worked around it
            logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "injected" in r.getMessage()]
            assert errors or logged, f"an injected failure was swallowed: {context}"
        caplog.clear()
        try:
            stored, delivered = reopened(path, config)
        except Exception as exc:  # the healthy reopen must work: nothing corrupt was written
            raise AssertionError(f"reopen failed: {exc!r}; {context}") from exc
        assert stored == sorted(set(stored)), f"duplicates or reordering: {stored}; {context}"
        # acked segments may be deleted (retention): every other acknowledged bundle must be stored
        lost = set(ingested) - set(stored) - set(acked) - set(unsure)
        assert not lost, f"acknowledged bundles lost: {sorted(lost)}, stored {stored}; {context}"
        assert not set(acked) & set(delivered), f"acked bundles delivered again: {delivered}; {context}"
        missing = set(ingested) - set(acked) - set(unsure) - set(delivered)
        assert not missing, f"bundles never delivered: {sorted(missing)}, delivered {delivered}; {context}"
    assert injected_errors >= clean.ops * 0.9


class SidecarFails(FileSystem):
    """Every WAL truncation fails (its sidecar cannot be written); everything else works."""

    def open(self, path, flags, mode=0o644):
        if path.endswith("truncate.offset.tmp"):
            raise OSError(errno.EIO, "injected: sidecar write failed")
        return super().open(path, flags, mode)


def test_deleted_segments_are_not_replayed_when_wal_truncation_failed(tmp_path, caplog):
    """Retention deletes fully acked segments; the WAL still holds their entries because truncation
    failed. A reopen must not replay them as new bundles (the sequence floor records them first)."""
    caplog.set_level(logging.CRITICAL)
    config = StoreConfig(segment=SegmentConfig(target_size=1, max_open_duration=3600.0))
    with QuiverStore.open(tmp_path, config, fs=SidecarFails()) as store:
        subscription = store.subscribe("exporter")
        for i in range(4):
            store.ingest(bundle(i))
        store.flush()
        while (delivery := subscription.next(timeout=0.05)) is not None:
            assert delivery.ack()
        assert store.segments() == [] and store.stats()["truncate_errors"] >= 1
    with QuiverStore.open(tmp_path, config) as store:
        assert store.stats()["replayed_entries"] == 0
        subscription = store.subscribe("exporter")
        store.flush()
        assert subscription.next(timeout=0.05) is None
        assert list(store.bundles()) == []


def recovery_ops(image) -> int:
    """How many operations a healthy recovery of `image` performs (on a scratch copy)."""
    scratch = str(image) + "-count"
    shutil.copytree(image, scratch)
    fs = IoErrorFS(None, errno.EIO)
    QuiverStore.open(scratch, CONFIG, fs=fs).close()
    shutil.rmtree(scratch)
    return fs.ops


def check_compound(tmp_path, crash_at: int, code: int) -> None:
    """Power loss at `crash_at`, then an error at every operation of the recovery that follows,
    then a healthy reopen: still every acknowledged bundle, and acked ones not delivered again."""
    live = tmp_path / f"live-{crash_at}"
    fs = PowerLossFS(str(live), crash_at=crash_at)
    ingested, acked, attempted = run_subscribed_workload(str(live), fs)
    image = tmp_path / f"image-{crash_at}"
    fs.durable_image(str(image), random.Random(crash_at))
    for fail_at in range(recovery_ops(image) + 1):
        attempt = tmp_path / f"attempt-{crash_at}-{fail_at}"
        shutil.copytree(image, attempt)
        with contextlib.suppress(OSError, QuiverError):  # a failed recovery must leave the store recoverable
            QuiverStore.open(attempt, CONFIG, fs=IoErrorFS(fail_at, code)).close()
        context = f"crash at op {crash_at}, {errno.errorcode[code]} at recovery op {fail_at}: ingested {ingested}, acked {acked}"
        try:
            stored, delivered = reopened(attempt)
        except Exception as exc:
            raise AssertionError(f"healthy reopen failed: {exc!r}; {context}") from exc
        lost = set(ingested) - set(stored) - set(acked) - set(attempted)
        assert not lost, f"acknowledged bundles {sorted(lost)} lost; {context}"
        assert not set(acked) & set(delivered), f"acked bundles delivered again: {delivered}; {context}"
        shutil.rmtree(attempt)


@pytest.mark.parametrize("crash_at", [60, 120, 170])
def test_an_error_during_recovery_after_a_crash(tmp_path, crash_at, caplog):
    caplog.set_level(logging.CRITICAL)
    check_compound(tmp_path, crash_at, errno.EIO)


@pytest.mark.torture
@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_errors_during_recovery_torture(tmp_path, code, caplog):
    caplog.set_level(logging.CRITICAL)
    for crash_at in range(0, 190, 7):
        check_compound(tmp_path, crash_at, code)


class Refusing(FileSystem):
    """Every file creation fails with `code` (a full disk, a read-only directory)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def open(self, path, flags, mode=0o644):
        if flags & os.O_CREAT:
            raise OSError(self.code, os.strerror(self.code), path)
        return super().open(path, flags, mode)


@pytest.mark.parametrize(("code", "kind"), [(errno.ENOSPC, StoreFullError), (errno.EACCES, QuiverError), (errno.EROFS, QuiverError)])
def test_open_on_a_full_or_read_only_disk_raises_the_package_error(tmp_path, code, kind):
    with pytest.raises(kind, match=rf"{tmp_path}/LOCK: opening the store failed \(\[Errno {code}\] .*\); the store is not open; what it holds is kept, and a later open retries$") as caught:
        QuiverStore.open(tmp_path, fs=Refusing(code))
    assert (caught.value.errno, caught.value.filename) == (code, f"{tmp_path}/LOCK")  # type: ignore[attr-defined]
    assert isinstance(caught.value.__cause__, OSError)
    assert (kind is StoreFullError) == (code == errno.ENOSPC)
    with QuiverStore.open(tmp_path) as store:  # the failed open left nothing in the way
        store.ingest(bundle(0))


def test_a_directory_where_the_wal_file_belongs_is_named(tmp_path):
    (tmp_path / "wal" / "quiver.wal").mkdir(parents=True)
    wal = tmp_path / "wal" / "quiver.wal"
    with pytest.raises(QuiverError, match=rf"^{wal}: opening the store failed \(\[Errno 21\] Is a directory") as caught:
        QuiverStore.open(tmp_path)
    assert caught.value.errno == errno.EISDIR  # type: ignore[attr-defined]
