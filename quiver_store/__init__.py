"""Quiver: an embeddable, durable Arrow segment store (WAL + immutable multi-stream segments)."""

from .bundle import RecordBundle, default_fingerprint
from .config import (
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    SubscriberConfig,
    WalConfig,
)
from .engine import BundleReceipt, QuiverStore, core_numbers, core_path, open_cores
from .errors import (
    BundleError,
    ConfigError,
    CorruptionError,
    NotAStoreError,
    QuiverError,
    StoreClosedError,
    StoreFullError,
)
from .ingest_queue import IngestQueue
from .layout import DEFAULT_LAYOUT, Layout
from .progress import PROGRESS_SLOT, with_progress
from .segment import SegmentReader, load_dataset, load_table, representative_schema
from .segment.info import SegmentInfo, StreamInfo
from .subscriber.subscription import Delivery, Subscription

__all__ = [
    "DEFAULT_LAYOUT",
    "PROGRESS_SLOT",
    "BundleError",
    "BundleReceipt",
    "ConfigError",
    "CorruptionError",
    "Delivery",
    "IngestQueue",
    "Layout",
    "NotAStoreError",
    "QuiverError",
    "QuiverStore",
    "RecordBundle",
    "RetentionConfig",
    "SegmentConfig",
    "SegmentInfo",
    "SegmentReader",
    "StoreClosedError",
    "StoreConfig",
    "StoreFullError",
    "StreamInfo",
    "SubscriberConfig",
    "Subscription",
    "WalConfig",
    "core_numbers",
    "core_path",
    "default_fingerprint",
    "load_dataset",
    "load_table",
    "open_cores",
    "representative_schema",
    "with_progress",
]
