"""What a store must hold and does not: the evidence `quiver verify` uses to report missing files.

Damage is found by checksums; absence is not, since nothing is left to check. The store keeps
evidence written before anything that depends on it: `segments/next.seq` (written before a segment
number is used; its `wal_covered` raised past a segment's WAL sequences before that segment is
deleted), each segment's WAL sequence range in its metadata, the truncate sidecar (moved only past
entries a durable segment holds), and the ack log's registered segments and subscribers (retention
records `dropped` for every waiting subscriber before it deletes). Everything here only reads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from . import absent, seq_floor
from .engine import LOCK_NAME, META_WAL_FIRST, META_WAL_LAST, SEGMENT_SUFFIX, segment_path
from .errors import CorruptionError
from .fs import FileSystem
from .segment.info import SegmentInfo
from .subscriber import ack_log
from .subscriber.registry import RebuiltState, rebuild
from .wal import sidecar
from .wal.format import ENTRY_SYNCED, HEADER_LEN, decimal, decode_header
from .wal.reader import Damage, scan
from .wal.rotation import ACTIVE, QUARANTINE_DIR, chunk_name


@dataclass(frozen=True)
class WalFile:
    """One WAL file as verify scanned it: its generation (None: the active file) and valid frames."""

    generation: int | None
    path: str
    entries: list[tuple[int, int]]  # (offset, WAL sequence) of every valid frame, in file order
    damaged: bool
    torn_tail: int | None = None  # offset of a torn last entry of the active file: a crash's normal end


@dataclass(frozen=True)
class SegmentSpan:
    """A present segment and the WAL sequences of its bundles (None: unreadable, or not written by a
    store, which records them as quiver.wal.first_sequence / last_sequence), with the sequences it
    records that no segment holds (absent.py)."""

    seq: int
    first: int | None
    last: int | None
    absent: tuple[absent.Range, ...] = ()


@dataclass(frozen=True)
class AckEvidence:
    """What the ack log (checkpoint + records after it) says about segments, with the order in which
    segments and subscribers appeared: index -1 for the checkpoint, else the record's position."""

    state: RebuiltState
    registered: dict[int, int]  # segment seq -> where it was first registered
    born: dict[int, int]  # subscriber id -> where it first appeared


def scan_wal_file(fs: FileSystem, generation: int | None, path: str) -> tuple[WalFile, list[str]]:
    """Scan one WAL file and list its damage; punched holes, the zeroed tail of the active file
    (everything reclaimed) and its torn last entry (a crash's end of log) are normal states."""
    data = fs.read_file(path)
    try:
        h = decode_header(data, path)
    except CorruptionError as exc:
        return WalFile(generation, path, [], True), [str(exc)]
    if h.version != 1 or h.reserved != 0:
        return WalFile(generation, path, [], True), [f"{path} at offset 10: unsupported WAL version {h.version} / reserved {h.reserved}"]
    entries: list[tuple[int, int]] = []
    errors = []
    torn_tail = None
    for item in scan(memoryview(data), HEADER_LEN, resync=True):
        if isinstance(item, Damage):
            if generation is None and item.kind == "torn":  # zeroed tail, or a write a crash cut short
                torn_tail = None if item.reason == "zero-filled tail" else item.offset
            elif item.kind != "hole":
                what = "corrupt entry" if item.kind == "corrupt" else "invalid tail (torn write or corruption)"
                errors.append(f"{path} at offset {item.offset}: {what}: {item.reason} ({item.length} bytes)")
        elif item.entry_type != ENTRY_SYNCED:  # a synced frame's sequence names earlier frames, not its own
            entries.append((item.offset, item.sequence))
    return WalFile(generation, path, entries, bool(errors), torn_tail), errors


def segment_span(info: SegmentInfo) -> SegmentSpan:
    first, last = (decimal(info.metadata.get(k, "")) for k in (META_WAL_FIRST, META_WAL_LAST))
    recorded = tuple(absent.decode(info.metadata.get(absent.META_KEY, "")))
    if first is not None and last is not None:
        return SegmentSpan(info.seq, first, last, recorded)
    return SegmentSpan(info.seq, None, None, recorded)


def _recorded(spans: dict[int, SegmentSpan]) -> list[tuple[int, int]]:
    return [(lo, hi) for span in spans.values() for lo, hi, _ in span.absent]


def _ranges(parts: list[tuple[int, int]]) -> str:
    return ", ".join(absent.label(a, b) for a, b in parts)


def recorded_absences(seg_dir: str, spans: dict[int, SegmentSpan]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(lost, noted): per recorded range, a row label and what the record says. Lost ranges are
    acknowledged bundles gone (an error); damaged and unacknowledged ones are notes."""
    lost: list[tuple[str, str]] = []
    noted: list[tuple[str, str]] = []
    for seq in sorted(spans):
        name = os.path.relpath(segment_path(seg_dir, seq), os.path.dirname(seg_dir))
        for lo, hi, kind in spans[seq].absent:
            row = f"WAL sequence(s) {absent.label(lo, hi)}"
            if kind == absent.LOST:
                lost.append((row, f"{row} are lost, as {name} records: QuiverStore.open found them gone from the WAL "
                             "before any segment held them and reported it (stats()['corruption_reports'])"))
            elif kind == absent.DAMAGED:
                noted.append((row, f"in no segment ({name} records it): their WAL frames were damaged, zeroed or moved to "
                              "wal/quarantine/ after damage, and no later frame says they were fdatasynced: bundles "
                              "acknowledged and then damaged by the disk, or never acknowledged (a power loss during "
                              "their commit leaves the same)"))
            else:
                noted.append((row, f"never acknowledged, in no segment ({name} records it): a large bundle whose "
                              "segment write failed or was cut by a crash"))
    return lost, noted


def read_ack_evidence(fs: FileSystem, root: str) -> AckEvidence | None:
    """The ack log's segments and subscribers, read without modifying anything (None: no ack log).
    A damaged checkpoint raises CorruptionError, as it makes QuiverStore.open fail."""
    found = ack_log.read_untouched(root, fs)
    if found is None:
        return None
    checkpoint, records = found
    cp_path = os.path.join(root, ack_log.CHECKPOINT_NAME)
    registered: dict[int, int] = {}
    born: dict[int, int] = {}
    if checkpoint is not None:
        cp = ack_log.decode_checkpoint(checkpoint, cp_path)
        registered = {seq: -1 for seq, _ in cp.catalog.items()}
        born = {sub.sub_id: -1 for sub in cp.subscribers}
    for i, rec in enumerate(records):
        if rec[0] == ack_log.SEGMENT:
            registered.setdefault(rec[1], i)
        elif rec[0] == ack_log.SUBSCRIBE:
            born.setdefault(rec[1], i)
    return AckEvidence(rebuild(checkpoint, records, cp_path), registered, born)


def _owed(acks: AckEvidence, seq: int) -> list[str]:
    """Subscribers that were registered before segment `seq` and have not resolved all its bundles.
    Retention writes `dropped` for every such subscriber before it deletes a segment (retention.py
    `_delete`, registry `drop_segment`), and resolving is never undone, so they prove that no
    retention deletion removed it."""
    out = []
    catalog, reg = acks.state.catalog, acks.registered.get(seq, -1)
    for sub in sorted(acks.state.subscribers.values(), key=lambda s: s.name):
        b = acks.born.get(sub.sub_id, -1)
        if b != -1 and not (reg != -1 and b < reg):
            continue  # it may have arrived after a deletion
        missing = sub.unresolved_count(seq, catalog)
        if missing:
            out.append(f"subscriber {sub.name!r} has not acknowledged {missing} of its {catalog.count(seq)} bundles")
    return out


def _missing_segments(spans: dict[int, SegmentSpan], acks: AckEvidence | None, covered_floor: int | None) -> list[tuple[str, str]]:
    """Segment numbers absent between (or above) the present ones that the evidence says must exist.

    A number gap alone proves nothing: a crash skips the rest of a run of reserved numbers
    (engine.FLOOR_RESERVE), and retention deletes any fully processed segment, not only the oldest.
    Two facts do prove a loss. (1) Every deletion goes through QuiverStore.delete_segment, which
    first raises next.seq's wal_covered past the WAL sequences of every segment written so far, so
    a missing segment whose WAL sequences reach wal_covered was not deleted by the store. The WAL
    sequences of a missing segment lie between its present neighbours' (segments are written in
    log order). (2) A subscriber that was registered before the segment and has not resolved it.
    """
    out: list[tuple[str, str]] = []
    recorded = _recorded(spans)
    known = sorted(s for s in (acks.state.catalog if acks else ()) if s not in spans)
    prev = -1  # the present segment below the gap (-1: none)
    below: int | None = -1  # highest WAL sequence the present segments up to `prev` hold (None: unknown)
    for nxt in [*sorted(spans), None]:
        registered = [s for s in known if s > prev and (nxt is None or s < nxt)]
        reasons: list[str] = []
        proof = False
        first_after = spans[nxt].first if nxt is not None else None
        if nxt is not None and nxt > prev + 1 and covered_floor is not None and below is not None and first_after is not None:
            lo = max(below + 1, covered_floor)
            unexplained = absent.uncovered(lo, first_after - 1, recorded)
            if unexplained:
                reasons.append(
                    f"WAL sequence(s) {_ranges(unexplained)} are in no segment file, and segments/next.seq "
                    f"(wal_covered {covered_floor}) shows no deletion reached them: the store raises it past a "
                    "segment's WAL sequences before it deletes the segment"
                )
                proof = True
        named = ", ".join(map(str, registered[:10])) + (" ..." if len(registered) > 10 else "")
        if registered:
            reasons.insert(0, f"the ack log registered segment(s) {named}")
            owed = [f"segment {s}: {why}" for s in registered for why in _owed(acks, s)] if acks else []
            if owed:
                reasons.append("; ".join(owed[:5]) + (" ..." if len(owed) > 5 else "")
                               + " (retention records a drop for every waiting subscriber before it deletes a segment)")
                proof = True
            if not proof and covered_floor is not None and below is not None and covered_floor <= below + 1:
                reasons.append(
                    f"segments/next.seq wal_covered {covered_floor} is not past their WAL sequences (all above {below}): "
                    "the store raises it past a segment's WAL sequences before it deletes the segment"
                )
                proof = True
        if proof:
            if registered:  # the numbers the ack log names; others in the gap may be skipped numbers
                label, first = named, registered[0]
            else:
                assert nxt is not None
                label, first = (str(prev + 1) if nxt == prev + 2 else f"among {prev + 1}..{nxt - 1}"), prev + 1
            where = (f"between segments {prev} and {nxt}" if prev >= 0 else f"below segment {nxt}") if nxt is not None else (
                f"above segment {prev}" if prev >= 0 else "")
            out.append((f"segments/{first:016d}{SEGMENT_SUFFIX}", f"segment(s) {label} {where} missing: {'; '.join(reasons)}"))
        if nxt is not None:
            last_wal = spans[nxt].last
            below = None if last_wal is None or below is None else max(below, last_wal)
            prev = nxt
    return out


def _missing_wal_generations(fs: FileSystem, wal_dir: str, files: list[WalFile]) -> list[tuple[str, str]]:
    """Rotated WAL generations that must exist. Chunks below the sidecar's generation are reclaimed
    (deleted after the sidecar moved past them, wal/writer.py truncate_to); every generation from it
    up to the newest chunk is still needed, and the file the sidecar names always exists (a rotation
    renames it). Without a sidecar nothing was ever reclaimed. Generations that recovery moved into
    wal/quarantine/ after a corruption are accounted for."""
    point, problem = sidecar.read(fs, wal_dir)
    if problem:
        return []  # reported as damage; no reliable lower bound
    chunks = sorted(f.generation for f in files if f.generation is not None)
    active = any(f.generation is None for f in files)
    qdir = os.path.join(wal_dir, QUARANTINE_DIR)
    quarantined = set()
    if fs.exists(qdir):
        for name in fs.listdir(qdir):
            m = re.fullmatch(re.escape(ACTIVE) + r"\.(\d+)\.\d{8}T\d{6}\.bin", name)
            if m:
                quarantined.add(int(m.group(1)))
    out: list[tuple[str, str]] = []
    lo = point.generation if point else 0
    if point is not None and point.generation not in chunks and not (active and all(g < point.generation for g in chunks)):
        out.append((
            f"wal/{chunk_name(point.generation)}",
            f"WAL generation {point.generation} is missing: wal/truncate.offset says recovery starts in it at offset "
            f"{point.offset} (it is never deleted while the sidecar names it)",
        ))
    needed = _absent_between(lo, max(chunks, default=-1), {*chunks, *quarantined, *([point.generation] if point else [])})
    if needed:
        why = (f"every rotated generation from the truncate point's ({lo}) to the newest ({chunks[-1]}) holds entries "
               "recovery still needs" if point else "there is no wal/truncate.offset, and no WAL file is reclaimed before one is written")
        gens = ", ".join(map(str, needed[:10])) + (" ..." if len(needed) > 10 else "")
        out.append((f"wal/{chunk_name(needed[0])}", f"rotated WAL generation(s) {gens} missing: {why}"))
    return out


def _absent_between(lo: int, hi: int, present: set[int]) -> list[int]:
    """The first 11 numbers of lo..hi not in `present`, without walking the whole range (a stray
    file can name a generation near 2**63)."""
    out: list[int] = []
    g = lo
    while g <= hi and len(out) < 11:
        if g not in present:
            out.append(g)
        g += 1
    return out


def _missing_wal_data(
    fs: FileSystem, wal_dir: str, files: list[WalFile], covered: int, recorded: list[tuple[int, int]]
) -> list[tuple[str, str]]:
    """WAL entries that are neither in a segment file nor where recovery will read them.

    Recovery starts at the truncate point (wal/truncate.offset), which moves only past entries that
    a durable segment holds; so entries before it whose sequence no segment covers mean the point is
    ahead of the segments' data, and a first entry after it above `covered` + 1 means the entries in
    between were reclaimed from the WAL into segments that are gone. (`covered`: the highest WAL
    sequence the present segments hold, or next.seq's wal_covered - 1 when deletions passed it;
    `recorded`: sequences a segment records as absent, which need no segment.)
    """
    point, problem = sidecar.read(fs, wal_dir)
    if problem:
        point = None
    active_gen = max([f.generation + 1 for f in files if f.generation is not None] + [point.generation if point else 0])
    before: list[int] = []
    after: list[int] = []
    for f in files:
        gen = active_gen if f.generation is None else f.generation
        for offset, seq in f.entries:
            if point is not None and (gen, offset) < (point.generation, point.offset):
                before.append(seq)
            else:
                after.append(seq)
    out = []
    ahead = sorted(s for s in before if s > covered and not any(a <= s <= b for a, b in recorded))
    if ahead:
        assert point is not None
        out.append((
            f"wal/{sidecar.NAME}",
            f"the truncate point (generation {point.generation}, offset {point.offset}) is past WAL entries "
            f"{absent.label(ahead[0], ahead[-1])} that no segment file holds (the segments hold WAL sequences up to "
            f"{covered}); it only moves past entries a durable segment holds, so that segment is missing, and "
            "recovery, which starts at the point, will not replay them",
        ))
        covered = max(covered, ahead[-1])
    unexplained = absent.uncovered(covered + 1, min(after) - 1, recorded) if after else []
    if unexplained:
        out.append((
            "wal/",
            f"WAL sequence(s) {_ranges(unexplained)} are in no segment file and no longer in the WAL "
            f"(the oldest entry recovery reads has sequence {min(after)}; the segments hold sequences up to {covered}): "
            "the WAL only reclaims entries a durable segment holds, so that segment is missing",
        ))
    return out


def find_missing(
    fs: FileSystem, root: str, files: list[WalFile], spans: dict[int, SegmentSpan], acks: AckEvidence | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(missing, notes): what must exist but does not, with why; and absences that lose nothing."""
    wal_dir, seg_dir = os.path.join(root, "wal"), os.path.join(root, "segments")
    missing: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    opened = [n for n in (LOCK_NAME, ack_log.LOG_NAME, ack_log.CHECKPOINT_NAME) if fs.exists(os.path.join(root, n))]
    if not fs.exists(wal_dir):
        if opened:
            missing.append(("wal/", f"wal/ is missing: {root} holds {', '.join(opened)}, so QuiverStore.open ran on it, "
                            "and it creates wal/ first; bundles acknowledged after the newest segment were only there"))
        else:
            notes.append(("wal/", "absent (no LOCK or ack log: segments copied out of a store)"))
    else:
        missing += _missing_wal_generations(fs, wal_dir, files)
    gone = ack_log.missing_log(root, fs) if fs.exists(os.path.join(root, LOCK_NAME)) else None  # else: copied files
    if gone is not None:
        missing.append((ack_log.LOG_NAME, f"{ack_log.LOG_NAME} is missing: {gone}"))
    wal_damaged = any(f.damaged for f in files)
    sidecar_exists = fs.exists(os.path.join(wal_dir, sidecar.NAME))
    max_seen = acks.state.catalog.max_seen if acks else -1
    if not fs.exists(seg_dir):
        evidence = []
        if sidecar_exists:
            evidence.append("wal/truncate.offset exists (it is first written once a segment file is durable)")
        if max_seen >= 0:
            evidence.append(f"the ack log registered segments up to {max_seen}")
        if not wal_damaged:
            evidence += [why for _, why in _missing_wal_data(fs, wal_dir, files, -1, [])]
        if evidence:
            missing.append(("segments/", "segments/ is missing although " + "; ".join(evidence)))
        else:
            notes.append(("segments/", "absent (nothing shows a segment was ever written)"))
        return missing, notes
    floor_path = os.path.join(seg_dir, seq_floor.NAME)
    floor, floor_problem = seq_floor.read(fs, seg_dir)
    covered_floor = floor.wal_covered if fs.exists(floor_path) and floor_problem is None else None
    if not fs.exists(floor_path) and (spans or max_seen >= 0 or sidecar_exists):
        missing.append((f"segments/{seq_floor.NAME}", (
            "segments/next.seq is missing: it is written before the first segment number is used, and this store "
            "has written segments; without it a reopen hands out segment numbers again and ignores its record of "
            "deletions")))
    missing += _missing_segments(spans, acks, covered_floor)
    if all(s.last is not None for s in spans.values()) and not wal_damaged and fs.exists(wal_dir):
        covered = max([covered_floor - 1 if covered_floor is not None else -1] + [s.last for s in spans.values() if s.last is not None])
        missing += _missing_wal_data(fs, wal_dir, files, covered, _recorded(spans))
    return missing, notes
