"""Segment file throughput: accumulate, write (fsync included), open, read, verify, and the open
time of 1,000 small segments. Prints a table; figures go to docs/benchmarks.md "Segment files".

    .venv/bin/python -m benchmarks.bench_segment [--bundles N] [--dir DIR] [--codecs none,lz4,zstd,zstd:3]

With ``--codecs`` the stream-mode case is written once per segment compression codec
(``SegmentConfig.compression``[:``compression_level``]; ``none``: uncompressed, the default).

Data: OTAP logs bundles from the generator through one adaptive encoder (stream mode: the
dictionaries of consecutive bundles extend each other, the unification fast path), and the same
records through a fresh encoder per bundle (each bundle's own dictionaries: the general path).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig
from quiver_store.segment import OpenSegment, SegmentReader, write_segment


def otap_bundles(count: int, rows: int) -> list[RecordBundle]:
    import adaptive_arrow
    import otap_model

    encoder = adaptive_arrow.Encoder(otap_model.Signal.LOGS)
    out = []
    for i, bundle in enumerate(otap_model.generate(otap_model.Signal.LOGS, count * rows, batch_size=rows, seed=7)):
        rb = encoder.encode_records(bundle)
        out.append(RecordBundle(dict(rb.slots), dict(rb.fingerprints or {}), ingestion_time_ns=i))
    return out[:count]


def independent_bundles(count: int, rows: int) -> list[RecordBundle]:
    """A fresh encoder per bundle: each bundle's dictionaries are its own (overlapping, not prefixes)."""
    import adaptive_arrow
    import otap_model

    out = []
    for i, bundle in enumerate(otap_model.generate(otap_model.Signal.LOGS, count * rows, batch_size=rows, seed=7)):
        rb = adaptive_arrow.Encoder(otap_model.Signal.LOGS).encode_records(bundle)
        out.append(RecordBundle(dict(rb.slots), dict(rb.fingerprints or {}), ingestion_time_ns=i))
    return out[:count]


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def accumulate(bundles: list[RecordBundle], config: SegmentConfig) -> OpenSegment:
    seg = OpenSegment(config)
    for b in bundles:
        seg.append(b)
    return seg


def read_all(path: str) -> int:
    n = 0
    with SegmentReader.open(path) as reader:
        for bundle in reader.bundles():
            n += len(bundle.slots)
    return n


def verify(path: str) -> None:
    with SegmentReader.open(path) as reader:
        reader.verify()


def segment_config(codec: str) -> SegmentConfig:
    """`none`, `lz4`, `zstd` or `zstd:3` as a SegmentConfig."""
    name, _, level = codec.partition(":")
    if name == "none":
        return SegmentConfig()
    return SegmentConfig(compression=name, compression_level=int(level) if level else None)  # type: ignore[arg-type]


def run_case(name: str, bundles: list[RecordBundle], workdir: str, config: SegmentConfig | None = None) -> list[tuple[str, str]]:
    config = config or SegmentConfig()
    t_acc, seg = timed(lambda: accumulate(bundles, config))
    assert isinstance(seg, OpenSegment)
    path = os.path.join(workdir, f"{name}.qseg")
    codec = config.codec()
    t_write, info = timed(lambda: write_segment(seg, path, 1, metadata={"signal": "logs"}, compression=codec))
    size = info.size_bytes  # type: ignore[attr-defined]
    t_open, _ = timed(lambda: SegmentReader.open(path).close(), repeat=20)
    t_read, _ = timed(lambda: read_all(path))
    t_verify, _ = timed(lambda: verify(path))
    n = len(bundles)
    mb = size / 1e6
    return [
        ("case", name),
        ("bundles / rows / streams", f"{n} / {sum(b.num_rows for s in bundles for b in s.slots.values())} / {info.stream_count}"),  # type: ignore[attr-defined]
        ("segment size (MB); serialized_size estimate (MB)", f"{mb:.2f}; {seg.serialized_size / 1e6:.2f}"),
        ("accumulate (bundles/s)", f"{n / t_acc:,.0f}"),
        ("write_segment incl. fsync (ms; MB/s)", f"{t_write * 1e3:.1f}; {mb / t_write:,.0f}"),
        ("open, metadata only (ms)", f"{t_open * 1e3:.2f}"),
        ("read every bundle, all slots (bundles/s; MB/s)", f"{n / t_read:,.0f}; {mb / t_read:,.0f}"),
        ("verify (ms; MB/s)", f"{t_verify * 1e3:.1f}; {mb / t_verify:,.0f}"),
    ]


def small_bundle(i: int) -> RecordBundle:
    """4 slots x 100 rows of plain columns (the store benchmark's shape)."""
    ids = pa.array(range(100), pa.uint16())
    return RecordBundle(
        {
            1: pa.record_batch({"id": ids, "service": pa.array([f"svc{j % 5}" for j in range(100)])}),
            2: pa.record_batch({"id": ids, "name": pa.array([f"lib{j % 3}" for j in range(100)])}),
            30: pa.record_batch({"id": ids, "time": pa.array(range(i, i + 100), pa.int64()), "body": pa.array([f"m{i}-{j}" for j in range(100)])}),
            31: pa.record_batch({"parent_id": ids, "key": pa.array([f"k{j % 20}" for j in range(100)]), "str": pa.array([f"v{j}" for j in range(100)])}),
        },
        ingestion_time_ns=i,
    )


def small_accumulate(count: int = 5000) -> float:
    """Microseconds per OpenSegment.append of a 4-slot, 100-row bundle."""
    bundles = [small_bundle(i) for i in range(count)]
    t, _ = timed(lambda: accumulate(bundles, SegmentConfig()))
    return t / count * 1e6


def open_many(workdir: str, count: int = 1000) -> tuple[float, float]:
    """Write `count` small segments (one 4-slot bundle each); time opening all of them."""
    bundle = RecordBundle(
        {s: pa.record_batch({"id": pa.array(range(100), pa.uint32()), "v": pa.array([1.5] * 100)}) for s in (1, 2, 30, 31)},
        ingestion_time_ns=1,
    )
    seg = accumulate([bundle], SegmentConfig())
    d = os.path.join(workdir, "many")
    os.makedirs(d)
    for i in range(count):  # each file holds its own sequence number (readers check it against the name)
        write_segment(seg, os.path.join(d, f"{i:016d}.qseg"), i, metadata={"signal": "logs"})
    paths = sorted(os.path.join(d, f) for f in os.listdir(d))
    first = paths[0]

    def open_all() -> None:
        for p in paths:
            SegmentReader.open(p).close()

    t, _ = timed(open_all)
    return t, os.path.getsize(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--dir", default=None, help="work directory on the disk to measure (default: a temp dir)")
    parser.add_argument("--codecs", default="none", help="segment compression codecs to compare, comma-separated")
    args = parser.parse_args()
    codecs = args.codecs.split(",")
    configs = [segment_config(c) for c in codecs]  # bad names fail before the slow part
    workdir = tempfile.mkdtemp(prefix="bench_segment_", dir=args.dir)
    try:
        base = otap_bundles(args.bundles, args.rows)
        tables = [run_case(f"otap-logs (prefix dictionaries), {c}", base, workdir, cfg) for c, cfg in zip(codecs, configs)]
        tables.append(run_case("otap-logs (per-bundle dictionaries)", independent_bundles(args.bundles, args.rows), workdir))
        t_many, small = open_many(workdir)
        us_append = small_accumulate()
        print(f"{'metric':<52} {'value'}")
        for table in tables:
            for k, v in table:
                print(f"{k:<52} {v}")
            print()
        print(f"{'open 1,000 segments of ' + str(small) + ' bytes (s; us each)':<52} {t_many:.3f}; {t_many * 1e3:.0f}")
        print(f"{'OpenSegment.append, 4-slot 100-row bundle (us)':<52} {us_append:.1f}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
