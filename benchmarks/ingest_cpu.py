"""CPU cost of one `QuiverStore.ingest` of a small bundle, by step, insensitive to disk noise.

    .venv/bin/python -m benchmarks.ingest_cpu [--bundles N] [--rounds R] [--threads T] [--dir DIR] [--otap SIGNAL]

The bundles are bench_store's `small_bundles` (4 slots x 100 rows, OTAP-log shaped; every field
nullable), or with `--otap` the encoder's own bundles of 100 generated records of that signal
(3 to 14 slots, with the not-null fields of the OTAP schemas), built before timing as bench_store
does (so they are cold in cache). Each round opens a fresh store and ingests
them from one producer, twice:

- "fsync": the real file system. Reports the producer thread's CPU time per ingest
  (`time.thread_time_ns` around `ingest`; also without the kernel time of its pwritev and
  fdatasync calls, which varies with the disk's load) and the applier thread's CPU time per
  bundle (around its `_apply` of each entry), both independent of how long the fdatasync waits.
- "nosync": a FileSystem whose fdatasync is a no-op (measurement only): wall time per ingest, the
  Python cost with the disk taken out.

Then the same bundles from T producer threads (default 8), with each file system: the process's
CPU time per bundle, user and system (every thread: producers, applier, finalizer, preallocator),
which is what bounds the many-producer rate on two cores; bundles/s; and the producers' voluntary
context switches per bundle (sleeps: GIL hand-offs around pyarrow calls that release it, lock and
commit waits, I/O), the source of most of the system time.

Per-step figures (producer CPU time, per ingest) come from wrappers around the store's own steps;
each wrapper costs about 0.5 us (two clock reads), included in its step. A step the tree does not
have is skipped, so the same script measures an older tree run with PYTHONPATH, from a
directory outside the checkout (`python -m` puts the working directory first on `sys.path`, so
inside it the checkout is measured whatever PYTHONPATH says).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.bench_store import small_bundles, store_config
from quiver_store import QuiverStore, RecordBundle
from quiver_store.fs import FileSystem
from quiver_store.wal import group_commit

_clock = time.thread_time_ns


class NoSyncFS(FileSystem):
    """fdatasync and directory fsync do nothing: for measuring Python cost only, never a product."""

    def fdatasync(self, fd: int) -> None:
        return None

    def fsync_dir(self, path: str) -> None:
        return None


class Steps:
    """Producer-thread CPU time per named step, summed over a round."""

    def __init__(self) -> None:
        self.ns: collections.Counter[str] = collections.Counter()

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Replace `owner.name` (an instance or module attribute) with a timed call, if it exists."""
        fn: Callable[..., Any] | None = getattr(owner, name, None)
        if fn is None:
            return
        ns = self.ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                ns[label] += _clock() - t

        setattr(owner, name, timed)


def instrument(store: QuiverStore, steps: Steps, applier_ns: list[int]) -> Callable[[], None]:
    """Wrap the store's steps; returns a function undoing the module-level patch."""
    steps.wrap(store, "_check_schemas", "schema check")  # before: its own step
    steps.wrap(store._encoder, "check", "schema check")
    original_nulls = RecordBundle.__dict__.get("check_slot_nulls")
    steps.wrap(RecordBundle, "check_slot_nulls", "  not-null check")
    steps.wrap(store, "_is_large", "large-bundle test")
    steps.wrap(store._encoder, "encode", "serialize slots")
    steps.wrap(store._hub, "before_ingest", "size cap")
    steps.wrap(store, "_admit", "admit")
    steps.wrap(store._committer, "append", "group commit (all)")
    steps.wrap(store._committer, "on_commit", "  on_commit hand-off")
    steps.wrap(store._committer, "before_sync", "  applier wake-up")
    steps.wrap(store._wal, "append", "  WAL write+sync (all)")
    fs = store.fs
    steps.wrap(fs, "pwritev", "    pwritev")
    steps.wrap(fs, "fdatasync", "    fdatasync")
    original_parts = group_commit.entry_parts
    steps.wrap(group_commit, "entry_parts", "  framing + CRC32C")

    apply = store._apply

    def timed_apply(item: tuple, seg_cfg: Any) -> None:
        t = _clock()
        try:
            apply(item, seg_cfg)
        finally:
            if item[0] == "entry":
                applier_ns.append(_clock() - t)

    store._apply = timed_apply  # type: ignore[method-assign]

    def undo() -> None:
        group_commit.entry_parts = original_parts
        if original_nulls is not None:
            RecordBundle.check_slot_nulls = original_nulls  # type: ignore[method-assign]

    return undo


def one_round(directory: str, bundles: list[RecordBundle], fs: FileSystem, warm: int) -> dict[str, Any]:
    path = tempfile.mkdtemp(prefix="ingest-cpu-", dir=directory)
    steps = Steps()
    applier_ns: list[int] = []
    try:
        with QuiverStore.open(path, store_config(), fs=fs) as store:
            for b in bundles[:warm]:
                store.ingest(b)
            undo = instrument(store, steps, applier_ns)
            try:
                cpu: list[int] = []
                wall: list[int] = []
                for b in bundles[warm:]:
                    w, c = time.perf_counter_ns(), _clock()
                    store.ingest(b)
                    cpu.append(_clock() - c)
                    wall.append(time.perf_counter_ns() - w)
                store.flush()
            finally:
                undo()
            fsyncs = store.stats()["fsyncs"]
    finally:
        shutil.rmtree(path, ignore_errors=True)
    n = len(cpu)
    syscalls = steps.ns["    pwritev"] + steps.ns["    fdatasync"]
    return {
        "python": (sum(cpu) - syscalls) / n / 1e3,
        "cpu_mean": sum(cpu) / n / 1e3,
        "cpu_p50": statistics.median(cpu) / 1e3,
        "wall_mean": sum(wall) / n / 1e3,
        "wall_p50": statistics.median(wall) / 1e3,
        "applier_mean": sum(applier_ns) / max(len(applier_ns), 1) / 1e3,
        "steps": {k: v / n / 1e3 for k, v in steps.ns.items()},
        "fsyncs": fsyncs,
        "n": n,
    }


def context_switches() -> int:
    """Voluntary context switches of the calling thread so far (Linux; 0 elsewhere)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
    except (OSError, StopIteration):
        return 0


def many_round(directory: str, bundles: list[RecordBundle], fs: FileSystem, threads: int) -> dict[str, float]:
    """Process CPU (user, system) per bundle, bundles/s, bundles per fdatasync and the producers'
    voluntary context switches per bundle (each one a sleep: GIL hand-offs, lock and commit waits,
    I/O) for `threads` producers."""
    path = tempfile.mkdtemp(prefix="ingest-cpu-", dir=directory)
    switches = [0] * threads
    try:
        with QuiverStore.open(path, store_config(), fs=fs) as store:
            per = len(bundles) // threads
            start = threading.Barrier(threads + 1)

            def run(k: int) -> None:
                start.wait()
                before = context_switches()
                for b in bundles[k * per : (k + 1) * per]:
                    store.ingest(b)
                switches[k] = context_switches() - before

            workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
            for w in workers:
                w.start()
            cpu = os.times()
            start.wait()
            t = time.perf_counter()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - t
            end = os.times()
            stats = store.stats()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    n = per * threads
    return {
        "user": (end.user - cpu.user) / n * 1e6,
        "system": (end.system - cpu.system) / n * 1e6,
        "rate": n / elapsed,
        "group": stats["entries"] / max(stats["fsyncs"], 1),
        "switches": sum(switches) / n,
    }


def otap_bundles(signal: str, n: int, seed: int) -> list[RecordBundle]:
    """n bundles of the stream encoder, 100 generated records each."""
    import otap_model
    from adaptive_arrow import Encoder

    encoder = Encoder(signal)
    return [encoder.encode_records(b) for b in otap_model.generate(signal, 100 * n, batch_size=100, seed=seed)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundles", type=int, default=3000, help="bundles per round (default 3000; 100 of them warm-up)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8, help="producer threads of the many-producer rows (0: skip them)")
    ap.add_argument("--dir", default=None, help="directory for the stores (default: a temp dir)")
    ap.add_argument("--otap", choices=("logs", "traces", "metrics"), help="ingest the encoder's bundles of this signal instead")
    args = ap.parse_args()

    def fresh(seed: int) -> list[RecordBundle]:
        return small_bundles(args.bundles, seed=seed) if args.otap is None else otap_bundles(args.otap, args.bundles, seed)

    base = tempfile.mkdtemp(prefix="ingest-cpu-", dir=args.dir)
    warm = min(100, args.bundles // 10)
    try:
        for r in range(args.rounds):
            for label, fs in (("fsync", FileSystem()), ("nosync", NoSyncFS())):
                bundles = fresh(r + 1)  # fresh (cold) bundles per run
                res = one_round(base, bundles, fs, warm)
                print(
                    f"round {r + 1} {label:6s}: producer CPU {res['cpu_mean']:6.1f} us/ingest (p50 {res['cpu_p50']:.1f}; "
                    f"{res['python']:.1f} outside pwritev/fdatasync), "
                    f"wall {res['wall_mean']:6.1f} us (p50 {res['wall_p50']:.1f}), applier CPU {res['applier_mean']:5.1f} us/bundle, "
                    f"{res['fsyncs']} fsyncs / {res['n'] + warm} ingests"
                )
                for name, us in res["steps"].items():
                    print(f"    {name:28s} {us:6.1f} us")
            for label, fs in (("fsync", FileSystem()), ("nosync", NoSyncFS())) if args.threads else ():
                bundles = fresh(r + 1)
                m = many_round(base, bundles, fs, args.threads)
                print(
                    f"round {r + 1} {label:6s}, {args.threads} producers: process CPU {m['user'] + m['system']:6.1f} us/bundle "
                    f"(user {m['user']:.0f}, system {m['system']:.0f}), {m['rate']:,.0f} bundles/s, "
                    f"{m['group']:.1f} bundles per fdatasync, {m['switches']:.1f} voluntary context switches per bundle"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
