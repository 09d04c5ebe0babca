"""kill -9 of a writer process at random moments while it ingests and a subscriber in it acks:
across restarts no acknowledged ingest is lost, no acked bundle is delivered again, and every
other bundle is delivered (at-least-once, no gaps). The writer prints each step only after the
call returned, so the parent knows exactly what was promised before the kill; like any producer
it sends again, after a restart, the one bundle whose acknowledgement it may have missed, so that
bundle alone may be stored (and delivered) twice."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .test_power_loss import reopened

REPO = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    from quiver_store import QuiverStore
    from tests.test_power_loss import CONFIG, bundle
    store = QuiverStore.open(sys.argv[1], CONFIG)
    print("open", flush=True)
    subscription = store.subscribe("exporter")
    i = int(sys.argv[2])
    while True:
        store.ingest(bundle(i))
        print("ingested", i, flush=True)
        i += 1
        while (delivery := subscription.next(timeout=0.0)) is not None:
            value = delivery.bundle.slots[30]["v"][0].as_py()
            print("acking", value, flush=True)
            delivery.ack()
            print("acked", value, flush=True)
    """
)


def run_and_kill(path: str, start: int, after_s: float) -> list[list[str]]:
    """Run the writer, SIGKILL it `after_s` seconds after it opened the store; its output lines."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, path, str(start), str(REPO)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = []
    try:
        first = proc.stdout.readline()
        assert first.strip() == "open", first
        time.sleep(after_s)
        os.kill(proc.pid, signal.SIGKILL)
        output = proc.stdout.read()
        complete = output[: output.rfind("\n") + 1]  # a line the kill cut short means nothing yet
        lines = [line.split() for line in complete.splitlines()]
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return [line for line in lines if line]


def check_random_kills(tmp_path, seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    ingested = 0
    acked: set[int] = set()  # ack() returned
    cut_short: set[int] = set()  # ack() the kill interrupted: outcome unknown
    resent: set[int] = set()  # a kill between ingest() returning and the print makes the next run send it again
    for _ in range(rounds):
        resent.add(ingested)
        for line in run_and_kill(str(tmp_path), ingested, rng.uniform(0.05, 0.6)):
            value = int(line[1])
            if line[0] == "ingested":
                assert value == ingested
                ingested += 1
            elif line[0] == "acking":
                assert value not in acked or value in resent, f"bundle {value} was acked, then delivered again"
                cut_short.add(value)
            elif line[0] == "acked":
                cut_short.discard(value)
                acked.add(value)
    assert ingested > 20 and len(acked) > 10, (ingested, len(acked))
    _, delivered = reopened(tmp_path)
    context = f"ingested {ingested}, acked {sorted(acked)}, cut short {sorted(cut_short)}, delivered {delivered}"
    twice = {v for v in delivered if delivered.count(v) > 1} - resent
    assert not twice, f"bundles {sorted(twice)} delivered twice: {context}"
    again = acked & set(delivered) - resent
    assert not again, f"acked bundles {sorted(again)} delivered again: {context}"
    missing = set(range(ingested)) - acked - cut_short - set(delivered)
    assert not missing, f"acknowledged bundles {sorted(missing)} never delivered: {context}"


def test_random_kills_with_a_subscriber(tmp_path):
    check_random_kills(tmp_path, seed=7, rounds=8)


@pytest.mark.torture
@pytest.mark.parametrize("seed", range(10))
def test_random_kills_torture(tmp_path, seed):
    check_random_kills(tmp_path, seed=seed, rounds=20)
