"""Sweep of the repetition-aware dictionary fallback threshold (OTAP+zstd bytes per setting).

For every generator profile and every Zipkin sample, encodes the same sorted batches in stream
mode (one encoder per run) and unary mode (a fresh encoder per batch) with each value of
``EncoderConfig.dictionary_max_distinct_ratio`` and sums the zstd-compressed envelope sizes, so
the default can be chosen where the total is smallest.

    .venv/bin/python -m benchmarks.dictionary_sweep [--batch-size 5000] [--batches 4]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import zstandard

from adaptive_arrow import Encoder, EncoderConfig
from benchmarks.compression import ZSTD_LEVEL, generator_datasets, zipkin_datasets
from otap_model import from_otlp

RATIOS: tuple[float | None, ...] = (None, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--batches", type=int, default=4, help="batches per generated run")
    ap.add_argument("--min-values", type=int, default=EncoderConfig().dictionary_min_values)
    ap.add_argument("--ratios", default=",".join("none" if r is None else str(r) for r in RATIOS))
    args = ap.parse_args(argv)
    ratios = [None if r == "none" else float(r) for r in args.ratios.split(",")]
    z = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    sets = generator_datasets(("logs", "traces", "metrics"), None, lambda bs: args.batches, seed=1) + zipkin_datasets()
    totals = {(mode, r): 0 for mode in ("stream", "unary") for r in ratios}
    header = "| input | mode | " + " | ".join("Go ladder" if r is None else f"{r:g}" for r in ratios) + " |"
    print(header)
    print("|---|---|" + "---:|" * len(ratios))
    for ds in sets:
        bundles = [from_otlp(r) for r in ds.batches(args.batch_size)]
        for mode in ("stream", "unary"):
            row = []
            for r in ratios:
                config = EncoderConfig(dictionary_max_distinct_ratio=r, dictionary_min_values=args.min_values)
                stream = Encoder(ds.signal, config)
                size = 0
                for b in bundles:
                    enc = stream if mode == "stream" else Encoder(ds.signal, config)
                    size += len(z.compress(enc.encode(b).to_bytes()))
                totals[(mode, r)] += size
                row.append(size)
            print(f"| {ds.name} | {mode} | " + " | ".join(f"{s:,}" for s in row) + " |", flush=True)
    for mode in ("stream", "unary"):
        print(f"| **total** | {mode} | " + " | ".join(f"{totals[(mode, r)]:,}" for r in ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
