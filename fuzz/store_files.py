"""One file of a crashed store replaced by fuzz input (see fuzz/__init__.py).

Input: byte 0 picks the file (mod 6), the rest is its new content. The crashed store is made
once (FUZZ_STORE_TEMPLATE names it; `python -m fuzz` keeps it in its output folder)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping

from quiver_store import QuiverError, QuiverStore, SegmentConfig, StoreConfig, WalConfig, cli

from .harness import Seeds, fuzz

FILES = ("wal/quiver.wal", "segments/0000000000000000.qseg", "ack.log", "ack.checkpoint", "wal/truncate.offset", "segments/next.seq")
CONFIG = StoreConfig(segment=SegmentConfig(max_open_duration=3600.0))
WORK = tempfile.mkdtemp(prefix="fuzz-store-")
atexit.register(shutil.rmtree, WORK, True)

CRASHED_STORE = """
import os, sys
import otap_model
from adaptive_arrow import Encoder
from quiver_store import QuiverStore, SegmentConfig, StoreConfig
store = QuiverStore.open(sys.argv[1], StoreConfig(segment=SegmentConfig(max_open_duration=3600.0)))
encoder = Encoder("logs")
for bundle in otap_model.generate("logs", 30, batch_size=10, seed=1):
    store.ingest(encoder.encode_records(bundle))
store.flush()
subscription = store.subscribe("a")
subscription.next(timeout=1).ack()
subscription.next(timeout=1).nack()
encoder = Encoder("traces")
for bundle in otap_model.generate("traces", 30, batch_size=10, seed=1):
    store.ingest(encoder.encode_records(bundle))
os._exit(0)  # a crash: the traces stay in the WAL only
"""


def make_template(path: str) -> None:
    """A store with a segment, an ack log with an ack and a nack, and WAL entries to replay."""
    subprocess.run([sys.executable, "-c", CRASHED_STORE, path], check=True)


@functools.cache
def template() -> str:
    """FUZZ_STORE_TEMPLATE, made if missing; else one made for this process."""
    path = os.environ.get("FUZZ_STORE_TEMPLATE") or os.path.join(WORK, "template")
    if not os.path.isdir(path):
        make_template(path)
    return path


logging.disable(logging.CRITICAL)  # recovery logs every damage it meets


def one(data: bytes) -> None:
    if not data:
        return
    check_with(FILES[data[0] % len(FILES)], data[1:])


def check_with(name: str, content: bytes, others: Mapping[str, bytes] | None = None) -> None:
    """The template with file `name` replaced by `content` (and each of `others` written too):
    every tool and every open of it either works or raises QuiverError."""
    path = os.path.join(WORK, "store")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(template(), path)
    for file, data in {name: content, **(others or {})}.items():
        with open(os.path.join(path, file), "wb") as f:
            f.write(data)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for command in (
            ["verify", path], ["inspect", path, "--streams", "--schemas"], ["replay", path],
            ["replay", path, "--recovery", "skip_corrupt"], ["dump", path],
        ):
            status = cli.main(command)
            assert status in (0, 1, 2), (command, status)
    for recovery in ("point_in_time", "skip_corrupt", "strict"):
        copy = os.path.join(WORK, recovery)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy)
        try:
            with QuiverStore.open(copy, StoreConfig(segment=CONFIG.segment, wal=WalConfig(recovery=recovery))) as store:
                for _ in store.bundles():
                    pass
                subscription = store.subscribe("a")
                while (delivery := subscription.next(timeout=0)) is not None:
                    delivery.ack()
        except QuiverError:
            pass


def seed(directory: str) -> None:
    """Each file of the template as it is (the WAL without its pre-extended zero tail)."""
    put = Seeds(directory).put
    for i, name in enumerate(FILES):
        source = os.path.join(template(), name)
        if not os.path.exists(source):
            continue
        with open(source, "rb") as f:
            data = f.read()
        put(bytes([i]) + (data.rstrip(b"\0") if name.endswith(".wal") else data))


if __name__ == "__main__":
    fuzz(one)
