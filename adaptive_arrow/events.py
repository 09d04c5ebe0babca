"""Schema events raised by the feed phase, and the encoder's counters of them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from otap_model import PayloadType


class EventKind(StrEnum):
    FIELD_ADDED = "field_added"  # an optional field carried a value for the first time
    UNION_VARIANT_ADDED = "union_variant_added"
    DICTIONARY_UPGRADE = "dictionary_upgrade"
    DICTIONARY_OVERFLOW = "dictionary_overflow"
    DICTIONARY_RESET = "dictionary_reset"
    DICTIONARY_FALLBACK = "dictionary_fallback"  # values barely repeat: plain type from now on
    STREAM_OPENED = "stream_opened"  # a new (payload type, signature) IPC stream, i.e. a schema reset


@dataclass(frozen=True)
class Event:
    kind: EventKind
    payload_type: PayloadType
    path: str  # dotted column path; "" for stream events
    detail: str = ""  # e.g. "u8->u16" or the new schema id


@dataclass
class EncoderStats:
    """Counters over the life of an encoder. ``events`` is keyed by (kind, payload type, path)."""

    batches: int = 0
    rows: int = 0
    events: Counter[tuple[EventKind, PayloadType, str]] = field(default_factory=Counter)

    def record(self, events: list[Event]) -> None:
        for e in events:
            self.events[(e.kind, e.payload_type, e.path)] += 1

    def count(self, kind: EventKind | str, payload_type: PayloadType | int | None = None, path: str | None = None) -> int:
        """Events of one kind, optionally restricted to a payload type and a column path."""
        kind = EventKind(kind)
        return sum(
            n
            for (k, pt, p), n in self.events.items()
            if k is kind and (payload_type is None or pt == payload_type) and (path is None or p == path)
        )

    def as_dict(self) -> dict[str, object]:
        per_kind: Counter[str] = Counter()
        for (k, _, _), n in self.events.items():
            per_kind[k.value] += n
        return {"batches": self.batches, "rows": self.rows, **dict(sorted(per_kind.items()))}
