"""`quiver inspect` names each segment's codec, read from its streams' first batch messages
(the Arrow `BodyCompression` field): a store may hold segments written before and after a
change of `segment.compression`, and pyarrow decompresses without saying how."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store import QuiverStore, RecordBundle, SegmentConfig, StoreConfig
from quiver_store.cli import main
from quiver_store.segment.codec import message_codec, stream_codec

BATCH = pa.record_batch({"i": pa.array(range(1000)), "s": pa.array(["ab"] * 1000).dictionary_encode()})


def ipc_file(batch: pa.RecordBatch, compression: str | None) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


@pytest.mark.parametrize(("compression", "expected"), [(None, "none"), ("zstd", "zstd"), ("lz4", "lz4")])
def test_the_codec_of_an_ipc_file_is_read_from_its_first_batch_message(compression: str | None, expected: str) -> None:
    assert stream_codec(ipc_file(BATCH, compression)) == expected  # first batch message: a dictionary
    assert stream_codec(ipc_file(BATCH.select(["i"]), compression)) == expected  # a record batch


def test_a_file_without_batches_and_bytes_that_are_no_file() -> None:
    assert stream_codec(ipc_file(BATCH.slice(0, 0).select(["i"]), "zstd")) == "zstd"  # an empty batch is still a message
    empty = pa.BufferOutputStream()
    with pa.ipc.new_file(empty, BATCH.schema):
        pass
    assert stream_codec(empty.getvalue()) == "none"
    assert stream_codec(pa.py_buffer(b"ARROW1\0\0" + b"\xff" * 40)) == "?"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_random_metadata_never_raises(data: bytes) -> None:
    assert message_codec(data) in (None, "none", "zstd", "lz4", "?")


def test_inspect_names_the_codec_of_each_segment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for compression in (None, "zstd", "lz4"):
        with QuiverStore.open(tmp_path, StoreConfig(segment=SegmentConfig(compression=compression, max_open_duration=3600.0))) as store:
            store.ingest(RecordBundle({0: BATCH}))
    assert main(["inspect", str(tmp_path)]) == 0
    rows = re.findall(r"^\S\s+(\d+)\s+│\s+1\s+│\s+1\s+│\s+1000\s+│\s+\S+ \S+\s+│\s+(\w+)\s", capsys.readouterr().out, re.M)
    assert rows == [("0", "none"), ("1", "zstd"), ("2", "lz4")]
