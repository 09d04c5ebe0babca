"""The layout contract: what an embedder's slots mean, hashed into every WAL header.

A WAL written under one layout must never be replayed under another (slot 3 might mean something
else), so the first 16 bytes of blake3 over the contract's canonical bytes are stored in the WAL
header and compared on open. Operational knobs (sizes, durations) are deliberately not part of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import blake3

from .bundle import MAX_SLOTS
from .errors import ConfigError
from .progress import PROGRESS_SLOT

CHECKSUM_POLICIES = ("crc32c",)


def _pairs(value: Any, what: str) -> tuple[tuple[int, Any], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    out: dict[int, Any] = {}
    for slot, item in items:
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < MAX_SLOTS:
            raise ConfigError(f"layout.{what}: slot id {slot!r} is out of range [0, {MAX_SLOTS})")
        out[slot] = item
    return tuple(sorted(out.items()))


@dataclass(frozen=True)
class Layout:
    """Slot table and per-slot semantics of the bundles a store holds.

    ``slots`` maps slot id -> label (empty: the generic layout, every slot 0..63 allowed);
    ``payload_type_ids`` maps slot id -> the u16 written in WAL slot blocks (default: the slot id);
    ``event_time_columns`` maps slot id -> column names holding event time;
    ``root_slots`` maps a root slot id -> the signal label its bundles carry.
    Mappings are normalised to sorted tuples of pairs so the contract is hashable and canonical.
    """

    name: str = "generic"
    slots: Mapping[int, str] | tuple[tuple[int, str], ...] = ()
    payload_type_ids: Mapping[int, int] | tuple[tuple[int, int], ...] = ()
    event_time_columns: Mapping[int, tuple[str, ...]] | tuple[tuple[int, tuple[str, ...]], ...] = ()
    root_slots: Mapping[int, str] | tuple[tuple[int, str], ...] = ()
    checksum: str = "crc32c"
    version: int = 1
    _slot_labels: dict[int, str] = field(init=False, repr=False, compare=False)
    _type_ids: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"layout.name must be a non-empty string, got {self.name!r}")
        if self.checksum not in CHECKSUM_POLICIES:
            raise ConfigError(f"layout.checksum must be one of {CHECKSUM_POLICIES}, got {self.checksum!r}")
        slots = _pairs(self.slots, "slots")
        for slot, label in slots:
            if slot == PROGRESS_SLOT:
                raise ConfigError(f"layout.slots: slot {PROGRESS_SLOT} is reserved for producer progress (quiver_store.progress)")
            if not isinstance(label, str) or not label:
                raise ConfigError(f"layout.slots: slot {slot} needs a non-empty string label, got {label!r}")
        type_ids = _pairs(self.payload_type_ids, "payload_type_ids")
        for slot, tid in type_ids:
            if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < 1 << 16:
                raise ConfigError(f"layout.payload_type_ids: slot {slot} needs a u16 id, got {tid!r}")
        times = tuple((s, tuple(str(c) for c in cols)) for s, cols in _pairs(self.event_time_columns, "event_time_columns"))
        roots = _pairs(self.root_slots, "root_slots")
        known = {s for s, _ in slots}
        for what, pairs in (("payload_type_ids", type_ids), ("event_time_columns", times), ("root_slots", roots)):
            for slot, _ in pairs:
                if known and slot not in known:
                    raise ConfigError(f"layout.{what}: slot {slot} is not in the slot table")
        object.__setattr__(self, "slots", slots)
        object.__setattr__(self, "payload_type_ids", type_ids)
        object.__setattr__(self, "event_time_columns", times)
        object.__setattr__(self, "root_slots", roots)
        object.__setattr__(self, "_slot_labels", dict(slots))
        object.__setattr__(self, "_type_ids", dict(type_ids))

    @property
    def is_generic(self) -> bool:
        return not self._slot_labels

    def label(self, slot: int) -> str:
        return self._slot_labels.get(slot, "progress" if slot == PROGRESS_SLOT else f"slot{slot}")

    def payload_type_id(self, slot: int) -> int:
        return self._type_ids.get(slot, slot)

    def check_slots(self, slots: object) -> None:
        """Raise ConfigError naming the first slot the slot table does not define (the reserved
        progress slot is defined in every layout)."""
        if self.is_generic:
            return
        for slot in cast(Any, slots):
            if slot not in self._slot_labels and slot != PROGRESS_SLOT:
                raise ConfigError(
                    f"slot {slot} is not defined by layout {self.name!r} (defined: {sorted(self._slot_labels)})"
                )

    def signals_of(self, slots: Iterable[int]) -> tuple[str, ...]:
        """The signal labels of the root slots among `slots`, sorted and distinct: which signals a
        segment holding those slots carries (recorded in its metadata, so a reader can pick
        segments without opening their streams)."""
        roots = dict(cast(tuple, self.root_slots))
        return tuple(sorted({roots[s] for s in slots if s in roots}))

    def canonical_bytes(self) -> bytes:
        """Deterministic JSON of every field; the input of the WAL header hash."""
        def pairs(value: object) -> list[list[Any]]:
            return [[s, list(v) if isinstance(v, tuple) else v] for s, v in cast(tuple, value)]

        doc = {
            "name": self.name,
            "version": self.version,
            "checksum": self.checksum,
            "slots": pairs(self.slots),
            "payload_type_ids": pairs(self.payload_type_ids),
            "event_time_columns": pairs(self.event_time_columns),
            "root_slots": pairs(self.root_slots),
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @property
    def cfg_hash(self) -> bytes:
        """16-byte segment_cfg_hash stored in the WAL header."""
        return blake3.blake3(self.canonical_bytes()).digest()[:16]


DEFAULT_LAYOUT = Layout()
