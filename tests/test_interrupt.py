"""Ctrl-C at a random moment: a KeyboardInterrupt raised wherever the main thread happens to be.

Python delivers SIGINT as a KeyboardInterrupt between two bytecodes of the main thread, so it can
cut any store call in the middle: inside the WAL's group commit, between a lock's acquire and
the code that releases it, inside `close()` itself. What a user gets afterwards must still be
what a kill -9 leaves at worst: the `with` block's close() ends without hanging, the process
exits with the KeyboardInterrupt (not another error raised by a half-finished close), and the
next open returns every bundle whose `ingest` returned and never redelivers one whose `ack()`
returned.

Each run starts a writer process, lets it work for a random time, sends SIGINT (a second one
shortly after in the "twice" variants, as impatient users do), and checks all of the above. The
quick form runs in `make test`; `make torture` runs many more random times
(QUIVER_INTERRUPT_RUNS, default 60 per variant); the counts are in docs/reliability.md.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from quiver_store import QuiverStore, SegmentConfig, StoreConfig

CFG = StoreConfig(segment=SegmentConfig(target_size=64 << 10, max_open_duration=3600.0))


def sigint_default() -> None:
    """preexec_fn of the processes these tests send SIGINT: a test run started in the background by
    a non-interactive shell (`make torture &`) inherits SIGINT ignored, passes that on to every
    child, and Python then leaves it ignored, so the Ctrl-C never arrives and the run looks hung.
    Restored to the default, the child's Python installs its KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

WRITER = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, threading
    import pyarrow as pa
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the harness asks for stacks on a hang
    from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
    from quiver_store.errors import QuiverError, StoreClosedError
    cfg = StoreConfig(segment=SegmentConfig(target_size=64 << 10, max_open_duration=3600.0))
    start, mode, how = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    def say(line):  # one write(2) per line: print() from two threads can interleave mid-line
        os.write(1, (line + "\\n").encode())
    def produce():
        i = start
        while True:
            store.ingest(RecordBundle({0: pa.record_batch({"n": pa.array([i] * 40, pa.int64())}),
                                       3: pa.record_batch({"s": [f"v{i}"]})}))
            say(f"stored {i}")
            i += 1
            if mode != "plain" and i % 25 == 0:
                store.flush()  # finalize, so the subscriber has segments to read
    def consume():
        for delivery in sub:  # ends when the store closes
            value = delivery.bundle.slots[0]["n"][0].as_py()
            say(f"acking {value}")
            delivery.ack()
            say(f"acked {value}")
    def in_thread(work):  # the other thread's work ends with the store's close
        def run():
            try:
                work()
            except StoreClosedError:
                pass
            except QuiverError as exc:  # a signal cut a log write in the main thread: the store says to
                if "interrupted by" not in str(exc) and "signal handler raised" not in str(exc):  # reopen,
                    raise  # as the next run does; any other error is a failure
        threading.Thread(target=run).start()
    with QuiverStore.open(sys.argv[1], cfg) as store:
        if how == "sigterm":  # the usual service shutdown: close, then exit with status 0
            def on_term(signum, frame):
                store.close()
                sys.exit(0)
            signal.signal(signal.SIGTERM, on_term)
        if mode != "plain":
            sub = store.subscribe("a")
        say("ready")
        if mode == "subscriber-in-main":  # an exporter: the signal lands in next() or ack()
            in_thread(produce)
            consume()
        else:
            if mode == "subscriber":
                in_thread(consume)
            produce()
    """
)

MODES = {"plain": "ingest", "subscriber": "ingest+subscriber", "subscriber-in-main": "subscriber-in-main"}

HANG_SECONDS = 30.0


def interrupt_writer(path: Path, start: int, mode: str, after: float, twice: bool, how: str = "ctrl-c"
                     ) -> tuple[set[int], set[int], set[int]]:
    """Run the writer, signal it after `after` seconds (and again 5-50 ms later when `twice`):
    SIGINT ("ctrl-c"), or SIGTERM to a handler that calls close() and sys.exit(0) ("sigterm").
    Return the values it reported stored, acked, and being acked (ack() called, not known to have
    returned). Fails on a hang or an unexpected exit."""
    signum = signal.SIGINT if how == "ctrl-c" else signal.SIGTERM
    # Unbuffered, so readline() takes "ready" alone: communicate() reads the pipes' descriptors, not
    # a buffered reader, and would never see lines such a reader had read past it.
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start), mode, how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, preexec_fn=sigint_default)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if first != b"ready\n":
        proc.kill()
        raise AssertionError(f"writer did not start: {first!r} {proc.communicate()[1][-2000:].decode(errors='replace')}")
    time.sleep(after)
    proc.send_signal(signum)
    if twice:
        time.sleep(random.uniform(0.005, 0.05))
        if proc.poll() is None:
            proc.send_signal(signum)
    where = f"{how}, after={after:.3f}, twice={twice}"
    try:
        out, err = (stream.decode(errors="replace") for stream in proc.communicate(timeout=HANG_SECONDS))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # every thread's stack to stderr
        time.sleep(1.0)
        proc.kill()
        err = proc.communicate()[1].decode(errors="replace")
        raise AssertionError(f"writer hung for {HANG_SECONDS:.0f} s after the signal ({where})\n{err[-6000:]}") from None
    if how == "ctrl-c":
        ok = proc.returncode in (-signal.SIGINT, 1) and ends_with_keyboard_interrupt(err, twice)
    else:  # the handler's sys.exit(0) is the program's end, whatever the close it made ran into;
        # a second SIGTERM that arrives once the interpreter has restored the default handlers on
        # its way out ends the process by that signal
        ok = proc.returncode in ((0, -signal.SIGTERM) if twice else (0,)) and "Traceback" not in without_exit_noise(err)
    assert ok, f"writer ended with {proc.returncode} ({where}):\n{err[-3000:]}"
    (path.parent / "writer.out").write_text(out)  # evidence of the last run, kept with pytest's tmp_path
    (path.parent / "writer.err").write_text(f"{where}\n{err}")
    stored = {int(m.group(1)) for m in re.finditer(r"^stored (\d+)$", out, re.M)}
    acked = {int(m.group(1)) for m in re.finditer(r"^acked (\d+)$", out, re.M)}
    acking = {int(m.group(1)) for m in re.finditer(r"^acking (\d+)$", out, re.M)}
    return stored, acked, acking


_SHUTDOWN_REPORT = re.compile(
    r"Exception ignored in(?: atexit callback: |: <module 'threading' from |: <generator object CallDepth\.inside at )[^\n]*\n"
    r"Traceback \(most recent call last\):\n.{0,4000}?\n(?:SystemExit: 0|KeyboardInterrupt: ?)(?:\n|$)"
    # logging.shutdown (an atexit callback of CPython's) cut between its handler lock's acquire and
    # its `finally: release()`: that release fails in place of the signal's exception. Only frames of
    # logging/__init__.py, so a lock of the store's can never pass as this.
    r"|Exception ignored in atexit callback: <function shutdown at 0x[0-9a-f]+>\n"
    r"Traceback \(most recent call last\):\n"
    r"(?:  File \"[^\"\n]*/logging/__init__\.py\", line \d+, in \w+\n    [^\n]*\n)+"
    r"RuntimeError: cannot release un-acquired lock(?:\n|$)",
    re.S,
)


def without_exit_noise(err: str) -> str:
    """`err` less the report CPython prints when a second signal's exception (the SIGTERM handler's
    SystemExit(0), or a KeyboardInterrupt) lands in its own shutdown: inside an atexit callback (the
    store's exit guard, the handler's own close, or logging.shutdown, whose cut lock hand-over then
    reports a RuntimeError of its own), or in `threading._shutdown` (concurrent.futures' exit hook).
    Or in the finalization of a store call's `CallDepth.inside` generator: when the first signal
    cut the call's `with` inside its `__enter__`, no `__exit__` runs, and the generator's close (as
    the first exception unwinds) runs the close() that handler deferred; a second handler's
    exception there is one CPython ignores and prints (make torture at 47c15e1, 1 of 720 signals,
    status 0). The exit status is unchanged by it, and the exit guard stops what an interrupted
    callback did not."""
    return _SHUTDOWN_REPORT.sub("", err)


_IGNORED_IN_INSIDE = (
    "Exception ignored in: <generator object CallDepth.inside at 0x7f09a8d924d0>\n"
    "Traceback (most recent call last):\n"
    '  File "/x/quiver_store/reentry.py", line 53, in inside\n    self._run_deferred(leaving)\n'
    '  File "<string>", line 40, in on_term\n'
)


@pytest.mark.parametrize(("report", "noise"), [
    (_IGNORED_IN_INSIDE + "SystemExit: 0\n", True),
    (_IGNORED_IN_INSIDE + "KeyboardInterrupt: \n", True),
    (_IGNORED_IN_INSIDE + "quiver_store.errors.QuiverError: ack log /s/ack.log failed earlier\n", False),
    ("Exception ignored in: <generator object Other.inside at 0x1>\nTraceback (most recent call last):\nSystemExit: 0\n", False),
])
def test_exit_noise_is_only_a_signal_exception_cpython_ignored(report: str, noise: bool) -> None:
    """The filter drops CPython's report of a second signal's own exception in a finalizer, never
    a store error reported there, nor the report of another generator."""
    assert ("Traceback" not in without_exit_noise("before\n" + report)) is noise


def ends_with_keyboard_interrupt(err: str, twice: bool) -> bool:
    """The program ended with the KeyboardInterrupt itself, not with an error a close() cut short
    raised in its place: the last traceback's exception line (notes may follow it) names it. A
    second SIGINT can also land while the interpreter shuts down, after sys.stderr is gone; CPython
    then reports the KeyboardInterrupt object it could not print. Or while it prints the first
    one's traceback: its str() is then cut short ("KeyboardInterrupt: <exception str() failed>",
    make torture at 9ebd373, 1 of 720 signals)."""
    if twice:
        err = without_exit_noise(err)
    lines = err.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "Traceback (most recent call last):"]
    if starts:
        last = next((line for line in lines[starts[-1] + 1:] if line and not line[0].isspace()), "")
        if last == "KeyboardInterrupt" or (twice and last == "KeyboardInterrupt: <exception str() failed>"):
            return True
    return twice and "object type name: KeyboardInterrupt" in err and lines[-1:] == ["lost sys.stderr"]


def reopen(path: Path, subscriber: bool) -> tuple[list[int], list[int]]:
    """Every stored value in order, and what subscriber "a" is delivered now (acking each)."""
    with QuiverStore.open(path, CFG) as store:
        store.flush()
        values = [b.slots[0]["n"][0].as_py() for _, _, b in store.bundles()]
        delivered = []
        if subscriber:
            sub = store.subscribe("a")
            while (d := sub.next(timeout=0)) is not None:
                delivered.append(d.bundle.slots[0]["n"][0].as_py())
                d.ack()
    return values, delivered


def check_round(path: Path, rounds: int, mode: str, twice: bool, seed: int, how: str = "ctrl-c") -> None:
    """`rounds` interrupted writers on one store. A bundle may leave the store only after subscriber
    "a" acked it (retention then deletes its segment), so every stored bundle must be either still
    in the store or acked; an ack cut short by the interrupt may or may not have been recorded, so a
    bundle whose ack() was called is allowed to be gone as well as to come again."""
    rng = random.Random(seed)
    random.seed(seed)
    all_stored: set[int] = set()
    all_acked: set[int] = set()
    all_acking: set[int] = set()
    next_value = 0
    for _ in range(rounds):
        stored, acked, acking = interrupt_writer(path, next_value, mode, rng.uniform(0.02, 0.6), twice, how)
        all_stored |= stored
        evidence = path.parent / "before-reopen"  # the store as the writer left it, for a failure's diagnosis
        shutil.rmtree(evidence, ignore_errors=True)
        shutil.copytree(path, evidence)
        values, delivered = reopen(path, mode != "plain")
        assert not acked & set(delivered), (
            f"acked bundles delivered again: {sorted(acked & set(delivered))[:10]} "
            f"(the store before the reopen, the writer's output: {path.parent})"
        )
        all_acked |= acked | set(delivered)
        all_acking |= acking
        lost = all_stored - set(values) - all_acked - all_acking
        assert not lost, f"acknowledged bundles lost: {sorted(lost)[:10]} (evidence: {path.parent})"
        assert values == sorted(values) and len(values) == len(set(values)), "stored values are not one ordered run"
        next_value = max(all_stored | all_acking | set(values), default=-1) + 1
    if mode != "plain":  # at-least-once: reopen() delivered and acked the rest, so nothing is pending
        assert reopen(path, True)[1] == []


VARIANTS = pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
MODE = pytest.mark.parametrize("mode", list(MODES), ids=list(MODES.values()))
TWICE = pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])


@VARIANTS
@MODE
@TWICE
def test_a_signal_loses_nothing_acknowledged(tmp_path: Path, how: str, mode: str, twice: bool) -> None:
    check_round(tmp_path / "store", 2, mode, twice, seed=len(how) * 8 + 2 * list(MODES).index(mode) + twice, how=how)


RUNS = int(os.environ.get("QUIVER_INTERRUPT_RUNS", "60"))


@pytest.mark.torture
@VARIANTS
@MODE
@TWICE
def test_a_signal_at_many_random_moments(tmp_path: Path, how: str, mode: str, twice: bool) -> None:
    """RUNS signals per variant, the store reused across them (each run continues the last)."""
    check_round(tmp_path / "store", RUNS, mode, twice, seed=1000 + len(how) * 8 + 2 * list(MODES).index(mode) + twice,
                how=how)


# -- the command-line tools --------------------------------------------------------------------------


def test_ctrl_c_during_adaptive_arrow_pipeline_ends_quietly_and_leaves_a_sound_store(tmp_path: Path) -> None:
    """Exit status 130 and one line instead of a traceback; the store the command was filling opens,
    verifies and holds whole batches only (the with block closed it on the way out)."""
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store.cli import main as quiver_main

    store = tmp_path / "store"
    cli = Path(sys.executable).with_name("adaptive-arrow")
    proc = subprocess.Popen([str(cli), "pipeline", "--store", str(store), "--signal", "logs", "--count", "200000",
                             "--batch-size", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    wal = store / "wal" / "quiver.wal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # it generates and encodes every batch first, then ingests them
        if wal.is_file() and any(wal.read_bytes()[30:64]):  # the first entry after the 30-byte header
            break
        time.sleep(0.02)
    else:
        proc.kill()
        raise AssertionError(f"the pipeline never started ingesting: {proc.communicate()[1][-2000:]}")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_SECONDS)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == "adaptive-arrow pipeline: interrupted" and "Traceback" not in err, err[-2000:]
    assert quiver_main(["verify", str(store)]) == 0
    with QuiverStore.open(store, layout=OTAP_LAYOUT) as opened:  # the pipeline's layout: its WAL may hold entries
        opened.flush()
        rows = [sum(b.num_rows for b in bundle.slots.values()) for _, _, bundle in opened.bundles()]
    assert rows and all(rows), f"stored bundles' row counts: {rows}"  # interrupted mid-run, with work stored


def test_ctrl_c_in_a_quiver_command_ends_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from quiver_store import cli

    QuiverStore.open(tmp_path / "store").close()

    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_dump", interrupted)
    assert cli.main(["dump", str(tmp_path / "store")]) == 130
    assert capsys.readouterr().err.strip() == "quiver dump: interrupted"


def test_ctrl_c_in_an_adaptive_arrow_command_ends_quietly(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from adaptive_arrow import cli
    from adaptive_arrow.commands import generate

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "run", interrupted)
    assert cli.main(["generate", "--signal", "logs", "--count", "10", "--out", "x.pb"]) == 130
    assert capsys.readouterr().err.strip() == "adaptive-arrow generate: interrupted"


# -- a failing close beside an exception already leaving ---------------------------------------------


def test_a_failing_close_does_not_replace_the_exception_leaving_the_with_block(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from quiver_store.errors import QuiverError

    store = QuiverStore.open(tmp_path / "store")
    real_close = store._close

    def failing_close() -> None:
        real_close()
        raise QuiverError("closed without finalizing its open segment (kept in the WAL)")

    monkeypatch.setattr(store, "_close", failing_close)
    with pytest.raises(KeyboardInterrupt) as leaving, store:
        raise KeyboardInterrupt
    assert leaving.value.__notes__ == [
        f"then closing the Quiver store {store.path} failed: closed without finalizing its open segment (kept in the WAL)"
    ]
    assert store._closed


def test_a_deferred_close_that_fails_leaves_the_handlers_exit_status_alone() -> None:
    from quiver_store.errors import QuiverError
    from quiver_store.reentry import CallDepth

    def failing_close() -> None:
        raise QuiverError("the WAL stopped accepting writes after SystemExit during a commit")

    calls = CallDepth()
    with pytest.raises(SystemExit) as leaving, calls.inside():
        assert calls.defer_if_inside(failing_close)  # a SIGTERM handler's close(), inside a store call
        raise SystemExit(0)  # ... then its sys.exit(0)
    assert leaving.value.code == 0
    assert leaving.value.__notes__ == [
        "then the close() deferred to the end of this call failed: "
        "the WAL stopped accepting writes after SystemExit during a commit"
    ]
