"""EncoderConfig: the knobs of the adaptive encoder, validated once at construction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .errors import ConfigError
from .transform.dictionary import RepetitionRule
from .transport.errors import TransportError
from .transport.sort import resolve_sort_orders

MAX_DICTIONARY_LIMIT = 2**32 - 1
DEFAULT_MAX_DISTINCT_RATIO: float | None = 0.5  # chosen by benchmarks/dictionary_sweep.py


@dataclass(frozen=True)
class EncoderConfig:
    """Adaptive encoder settings.

    sort: run ``transport.optimize`` (sort, dense ids, delta ids) before the adaptive transform.
    ipc_compression: ``None`` or ``"zstd"`` Arrow IPC body compression.
    dictionary_reset_threshold: past the widest index type, a dictionary whose distinct/total
        ratio is below this is reset (emptied) instead of being dropped for the plain type.
    max_schema_updates: most corrective rounds one table may need in one batch (Go's
        replay-loop limit; a round adds every missing field at once, the next fixes dictionaries).
    dictionary_limit: largest dictionary cardinality (Go ``LimitIndexSize``); 0 disables
        dictionaries.
    dictionary_max_distinct_ratio: beyond Go's ladder, a dictionary column falls back to its plain
        type for the rest of the stream when more than this fraction of one batch's non-null
        values are new to its dictionary (its values barely repeat, so values + indices cost more
        than the plain column); ``None`` keeps the pure Go ladder.
    dictionary_min_values: the fewest non-null values of the column a batch must carry to be
        judged: smaller batches keep the dictionary (across messages it is the only memory of
        earlier values; in unary mode every batch is a first batch).
    sort_orders: per payload type id, the sort keys ``transport.optimize`` uses (None = its defaults).
    """

    sort: bool = True
    ipc_compression: str | None = None
    dictionary_reset_threshold: float = 0.3
    max_schema_updates: int = 5
    dictionary_limit: int = 65535
    dictionary_max_distinct_ratio: float | None = DEFAULT_MAX_DISTINCT_RATIO
    dictionary_min_values: int = 500
    sort_orders: Mapping[int, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sort, bool):
            raise ConfigError(f"EncoderConfig.sort must be a bool, got {self.sort!r}")
        if self.ipc_compression not in (None, "zstd"):
            raise ConfigError(f"EncoderConfig.ipc_compression must be None or 'zstd', got {self.ipc_compression!r}")
        t = self.dictionary_reset_threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t <= 1.0:
            raise ConfigError(f"EncoderConfig.dictionary_reset_threshold must be a number in [0, 1], got {t!r}")
        m = self.max_schema_updates
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ConfigError(f"EncoderConfig.max_schema_updates must be an integer >= 1, got {m!r}")
        d = self.dictionary_limit
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= MAX_DICTIONARY_LIMIT:
            raise ConfigError(
                f"EncoderConfig.dictionary_limit must be an integer in [0, {MAX_DICTIONARY_LIMIT}], got {d!r}"
            )
        r = self.dictionary_max_distinct_ratio
        if r is not None and (isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 <= r <= 1.0):
            raise ConfigError(f"EncoderConfig.dictionary_max_distinct_ratio must be None or a number in [0, 1], got {r!r}")
        v = self.dictionary_min_values
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"EncoderConfig.dictionary_min_values must be an integer >= 1, got {v!r}")
        if self.sort_orders is not None:
            if not isinstance(self.sort_orders, Mapping):
                raise ConfigError("EncoderConfig.sort_orders must be a mapping of payload type id to column names")
            frozen: dict[int, tuple[str, ...]] = {}
            for pt, keys in self.sort_orders.items():
                if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
                    raise ConfigError(f"EncoderConfig.sort_orders[{pt!r}] must be a sequence of column names, got {keys!r}")
                try:
                    frozen[int(pt)] = tuple(keys)
                except (TypeError, ValueError):
                    raise ConfigError(f"EncoderConfig.sort_orders: key {pt!r} is not a payload type id") from None
            try:
                resolve_sort_orders(frozen)
            except TransportError as exc:
                raise ConfigError(f"EncoderConfig.{exc}") from None
            object.__setattr__(self, "sort_orders", MappingProxyType(frozen))

    @property
    def repetition_rule(self) -> RepetitionRule | None:
        """The repetition-aware dictionary fallback, or None for the pure Go ladder."""
        r = self.dictionary_max_distinct_ratio
        return None if r is None else RepetitionRule(float(r), self.dictionary_min_values)
