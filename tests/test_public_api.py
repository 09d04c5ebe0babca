"""The public names DESIGN.md section 3 promises (other code and external checks rely on them)."""

import inspect

import pytest

import adaptive_arrow
import otap_model
import quiver_store
from adaptive_arrow.cli import build_parser as aa_parser
from quiver_store.cli import main as quiver_main


def test_otap_model_names():
    for name in ("PayloadType", "Signal", "OtapBundle", "reference_schema", "from_otlp", "from_otlp_json",
                 "to_otlp", "from_zipkin_json", "generate"):
        assert hasattr(otap_model, name), name
    assert otap_model.PayloadType.MULTIVARIATE_METRICS == 25 and otap_model.PayloadType.SPAN_LINK_ATTRS == 45
    assert {s.name for s in otap_model.Signal} == {"LOGS", "TRACES", "METRICS"}
    params = inspect.signature(otap_model.generate).parameters
    assert list(params)[:2] == ["signal", "count"]
    assert params["profile"].default == "default"
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in ("batch_size", "seed", "profile"))


def test_adaptive_arrow_names():
    config = adaptive_arrow.EncoderConfig()
    assert (config.sort, config.ipc_compression, config.dictionary_reset_threshold, config.max_schema_updates) == (
        True, None, 0.3, 5)
    encoder = adaptive_arrow.Encoder(otap_model.Signal.LOGS)
    for name in ("encode", "encode_records", "stats"):
        assert hasattr(encoder, name), name
    decoder = adaptive_arrow.Decoder()
    assert hasattr(decoder, "decode") and hasattr(decoder, "decode_records")
    bar = adaptive_arrow.BatchArrowRecords
    assert hasattr(bar, "to_bytes") and hasattr(bar, "from_bytes")
    schema = otap_model.reference_schema(otap_model.PayloadType.LOG_ATTRS)
    assert isinstance(adaptive_arrow.schema_signature(schema), str)
    assert len(adaptive_arrow.schema_fingerprint(schema)) == 32


def test_quiver_store_names():
    for name in ("RecordBundle", "QuiverStore", "StoreConfig", "SegmentConfig", "WalConfig", "RetentionConfig",
                 "CorruptionError", "StoreFullError", "ConfigError", "QuiverError"):
        assert hasattr(quiver_store, name), name
    for error in (quiver_store.CorruptionError, quiver_store.StoreFullError, quiver_store.ConfigError,
                  quiver_store.NotAStoreError, quiver_store.BundleError):
        assert issubclass(error, quiver_store.QuiverError)
    assert issubclass(quiver_store.NotAStoreError, quiver_store.ConfigError)
    assert issubclass(quiver_store.BundleError, ValueError)  # callers that caught the ValueError of old
    config = quiver_store.StoreConfig(
        segment=quiver_store.SegmentConfig(target_size=1 << 20, max_open_duration=1.0, max_stream_count=8),
        wal=quiver_store.WalConfig(max_size=1 << 30, max_chunks=4, flush_interval=0.0, durability="fsync"),
        retention=quiver_store.RetentionConfig(max_age=60.0, size_cap=1 << 30, size_cap_policy="drop_oldest"),
    )
    assert config.wal.durability == "fsync"
    for name in ("open", "ingest", "flush", "close", "bundles", "subscribe", "segments", "stats"):
        assert hasattr(quiver_store.QuiverStore, name), name
    for name in ("ack", "nack", "defer", "bundle", "segment_seq", "bundle_index"):
        assert hasattr(quiver_store.Delivery, name), name


def test_command_lines():
    choices = aa_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(choices) == {"generate", "encode", "decode", "bench", "pipeline"}
    for command in ("inspect", "verify", "dump", "replay"):
        with pytest.raises(SystemExit) as exit_:
            quiver_main([command, "--help"])
        assert exit_.value.code == 0
