"""What a store opened on edited template files may give back: the template's bundles, or other
data only where the input left every checksum over it right (the property of the store targets).

Every byte of a segment file lies in a checksummed region (header, stream slices, directory,
manifest, metadata, footer, trailer) or in zero padding that only `verify()` reads (docs/formats.md,
"Segment files"). So a reader may accept an edit of padding silently, must refuse an edit of a
checksummed region whose checksum no longer holds, and can only be fooled by an edit whose checksum
was made right again (segment_fields makes every one right; libFuzzer can too, by copying the value
a CRC comparison expected). A bundle read from an edited segment must therefore be the template's
bundle at the same (segment, index) unless every checksum the reader checks for it holds in the
edited file and one of the parts it is built from differs from the template's: its manifest row
and refs, and per ref the stream's fingerprint and slice bytes. Anything else is a silent
wrong-data read.

A bundle replayed from the WAL (read back once a flush put it in a new segment) must likewise be the
bundle of one of the template's WAL frames unless the edited WAL files hold a frame with a valid
CRC, at any offset (skip_corrupt resynchronises anywhere), that is none of the template's frames.
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import crc32c
import numpy as np

from adaptive_arrow.store_layout import OTAP_LAYOUT
from quiver_store import QuiverError, RecordBundle, SegmentReader
from quiver_store.segment import format as fmt
from quiver_store.wal import format as wal
from quiver_store.wal.bundle_codec import decode_bundle
from quiver_store.wal.format import Entry
from quiver_store.wal.reader import scan

WAL_PREFIX = "wal/quiver.wal"  # the active file and the rotated chunks


def segment_name(seq: int) -> str:
    return f"segments/{seq:016d}.qseg"


def difference(bundle: RecordBundle, want: RecordBundle, *, plain: bool = False) -> str | None:
    """How `bundle` differs from `want`, None when it does not. `plain` compares values only: a
    bundle replayed into a segment shares its stream's unified dictionary (docs/formats.md)."""
    if bundle.ingestion_time_ns != want.ingestion_time_ns:
        return f"ingestion time {bundle.ingestion_time_ns}, not {want.ingestion_time_ns}"
    if bundle.slots.keys() != want.slots.keys():
        return f"slots {sorted(bundle.slots)}, not {sorted(want.slots)}"
    if bundle.fingerprints != want.fingerprints:
        return "other schema fingerprints"
    for slot, batch in bundle.slots.items():
        other = want.slots[slot]
        if not (batch.to_pylist() == other.to_pylist() if plain else batch.equals(other)):
            return f"other rows in slot {slot}"
    return None


@dataclass(frozen=True)
class Parts:
    """What a segment file's bundles are built from, and which of the checksums over them fail."""

    failing: tuple[str, ...]  # the header, trailer, footer and sections' checksums that fail
    rows: np.ndarray  # manifest bundles
    refs: np.ndarray  # manifest refs
    starts: np.ndarray  # each bundle's first ref
    fingerprints: tuple[bytes, ...]  # per stream
    slices: tuple[bytes, ...]  # per stream, as the directory places it
    slices_failing: tuple[bool, ...]  # per stream: its CRC32C fails

    @classmethod
    def of(cls, data: bytes) -> Parts:
        """The parts of a segment file, read with the format's decoders (CorruptionError where the
        reader would raise it too)."""
        t_off = len(data) - fmt.TRAILER_SIZE
        footer_length, footer_crc, _ = fmt.decode_trailer(data[t_off:], "", t_off)  # checks its own CRC
        footer_bytes = data[t_off - footer_length : t_off]
        footer = fmt.Footer.decode(footer_bytes, "", 0)
        failing = [name for name, ok in (
            ("header", struct.unpack_from("<I", data, fmt.HEADER_SIZE - 4)[0] == fmt.crc(data[: fmt.HEADER_SIZE - 4])),
            ("footer", fmt.crc(footer_bytes) == footer_crc),
        ) if not ok]  # fmt: skip
        sections = {}
        for name in ("directory", "manifest", "metadata"):
            at, length = getattr(footer, f"{name}_offset"), getattr(footer, f"{name}_length")
            sections[name] = data[at : at + length]
            if fmt.crc(sections[name]) != getattr(footer, f"{name}_crc32c"):
                failing.append(name)
        entries, _ = fmt.decode_directory(sections["directory"], footer.stream_count, "", 0)
        rows, refs = fmt.decode_manifest(sections["manifest"], "", 0)
        counts = [int(b).bit_count() for b in rows["slot_bitmap"]]
        slices = tuple(data[int(e["offset"]) : int(e["offset"]) + int(e["length"])] for e in entries)
        return cls(
            tuple(failing), rows, refs, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            tuple(bytes(e["fingerprint"]) for e in entries), slices,
            tuple(fmt.crc(s) != int(e["crc32c"]) for s, e in zip(slices, entries, strict=True)),
        )  # fmt: skip

    def bundle_refs(self, index: int) -> np.ndarray | None:
        if index >= len(self.rows) or self.starts[index + 1] > len(self.refs):
            return None
        return self.refs[self.starts[index] : self.starts[index + 1]]

    def sources(self, index: int) -> tuple[object, ...] | None:
        """Everything bundle `index` is built from (None: this file has no such bundle)."""
        refs = self.bundle_refs(index)
        if refs is None or any(int(sid) >= len(self.slices) for sid in refs["stream_id"]):
            return None
        streams = tuple((self.fingerprints[int(sid)], self.slices[int(sid)]) for sid in refs["stream_id"])
        return self.rows[index].tobytes(), refs.tobytes(), streams

    def failing_for(self, index: int) -> list[str]:
        """The checksums the reader checks before it returns bundle `index` that fail."""
        refs = self.bundle_refs(index)
        sids = [] if refs is None else [int(s) for s in refs["stream_id"] if int(s) < len(self.slices)]
        return [*self.failing, *(f"stream {s}" for s in sids if self.slices_failing[s])]


@functools.cache
def stored(template: str) -> dict[int, tuple[Parts, list[RecordBundle]]]:
    """The template's segments by sequence: their parts and bundles (the readers stay open: the
    batches map the files)."""
    out = {}
    for name in sorted(os.listdir(os.path.join(template, "segments"))):
        if name.endswith(".qseg"):
            path = os.path.join(template, "segments", name)
            reader = SegmentReader.open(path)
            with open(path, "rb") as f:
                out[reader.info.seq] = (Parts.of(f.read()), list(reader.bundles()))
    return out


@functools.cache
def frames(template: str) -> tuple[frozenset[bytes], tuple[RecordBundle, ...]]:
    """The bodies of the template's WAL frames, and the bundles of those that hold one."""
    bodies, bundles = set(), []
    for name in os.listdir(os.path.join(template, "wal")):
        path = os.path.join(template, "wal", name)
        if not name.startswith("quiver.wal"):
            continue
        with open(path, "rb") as f:
            data = f.read()
        for frame in scan(memoryview(data), wal.HEADER_LEN, resync=False):
            if isinstance(frame, Entry):
                bodies.add(bytes(frame.body))
                if frame.entry_type == wal.ENTRY_RECORD_BUNDLE:
                    bundles.append(decode_bundle(frame, OTAP_LAYOUT, path))
    return frozenset(bodies), tuple(bundles)


def new_frame(data: bytes, known: frozenset[bytes]) -> bool:
    """`data` holds, at some offset, a frame whose CRC holds and whose body is none of `known`."""
    for at in range(len(data) - wal.FRAME_OVERHEAD - wal.MIN_ENTRY_LEN + 1):
        (length,) = wal.LEN.unpack_from(data, at)
        end = at + wal.LEN.size + length
        if length >= wal.MIN_ENTRY_LEN and end + wal.CRC.size <= len(data):
            body = data[at + wal.LEN.size : end]
            if wal.CRC.unpack_from(data, end)[0] == crc32c.crc32c(body) and body not in known:
                return True
    return False


class Edited:
    """The template with the files an input wrote: checks each bundle a store opened on it gives."""

    def __init__(self, template: str, written: Mapping[str, bytes]) -> None:
        self.template = template
        self.written = written

    def check(self, seq: int, index: int, bundle: RecordBundle) -> None:
        if seq in stored(self.template):
            self.check_stored(seq, index, bundle)
        else:
            self.check_replayed(seq, index, bundle)

    def check_stored(self, seq: int, index: int, bundle: RecordBundle) -> None:
        """A bundle read from a template segment is the one stored, unless the input re-made every
        checksum over a part it is built from."""
        parts, bundles = stored(self.template)[seq]
        differs = difference(bundle, bundles[index]) if index < len(bundles) else "a bundle the template lacks"
        if differs is None:
            return
        where = f"segment {seq} bundle {index}: {differs}"
        edited = self.written.get(segment_name(seq))
        assert edited is not None, f"{where}, read from a file the input left alone"
        try:
            mine = Parts.of(edited)
        except QuiverError as exc:
            raise AssertionError(f"{where}, read from a file whose parts do not decode ({exc})") from None
        failing = mine.failing_for(index)
        assert not failing, f"{where}, read through failing checksums ({', '.join(failing)})"
        sources = mine.sources(index)
        assert sources is not None, f"{where}, a bundle the file's manifest lacks"
        assert sources != parts.sources(index), f"{where}, though every part it is built from is the template's"

    def check_replayed(self, seq: int, index: int, bundle: RecordBundle) -> None:
        """A bundle of a segment the template lacks (the WAL's, replayed) is a template frame's,
        unless an edited WAL file holds a new frame whose CRC holds."""
        bundles = frames(self.template)[1]
        if any(difference(bundle, want, plain=True) is None for want in bundles):
            return
        assert self.new_frames, f"segment {seq} bundle {index}: replayed from the WAL, none of its frames' bundles, and no new CRC-valid frame"

    @functools.cached_property
    def new_frames(self) -> bool:
        known = frames(self.template)[0]
        return any(new_frame(data, known) for name, data in self.written.items() if name.startswith(WAL_PREFIX))
