"""A program that ends with a store still open (close() never called, or cut short by a second
Ctrl-C) exits normally and loses nothing acknowledged.

Before quiver_store/exit_guard.py, the store's daemon threads were torn down by the interpreter's
shutdown; a finalizer inside pyarrow's C++ at that moment aborted the process (SIGABRT, "terminate
called without an active exception"): 5 of 30 runs of the script below. Now the threads are stopped
first, as a crash would stop them, and the next open replays the WAL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quiver_store import QuiverStore

SCRIPT = r"""
import sys, pyarrow as pa
from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
store = QuiverStore.open(sys.argv[1], StoreConfig(segment=SegmentConfig(target_size=256 << 10)))
for i in range(int(sys.argv[2])):
    store.ingest(RecordBundle({0: pa.record_batch({"n": pa.array([i] * 2000, pa.int64()),
                                                   "s": [f"value {i} {j}" for j in range(2000)]})}))
print("acknowledged", sys.argv[2], flush=True)
"""  # ends with the store open: segments are being finalized while the interpreter exits


def run_unclosed(path: Path, bundles: int) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(bundles)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{proc.stderr[-2000:]}"
    assert proc.stdout == f"acknowledged {bundles}\n"
    assert "still open at interpreter exit: stopping its threads; the next open replays the WAL" in proc.stderr
    with QuiverStore.open(path) as store:
        store.flush()  # the replayed tail of the WAL becomes a segment
        assert [b.slots[0]["n"][0].as_py() for _, _, b in store.bundles()] == list(range(bundles))


@pytest.mark.parametrize("bundles", [20, 21, 22, 23, 24, 25, 26, 27])
def test_exit_with_the_store_open_is_a_normal_exit(tmp_path: Path, bundles: int) -> None:
    run_unclosed(tmp_path / "store", bundles)


@pytest.mark.torture
def test_exit_with_the_store_open_many_times(tmp_path: Path) -> None:
    runs = int(os.environ.get("QUIVER_EXIT_RUNS", "60"))
    for k in range(runs):
        run_unclosed(tmp_path / f"store{k}", 20 + k % 7)
