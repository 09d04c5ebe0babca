"""A store opened before os.fork() refuses every call in the child, and the parent's data is intact.

Before, the child's ingest was acknowledged and then lost (the parent's next WAL entry went to the
same offset), and the child's flush() hung."""

from __future__ import annotations

import json
import os
import signal
import warnings
from pathlib import Path

import pyarrow as pa

from quiver_store import QuiverStore, RecordBundle
from quiver_store.errors import QuiverError


def bundle(i: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"i": pa.array([i], pa.int64())})})


def in_child(work) -> dict:  # type: ignore[no-untyped-def]
    """Run `work()` in a forked child; return the dict it returns (or the error it raised)."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, Python >= 3.12
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read_end)
        signal.alarm(20)  # a hang (flush() in the child used to) ends the child, failing the test
        try:
            result = work()
        except BaseException as exc:
            result = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return json.loads(b"".join(chunks))


def test_the_child_refuses_every_call_and_the_parent_loses_nothing(tmp_path: Path) -> None:
    store = QuiverStore.open(tmp_path / "s")
    sub = store.subscribe("a")
    store.ingest(bundle(1))
    store.flush()
    delivery = sub.next(timeout=2.0)
    assert delivery is not None

    def child() -> dict:
        refused = {}
        for name, call in [
            ("ingest", lambda: store.ingest(bundle(2))),
            ("flush", store.flush),
            ("finalize_now", lambda: store.finalize_now("child")),
            ("subscribe", lambda: store.subscribe("b")),
            ("next", lambda: sub.next(timeout=0)),
            ("ack", delivery.ack),
        ]:
            try:
                call()
                refused[name] = "accepted"
            except QuiverError as exc:
                refused[name] = f"{type(exc).__name__}: {exc}"
        store.close()  # forgets the store; the parent's files are left alone
        return {"refused": refused, "pid": os.getpid()}

    result = in_child(child)
    message = (
        f"QuiverError: store {tmp_path / 's'} was opened in process {os.getpid()} before it forked; this process "
        f"({result['pid']}) cannot use it (it has the parent's files but not its threads). Open the store after the "
        "fork, in the process that uses it; one process opens a store directory at a time"
    )
    assert result["refused"] == dict.fromkeys(["ingest", "flush", "finalize_now", "subscribe", "next", "ack"], message)
    assert delivery.settled is None  # the child's ack was refused before it settled anything
    store.ingest(bundle(3))  # the parent's store works on
    store.close()
    with QuiverStore.open(tmp_path / "s") as reopened:
        assert [b.slots[0]["i"][0].as_py() for _, _, b in reopened.bundles()] == [1, 3]
        again = reopened.subscribe("a")
        got = [again.next(timeout=1.0) for _ in range(2)]
        assert [d.bundle.slots[0]["i"][0].as_py() for d in got] == [1, 3]  # type: ignore[union-attr]


def test_a_store_opened_in_the_child_works(tmp_path: Path) -> None:
    parent = QuiverStore.open(tmp_path / "parent")

    def child() -> dict:
        with QuiverStore.open(tmp_path / "child") as own:
            own.ingest(bundle(5))
        return {"ok": True}

    assert in_child(child) == {"ok": True}
    parent.ingest(bundle(6))
    parent.close()
    with QuiverStore.open(tmp_path / "child") as own:
        assert [b.slots[0]["i"][0].as_py() for _, _, b in own.bundles()] == [5]


def test_a_closed_store_is_no_longer_tracked(tmp_path: Path) -> None:
    from quiver_store import fork_guard

    store = QuiverStore.open(tmp_path / "s")
    assert store in set(fork_guard._OPEN)
    store.close()
    assert store not in set(fork_guard._OPEN)
