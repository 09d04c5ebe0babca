"""Store defects found by fresh-user review 5 (the guide's store lifecycle run by hand). Each test
failed before its fix."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from quiver_store import QuiverStore, RecordBundle
from quiver_store.config import RetentionConfig, StoreConfig
from quiver_store.fs import FileSystem
from quiver_store.wal.writer import RECLAIM_THRESHOLD


def bundle(i: int, rows: int = 5000) -> RecordBundle:
    """About 40 KB of Arrow."""
    return RecordBundle({0: pa.record_batch({"v": np.arange(rows, dtype=np.int64) + i})})


class NoPunchFileSystem(FileSystem):
    """Hole punching unsupported: the WAL reclaims its prefix by rewriting the active file."""

    def punch_hole(self, fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "hole punching not supported")


FILE_SYSTEMS = pytest.mark.parametrize("fs", [FileSystem(), NoPunchFileSystem()], ids=["punch", "rewrite"])


@FILE_SYSTEMS
def test_the_reclaimed_wal_prefix_does_not_count_again_after_a_reopen(tmp_path: Path, fs: FileSystem) -> None:
    """Reopening counted the WAL prefix already in segments (a punched hole, or one the rewrite
    would drop) as usage again: 1.6 MB here, 7 MB in the review, where a drop_oldest cap then
    deleted 2 segments (684 bundles) nobody had read."""
    with QuiverStore.open(tmp_path, fs=fs) as store:
        store.subscribe("never-acks")  # keeps every segment
        for i in range(40):
            store.ingest(bundle(i))
        store.flush()
        assert store.stats()["wal_bytes"] < RECLAIM_THRESHOLD
        segments = len(store.segments())
        cap = store.disk_usage() + (200 << 10)
    config = StoreConfig(retention=RetentionConfig(size_cap=cap, size_cap_policy="drop_oldest"))
    with QuiverStore.open(tmp_path, config, fs=fs) as store:
        assert store.stats()["wal_bytes"] < RECLAIM_THRESHOLD
        store.ingest(bundle(99, rows=100))
        assert len(store.segments()) == segments  # nothing dropped
        assert store.stats()["quiver.segment.dropped_total"] == 0
