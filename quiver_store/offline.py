"""A store directory read without opening the store: no lock taken, nothing written, so it works
beside a live store and on a copy. The `quiver` commands read stores this way, and so does
`adaptive-arrow decode STORE` (through `StoredBundles`).

What it lists is what an open would hold: the finalized segments in order, then the acknowledged
bundles only the WAL holds (a crashed store, or an open segment not finalized yet), exactly those
point-in-time recovery would replay, in WAL order.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

from . import seq_floor
from .bundle import RecordBundle
from .engine import list_segment_seqs, newest_covered_sequence, segment_path
from .errors import CorruptionError, QuiverError
from .fs import DEFAULT_FS, FileSystem
from .segment.reader import SegmentReader
from .store_dir import check_store_dir
from .wal import sidecar
from .wal.bundle_codec import decode_bundle
from .wal.format import HEADER_LEN, decode_header
from .wal.replay import RecoveryPlan, plan_recovery
from .wal.rotation import ACTIVE, chunk_name, list_chunks


def wal_files(fs: FileSystem, wal_dir: str) -> list[tuple[int | None, str]]:
    """(generation, path) oldest first; the active file's generation is not needed here."""
    if not fs.exists(wal_dir):
        return []
    files: list[tuple[int | None, str]] = [(g, os.path.join(wal_dir, chunk_name(g))) for g in list_chunks(fs, wal_dir)]
    active = os.path.join(wal_dir, ACTIVE)
    if fs.exists(active):
        files.append((None, active))
    return files


def recovery_plan(fs: FileSystem, wal_dir: str, seg_dir: str, mode: str) -> tuple[RecoveryPlan | None, int]:
    """What recovery in `mode` would do, and the newest WAL sequence already in segments
    (None: no WAL files and no sidecar, nothing was ever logged)."""
    floor, _ = seq_floor.read(fs, seg_dir) if fs.exists(seg_dir) else (seq_floor.SequenceFloor(), None)
    covered = max(floor.wal_covered - 1, newest_covered_sequence(fs, seg_dir) if fs.exists(seg_dir) else -1)
    files = wal_files(fs, wal_dir)
    if not files and not fs.exists(os.path.join(wal_dir, sidecar.NAME)):
        return None, covered
    return plan_recovery(fs, wal_dir, _layout_hash(fs, files), mode, covered), covered


def _layout_hash(fs: FileSystem, files: list[tuple[int | None, str]]) -> bytes:
    """The segment_cfg_hash recovery is planned under. QuiverStore.open passes its layout's; a
    reader without the layout takes the first WAL header that decodes. plan_recovery then decides
    each file itself, as on open: an active file cut short while being created (no whole header,
    or a header and nothing but zeros) is recreated whatever the hash, a damaged header elsewhere
    refuses to open, headers that disagree refuse to open. When no header decodes, any hash gives
    the same decisions (none equals a header that does not decode)."""
    for _, path in files:
        try:
            return decode_header(fs.read_file(path)[:HEADER_LEN], path).cfg_hash
        except CorruptionError:
            continue
    return bytes(32)


@dataclass(frozen=True)
class StoredBundle:
    """One bundle and where it is: a segment's (`segment_seq`, `bundle_index`), or for a bundle
    only the WAL holds, its `wal_sequence` (the other two None)."""

    bundle: RecordBundle
    segment_seq: int | None
    bundle_index: int | None
    wal_sequence: int | None = None


class StoredBundles:
    """Every bundle of the store at `path`, iterated once: segments first, then (unless a single
    `segment` is asked for) the WAL's. A directory that is no store raises NotAStoreError, a
    damaged segment CorruptionError naming its file. What the WAL part met is left in attributes
    for the caller to report once the iteration ends:

    - `deleted`: segments a live store's retention deleted between the listing and their read;
    - `wal_only`: bundles that came from the WAL;
    - `wal_error`: the WAL could not be read at all (no WAL bundle was listed);
    - `wal_damage`: the first corruption in the WAL (the bundles after it were not listed).
    """

    def __init__(self, path: str, fs: FileSystem = DEFAULT_FS, segment: int | None = None) -> None:
        self.wal_dir, self.seg_dir = check_store_dir(path)
        self.fs = fs
        self.seqs = list_segment_seqs(fs, self.seg_dir) if fs.exists(self.seg_dir) else []
        if segment is not None and segment not in self.seqs:
            more = "..." if len(self.seqs) > 10 else ""
            raise QuiverError(f"no segment {segment} in {self.seg_dir} (segments: {self.seqs[:10]}{more})")
        self.segment = segment
        self.deleted: list[int] = []
        self.wal_only = 0
        self.wal_error: QuiverError | None = None
        self.wal_damage: QuiverError | None = None

    def __iter__(self) -> Iterator[StoredBundle]:
        for seq in [self.segment] if self.segment is not None else self.seqs:
            try:
                reader = SegmentReader.open(segment_path(self.seg_dir, seq), fs=self.fs)
            except QuiverError as exc:
                if self.segment is not None or getattr(exc, "errno", None) != errno.ENOENT:
                    raise
                self.deleted.append(seq)  # deleted by a live store's retention since the listing
                continue
            with reader:
                for index, bundle in enumerate(reader.bundles()):
                    yield StoredBundle(bundle, seq, index)
        if self.segment is None:
            yield from self._wal_bundles()

    def _wal_bundles(self) -> Iterator[StoredBundle]:
        try:
            plan, _ = recovery_plan(self.fs, self.wal_dir, self.seg_dir, "point_in_time")
        except QuiverError as exc:
            self.wal_error = exc
            return
        if plan is None:
            return
        for entry, _, path in plan.entries:
            self.wal_only += 1
            yield StoredBundle(decode_bundle(entry, None, path), None, None, entry.sequence)
        if plan.corruptions:
            self.wal_damage = plan.corruptions[0]
