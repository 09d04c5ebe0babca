"""Store configuration: frozen dataclasses mirroring the seed's YAML keys, validated on creation.

Sizes are in bytes, durations in seconds. Operational knobs only: nothing here changes the
on-disk layout (that is the adapter's layout contract, hashed into the WAL header).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Literal, get_args

import pyarrow as pa

from .errors import ConfigError

MiB = 1 << 20
GiB = 1 << 30

Durability = Literal["fsync", "os", "none"]
RecoveryMode = Literal["point_in_time", "skip_corrupt", "strict"]
SizeCapPolicy = Literal["backpressure", "drop_oldest"]


def _positive(
    config: object, prefix: str, attr: str, *, allow_none: bool = False, allow_zero: bool = False, integer: bool = False
) -> None:
    """Check a size, count (`integer`) or duration of a frozen config: a finite number (bool is not
    one), above zero unless `allow_zero`; None only with `allow_none` (no limit). NumPy scalars are
    accepted and stored as the builtin int / float, so configs compare, print and pickle alike."""
    name, value = f"{prefix}.{attr}" if prefix else attr, getattr(config, attr)
    if value is None:
        if allow_none:
            return
        raise ConfigError(f"{name} must be set")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if integer and not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be a whole number (an int), got {value!r}")
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    object.__setattr__(config, attr, value)
    if isinstance(value, float) and not math.isfinite(value):
        unset = " (None means no limit)" if allow_none else ""
        raise ConfigError(f"{name} must be a finite number{unset}, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _whole(config: object, attr: str) -> bool:
    """Whether a frozen config's field is an int >= 0 (bool is not; a NumPy integer is stored as int)."""
    value = getattr(config, attr)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        return False
    object.__setattr__(config, attr, int(value))
    return True


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


Compression = Literal["lz4", "zstd"]


def _check_level(codec: str, level: object) -> None:
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"segment.compression_level must be an int, got {type(level).__name__} {level!r}")
    low, high = pa.Codec.minimum_compression_level(codec), pa.Codec.maximum_compression_level(codec)
    if not low <= level <= high:
        raise ConfigError(f"segment.compression_level {level} is outside {codec}'s range [{low}, {high}]")


@dataclass(frozen=True)
class SegmentConfig:
    """When the open segment is finalized into an immutable segment file."""

    target_size: int = 32 * MiB  # serialized bytes of the open segment's streams
    max_open_duration: float = 5.0  # seconds; a timer finalizes even when no data arrives
    max_stream_count: int = 512  # distinct (slot, schema fingerprint) streams per segment
    max_dictionary_size: int = 65_535  # unified dictionary entries per column before a stream rotates
    compression: Compression | None = None  # Arrow IPC body compression of segment streams
    compression_level: int | None = None  # the codec's level (None: the codec's default, 1)

    def __post_init__(self) -> None:
        _positive(self, "segment", "target_size", integer=True)
        _positive(self, "segment", "max_open_duration")
        _positive(self, "segment", "max_stream_count", integer=True)
        _positive(self, "segment", "max_dictionary_size", integer=True)
        if self.compression is not None:
            _choice("segment.compression", self.compression, get_args(Compression))
            if self.compression_level is not None:
                _check_level(self.compression, self.compression_level)
        elif self.compression_level is not None:
            raise ConfigError("segment.compression_level is set but segment.compression is None: name a codec")

    def codec(self) -> pa.Codec | None:
        """The pyarrow codec segment streams are written with (None: uncompressed)."""
        if self.compression is None:
            return None
        return pa.Codec(self.compression, self.compression_level)


@dataclass(frozen=True)
class WalConfig:
    """Write-ahead log size bounds and durability policy."""

    max_size: int = 1 * GiB  # aggregate bytes of the active WAL file plus rotated chunks
    max_chunks: int = 10  # files, counting the active WAL and rotated siblings
    rotation_size: int = 64 * MiB  # the active file rotates once it holds this many bytes
    flush_interval: float = 0.0  # seconds a group commit may wait to gather more appends
    durability: Durability = "fsync"  # fsync: ack after fdatasync; os: after write(2); none: buffered
    recovery: RecoveryMode = "point_in_time"
    preallocate: int = 1 * MiB  # zeros kept written and synced past the active file's last entry (fsync only)
    direct_bundle_size: int | None = None  # Arrow bytes from which a bundle skips the WAL for a segment of its own
    # (fsync only; None: max(segment.target_size // 8, 1 MiB), 4 MiB by default; 0: never)

    def __post_init__(self) -> None:
        _positive(self, "wal", "max_size", integer=True)
        _positive(self, "wal", "max_chunks", integer=True)
        _positive(self, "wal", "rotation_size", integer=True)
        _positive(self, "wal", "flush_interval", allow_zero=True)
        _choice("wal.durability", self.durability, ("fsync", "os", "none"))
        _choice("wal.recovery", self.recovery, ("point_in_time", "skip_corrupt", "strict"))
        if not _whole(self, "preallocate"):
            raise ConfigError(f"wal.preallocate must be a whole number of bytes >= 0 (0 turns it off), got {self.preallocate!r}")
        if self.direct_bundle_size is not None and not _whole(self, "direct_bundle_size"):
            raise ConfigError(
                "wal.direct_bundle_size must be None or a whole number of bytes >= 0 (0 sends every bundle through "
                f"the WAL), got {self.direct_bundle_size!r}"
            )
        if self.rotation_size > self.max_size:
            raise ConfigError(
                f"wal.rotation_size ({self.rotation_size}) must not exceed wal.max_size ({self.max_size})"
            )
        if self.max_chunks < 2:
            raise ConfigError("wal.max_chunks must be at least 2 (the active file and one rotated chunk)")


@dataclass(frozen=True)
class RetentionConfig:
    """How long finalized segments are kept and what happens at the size cap."""

    max_age: float | None = None  # seconds after ingestion (seed: max_retain_after_ingestion)
    size_cap: int | None = None  # bytes for the whole store root, divided evenly across cores
    size_cap_policy: SizeCapPolicy = "backpressure"
    backpressure_timeout: float = 30.0  # seconds ingest blocks at the cap before StoreFullError
    steady_state_headroom: int = 0  # bytes of fully processed segments kept as a local spool
    maintenance_interval: float = 1.0  # seconds between sweeps (orphans, max_age, cleanup, checkpoint)

    def __post_init__(self) -> None:
        _positive(self, "retention", "max_age", allow_none=True)
        _positive(self, "retention", "size_cap", allow_none=True, integer=True)
        _choice("retention.size_cap_policy", self.size_cap_policy, ("backpressure", "drop_oldest"))
        _positive(self, "retention", "backpressure_timeout", allow_zero=True)
        _positive(self, "retention", "steady_state_headroom", allow_zero=True, integer=True)
        _positive(self, "retention", "maintenance_interval")


@dataclass(frozen=True)
class SubscriberConfig:
    """Delivery and acknowledgement behaviour of subscriptions."""

    nack_backoff_initial: float = 0.1  # seconds before a nacked bundle is redelivered
    nack_backoff_max: float = 30.0
    nack_backoff_multiplier: float = 2.0
    orphan_timeout: float | None = 24 * 3600.0  # a subscriber absent this long stops pinning data
    ack_log_checkpoint_interval: int = 10_000  # ack log records between checkpoints of marks and gap sets
    ack_log_rotation_size: int = 64 * MiB

    def __post_init__(self) -> None:
        _positive(self, "subscribers", "nack_backoff_initial", allow_zero=True)
        _positive(self, "subscribers", "nack_backoff_max", allow_zero=True)
        _positive(self, "subscribers", "nack_backoff_multiplier")
        _positive(self, "subscribers", "orphan_timeout", allow_none=True)
        _positive(self, "subscribers", "ack_log_checkpoint_interval", integer=True)
        _positive(self, "subscribers", "ack_log_rotation_size", integer=True)
        if self.nack_backoff_multiplier < 1:
            raise ConfigError(
                f"subscribers.nack_backoff_multiplier must be >= 1 (each redelivery waits at least as long as "
                f"the one before), got {self.nack_backoff_multiplier!r}"
            )
        if self.nack_backoff_max < self.nack_backoff_initial:
            raise ConfigError(
                f"subscribers.nack_backoff_max ({self.nack_backoff_max!r}) must not be below "
                f"subscribers.nack_backoff_initial ({self.nack_backoff_initial!r})"
            )


@dataclass(frozen=True)
class StoreConfig:
    """Every knob of a store; the defaults are safe (no acknowledgement before fdatasync)."""

    segment: SegmentConfig = field(default_factory=SegmentConfig)
    wal: WalConfig = field(default_factory=WalConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    subscribers: SubscriberConfig = field(default_factory=SubscriberConfig)
    cores: int = 1  # stores sharing one root (core_<n>/); the size cap is divided among them

    def __post_init__(self) -> None:
        _positive(self, "", "cores", integer=True)
        for name, kind in (
            ("segment", SegmentConfig),
            ("wal", WalConfig),
            ("retention", RetentionConfig),
            ("subscribers", SubscriberConfig),
        ):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name} must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")

    @property
    def direct_bundle_size(self) -> int:
        """Arrow bytes from which a bundle skips the WAL (0: never): `wal.direct_bundle_size`, by
        default an eighth of a segment and at least 1 MiB, so direct segments stay within 8x the
        count of full ones; only under durability "fsync"."""
        if self.wal.durability != "fsync":
            return 0
        size = self.wal.direct_bundle_size
        return max(self.segment.target_size // 8, MiB) if size is None else size

    @property
    def per_core_size_cap(self) -> int | None:
        cap = self.retention.size_cap
        return None if cap is None else cap // self.cores
