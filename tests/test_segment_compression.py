"""Segment compression (`SegmentConfig.compression`): every stream body of a segment file is
compressed with Arrow IPC body compression, so any Arrow reader opens the slices as before; the
store returns the same bundles from files several times smaller."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from adaptive_arrow import Encoder
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import generate
from quiver_store import ConfigError, QuiverStore, SegmentConfig, StoreConfig
from quiver_store.segment import SegmentReader


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compression": "gzip"}, "segment.compression must be one of lz4, zstd; got 'gzip'"),
        ({"compression_level": 3}, "segment.compression_level is set but segment.compression is None: name a codec"),
        ({"compression": "zstd", "compression_level": 23}, "segment.compression_level 23 is outside zstd's range [-131072, 22]"),
        ({"compression": "lz4", "compression_level": 0}, "segment.compression_level 0 is outside lz4's range [1, 12]"),
        ({"compression": "zstd", "compression_level": True}, "segment.compression_level must be an int, got bool True"),
    ],
)
def test_bad_compression_settings_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(ConfigError) as info:
        SegmentConfig(**kwargs)
    assert str(info.value) == message


def test_codec_follows_the_settings():
    assert SegmentConfig().codec() is None
    assert SegmentConfig(compression="lz4").codec().name == "lz4"
    codec = SegmentConfig(compression="zstd", compression_level=7).codec()
    assert (codec.name, codec.compression_level) == ("zstd", 7)


def logs_records(batches: int) -> list:
    encoder = Encoder("logs")
    return [encoder.encode_records(b) for b in generate("logs", batches * 1_000, batch_size=1_000, seed=11)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str | None, tuple[object, list]]:
    """The same 6 stream-mode logs bundles stored under each codec, and what came back."""
    records = logs_records(6)
    out = {}
    for codec in (None, "lz4", "zstd"):
        root = tmp_path_factory.mktemp(f"store-{codec}")
        config = StoreConfig(segment=SegmentConfig(compression=codec, max_open_duration=3600.0))  # type: ignore[arg-type]
        with QuiverStore.open(root, config, layout=OTAP_LAYOUT) as store:
            for r in records:
                store.ingest(r)
            store.flush()
            segments = store.segments()
            got = [b for _, _, b in store.bundles()]
        out[codec] = (root, segments, got, records)
    return out


@pytest.mark.parametrize("codec", [None, "lz4", "zstd"])
def test_a_compressed_store_returns_every_bundle_unchanged(stores, codec):
    """Values compared as Python objects: the segment's unified dictionaries (nested ones too)
    differ from the encoder's, the values they stand for do not."""
    _, segments, got, records = stores[codec]
    assert len(got) == len(records)
    for want, have in zip(records, got):
        assert sorted(have.slots) == sorted(want.slots)
        for slot, batch in want.slots.items():
            assert have.slots[slot].to_pylist() == batch.to_pylist(), slot
    assert [s.bundle_count for s in segments] == [6]


@pytest.mark.parametrize(("codec", "smaller_by"), [("lz4", 2.0), ("zstd", 3.0)])
def test_compressed_segments_are_several_times_smaller(stores, codec, smaller_by):
    """On these 6 bundles (measured at 0705e7d): 1,466,792 bytes uncompressed, 501,416 with lz4
    (2.9x), 342,568 with zstd (4.3x); the bounds leave room for pyarrow's codecs to change."""
    plain_size = stores[None][1][0].size_bytes
    size = stores[codec][1][0].size_bytes
    assert size * smaller_by < plain_size, (codec, size, plain_size)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_each_stream_slice_is_an_arrow_ipc_file_any_reader_opens(stores, codec):
    """Plain pyarrow reads a compressed stream slice straight from the file, no Quiver code involved."""
    _, segments, _, _ = stores[codec]
    info = segments[0]
    data = Path(info.path).read_bytes()
    for stream in info.streams:
        reader = pa.ipc.open_file(pa.py_buffer(data[stream.offset : stream.offset + stream.bytes]))
        assert sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches)) == stream.rows
    with SegmentReader.open(info.path) as segment:
        segment.verify()


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_quiver_verify_and_reopen_accept_a_compressed_store(stores, codec):
    root, _, got, _ = stores[codec]
    result = subprocess.run([sys.executable, "-m", "quiver_store.cli", "verify", str(root)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    with QuiverStore.open(root) as store:  # an uncompressed config reads the compressed segments too
        again = [b for _, _, b in store.bundles()]
    assert [sorted(b.slots) for b in again] == [sorted(b.slots) for b in got]
