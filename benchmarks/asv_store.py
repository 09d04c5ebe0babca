"""asv benchmarks of the Quiver store: group-committed ingest, large bundles written once or
logged, WAL replay, opening many segments, segment files written and read under each codec.

The headline figures (against fdatasync latency and dd, in one run) come from bench_store.py;
these track regressions between commits.
"""

from __future__ import annotations

import shutil
import tempfile
import threading

from benchmarks.bench_segment import accumulate, otap_bundles, read_all
from benchmarks.bench_store import MiB, large_bundles, small_bundles, store_config
from quiver_store import QuiverStore, SegmentConfig, StoreConfig, WalConfig
from quiver_store.segment import write_segment

_BUNDLES = small_bundles(400)
_REPLAY_CFG = StoreConfig(segment=SegmentConfig(target_size=1 << 30, max_open_duration=3600.0), wal=WalConfig(durability="os"))


class Ingest:
    """400 four-slot, 100-row bundles with fdatasync on, from 1 and from 8 threads."""

    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        self.store = QuiverStore.open(self.dir, store_config())

    def teardown(self) -> None:
        self.store._abandon()
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_single_producer(self) -> None:
        for b in _BUNDLES:
            self.store.ingest(b)

    def time_eight_producers(self) -> None:
        def run(k: int) -> None:
            for b in _BUNDLES[k::8]:
                self.store.ingest(b)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


class SingleProducerPreallocate:
    """400 bundles from one producer with the WAL's zero tail off (appends) and on (the default)."""

    params = [0, 1 << 20]
    param_names = ["wal_preallocate"]

    def setup(self, preallocate: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        self.store = QuiverStore.open(self.dir, store_config(preallocate=preallocate))
        self.store._wal.extend_tail()  # start with the tail in place, not racing the first ingests

    def teardown(self, preallocate: int) -> None:
        self.store._abandon()
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_single_producer(self, preallocate: int) -> None:
        for b in _BUNDLES:
            self.store.ingest(b)


class LargeBundles:
    """8 bundles of 4 MiB until `flush()`: each a segment file of its own (the default,
    `direct_bundle_size` 4 MiB) or logged and then written into a segment (0: direct off)."""

    params = [None, 0]
    param_names = ["wal_direct_bundle_size"]

    def setup(self, direct: int | None) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        self.bundles = large_bundles(8, 4 * MiB)
        self.store = QuiverStore.open(self.dir, store_config(direct_bundle_size=direct))

    def teardown(self, direct: int | None) -> None:
        self.store._abandon()
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_ingest_and_flush(self, direct: int | None) -> None:
        for b in self.bundles:
            self.store.ingest(b)
        self.store.flush()


class Replay:
    """Open a store whose WAL holds 2,000 unfinalized bundles (about 20 MiB)."""

    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        store = QuiverStore.open(self.dir, _REPLAY_CFG)
        for i in range(2000):
            store.ingest(_BUNDLES[i % len(_BUNDLES)])
        store._abandon()

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_replay(self) -> None:
        QuiverStore.open(self.dir, _REPLAY_CFG)._abandon()


class OpenSegments:
    """Open (and close) a store holding 200 segments."""

    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        with QuiverStore.open(self.dir, store_config()) as store:
            for i in range(200):
                store.ingest(_BUNDLES[i % len(_BUNDLES)])
                store.flush()

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_open(self) -> None:
        QuiverStore.open(self.dir, store_config()).close()


class SegmentCompression:
    """One segment of 400 stream-mode OTAP logs bundles (100 records each) under each
    `segment.compression`: written (fsync included), read back whole, and its size."""

    params = [None, "lz4", "zstd"]
    param_names = ["segment_compression"]

    def setup(self, codec: str | None) -> None:
        self.dir = tempfile.mkdtemp(prefix="asv-quiver-")
        self.config = SegmentConfig(compression=codec)  # type: ignore[arg-type]
        self.segment = accumulate(otap_bundles(400, 100), self.config)
        self.path = f"{self.dir}/0000000000000001.qseg"
        self.info = write_segment(self.segment, self.path, 1, compression=self.config.codec())

    def teardown(self, codec: str | None) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_write_segment(self, codec: str | None) -> None:
        write_segment(self.segment, f"{self.dir}/0000000000000002.qseg", 2, compression=self.config.codec())

    def time_read_every_bundle(self, codec: str | None) -> None:
        read_all(self.path)

    def track_segment_bytes(self, codec: str | None) -> int:
        return self.info.size_bytes

    track_segment_bytes.unit = "bytes"  # type: ignore[attr-defined]
