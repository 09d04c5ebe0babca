"""SIGKILL a writer process right after `ingest` returned: the acknowledged bundles are recovered.

The writer runs with the default pre-extended WAL (its entries overwrite a zero tail, so a kill in
the middle of a write leaves a torn frame followed by zeros) and without pre-extension (appends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from quiver_store import QuiverStore, SegmentConfig, StoreConfig, WalConfig

CFG = StoreConfig(segment=SegmentConfig(target_size=16 << 10, max_open_duration=3600.0))
DEFAULT_PREALLOCATE = WalConfig().preallocate

WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig, WalConfig
    cfg = StoreConfig(segment=SegmentConfig(target_size=16 << 10, max_open_duration=3600.0),
                      wal=WalConfig(preallocate=int(sys.argv[3])))
    store = QuiverStore.open(sys.argv[1], cfg)
    start = int(sys.argv[2])
    i = start
    while True:
        receipt = store.ingest(RecordBundle({0: pa.record_batch({"n": pa.array([i] * 50, pa.int64())}),
                                             3: pa.record_batch({"s": [f"v{i}"]})}))
        print(i, receipt.sequence, flush=True)
        i += 1
    """
)


def run_and_kill(path: str, start: int, acks_before_kill: int, preallocate: int = DEFAULT_PREALLOCATE) -> list[int]:
    """Start a writer, kill -9 it as soon as it printed `acks_before_kill` receipts."""
    cmd = [sys.executable, "-c", WRITER, path, str(start), str(preallocate)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    acked = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked.append(int(line.split()[0]))
            if len(acked) >= acks_before_kill:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return acked


def recovered(path: str) -> list[int]:
    QuiverStore.open(path, CFG).close()  # recovery: replay the WAL, finalize it
    with QuiverStore.open(path, CFG) as store:
        return [b.slots[0]["n"][0].as_py() for _, _, b in store.bundles()]


def test_single_acknowledged_bundle_survives_sigkill(tmp_path):
    acked = run_and_kill(str(tmp_path), 0, 1)
    assert acked == [0]
    got = recovered(str(tmp_path))
    assert got[:1] == [0] and got == list(range(len(got)))


@pytest.mark.parametrize("preallocate", [DEFAULT_PREALLOCATE, 0], ids=["pre-extended", "appending"])
@pytest.mark.parametrize("rounds", [3])
def test_repeated_sigkill_loses_no_acknowledged_bundle(tmp_path, rounds, preallocate):
    next_value, all_acked = 0, []
    for r in range(rounds):
        acked = run_and_kill(str(tmp_path), next_value, 40 + 37 * r, preallocate)
        all_acked += acked
        got = recovered(str(tmp_path))
        assert set(all_acked) <= set(got), "an acknowledged bundle was lost"
        assert got == sorted(got) and len(got) == len(set(got)), "recovered log is not an ordered prefix"
        next_value = got[-1] + 1
