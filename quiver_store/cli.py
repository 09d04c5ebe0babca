"""`quiver` command line: inspect, verify, dump and replay a store directory (all read-only)."""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import seq_floor
from .engine import (
    LOCK_NAME,
    META_WAL_FIRST,
    META_WAL_LAST,
    SEGMENT_SUFFIX,
    list_segment_seqs,
    newest_covered_sequence,
    segment_path,
)
from .errors import CorruptionError, NotAStoreError, QuiverError
from .fs import DEFAULT_FS, FileSystem
from .segment.info import SegmentInfo
from .segment.reader import SegmentReader
from .subscriber import ack_log
from .subscriber.registry import RebuiltState, rebuild
from .subscriber.report import subscriber_table
from .wal import sidecar
from .wal.format import HEADER_LEN, decode_header
from .wal.reader import Damage, scan
from .wal.replay import plan_recovery
from .wal.rotation import ACTIVE, QUARANTINE_DIR, chunk_name, list_chunks


def _ts(ns: int | None) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _dirs(path: str) -> tuple[str, str]:
    """The wal/ and segments/ directories of the store at `path`, or NotAStoreError saying what
    `path` is instead. QuiverStore.open creates both (then LOCK) before anything else, so a directory
    with neither was never a store; one alone is enough (a WAL or segments copied out of a store)."""
    if not os.path.exists(path):
        raise NotAStoreError(f"{path} does not exist (expected a Quiver store directory holding wal/ and segments/)")
    if not os.path.isdir(path):
        raise NotAStoreError(f"{path} is a file, not a Quiver store directory (one holding wal/ and segments/)")
    wal_dir, seg_dir = os.path.join(path, "wal"), os.path.join(path, "segments")
    for d in (wal_dir, seg_dir):
        if os.path.exists(d) and not os.path.isdir(d):
            raise NotAStoreError(f"{path} is not a Quiver store: its {os.path.basename(d)} is a file, not a directory")
    if not os.path.isdir(wal_dir) and not os.path.isdir(seg_dir):
        raise NotAStoreError(f"{path} is not a Quiver store: it has no wal/ or segments/ directory{_hint(path)}")
    return wal_dir, seg_dir


def _hint(path: str) -> str:
    """Where the store probably is, when `path` is part of one or holds per-core stores."""
    norm = os.path.normpath(path)
    name, parent = os.path.basename(norm), os.path.dirname(norm) or "."
    if name in ("wal", "segments") and os.path.isdir(os.path.join(parent, "wal" if name == "segments" else "segments")):
        return f" (it is the {name}/ directory of the store {parent}: pass {parent})"
    cores = sorted(n for n in os.listdir(path) if re.fullmatch(r"core_\d+", n) and os.path.isdir(os.path.join(path, n)))
    if cores:
        return f" (it holds the per-core stores {', '.join(cores[:3])}{', ...' if len(cores) > 3 else ''}: pass one of them)"
    return ""


def _wal_files(fs: FileSystem, wal_dir: str) -> list[tuple[int | None, str]]:
    """(generation, path) oldest first; the active file's generation is not needed here."""
    if not fs.exists(wal_dir):
        return []
    files: list[tuple[int | None, str]] = [(g, os.path.join(wal_dir, chunk_name(g))) for g in list_chunks(fs, wal_dir)]
    active = os.path.join(wal_dir, ACTIVE)
    if fs.exists(active):
        files.append((None, active))
    return files


# -- inspect ---------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = _dirs(args.path)
    wal = Table(title=f"WAL of {args.path}")
    for col in ("file", "size", "header"):
        wal.add_column(col)
    for _, path in _wal_files(fs, wal_dir):
        data = fs.read_file(path)
        try:
            h = decode_header(data[:HEADER_LEN], path)
            desc = f"v{h.version} cfg {h.cfg_hash.hex()}"
        except CorruptionError as exc:
            desc = f"[red]{exc}"
        wal.add_row(os.path.basename(path), _size(len(data)), desc)
    point, problem = sidecar.read(fs, wal_dir) if fs.exists(wal_dir) else (None, None)
    wal.caption = f"sidecar: {point}" if point else f"sidecar: {problem or 'none'}"
    console.print(wal)
    seqs = list_segment_seqs(fs, seg_dir) if fs.exists(seg_dir) else []
    segs = Table(title=f"{len(seqs)} segments")
    for col in ("seq", "bundles", "streams", "rows", "size", "ingestion time min", "ingestion time max", "reason"):
        segs.add_column(col, justify="right" if col in ("seq", "bundles", "streams", "rows", "size") else "left")
    streams = Table(title="streams")
    for col in ("seq", "stream", "slot", "fingerprint", "rows", "chunks", "bytes", "event time", "columns"):
        streams.add_column(col)
    schemas: dict[int, pa.Schema] = {}
    bad = 0
    for seq in seqs:
        try:
            with SegmentReader.open(segment_path(seg_dir, seq), fs=fs) as reader:
                info = reader.info
        except QuiverError as exc:
            segs.add_row(str(seq), "-", "-", "-", "-", "-", "-", f"[red]{exc}")
            bad += 1
            continue
        segs.add_row(
            str(seq), str(info.bundle_count), str(info.stream_count), str(info.rows), _size(info.size_bytes),
            _ts(info.ingestion_time_min_ns), _ts(info.ingestion_time_max_ns), info.metadata.get("quiver.finalize_reason", ""),
        )
        for st in info.streams:
            ev = "-" if st.event_time_min_ns is None else f"{_ts(st.event_time_min_ns)} .. {_ts(st.event_time_max_ns)}"
            streams.add_row(
                str(seq), str(st.stream_id), str(st.slot), st.fingerprint.hex()[:16], str(st.rows), str(st.chunks),
                _size(st.bytes), ev, str(len(st.present_columns)),
            )
        schemas.update(info.representative_schemas)
    console.print(segs)
    console.print(subscriber_table(args.path, fs, on_disk=seqs))  # marks, gaps, lag (subscriber/report.py)
    if args.streams:
        console.print(streams)
    if args.schemas:
        for slot, schema in sorted(schemas.items()):
            console.print(f"[bold]slot {slot}[/bold] representative schema (newest segment):\n{schema}\n")
    return 1 if bad else 0


# -- verify ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _WalFile:
    """One WAL file as verify scanned it: its generation (None: the active file) and valid frames."""

    generation: int | None
    path: str
    entries: list[tuple[int, int]]  # (offset, WAL sequence) of every valid frame, in file order
    damaged: bool


@dataclass(frozen=True)
class _Span:
    """A present segment and the WAL sequences of its bundles (None: unreadable, or not written by a
    store, which records them as quiver.wal.first_sequence / last_sequence)."""

    seq: int
    first: int | None
    last: int | None


@dataclass(frozen=True)
class _AckEvidence:
    """What the ack log (checkpoint + records after it) says about segments, with the order in which
    segments and subscribers appeared: index -1 for the checkpoint, else the record's position."""

    state: RebuiltState
    registered: dict[int, int]  # segment seq -> where it was first registered
    born: dict[int, int]  # subscriber id -> where it first appeared


def _verify_wal_file(fs: FileSystem, generation: int | None, path: str) -> tuple[_WalFile, list[str]]:
    """Scan one WAL file and list its damage; punched holes and the zeroed tail of the active file
    (everything reclaimed) are normal states, not damage."""
    data = fs.read_file(path)
    try:
        h = decode_header(data, path)
    except CorruptionError as exc:
        return _WalFile(generation, path, [], True), [str(exc)]
    if h.version != 1 or h.reserved != 0:
        return _WalFile(generation, path, [], True), [f"{path} at offset 10: unsupported WAL version {h.version} / reserved {h.reserved}"]
    entries: list[tuple[int, int]] = []
    errors = []
    for item in scan(memoryview(data), HEADER_LEN, resync=True):
        if isinstance(item, Damage):
            reclaimed = item.kind == "hole" or (generation is None and item.kind == "torn" and item.reason == "zero-filled tail")
            if not reclaimed:
                what = "corrupt entry" if item.kind == "corrupt" else "invalid tail (torn write or corruption)"
                errors.append(f"{path} at offset {item.offset}: {what}: {item.reason} ({item.length} bytes)")
        else:
            entries.append((item.offset, item.sequence))
    return _WalFile(generation, path, entries, bool(errors)), errors


def _span(info: SegmentInfo) -> _Span:
    first, last = (info.metadata.get(k, "") for k in (META_WAL_FIRST, META_WAL_LAST))
    if first.isdigit() and last.isdigit():
        return _Span(info.seq, int(first), int(last))
    return _Span(info.seq, None, None)


def _read_acks(fs: FileSystem, root: str) -> _AckEvidence | None:
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
    return _AckEvidence(rebuild(checkpoint, records, cp_path), registered, born)


def _owed(acks: _AckEvidence, seq: int) -> list[str]:
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
        missing = sub.unresolved(seq, catalog)
        if missing:
            out.append(f"subscriber {sub.name!r} has not acknowledged {len(missing)} of its {catalog.count(seq)} bundles")
    return out


def _seq_range(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _missing_segments(spans: dict[int, _Span], acks: _AckEvidence | None, covered_floor: int | None) -> list[tuple[str, str]]:
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
            if lo < first_after:
                reasons.append(
                    f"WAL sequence(s) {_seq_range(lo, first_after - 1)} are in no segment file, and segments/next.seq "
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


def _missing_wal_generations(fs: FileSystem, wal_dir: str, files: list[_WalFile]) -> list[tuple[str, str]]:
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
    needed = [g for g in range(lo, max(chunks, default=-1) + 1) if g not in chunks and g not in quarantined and g != (point.generation if point else None)]
    if needed:
        why = (f"every rotated generation from the truncate point's ({lo}) to the newest ({chunks[-1]}) holds entries "
               "recovery still needs" if point else "there is no wal/truncate.offset, and no WAL file is reclaimed before one is written")
        gens = ", ".join(map(str, needed[:10])) + (" ..." if len(needed) > 10 else "")
        out.append((f"wal/{chunk_name(needed[0])}", f"rotated WAL generation(s) {gens} missing: {why}"))
    return out


def _missing_wal_data(fs: FileSystem, wal_dir: str, files: list[_WalFile], covered: int) -> list[tuple[str, str]]:
    """WAL entries that are neither in a segment file nor where recovery will read them.

    Recovery starts at the truncate point (wal/truncate.offset), which moves only past entries that
    a durable segment holds; so entries before it whose sequence no segment covers mean the point is
    ahead of the segments' data, and a first entry after it above `covered` + 1 means the entries in
    between were reclaimed from the WAL into segments that are gone. (`covered`: the highest WAL
    sequence the present segments hold, or next.seq's wal_covered - 1 when deletions passed it.)
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
    ahead = sorted(s for s in before if s > covered)
    if ahead:
        assert point is not None
        out.append((
            f"wal/{sidecar.NAME}",
            f"the truncate point (generation {point.generation}, offset {point.offset}) is past WAL entries "
            f"{_seq_range(ahead[0], ahead[-1])} that no segment file holds (the segments hold WAL sequences up to "
            f"{covered}); it only moves past entries a durable segment holds, so that segment is missing, and "
            "recovery, which starts at the point, will not replay them",
        ))
        covered = max(covered, ahead[-1])
    if after and min(after) > covered + 1:
        out.append((
            "wal/",
            f"WAL sequence(s) {_seq_range(covered + 1, min(after) - 1)} are in no segment file and no longer in the WAL "
            f"(the oldest entry recovery reads has sequence {min(after)}; the segments hold sequences up to {covered}): "
            "the WAL only reclaims entries a durable segment holds, so that segment is missing",
        ))
    return out


def _presence(
    fs: FileSystem, root: str, files: list[_WalFile], spans: dict[int, _Span], acks: _AckEvidence | None
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
            evidence += [why for _, why in _missing_wal_data(fs, wal_dir, files, -1)]
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
        missing += _missing_wal_data(fs, wal_dir, files, covered)
    return missing, notes


def cmd_verify(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = _dirs(args.path)
    errors: list[str] = []
    table = Table(title=f"verify {args.path}")
    for col in ("file", "checked", "result"):
        table.add_column(col)
    files: list[_WalFile] = []
    for generation, path in _wal_files(fs, wal_dir):
        scanned, errs = _verify_wal_file(fs, generation, path)
        files.append(scanned)
        errors += errs
        table.add_row(os.path.relpath(path, args.path), f"{len(scanned.entries)} entries", "[red]CORRUPT" if errs else "[green]ok")
    side = os.path.join(wal_dir, sidecar.NAME)
    if fs.exists(side):
        point, problem = sidecar.read(fs, wal_dir)
        if point is None:
            errors.append(f"{side} at offset 0: {problem}")
        table.add_row(os.path.relpath(side, args.path), "32 bytes", "[red]CORRUPT" if point is None else "[green]ok")
    floor_path = os.path.join(seg_dir, seq_floor.NAME)
    if fs.exists(floor_path):
        _, problem = seq_floor.read(fs, seg_dir)
        if problem:
            errors.append(f"{floor_path} at offset 0: {problem}")
        table.add_row(os.path.relpath(floor_path, args.path), "32 bytes", "[red]CORRUPT" if problem else "[green]ok")
    spans: dict[int, _Span] = {}
    for seq in list_segment_seqs(fs, seg_dir) if fs.exists(seg_dir) else []:
        path = segment_path(seg_dir, seq)
        spans[seq] = _Span(seq, None, None)
        try:
            with SegmentReader.open(path, fs=fs) as reader:
                reader.verify()
                n = reader.info.bundle_count
                spans[seq] = _span(reader.info)
        except CorruptionError as exc:
            where = "" if exc.path else f"{path}: "
            errors.append(f"{where}{exc}")
            table.add_row(os.path.relpath(path, args.path), "-", "[red]CORRUPT")
            continue
        table.add_row(os.path.relpath(path, args.path), f"{n} bundles", "[green]ok")
    acks: _AckEvidence | None = None
    try:
        acks = _read_acks(fs, args.path)
    except QuiverError as exc:  # a damaged checkpoint or log header: QuiverStore.open refuses it too
        errors.append(str(exc))
        damaged = getattr(exc, "path", None) or os.path.join(args.path, ack_log.CHECKPOINT_NAME)
        table.add_row(os.path.relpath(damaged, args.path), "-", "[red]CORRUPT")
    missing, notes = _presence(fs, args.path, files, spans, acks)
    for name, why in notes:
        table.add_row(name, "-", f"[yellow]{why}")
    for name, why in missing:
        table.add_row(name, "-", "[red]MISSING")
        errors.append(f"{os.path.join(args.path, name)}: {why}")
    console.print(table)
    for e in errors:
        console.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
    return 1 if errors else 0


# -- dump ------------------------------------------------------------------------------------------
def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return str(value)


def cmd_dump(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    _, seg_dir = _dirs(args.path)
    seqs = list_segment_seqs(fs, seg_dir) if fs.exists(seg_dir) else []
    if args.segment is not None:
        if args.segment not in seqs:
            raise QuiverError(f"no segment {args.segment} in {seg_dir} (segments: {seqs[:10]}{'...' if len(seqs) > 10 else ''})")
        seqs = [args.segment]
    if args.format == "arrow":
        if not args.output:
            raise QuiverError("--format arrow writes one Arrow IPC file per bundle slot: give --output DIR")
        _check_output_dir(args.output)
        try:
            os.makedirs(args.output, exist_ok=True)
        except OSError as exc:
            raise QuiverError(f"--output {args.output}: cannot create the directory ({exc.strerror})") from None
    elif args.output:
        raise QuiverError("--output is for --format arrow; JSON lines go to stdout (redirect them: > FILE)")
    out = sys.stdout
    for seq in seqs:
        with SegmentReader.open(segment_path(seg_dir, seq), fs=fs) as reader:
            for index, bundle in enumerate(reader.bundles()):
                if args.format == "json":
                    row = {
                        "segment": seq,
                        "bundle": index,
                        "ingestion_time_ns": bundle.ingestion_time_ns,
                        "slots": {str(s): _json_rows(b) for s, b in bundle.slots.items()},
                    }
                    out.write(json.dumps(row, default=_json_default) + "\n")
                    continue
                for slot, batch in bundle.slots.items():
                    target = os.path.join(args.output, f"seg{seq:016d}_bundle{index:06d}_slot{slot:02d}.arrow")
                    with pa.OSFile(target, "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
                        w.write_batch(batch)
    return 0


DUMP_FILE = re.compile(r"seg\d{16}_bundle\d{6}_slot\d{2}\.arrow")


def _check_output_dir(out: str) -> None:
    """Refuse an --output that is a file, or a directory holding an earlier dump's files (which this
    dump would overwrite or, when it writes fewer, silently mix with)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise QuiverError(f"--output {out} is an existing file, not a directory: name a new or empty directory")
    if os.path.isdir(out):
        earlier = sorted(n for n in os.listdir(out) if DUMP_FILE.fullmatch(n))
        if earlier:
            raise QuiverError(
                f"--output {out} already holds {len(earlier)} file(s) of an earlier dump (e.g. {earlier[0]}): "
                "name a new directory or remove them first"
            )


def _json_rows(batch: pa.RecordBatch) -> list[dict]:
    """Rows with JSON-friendly types: times as integer nanoseconds, dictionaries as their values."""
    schema = pa.schema([f.with_type(_json_type(f.type)) for f in batch.schema])
    return batch.cast(schema).to_pylist()


def _json_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_dictionary(t):
        return _json_type(t.value_type)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_json_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_json_type(t.value_type)))
    return t


# -- replay ----------------------------------------------------------------------------------------
def cmd_replay(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = _dirs(args.path)
    files = _wal_files(fs, wal_dir)
    if not files:
        console.print(f"{wal_dir}: no WAL files; recovery would start an empty log")
        return 0
    cfg_hash = decode_header(fs.read_file(files[0][1])[:HEADER_LEN], files[0][1]).cfg_hash
    floor, _ = seq_floor.read(fs, seg_dir) if fs.exists(seg_dir) else (seq_floor.SequenceFloor(), None)
    covered = max(floor.wal_covered - 1, newest_covered_sequence(fs, seg_dir) if fs.exists(seg_dir) else -1)
    try:
        plan = plan_recovery(fs, wal_dir, cfg_hash, args.recovery, covered)
    except CorruptionError as exc:
        console.print(f"[red]recovery mode {args.recovery!r} would refuse to open:[/red] {exc}", soft_wrap=True)
        return 2
    console.print(f"sidecar: {plan.sidecar_point or 'none'}" + (f" ({plan.sidecar_problem})" if plan.sidecar_problem else ""))
    console.print(f"entries already in segments: WAL sequence <= {covered}")
    table = Table(title=f"what recovery ({args.recovery}) would do — nothing is modified")
    for col in ("file", "scan from", "valid entries", "in segments", "unknown type", "hole bytes", "last seq"):
        table.add_column(col)
    for f in plan.files:
        table.add_row(
            os.path.basename(f.path), str(f.start), str(f.valid), str(f.covered), str(f.unknown), str(f.holes),
            "-" if f.last_sequence is None else str(f.last_sequence),
        )
    console.print(table)
    console.print(f"entries to replay into the open segment: {len(plan.entries)}")
    if plan.torn:
        console.print(f"torn tail: {plan.torn[0]} at offset {plan.torn[1]} ({plan.torn[2]} bytes) — a normal end of log")
    for err in plan.corruptions:
        console.print(f"[red]corruption:[/red] {err}", soft_wrap=True)
    for act in plan.actions:
        console.print(f"would {act.kind}: {act.path} offset {act.offset} length {act.length} — {act.reason}", soft_wrap=True)
    console.print(f"bytes that would be quarantined: {plan.quarantined_bytes}")
    return 1 if plan.corruptions else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quiver", description="Inspect and check a Quiver store (read-only).")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="segments, streams, schemas, time ranges and sizes")
    p.add_argument("path")
    p.add_argument("--streams", action="store_true", help="also list every stream of every segment")
    p.add_argument("--schemas", action="store_true", help="print the representative schema of each slot")
    p = sub.add_parser("verify", help="full checksum pass; non-zero exit naming file and offset on damage")
    p.add_argument("path")
    p = sub.add_parser("dump", help="bundles as JSON lines (stdout) or Arrow IPC files")
    p.add_argument("path")
    p.add_argument("--format", choices=("json", "arrow"), default="json")
    p.add_argument("--segment", type=int, default=None, help="only this segment sequence number")
    p.add_argument("--output", help="directory for --format arrow")
    p = sub.add_parser("replay", help="what WAL recovery would do (read-only)")
    p.add_argument("path")
    p.add_argument("--recovery", choices=("point_in_time", "skip_corrupt", "strict"), default="point_in_time")
    args = parser.parse_args(argv)
    console = Console(width=max(Console().width, 140))
    handler = {"inspect": cmd_inspect, "verify": cmd_verify, "dump": cmd_dump, "replay": cmd_replay}[args.command]
    try:
        return handler(args, console, DEFAULT_FS)
    except (QuiverError, OSError) as exc:  # one line on stderr, never a traceback
        Console(stderr=True, highlight=False).print(f"[red]quiver {args.command}:[/red] {escape(str(exc))}", soft_wrap=True)
        return 1 if isinstance(exc, CorruptionError) else 2  # damage found vs bad arguments or refused


if __name__ == "__main__":
    sys.exit(main())
