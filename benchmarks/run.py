"""`make bench`: every benchmark harness in sequence, each printing its own table.

The figures in docs/benchmarks.md come from these commands (each section names the exact one).
Run on a quiet machine: the harnesses compare side by side within one run, but absolute rates and
fsync latencies move with load.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

HARNESSES = [
    ("OTLP -> OTAP conversion", ["benchmarks.bench_conversion", "--repeat", "10"]),
    ("adaptive encoder", ["benchmarks.bench_encoder", "--rows", "20000", "--repeat", "5"]),
    ("sorting and delta ids", ["benchmarks.bench_transport", "--batches", "10", "--repeat", "5"]),
    ("segment files", ["benchmarks.bench_segment", "--bundles", "2000"]),
    ("Quiver store", ["benchmarks.bench_store"]),
    ("Quiver subscribers", ["benchmarks.bench_subscribers"]),
    ("pipeline overhead of persisting", ["benchmarks.bench_pipeline"]),
    ("encoding in Spark", ["benchmarks.bench_spark"]),
]


def main() -> int:
    import argparse

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    failed = []
    for title, module_args in HARNESSES:
        print(f"\n===== {title}: python -m {' '.join(module_args)}", flush=True)
        if subprocess.call([sys.executable, "-m", *module_args]) != 0:
            failed.append(title)
    out = tempfile.mkdtemp(prefix="otap-bench-")
    print(f"\n===== compression against OTLP + zstd: adaptive-arrow bench --out {out}", flush=True)
    if subprocess.call([sys.executable, "-m", "adaptive_arrow.cli", "bench", "--out", out]) != 0:
        failed.append("compression")
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
