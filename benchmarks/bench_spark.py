"""The encoder in Spark against the same encoder in one plain Python process (DESIGN.md section 6:
Spark local mode costs at most 1.5x, and local[2] is at least 1.6x faster than local[1]).

The same serialized OTLP requests (generated, default profile; 64 of 5,000 root records by default,
about 100 MB, so each of the 4 partitions carries about 25 MB and Spark's fixed cost per job and
task does not dominate) are cut into the same partitions of consecutive requests in every mode.
Each partition is one stream-mode ``Encoder`` fed request by request (``from_otlp`` then
``encode(...).to_bytes()``), with the same ``EncoderConfig`` on both sides (by default
``encode_otlp``'s: zstd IPC compression):

* ``python``: every partition one after the other in this process;
* ``local[1]`` / ``local[2]``: ``adaptive_arrow.spark.encode_otlp`` over a cached DataFrame of those
  partitions, its envelopes written to Spark's ``noop`` sink (they cross from the Python worker to
  the JVM, nothing is collected). Each master gets its own SparkSession, one after the other.

Every mode runs once untimed first (Python workers started, imports done, numba kernels loaded).
Rounds alternate the modes within each session; medians are compared. Besides wall time, each run
reports its CPU time summed over this process and all its descendants (the Spark JVM and its
Python workers, read from /proc): the cost, which other jobs on the machine do not inflate the
way they stretch wall time. local[2] against local[1] is a wall-time figure and needs idle cores.

Run:  .venv/bin/python -m benchmarks.bench_spark [--signal logs] [--requests 64] [--batch-size 5000]
      [--partitions 4] [--rounds 5] [--conf KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from adaptive_arrow import Encoder, EncoderConfig
from adaptive_arrow.spark import encode_otlp, spark_session
from otap_model import Signal, from_otlp, generate_otlp


def partitions_of(requests: list[bytes], partitions: int) -> list[list[bytes]]:
    """Consecutive runs of requests, as evenly as possible."""
    size, extra = divmod(len(requests), partitions)
    out, start = [], 0
    for p in range(partitions):
        end = start + size + (1 if p < extra else 0)
        out.append(requests[start:end])
        start = end
    return out


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and every live descendant (Linux /proc)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    tree, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(pid, 0.0) for pid in tree)


def run_python(signal: Signal, parts: list[list[bytes]], config: EncoderConfig) -> tuple[float, float]:
    c0, t0 = tree_cpu_seconds(), time.perf_counter()
    for part in parts:
        encoder = Encoder(signal, config)
        for data in part:
            encoder.encode(from_otlp(data, signal)).to_bytes()
    return time.perf_counter() - t0, tree_cpu_seconds() - c0


def run_spark(df, signal: Signal, config: EncoderConfig) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    c0, t0 = tree_cpu_seconds(), time.perf_counter()
    encode_otlp(df, signal, config=config).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0, tree_cpu_seconds() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--signal", default="logs", choices=[s.value for s in Signal])
    ap.add_argument("--requests", type=int, default=64, help="OTLP requests (batches) in all")
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--ipc-compression", default="zstd", choices=("zstd", "none"),
                    help="EncoderConfig.ipc_compression on both sides (default zstd, encode_otlp's default)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark setting over spark_session's defaults (repeatable)")
    args = ap.parse_args(argv)
    signal = Signal(args.signal)
    config = EncoderConfig(ipc_compression=None if args.ipc_compression == "none" else args.ipc_compression)
    requests = [r.SerializeToString() for r in generate_otlp(signal, args.requests * args.batch_size,
                                                             batch_size=args.batch_size, seed=7)]
    parts = partitions_of(requests, args.partitions)
    records = sum(from_otlp(r, signal).num_rows for r in requests)
    print(f"{signal.value}: {len(requests)} requests, {records:,} root records, {sum(map(len, requests)):,} OTLP bytes, "
          f"{args.partitions} partitions, {args.rounds} rounds, ipc_compression {args.ipc_compression}")

    times: dict[str, list[tuple[float, float]]] = {"python": []}
    run_python(signal, parts[:1], config)  # warm-up: imports, numba kernels
    for master in args.masters.split(","):
        conf = {"spark.driver.memory": "3g", **dict(c.split("=", 1) for c in args.conf)}  # parallelize ships the requests
        spark = spark_session(master, "bench-spark", **conf)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            df = _consecutive(spark, parts)
            df.cache().count()
            run_spark(df, signal, config)  # warm-up: workers, imports, numba kernels
            times[master] = []
            for _ in range(args.rounds):
                times[master].append(run_spark(df, signal, config))
                times["python"].append(run_python(signal, parts, config))
        finally:
            spark.stop()

    wall = {mode: statistics.median(t for t, _ in runs) for mode, runs in times.items()}
    cpu = {mode: statistics.median(c for _, c in runs) for mode, runs in times.items()}
    print(f"{'mode':10} {'wall s':>7} {'records/s':>10} {'vs python':>9} {'cpu s':>6} {'vs python':>9}  rounds: wall/cpu s")
    for mode, runs in times.items():
        print(f"{mode:10} {wall[mode]:7.3f} {records / wall[mode]:10,.0f} {wall[mode] / wall['python']:8.2f}x "
              f"{cpu[mode]:6.2f} {cpu[mode] / cpu['python']:8.2f}x  " + " ".join(f"{t:.2f}/{c:.2f}" for t, c in runs))
    masters = args.masters.split(",")
    if len(masters) == 2:
        print(f"{masters[1]} is {wall[masters[0]] / wall[masters[1]]:.2f}x faster than {masters[0]} (wall time)")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def _consecutive(spark, parts: list[list[bytes]]):  # type: ignore[no-untyped-def]
    """A DataFrame whose partition p holds exactly ``parts[p]``, in order."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    rdd = spark.sparkContext.parallelize([(data,) for part in parts for data in part], numSlices=len(parts))
    frame = spark.createDataFrame(rdd, StructType([StructField("value", BinaryType())]))
    sizes = frame.rdd.glom().map(len).collect()
    if sizes != [len(part) for part in parts]:
        raise SystemExit(f"Spark sliced the requests as {sizes}, not {[len(p) for p in parts]}; use a multiple of --partitions")
    return frame


if __name__ == "__main__":
    raise SystemExit(main())
