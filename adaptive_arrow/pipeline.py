"""The end-to-end job: generate telemetry, encode it adaptively, persist it in Quiver, read it back
through a subscriber and check every bundle against its source.

This is what `make demo` and `adaptive-arrow pipeline` run. Each step uses the public API only, so
the job doubles as the reference for wiring the three packages together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import zstandard

from otap_model import Signal, from_otlp, generate_otlp, normalize_otlp, to_otlp
from otap_model.otlp.decode import REQUEST_TYPES
from otap_model.otlp.order import canonical_order
from quiver_store import QuiverStore, RetentionConfig, SegmentConfig, StoreConfig
from quiver_store.config import Compression

from .config import EncoderConfig
from .decoder import Decoder
from .encoder import Encoder
from .store_layout import OTAP_LAYOUT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ZSTD_LEVEL = 3
SUBSCRIBER = "pipeline-verifier"
KEEP_ACKED = 256 * 1024 * 1024
"""Bytes of acknowledged segments the job's store keeps when no ``store_config`` is given
(``retention.steady_state_headroom``; newest kept, oldest deleted first): the verifier acks every
bundle, and with the default of 0 the store would delete the run's data before anyone could
``quiver inspect``, ``dump`` or ``verify`` it."""


def job_store_config(segment_compression: Compression | None = None) -> StoreConfig:
    """The store configuration of the job when none is given: `KEEP_ACKED` bytes of acknowledged
    segments kept, segments compressed with `segment_compression` (None: uncompressed)."""
    return StoreConfig(
        segment=SegmentConfig(compression=segment_compression),
        retention=RetentionConfig(steady_state_headroom=KEEP_ACKED),
    )


@dataclass
class SignalReport:
    """What one signal went through, with the sizes of each representation."""

    signal: Signal
    batches: int = 0
    records: int = 0
    otlp_bytes: int = 0
    otlp_zstd_bytes: int = 0
    otap_bytes: int = 0
    otap_zstd_bytes: int = 0
    encode_seconds: float = 0.0
    ingest_seconds: float = 0.0
    delivered: int = 0
    verified: int = 0
    mismatches: list[int] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """How many times smaller OTAP + zstd is than OTLP + zstd."""
        return self.otlp_zstd_bytes / self.otap_zstd_bytes if self.otap_zstd_bytes else 0.0


@dataclass
class PipelineResult:
    reports: list[SignalReport]
    store_path: Path
    store_stats: dict[str, object]

    @property
    def ok(self) -> bool:
        return all(r.verified == r.batches and not r.mismatches for r in self.reports)


def run_pipeline(
    store_path: str | Path,
    *,
    signals: Iterable[Signal] = tuple(Signal),
    count: int = 20_000,
    batch_size: int = 5_000,
    seed: int = 42,
    profile: str = "default",
    encoder_config: EncoderConfig | None = None,
    store_config: StoreConfig | None = None,
    progress: object | None = None,
    spark: SparkSession | None = None,
) -> PipelineResult:
    """Run the job into the store at `store_path` (created if needed) and verify what comes back.

    Without `spark` this process encodes each request; with a SparkSession the requests become a
    DataFrame and Spark tasks encode them (`adaptive_arrow.spark.encode_otlp`, one OTAP stream per
    partition). Either way the driver stores each envelope's records (`Decoder.read_records`, no
    second encoding) and a subscriber reads them back; without `store_config` the store keeps the
    acknowledged segments up to `KEEP_ACKED` bytes. Every request is kept (as bytes) until its
    bundle has been delivered back, decoded and compared, so keep `count` moderate. A signal named
    twice runs once (its report would count both runs against one run's batches).
    """
    store_path = Path(store_path)
    signals = list(dict.fromkeys(Signal(s) for s in signals))  # first appearance decides the order
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    store_config = store_config or job_store_config()
    reports: dict[Signal, SignalReport] = {}
    originals: list[tuple[Signal, bytes]] = []  # in ingestion order, which is delivery order
    with QuiverStore.open(store_path, store_config, layout=OTAP_LAYOUT) as store:
        subscription = store.subscribe(SUBSCRIBER, start="latest")
        config = encoder_config or EncoderConfig()  # the same encoding on both engines
        for signal in signals:
            report = reports[signal] = SignalReport(signal)
            requests = [
                r.SerializeToString()
                for r in generate_otlp(signal, count, batch_size=batch_size, seed=seed, profile=profile)
            ]
            if spark is None:
                encoded, report.encode_seconds = _encode_here(signal, requests, config)
            else:
                encoded, report.encode_seconds = _encode_in_spark(spark, signal, requests, config)
            for index, envelope, records, decoder in encoded:
                data = requests[index]
                t0 = time.perf_counter()
                store.ingest(decoder.read_records(envelope))
                report.ingest_seconds += time.perf_counter() - t0
                originals.append((signal, data))
                report.batches += 1
                report.records += records
                report.otlp_bytes += len(data)
                report.otlp_zstd_bytes += len(compressor.compress(data))
                report.otap_bytes += len(envelope)
                report.otap_zstd_bytes += len(compressor.compress(envelope))
                if progress is not None:
                    progress.advance(signal, records)  # type: ignore[attr-defined]
        store.flush()
        _verify(subscription, reports, originals)
        stats = store.stats()
    return PipelineResult(list(reports.values()), store_path, stats)


_Encoded = list[tuple[int, bytes, int, Decoder]]  # (request index, envelope, root records, its stream's decoder)


def _encode_here(signal: Signal, requests: list[bytes], config: EncoderConfig) -> tuple[_Encoded, float]:
    """One stream-mode encoder in this process; the seconds count conversion and encoding only."""
    encoder, decoder = Encoder(signal, config), Decoder()
    encoded: _Encoded = []
    seconds = 0.0
    for index, data in enumerate(requests):
        t0 = time.perf_counter()
        bundle = from_otlp(data, signal)
        envelope = encoder.encode(bundle).to_bytes()
        seconds += time.perf_counter() - t0
        encoded.append((index, envelope, bundle.num_rows, decoder))
    return encoded, seconds


def _encode_in_spark(
    spark: SparkSession, signal: Signal, requests: list[bytes], config: EncoderConfig
) -> tuple[_Encoded, float]:
    """The requests as a DataFrame (contiguous runs per partition, as files or Kafka partitions
    would arrive), encoded by Spark tasks; the seconds are the whole job's, collection included."""
    from .spark import collect_streams, encode_otlp, stream_decoders

    frame = pa.table({"request": pa.array(range(len(requests)), pa.int64()), "value": pa.array(requests, pa.binary())})
    t0 = time.perf_counter()
    rows = list(collect_streams(encode_otlp(spark.createDataFrame(frame), signal, keep=["request"], config=config)))
    seconds = time.perf_counter() - t0
    encoded: _Encoded = []
    for row, decoder in stream_decoders(rows):
        if row.otap is None:  # errors="raise" fails the job first; never drop a request silently
            raise RuntimeError(f"request {row.kept['request']} came back without an envelope: {row.error}")
        encoded.append((row.kept["request"], row.otap, row.records, decoder))
    return encoded, seconds


def _verify(subscription, reports: dict[Signal, SignalReport], originals: list[tuple[Signal, bytes]]) -> None:
    """Drain the subscriber, decode each bundle and compare it with the request it came from.

    Sorting reorders records inside a batch, so both sides are compared in canonical order.
    """
    decoder = Decoder()
    for index, (signal, data) in enumerate(originals):
        delivery = subscription.next(timeout=30.0)
        if delivery is None:
            raise RuntimeError(f"{len(originals) - index} ingested bundles were never delivered back")
        report = reports[signal]
        report.delivered += 1
        decoded = decoder.decode_records(delivery.bundle)
        expected = canonical_order(normalize_otlp(REQUEST_TYPES[signal].FromString(data)))
        if canonical_order(to_otlp(decoded)) == expected:
            report.verified += 1
        else:
            report.mismatches.append(index)
        delivery.ack()
