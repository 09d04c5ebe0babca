"""Pipeline overhead of persisting: encode + Quiver ingest against encode alone (DESIGN.md section 6,
target under 10%).

For each signal, generated batches (default profile, converted to plain OTAP tables before any
timing) go through a fresh stream-mode ``Encoder.encode_records`` (the records Quiver persists,
sorted and delta-encoded as configured by default) in three modes, alternated round by round:

* ``encode``: encoding alone;
* ``serial``: encode, then ``QuiverStore.ingest`` of the records, which returns once the WAL entry
  is fdatasync'ed (default durability), batch after batch;
* ``overlapped``: the same work, but ingest runs on one writer thread fed through a queue of one
  batch (``quiver_store.IngestQueue``), so the fdatasync of batch N overlaps the encoding
  of batch N+1, as a collector pipeline would run it. Every batch is still acknowledged only after
  its fdatasync; the time stops when the last acknowledgement came back.

Store modes end with ``store.flush()`` outside the timed loop (segment finalization is background
work and is reported on its own line), each round in a new store directory. The overhead is
``time(mode) / time(encode) - 1`` with medians over the rounds.

Run:  .venv/bin/python -m benchmarks.bench_pipeline [--batches 8] [--batch-size 5000] [--rounds 5]
      [--durability fsync|os|none] [--preallocate BYTES] [--direct-bundle-size BYTES] [--dir DIR]

Bundles of ``wal.direct_bundle_size`` (default: an eighth of the segment target, 4 MiB) Arrow bytes or more skip the WAL and are
acknowledged once their own segment file is durable, so for them the segment write is inside the
timed loop and the flush has nothing left to do; ``--direct-bundle-size 0`` logs every bundle.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from adaptive_arrow import Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import OtapBundle, Signal, from_otlp, generate_otlp
from quiver_store import IngestQueue, QuiverStore, StoreConfig, WalConfig

from .bench_segment import segment_config

MODES = ("encode", "serial", "overlapped")


def bundles_for(signal: Signal, batches: int, batch_size: int, seed: int = 7) -> list[OtapBundle]:
    requests = generate_otlp(signal, batches * batch_size, batch_size=batch_size, seed=seed)
    return [from_otlp(r.SerializeToString(), signal) for r in requests]


def run(mode: str, signal: Signal, bundles: list[OtapBundle], directory: Path, config: StoreConfig) -> tuple[float, float, dict]:
    """Encode every bundle, then ingest it inline ("serial") or through an IngestQueue ("overlapped"),
    or not at all ("encode"); returns (timed loop, flush) seconds and the store's counters of
    direct bundles, WAL bytes and segment bytes written (empty for "encode")."""
    encoder = Encoder(signal)
    if mode == "encode":
        t0 = time.perf_counter()
        for bundle in bundles:
            encoder.encode_records(bundle)
        return time.perf_counter() - t0, 0.0, {}
    with QuiverStore.open(directory, config, layout=OTAP_LAYOUT) as store:
        t0 = time.perf_counter()
        if mode == "overlapped":
            with IngestQueue(store) as queue:
                for bundle in bundles:
                    queue.submit(encoder.encode_records(bundle))
        else:
            for bundle in bundles:
                store.ingest(encoder.encode_records(bundle))
        elapsed = time.perf_counter() - t0
        t1 = time.perf_counter()
        store.flush()
        flushed = time.perf_counter() - t1
        stats = store.stats()
        return elapsed, flushed, {k: stats[k] for k in ("direct_bundles", "bytes_written", "segment_bytes_written")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--signals", default="logs,traces,metrics")
    ap.add_argument("--durability", default="fsync", choices=("fsync", "os", "none"),
                    help="WAL durability (default fsync: acknowledged after fdatasync)")
    ap.add_argument("--preallocate", type=int, default=WalConfig().preallocate,
                    help="wal.preallocate bytes of zero tail (0: none; default %(default)s)")
    ap.add_argument("--direct-bundle-size", type=int, default=WalConfig().direct_bundle_size,
                    help="wal.direct_bundle_size: bundles this large skip the WAL (0: never; default: an eighth of the segment target)")
    ap.add_argument("--segment-compression", default="none", metavar="CODEC[:LEVEL]",
                    help="segment.compression: none (default), lz4, zstd, or zstd:3 with a level")
    ap.add_argument("--dir", default=None, help="directory on the file system to measure (default: a temp dir)")
    args = ap.parse_args(argv)
    config = StoreConfig(
        segment=segment_config(args.segment_compression),
        wal=WalConfig(durability=args.durability, preallocate=args.preallocate, direct_bundle_size=args.direct_bundle_size),
    )
    base = Path(tempfile.mkdtemp(prefix="pipeline-bench-", dir=args.dir))
    try:
        print(f"{args.batches} batches of {args.batch_size} root records per signal, {args.rounds} rounds, "
              f"durability {args.durability}, wal.preallocate {args.preallocate}, segment compression {args.segment_compression}, "
              f"direct_bundle_size {config.direct_bundle_size}, store in {base}")
        print(f"{'signal':8} {'mode':11} {'median ms':>10} {'per batch':>10} {'overhead':>9} {'flush ms':>9}  rounds (ms)")
        for name in args.signals.split(","):
            signal = Signal(name)
            bundles = bundles_for(signal, args.batches, args.batch_size)
            times: dict[str, list[float]] = {m: [] for m in MODES}
            flushes: dict[str, list[float]] = {m: [] for m in MODES}
            written: dict = {}
            run("encode", signal, bundles[:1], base, config)  # compile numba kernels, warm caches
            for r in range(args.rounds):
                for mode in MODES:
                    directory = base / f"{name}-{mode}-{r}"
                    elapsed, flushed, counters = run(mode, signal, bundles, directory, config)
                    written = counters or written
                    times[mode].append(elapsed * 1e3)
                    flushes[mode].append(flushed * 1e3)
                    shutil.rmtree(directory, ignore_errors=True)
            base_ms = statistics.median(times["encode"])
            for mode in MODES:
                ms = statistics.median(times[mode])
                overhead = "-" if mode == "encode" else f"{ms / base_ms - 1:+.1%}"
                flush = "-" if mode == "encode" else f"{statistics.median(flushes[mode]):.1f}"
                rounds = " / ".join(f"{t:.0f}" for t in times[mode])
                print(f"{name:8} {mode:11} {ms:10.1f} {ms / len(bundles):10.2f} {overhead:>9} {flush:>9}  {rounds}")
            print(f"{name:8} {written['direct_bundles']} of {len(bundles)} bundles skipped the WAL (direct_bundle_size "
                  f"{config.direct_bundle_size}); WAL bytes written {written['bytes_written']:,}, segment bytes "
                  f"{written['segment_bytes_written']:,} (last round)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
