"""One file of a crashed store replaced by fuzz input (see fuzz/__init__.py).

Input: byte 0 picks the file (mod 12: the 11 FILES, then the progress ledger again with the CRC32C
of the rest appended, so that its entries are read), the rest is its new content. The crashed store
is made once (FUZZ_STORE_TEMPLATE names it; `python -m fuzz` keeps it in its output folder)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping

import crc32c

from adaptive_arrow.store_layout import OTAP_LAYOUT
from quiver_store import (
    QuiverError,
    QuiverStore,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    WalConfig,
    cli,
    progress_ledger,
)

from .harness import Seeds, fuzz
from .readback import Edited, segment_name

SEGMENTS = tuple(segment_name(seq) for seq in (1, 2, 3))  # 1 and 2 uncompressed, 3 zstd
WALS = ("wal/quiver.wal.6", "wal/quiver.wal.7", "wal/quiver.wal")  # two rotated chunks, then the active file
LEDGER = f"segments/{progress_ledger.NAME}"
FILES = (WALS[2], SEGMENTS[0], "ack.log", "ack.checkpoint", "wal/truncate.offset", "segments/next.seq", *WALS[:2],
         *SEGMENTS[1:], LEDGER)  # fmt: skip
PRODUCERS = ("import/0", "import/1", "import/2", "import/3")  # the template's three, and one it never saw
# Small WAL files so the template's WAL rotates; the maintenance timer never runs by itself, so
# the template's one retention sweep is the explicit one.
CONFIG = StoreConfig(
    segment=SegmentConfig(max_open_duration=3600.0, compression="zstd"),
    wal=WalConfig(max_size=1 << 20, rotation_size=16384, preallocate=4096),
    retention=RetentionConfig(max_age=3600.0, maintenance_interval=3600.0),
)
WORK = tempfile.mkdtemp(prefix="fuzz-store-")
atexit.register(shutil.rmtree, WORK, True)

CRASHED_STORE = """
import dataclasses, os, sys, time
import otap_model
from adaptive_arrow import Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from quiver_store import *
config = {config!r}
def ingest(store, signal, bundles, ingestion_time_ns=None, producer=None, offset=0):
    encoder = Encoder(signal)
    for i, bundle in enumerate(otap_model.generate(signal, 10 * bundles, batch_size=10, seed=1)):
        records = encoder.encode_records(bundle)
        if producer is not None:  # "producer has consumed offset + i + 1 items", in slot 63
            records = with_progress(records, producer, offset + i + 1)
        if ingestion_time_ns is not None:
            records.ingestion_time_ns = ingestion_time_ns
        store.ingest(records)
uncompressed = dataclasses.replace(config, segment=dataclasses.replace(config.segment, compression=None))
with QuiverStore.open(sys.argv[1], uncompressed, layout=OTAP_LAYOUT) as store:
    a, b = store.subscribe("a"), store.subscribe("b")
    ingest(store, "logs", 1, 10**18, "import/0", 0)  # segment 0: retention drops it (max_age), its
    ingest(store, "logs", 1, 10**18, "import/1", 40)  # offsets (import/0 1, import/1 41) go to the ledger
    store.flush()
    ingest(store, "logs", 2, None, "import/0", 1)  # segment 1: import/0 3
    store.flush()
    ingest(store, "logs", 1)  # segment 2
    store.flush()
    a.next(timeout=1).ack(); a.next(timeout=1).nack(); b.next(timeout=1).ack()
    store.maintain()  # drops segment 0: outcomes "dropped" for a's nacked bundle and b's unread one
    a.next(timeout=1).ack(); a.next(timeout=1).nack()
    b.next(timeout=1).nack(); b.next(timeout=1).ack(); b.next(timeout=1).ack()  # b: segment 2 done, 1 not
# closed: ack.checkpoint; reopened with compressed segments
store = QuiverStore.open(sys.argv[1], config, layout=OTAP_LAYOUT)
a, b = store.subscribe("a"), store.subscribe("b")
store.unsubscribe(store.subscribe("c").name)
ingest(store, "traces", 2, None, "import/1", 41)  # segment 3, zstd: import/1 43
store.flush()
a.next(timeout=1).ack(); b.next(timeout=1).nack()
# progress only in the WAL (replay recovers it): import/2 7, import/0 4
ingest(store, "metrics", 1, None, "import/2", 6)  # two WAL entries past wal.rotation_size: the next one rotates
ingest(store, "logs", 1, None, "import/0", 3)  # the WAL, in a new active file followed by its pre-extended
active, waited = os.path.join(sys.argv[1], "wal", "quiver.wal"), 0  # zero tail (the preallocator thread writes it)
while os.path.getsize(active) < config.wal.rotation_size and waited < 1000:
    time.sleep(0.01); waited += 1
os._exit(0)  # a crash: these stay in the WAL only
"""


def make_template(path: str) -> None:
    """A crashed OTAP store (docs: fuzz/__init__.py) holding every file FILES names."""
    subprocess.run([sys.executable, "-c", CRASHED_STORE.format(config=CONFIG), path], check=True)
    missing = [name for name in FILES if not os.path.exists(os.path.join(path, name))]
    assert not missing, f"the template store lacks {missing}"


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
    choice = data[0] % (len(FILES) + 1)
    if choice < len(FILES):
        check_with(FILES[choice], data[1:])
    else:
        check_with(LEDGER, data[1:] + crc32c.crc32c(data[1:]).to_bytes(4, "little"))


def check_with(name: str, content: bytes, others: Mapping[str, bytes] | None = None) -> None:
    """The template with file `name` replaced by `content` (and each of `others` written too):
    every tool and every open of it either works or raises QuiverError, and every bundle read back
    is what readback.py allows."""
    path = os.path.join(WORK, "store")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(template(), path)
    written = {name: content, **(others or {})}
    for file, data in written.items():
        with open(os.path.join(path, file), "wb") as f:
            f.write(data)
    edited = Edited(template(), written)
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
        config = dataclasses.replace(CONFIG, wal=dataclasses.replace(CONFIG.wal, recovery=recovery))
        try:
            with QuiverStore.open(copy, config, layout=OTAP_LAYOUT) as store:
                read_back(store, edited)
        except QuiverError:
            pass


def read_back(store: QuiverStore, edited: Edited) -> None:
    """Every finalized bundle, every delivery to both subscribers (again once a flush put the
    bundles replayed from the WAL into a segment), and each producer's committed offset. Each step
    runs even when an earlier one raised QuiverError: a damaged stream stops `bundles()`, and the
    data of the other streams must still be right."""
    with contextlib.suppress(QuiverError):
        for seq, index, bundle in store.bundles():
            edited.check(seq, index, bundle)
    subscriptions = []
    for name in ("a", "b"):
        with contextlib.suppress(QuiverError):
            subscriptions.append(store.subscribe(name))
    for flush in (True, False):
        for subscription in subscriptions:
            with contextlib.suppress(QuiverError):
                while (delivery := subscription.next(timeout=0)) is not None:
                    edited.check(delivery.segment_seq, delivery.bundle_index, delivery.bundle)
                    delivery.ack()
        if flush:
            with contextlib.suppress(QuiverError):
                store.flush()
    for producer in PRODUCERS:
        with contextlib.suppress(QuiverError):
            store.committed_offset(producer)


def seed(directory: str) -> None:
    """Each file of the template as it is (a WAL file without a pre-extended zero tail), and again
    with its middle byte inverted: libFuzzer keeps only seeds that add coverage, and every file
    as it is runs the same code (the template), so without the damaged ones it would keep two."""
    put = Seeds(directory).put
    for i, name in enumerate((*FILES, LEDGER)):
        with open(os.path.join(template(), name), "rb") as f:
            data = bytearray(f.read().rstrip(b"\0") if "/quiver.wal" in name else f.read())
        if i == len(FILES):  # the ledger whose CRC32C `one` appends
            del data[-4:]
        put(bytes([i]) + data)
        data[len(data) // 2] ^= 0xFF
        put(bytes([i]) + data)


if __name__ == "__main__":
    fuzz(one)
