"""Segments with real OTAP encoder output: encode -> segment -> read -> decode gives the same
tables as decoding the ingested records (every signal, stream-mode dictionaries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig
from quiver_store.fs import DEFAULT_FS
from quiver_store.segment import OpenSegment, SegmentReader, write_segment

adaptive_arrow = pytest.importorskip("adaptive_arrow")
otap_model = pytest.importorskip("otap_model")


@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_encoder_output_round_trips_through_a_segment(tmp_path, signal):
    sig = otap_model.Signal(signal)
    encoder = adaptive_arrow.Encoder(sig)
    ingested = []
    seg = OpenSegment(SegmentConfig(max_dictionary_size=64))  # small: exercises rotation too
    for i, bundle in enumerate(otap_model.generate(sig, 3000, batch_size=50, seed=3)):
        rb = encoder.encode_records(bundle)
        rb = RecordBundle(dict(rb.slots), dict(rb.fingerprints or {}), ingestion_time_ns=i)
        seg.append(rb)
        ingested.append(rb)
    path = str(tmp_path / "seg.qseg")
    info = write_segment(seg, path, 0, fs=DEFAULT_FS, metadata={"signal": signal})
    assert len({(s.slot, s.fingerprint) for s in info.streams}) < info.stream_count  # some stream rotated
    with SegmentReader.open(path) as reader:
        reader.verify()
        got = list(reader.bundles())
    assert len(got) == len(ingested)
    for a, b in zip(ingested, got):
        assert b.ingestion_time_ns == a.ingestion_time_ns
        assert dict(b.fingerprints or {}) == dict(a.fingerprints or {})
        want = adaptive_arrow.Decoder().decode_records(a)
        have = adaptive_arrow.Decoder().decode_records(b)
        assert set(want.tables) == set(have.tables)
        for pt in want.tables:
            assert have.tables[pt].equals(want.tables[pt]), (signal, pt)


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not DATA.is_dir(), reason="shared samples not available")
def test_real_samples_round_trip_through_one_segment(tmp_path):
    """Every OTLP example and Zipkin trace as bundles of one segment (mixed signals, many slots)."""
    bundles = []
    for f in sorted((DATA / "otlp-examples").glob("*.json")):
        bundles.append(otap_model.from_otlp_json(f.read_bytes()))
    for f in sorted((DATA / "zipkin").glob("*.json")):
        bundles.append(otap_model.from_zipkin_json(f.read_bytes()))
    seg = OpenSegment(SegmentConfig())
    ingested = []
    for i, bundle in enumerate(bundles):
        rb = adaptive_arrow.Encoder(bundle.signal).encode_records(bundle)
        rb = RecordBundle(dict(rb.slots), dict(rb.fingerprints or {}), ingestion_time_ns=i)
        seg.append(rb)
        ingested.append(rb)
    path = str(tmp_path / "samples.qseg")
    write_segment(seg, path, 0, fs=DEFAULT_FS, metadata={"source": "shared/data"})
    with SegmentReader.open(path) as reader:
        reader.verify()
        for a, b in zip(ingested, reader.bundles(), strict=True):
            want = adaptive_arrow.Decoder().decode_records(a)
            have = adaptive_arrow.Decoder().decode_records(b)
            assert {pt: t.to_pylist() for pt, t in want.tables.items()} == {pt: t.to_pylist() for pt, t in have.tables.items()}


def test_store_segments_name_the_signals_they_hold(tmp_path):
    """`quiver.signals` in a store-written segment's metadata lists the signals of the root slots
    holding rows; the generic layout, which names no root slots, writes no such key."""
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store import QuiverStore

    def bundle(signal, seed):
        plain = next(otap_model.generate(signal, 20, batch_size=20, seed=seed))
        return adaptive_arrow.Encoder(signal).encode_records(plain)

    with QuiverStore.open(tmp_path / "otap", layout=OTAP_LAYOUT) as store:
        store.ingest(bundle("metrics", 1))
        store.flush()
        store.ingest(bundle("traces", 2))
        store.ingest(bundle("logs", 3))
        store.flush()
        signals = [info.metadata.get("quiver.signals") for info in store.segments()]
    assert signals == ["metrics", "logs,traces"]

    with QuiverStore.open(tmp_path / "generic") as store:
        store.ingest(RecordBundle({0: bundle("logs", 4).slots[30]}))
        store.flush()
        (info,) = store.segments()
    assert "quiver.signals" not in info.metadata and info.metadata["quiver.layout"] == "generic"
