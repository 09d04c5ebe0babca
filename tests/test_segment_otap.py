"""Segments with real OTAP encoder output: encode -> segment -> read -> decode gives the same
tables as decoding the ingested records (every signal, stream-mode dictionaries)."""

from __future__ import annotations

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
