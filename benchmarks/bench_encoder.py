"""Adaptive encoder: schema savings, encode / decode throughput, and cost against a plain IPC write.

For each signal, generated bundles (``otap_model.generate``, default profile) go through one
encoder (stream mode) and one decoder. Reported:

* savings per payload type: leaf columns of the reference schema vs of the last emitted schema,
  and Arrow IPC stream bytes of the plain tables (full reference schema, plain types) vs of the
  adaptive records (same stream, dictionary deltas), both uncompressed;
* throughput: rows (root records) per second and plain-table MB (``RecordBatch.nbytes``) per
  second of ``Encoder.encode`` (+ envelope serialisation) and ``Decoder.decode``;
* the ratio of encode time to a plain ``pyarrow.ipc`` stream write of the same plain tables (one
  stream per payload type, every batch), each uncompressed and with zstd on both sides.

Times are the minimum over ``--repeat`` runs, encoder and plain write measured alternately in one
process, pinned to core 0 (``os.sched_setaffinity``) with Arrow single-threaded. Real samples (/work/shared/data) are reported
for savings only (too small for timing).

Run:  .venv/bin/python -m benchmarks.bench_encoder [--rows 20000] [--batch-size 5000] [--repeat 5]
      .venv/bin/python benchmarks/bench_encoder.py --cpu-times --repeat 20   (another tree: PYTHONPATH=<tree>)
      .venv/bin/python benchmarks/bench_encoder.py --digest                  (byte identity across trees)
      .venv/bin/python -m benchmarks.bench_encoder --against <tree> --repeat 30   (in-process A/B, see against)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

import adaptive_arrow
import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from otap_model import OtapBundle, PayloadType, Signal, reference_schema

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _leaves(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaves(t.field(i).type) for i in range(t.num_fields))
    return 1


class PlainStreams:
    """One plain Arrow IPC stream per payload type, fed every batch (the baseline)."""

    def __init__(self, compression: str | None):
        self.options = pa.ipc.IpcWriteOptions(compression=compression)
        self.sinks: dict[PayloadType, tuple[io.BytesIO, pa.ipc.RecordBatchStreamWriter]] = {}
        self.bytes: dict[PayloadType, int] = {}

    def write(self, bundle: OtapBundle) -> None:
        for pt, batch in bundle.tables.items():
            if pt not in self.sinks:
                sink = io.BytesIO()
                self.sinks[pt] = (sink, pa.ipc.new_stream(sink, batch.schema, options=self.options))
            sink, writer = self.sinks[pt]
            writer.write_batch(batch)
            self.bytes[pt] = self.bytes.get(pt, 0) + sink.tell()
            sink.seek(0)
            sink.truncate()


def savings(signal: Signal, bundles: list[OtapBundle]) -> list[tuple[str, int, int, int, int]]:
    """(payload type, reference columns, emitted columns, plain bytes, adaptive bytes) per table."""
    enc = Encoder(signal, EncoderConfig(sort=False))
    plain = PlainStreams(None)
    adaptive: dict[int, int] = {}
    for bundle in bundles:
        plain.write(bundle)
        for p in enc.encode(bundle).payloads:
            adaptive[p.type] = adaptive.get(p.type, 0) + len(p.record)
    rows = []
    for pt in sorted(plain.bytes):
        schema = enc.schema_of(pt)
        assert schema is not None
        ref_cols = sum(_leaves(f.type) for f in reference_schema(pt))
        rows.append((pt.name, ref_cols, sum(_leaves(f.type) for f in schema), plain.bytes[pt], adaptive[int(pt)]))
    return rows


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def throughput(signal: Signal, bundles: list[OtapBundle], repeat: int) -> dict[str, float]:
    rows = sum(b.num_rows for b in bundles)
    mb = sum(t.nbytes for b in bundles for t in b.tables.values()) / 1e6
    out: dict[str, float] = {"rows": rows, "mb": mb}
    for label, cfg in (
        ("adaptive", EncoderConfig(sort=False)),
        ("adaptive+sort", EncoderConfig(sort=True)),
        ("adaptive+sort+zstd", EncoderConfig(sort=True, ipc_compression="zstd")),
    ):
        messages: list[bytes] = []

        def encode(cfg: EncoderConfig = cfg, messages: list[bytes] = messages) -> None:
            messages.clear()
            enc = Encoder(signal, cfg)
            messages.extend(enc.encode(b).to_bytes() for b in bundles)

        def plain(compression: str | None = cfg.ipc_compression) -> None:
            streams = PlainStreams(compression)
            for b in bundles:
                streams.write(b)

        t_enc = t_plain = float("inf")
        for _ in range(repeat):  # alternate, so both see the same machine load
            t_enc = min(t_enc, best(encode, 1))
            t_plain = min(t_plain, best(plain, 1))

        def decode(messages: list[bytes] = messages) -> None:
            dec = Decoder()
            for m in messages:
                dec.decode(m)

        out[f"{label} encode s"] = t_enc
        out[f"{label} plain s"] = t_plain
        out[f"{label} decode s"] = best(decode, repeat)
        out[f"{label} bytes"] = sum(len(m) for m in messages)
    return out


def cpu_times(data: dict[Signal, list[OtapBundle]], repeat: int) -> None:
    """Thread CPU ms of the whole encode (``Encoder.encode(...).to_bytes()`` over the stream),
    minimum of ``repeat`` runs per signal and mode: other jobs preempting this one do not count,
    so trees can be compared across processes on a shared machine (run this file as a script
    with another tree first on ``PYTHONPATH``; it uses only the public API)."""
    print(f"### Encode thread CPU time (min of {repeat} runs, ms; {Path(adaptive_arrow.__file__).parents[1]})\n")
    print("| signal | adaptive | adaptive+sort |")
    print("|---|---|---|")
    for signal, bundles in data.items():
        cells = []
        for sort in (False, True):
            best = float("inf")
            for _ in range(repeat):
                t0 = time.thread_time()
                enc = Encoder(signal, EncoderConfig(sort=sort))
                for b in bundles:
                    enc.encode(b).to_bytes()
                best = min(best, time.thread_time() - t0)
            cells.append(f"{best * 1e3:.2f}")
        print(f"| {signal.value} | {' | '.join(cells)} |")


def _load_tree(tree: Path) -> object:
    """Another tree's ``adaptive_arrow`` package, imported under the name ``adaptive_arrow_other``
    (its modules import each other relatively; ``otap_model`` and ``quiver_store`` are shared)."""
    package = tree / "adaptive_arrow"
    spec = importlib.util.spec_from_file_location(
        "adaptive_arrow_other", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no adaptive_arrow package under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def against(data: dict[Signal, list[OtapBundle]], tree: Path, repeat: int, rounds: int) -> None:
    """This tree's encoder and another tree's in one process, alternating run by run: thread CPU
    ms of the sorted and unsorted encode of every stream, minimum over ``repeat`` runs per round,
    ``rounds`` rounds; the median round's ratio this / other. Both encoders see the same process
    state and the same machine load at the same moments, so their ratio is steadier than two
    processes run one after the other (the envelopes are compared for equality too)."""
    other = _load_tree(tree)
    print(f"### In-process A/B: {Path(adaptive_arrow.__file__).parents[1]} (this) vs {tree} (other); thread CPU ms, "
          f"min of {repeat} runs per round, {rounds} rounds, load {os.getloadavg()[0]:.2f}\n")
    print("| signal | mode | this (median of rounds) | other | this / other: median (range) |")
    print("|---|---|---|---|---|")
    for signal, bundles in data.items():
        for sort in (False, True):
            sides = {"this": (Encoder, EncoderConfig), "other": (other.Encoder, other.EncoderConfig)}  # type: ignore[attr-defined]
            outputs: dict[str, list[bytes]] = {}
            per_round: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(rounds):
                best_of = {name: float("inf") for name in sides}
                for _ in range(repeat):
                    for name, (encoder, config) in sides.items():
                        t0 = time.thread_time()
                        enc = encoder(signal, config(sort=sort))
                        out = [enc.encode(b).to_bytes() for b in bundles]
                        best_of[name] = min(best_of[name], time.thread_time() - t0)
                        outputs[name] = out
                for name in sides:
                    per_round[name].append(best_of[name])
            if outputs["this"] != outputs["other"]:
                print(f"| {signal.value} | sort={sort} | envelopes differ between the trees | | |")
            ratios = [a / b for a, b in zip(per_round["this"], per_round["other"], strict=True)]
            print(f"| {signal.value} | {'adaptive+sort' if sort else 'adaptive'} | {statistics.median(per_round['this']) * 1e3:.2f} | "
                  f"{statistics.median(per_round['other']) * 1e3:.2f} | {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")


def digest() -> None:
    """sha256 of every envelope (``Encoder.encode(b).to_bytes()``) over generated streams: each
    signal and profile, batch sizes 5000 / 300 / 37, sorted and unsorted, stream and unary mode.
    Two trees emit the same bytes when their lines match (public API only, see ``cpu_times``)."""
    total = hashlib.sha256()
    for signal in Signal:
        profiles = ["default", "high-cardinality", "sparse"] + (["multivariate"] if signal is Signal.METRICS else [])
        for profile in profiles:
            for batch_size, count in ((5000, 20000), (300, 1500), (37, 370)):
                bundles = list(otap_model.generate(signal, count, batch_size=batch_size, seed=1, profile=profile))
                for sort in (False, True):
                    for unary in (False, True):
                        h = hashlib.sha256()
                        enc = Encoder(signal, EncoderConfig(sort=sort))
                        for b in bundles:
                            if unary:
                                enc = Encoder(signal, EncoderConfig(sort=sort))
                            h.update(enc.encode(b).to_bytes())
                        total.update(h.digest())
                        print(f"{signal.value} {profile} batch={batch_size} sort={sort} unary={unary} {h.hexdigest()[:16]}")
    print(f"all {total.hexdigest()}")


def samples() -> list[tuple[str, Signal, list[OtapBundle]]]:
    found = []
    for path in sorted((DATA / "otlp-examples").glob("*.json")):
        b = otap_model.from_otlp_json(path.read_bytes())
        found.append((path.name, Signal(b.signal), [b]))
    zipkin = [otap_model.from_zipkin_json(p.read_bytes()) for p in sorted((DATA / "zipkin").glob("*.json"))]
    if zipkin:
        found.append(("zipkin/*.json (10 files, one stream)", Signal.TRACES, zipkin))
    return found


def _pin() -> None:
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {0})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20000, help="root records per signal")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu-times", action="store_true", help="only the encode's thread CPU time (see cpu_times)")
    parser.add_argument("--digest", action="store_true", help="only sha256 digests of the envelopes (see digest)")
    parser.add_argument("--against", type=Path, help="in-process A/B against the adaptive_arrow of another tree (see against)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --against")
    args = parser.parse_args(argv)
    if args.digest:
        digest()
        return 0
    _pin()
    data = {s: list(otap_model.generate(s, args.rows, batch_size=args.batch_size, seed=args.seed)) for s in Signal}
    if args.cpu_times:
        cpu_times(data, args.repeat)
        return 0
    if args.against:
        against(data, args.against, args.repeat, args.rounds)
        return 0

    print(f"### Schema savings (generator, default profile, {args.rows} root records in batches of {args.batch_size})\n")
    print("| signal | payload type | reference columns | emitted columns | plain IPC bytes | adaptive IPC bytes | saved |")
    print("|---|---|---|---|---|---|---|")
    for s, bundles in data.items():
        for name, rc, ec, pb, ab in savings(s, bundles):
            print(f"| {s.value} | {name} | {rc} | {ec} | {pb:,} | {ab:,} | {1 - ab / pb:.0%} |")
    print("\n### Schema savings (real samples)\n")
    print("| sample | payload type | reference columns | emitted columns | plain IPC bytes | adaptive IPC bytes | saved |")
    print("|---|---|---|---|---|---|---|")
    for label, s, bundles in samples():
        for name, rc, ec, pb, ab in savings(s, bundles):
            print(f"| {label} | {name} | {rc} | {ec} | {pb:,} | {ab:,} | {1 - ab / pb:.0%} |")

    print(f"\n### Throughput and cost against a plain IPC write (min of {args.repeat} runs, one core)\n")
    print("| signal | mode | encode rows/s | encode MB/s | decode rows/s | decode MB/s | encode / plain IPC write | OTAP bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for s, bundles in data.items():
        r = throughput(s, bundles, args.repeat)
        for label in ("adaptive", "adaptive+sort", "adaptive+sort+zstd"):
            te, tp, td = r[f"{label} encode s"], r[f"{label} plain s"], r[f"{label} decode s"]
            base = "plain write zstd" if "zstd" in label else "plain write"
            print(
                f"| {s.value} | {label} | {r['rows'] / te:,.0f} | {r['mb'] / te:,.1f} | {r['rows'] / td:,.0f} | "
                f"{r['mb'] / td:,.1f} | {te / tp:.1f}x ({base}) | {int(r[f'{label} bytes']):,} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
