"""`quiver` command line: inspect, verify, dump and replay a store directory (all read-only)."""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import errno
import json
import logging
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import absent, progress, progress_ledger, seq_floor
from .engine import (
    list_segment_seqs,
    segment_path,
)
from .errors import CorruptionError, QuiverError
from .fs import DEFAULT_FS, FileSystem
from .held_open import held_open
from .offline import StoredBundle, StoredBundles, recovery_plan, wal_files
from .presence import (
    AckEvidence,
    SegmentSpan,
    WalFile,
    find_missing,
    read_ack_evidence,
    recorded_absences,
    scan_wal_file,
    segment_span,
)
from .segment.info import SegmentInfo
from .segment.reader import SegmentReader
from .segment.schema_view import check_slot_streams, representative_schema, slot_schema
from .staged_dir import PublishError, StagedDir, stale_note
from .stdout import StdoutError, guarded_stdout, stdout_failure
from .store_dir import check_store_dir, output_inside
from .subscriber import ack_log
from .subscriber.report import subscriber_table
from .wal import sidecar
from .wal.bundle_codec import decode_bundle
from .wal.format import HEADER_LEN, VERSION, decode_header
from .wal.replay import RecoveryPlan, WalCutError, WalGapError


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


# -- inspect ---------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = check_store_dir(args.path)
    wal = Table(title=f"WAL of {escape(args.path)}")
    for col in ("file", "size", "header"):
        wal.add_column(col)
    bad = 0  # damage found: a WAL header QuiverStore.open refuses, a segment that cannot be read
    for _, path in wal_files(fs, wal_dir):
        data = fs.read_file(path)
        try:
            h = decode_header(data[:HEADER_LEN], path)
            desc = f"v{h.version} cfg {h.cfg_hash.hex()}"
            if (h.version, h.reserved) != (VERSION, 0) and _recreated_intact(_open_plan(fs, wal_dir, seg_dir), path) is None:
                # replay.py _check_header refuses it; verify reports it ("unsupported WAL version", exit 1)
                desc = f"[red]{desc}: format version {h.version} (reserved {h.reserved}) is not readable by this build (version {VERSION})"
                bad += 1
        except CorruptionError as exc:
            reason = _recreated_intact(_open_plan(fs, wal_dir, seg_dir), path)
            if reason is not None:  # an active file cut while being created: no entry lost
                desc = f"[yellow]{escape(str(exc))}: {escape(reason)}; QuiverStore.open recreates it"
            else:  # recovery refuses to open the store (replay.py _check_header); verify exits 1 on it
                desc = f"[red]{escape(str(exc))}"
                bad += 1
        wal.add_row(os.path.basename(path), _size(len(data)), desc)
    point, problem = sidecar.read(fs, wal_dir) if fs.exists(wal_dir) else (None, None)
    wal.caption = f"sidecar: {point}" if point else f"sidecar: {problem or 'none'}"
    console.print(wal)
    seqs = list_segment_seqs(fs, seg_dir) if fs.exists(seg_dir) else []
    segs = Table(title=f"{len(seqs)} segments")
    for col in ("seq", "bundles", "streams", "rows", "size", "codec", "ingestion time min", "ingestion time max", "reason"):
        segs.add_column(col, justify="right" if col in ("seq", "bundles", "streams", "rows", "size") else "left")
    streams = Table(title="streams")
    for col in ("seq", "stream", "slot", "fingerprint", "rows", "chunks", "bytes", "event time", "columns"):
        streams.add_column(col)
    schemas: dict[int, list[SegmentInfo]] = {}
    conflicts: dict[int, list[str]] = {}  # slot -> segments whose own streams disagree
    recorded: dict[int, SegmentSpan] = {}  # segments that record WAL sequences no segment holds
    for seq in seqs:
        try:
            with SegmentReader.open(segment_path(seg_dir, seq), fs=fs) as reader:
                info = reader.info
                codec = ", ".join(sorted({reader.stream_codec(st.stream_id) for st in info.streams}))
                if args.schemas:
                    for slot in info.representative_schemas:
                        conflict = _stream_conflict(reader, slot)
                        if conflict:
                            conflicts.setdefault(slot, []).append(conflict)
        except QuiverError as exc:
            if getattr(exc, "errno", None) == errno.ENOENT:  # a live store's retention deleted it after the listing
                segs.add_row(str(seq), "-", "-", "-", "-", "-", "-", "-", "deleted by retention while listing")
                continue
            segs.add_row(str(seq), "-", "-", "-", "-", "-", "-", "-", f"[red]{escape(str(exc))}")
            bad += 1
            continue
        segs.add_row(
            str(seq), str(info.bundle_count), str(info.stream_count), str(info.rows), _size(info.size_bytes), codec,
            _ts(info.ingestion_time_min_ns), _ts(info.ingestion_time_max_ns), info.metadata.get("quiver.finalize_reason", ""),
        )
        for st in info.streams:
            ev = "-" if st.event_time_min_ns is None else f"{_ts(st.event_time_min_ns)} .. {_ts(st.event_time_max_ns)}"
            streams.add_row(
                str(seq), str(st.stream_id), str(st.slot), st.fingerprint.hex()[:16], str(st.rows), str(st.chunks),
                _size(st.bytes), ev, str(len(st.present_columns)),
            )
        for slot in info.representative_schemas:
            schemas.setdefault(slot, []).append(info)
        span = segment_span(info)
        if span.absent:
            recorded[seq] = span
    lost, noted = recorded_absences(seg_dir, recorded)
    if lost or noted:
        segs.caption = "\n".join([why for _, why in lost] + [f"{row}: {why}" for row, why in noted])
    console.print(segs)
    console.print(subscriber_table(args.path, fs, on_disk=seqs))  # marks, gaps, lag (subscriber/report.py)
    if args.streams:
        console.print(streams)
    if args.schemas:
        for slot, group in sorted(schemas.items()):
            _print_schema(console, slot, group, conflicts.get(slot, []))
    return 1 if bad else 0


def _stream_conflict(reader: SegmentReader, slot: int) -> str | None:
    """Why the slot's streams in this segment cannot be merged, if they cannot (its recorded
    representative schema shows only the first type); None too for a damaged stream, which
    quiver verify names."""
    try:
        check_slot_streams(reader, slot)
    except CorruptionError:
        return None
    except QuiverError as exc:
        return str(exc)
    return None


def _print_schema(console: Console, slot: int, group: list[SegmentInfo], conflicts: list[str]) -> None:
    """The slot's representative schema over every segment holding it (what load_table reads),
    naming the segments whose types for a column cannot be merged, across segments or within one."""
    where = f"{len(group)} segment{'s' if len(group) > 1 else ''}"
    try:
        schema = slot_schema(group, slot)
    except QuiverError as exc:
        schema = representative_schema([i.representative_schemas[slot] for i in group], strict=False)
        conflicts = [f"the segments disagree ({exc})", *conflicts]
    if conflicts:
        where += "; [red]" + escape("; ".join(conflicts)) + "[/red]; load_table raises QuiverError for this slot; first type kept"
    console.print(f"[bold]slot {slot}[/bold] representative schema over {where}:\n{escape(str(schema))}\n", soft_wrap=True)


# -- verify ----------------------------------------------------------------------------------------
def _content_damage(plan: RecoveryPlan | None) -> dict[str, list[str]]:
    """Per WAL file, the entries recovery reads whose CRC holds but whose content does not decode
    into a bundle (QuiverStore.open skips them, losing those bundles)."""
    damage: dict[str, list[str]] = {}
    for entry, _, path in plan.entries if plan else ():
        try:
            decode_bundle(entry, None, path)
        except CorruptionError as exc:
            damage.setdefault(path, []).append(f"{exc} (QuiverStore.open skips this entry)")
    return damage


def cmd_verify(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = check_store_dir(args.path)
    errors: list[str] = []
    table = Table(title=f"verify {escape(args.path)}")
    for col in ("file", "checked", "result"):
        table.add_column(col)
    files: list[WalFile] = []
    plan = _open_plan(fs, wal_dir, seg_dir)
    content_damage = _content_damage(plan)
    for generation, path in wal_files(fs, wal_dir):
        scanned, errs = scan_wal_file(fs, generation, path)
        # What recovery calls damage, read from where it starts (the sidecar's point), which a scan
        # from the header cannot tell apart behind a reclaimed (zeroed) prefix. A sequence gap left
        # by missing rotated files, or between the segments and the truncate point, is reported
        # below as what is missing (find_missing).
        errs += [str(e) for e in (plan.corruptions if plan else []) if e.path == path and (
                 isinstance(e, WalCutError) or not any(x.startswith(f"{path} at offset {e.offset}:") for x in errs))
                 and not (isinstance(e, WalGapError) and (e.missing_generations or e.after_point))]
        errs += content_damage.get(path, [])
        reason = _recreated_intact(plan, path) if generation is None else None
        if reason is not None:
            files.append(WalFile(generation, path, [], False))  # no entry: as a freshly created log
            table.add_row(
                os.path.relpath(path, args.path), f"{fs.file_size(path)} bytes", f"[yellow]{escape(reason)}: QuiverStore.open recreates it"
            )
            continue
        files.append(scanned)
        errors += errs
        checked = f"{len(scanned.entries)} entries"
        read_from = next((f.start for f in plan.files if f.path == path), HEADER_LEN) if plan else HEADER_LEN
        if scanned.torn_tail is not None and scanned.torn_tail < read_from:  # zeros of a reclaimed prefix
            checked += f", bytes [{HEADER_LEN}, {read_from}) reclaimed into segments"
        elif scanned.torn_tail is not None:  # as recovery says: the end of the log, cut at that offset on open
            checked += f", torn tail at {scanned.torn_tail} (end of log)"
        table.add_row(os.path.relpath(path, args.path), checked, "[red]CORRUPT" if errs else "[green]ok")
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
    ledger_path = os.path.join(seg_dir, progress_ledger.NAME)
    if fs.exists(ledger_path):
        try:
            checked = f"{len(progress_ledger.read(fs, seg_dir))} producers"
        except CorruptionError as exc:
            errors.append(str(exc))
            checked = "-"
        table.add_row(os.path.relpath(ledger_path, args.path), checked, "[red]CORRUPT" if checked == "-" else "[green]ok")
    spans: dict[int, SegmentSpan] = {}
    bundles: dict[int, int] = {}  # of each readable segment
    vanished: list[int] = []  # listed, then gone before their read (as inspect and dump skip them)
    for seq in list_segment_seqs(fs, seg_dir) if fs.exists(seg_dir) else []:
        path = segment_path(seg_dir, seq)
        spans[seq] = SegmentSpan(seq, None, None)
        try:
            with SegmentReader.open(path, fs=fs) as reader:
                reader.verify()
                progress.segment_offsets(reader)  # what committed_offset reads: valid records only
                n = bundles[seq] = reader.info.bundle_count
                spans[seq] = segment_span(reader.info)
        except CorruptionError as exc:
            where = "" if exc.path else f"{path}: "
            errors.append(f"{where}{exc}")
            table.add_row(os.path.relpath(path, args.path), "-", "[red]CORRUPT")
            continue
        except QuiverError as exc:
            if not _vanished(fs, seg_dir, seq, exc):
                raise  # a segment that cannot be read: exit 2, as the help says
            del spans[seq]  # judged below as a segment absent from the start would be
            vanished.append(seq)
            continue
        table.add_row(os.path.relpath(path, args.path), f"{n} bundles", "[green]ok")
    acks: AckEvidence | None = None
    try:
        acks = read_ack_evidence(fs, args.path)
    except QuiverError as exc:  # a damaged checkpoint or log header: QuiverStore.open refuses it too
        errors.append(str(exc))
        damaged = getattr(exc, "path", None) or os.path.join(args.path, ack_log.CHECKPOINT_NAME)
        table.add_row(os.path.relpath(damaged, args.path), "-", "[red]CORRUPT")
    else:
        for path, records, damage in ack_log.check_files(args.path, fs):
            table.add_row(os.path.relpath(path, args.path), f"{records} records", "[red]CORRUPT" if damage else "[green]ok")
            if damage is not None:
                errors.append(f"{damage}: opening the store moves the records from here on aside, losing those outcomes")
        for why in acks.state.damage if acks is not None else []:
            errors.append(f"{os.path.join(args.path, ack_log.LOG_NAME)}: a record contradicts the ones before it: {why}; opening ignores it")
        for seq, n in bundles.items():
            logged = acks.state.catalog.count(seq) if acks is not None else None
            if logged is not None and logged != n:
                errors.append(f"{os.path.join(args.path, ack_log.LOG_NAME)}: segment {seq} holds {n} bundles, but the ack log "
                              f"registered it with {logged}; opening uses the segment's count")
    missing, notes = find_missing(fs, args.path, files, spans, acks)
    lost, noted = recorded_absences(seg_dir, spans)
    for name, why in notes + noted:
        table.add_row(name, "-", f"[yellow]{escape(why)}")
    for seq in vanished:
        if not _gap_missing(seq, spans, missing):  # else the store still expects it: reported as missing below
            table.add_row(os.path.relpath(segment_path(seg_dir, seq), args.path), "-",
                          "[yellow]deleted by the store's retention while verifying; skipped")
    for name, why in missing:
        table.add_row(name, "-", "[red]MISSING")
        errors.append(f"{os.path.join(args.path, name)}: {why}")
    for name, why in lost:
        table.add_row(name, "-", "[red]LOST")
        errors.append(f"{args.path}: {why}")
    console.print(table)
    for e in errors:
        console.print(f"[red]error:[/red] {escape(e)}", highlight=False, soft_wrap=True)
    return 1 if errors else 0


def _vanished(fs: FileSystem, seg_dir: str, seq: int, exc: QuiverError) -> bool:
    """Whether segment `seq`, listed before, failed to open because it is gone: its file does not
    exist (ENOENT) and segments/ no longer lists it, as when a live store's retention deletes it
    between verify's listing and its read. A name still listed (a dangling symlink) is a file that
    cannot be read."""
    if getattr(exc, "errno", None) != errno.ENOENT:
        return False
    return not fs.exists(seg_dir) or seq not in list_segment_seqs(fs, seg_dir)


SEGMENT_ROW = re.compile(r"segments/(\d+)\.qseg")


def _gap_missing(seq: int, spans: dict[int, SegmentSpan], missing: list[tuple[str, str]]) -> bool:
    """Whether find_missing reports the segments missing between the present neighbours of `seq`
    (it names each such gap by the first segment the evidence says must exist there), or segments/
    as a whole: then a vanished segment `seq` is part of that damage, not a deletion by the store."""
    below = max((s for s in spans if s < seq), default=-1)
    above = min((s for s in spans if s > seq), default=None)
    for name, _ in missing:
        if name == "segments/":
            return True
        m = SEGMENT_ROW.fullmatch(name)
        if m and below < int(m.group(1)) and (above is None or int(m.group(1)) < above):
            return True
    return False


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
    stored = StoredBundles(args.path, fs, args.segment)
    if args.format == "arrow":
        staged = _staged_output(args)
        try:
            failed = _dump_arrow(args, stored, staged)
        finally:
            staged.discard()  # unless published: a failed or interrupted dump leaves --output as it was
        if failed is not None:
            return failed
    else:
        if args.output:
            raise QuiverError("--output is for --format arrow; JSON lines go to stdout (redirect them: > FILE)")
        for item in stored:
            _dump_json(sys.stdout, item)
    for seq in stored.deleted:
        _stderr().print(f"quiver dump: segment {seq} was deleted by the store's retention while dumping; skipped")
    if stored.wal_error is not None:
        _stderr().print(f"quiver dump: the WAL could not be read ({escape(str(stored.wal_error))}); see quiver replay {escape(args.path)}")
    if stored.wal_only:
        named = '"segment" is null and "wal_sequence" numbers them' if args.format == "json" else "files wal<seq>_slot<slot>.arrow"
        _stderr().print(
            f"quiver dump: the last {stored.wal_only} bundle(s) are only in the WAL (acknowledged, not in a segment yet): {named}"
        )
    if stored.wal_damage is not None:
        _stderr().print(
            f"quiver dump: the WAL is damaged ({escape(str(stored.wal_damage))}); bundles after the damage are not "
            f"dumped: see quiver verify {escape(args.path)} and quiver replay {escape(args.path)}"
        )
    sys.stdout.flush()  # a closed pipe shows here, inside main's handler, not at interpreter exit
    return 1 if stored.wal_error is not None or stored.wal_damage is not None else 0


def _dump_json(out: Any, item: StoredBundle) -> None:
    """One JSON line for the bundle."""
    bundle = item.bundle
    if item.segment_seq is not None:
        row: dict = {"segment": item.segment_seq, "bundle": item.bundle_index}
        named = f"segment {item.segment_seq} bundle {item.bundle_index}"
    else:
        row, named = {"segment": None, "bundle": None, "wal_sequence": item.wal_sequence}, f"WAL sequence {item.wal_sequence}"
    row["ingestion_time_ns"] = bundle.ingestion_time_ns
    try:
        row["slots"] = {str(s): _json_rows(b) for s, b in bundle.slots.items()}
    except (pa.ArrowException, ValueError) as exc:  # a batch its own schema does not hold (nulls in a not-null column)
        raise CorruptionError(f"{named}: its rows do not fit their schema ({exc})") from None
    out.write(_json_line(row) + "\n")


def _staged_output(args: argparse.Namespace) -> StagedDir:
    """--output checked (see _check_output_dir) and created, with the directory its files are
    staged in; a note on stderr names the staging directories a killed dump left there."""
    if not args.output:
        raise QuiverError("--format arrow writes one Arrow IPC file per bundle slot: give --output DIR")
    inside = output_inside(args.output, args.path)
    if inside is not None:
        raise QuiverError(f"--output {args.output} is {inside} {args.path} being read; choose a directory outside it")
    _check_output_dir(args.output)
    out = Path(args.output)
    stale = stale_note("quiver dump", out)
    if stale is not None:
        _stderr().print(escape(stale))
    try:
        return StagedDir.create(out)
    except OSError as exc:
        raise QuiverError(f"--output {args.output}: cannot create the directory ({exc.strerror})") from None


def _dump_arrow(args: argparse.Namespace, stored: StoredBundles, staged: StagedDir) -> int | None:
    """One Arrow IPC file per bundle and slot, published into --output once every bundle was read,
    or once those before a damaged segment were (then the exit status after one line on stderr)."""
    dumped = 0
    items = iter(stored)
    while True:
        try:
            item = next(items)
        except StopIteration:
            break
        except QuiverError as exc:  # a damaged segment: the error names its file and offset
            return _failed("dump", exc, f"; {_salvaged(staged, dumped)}")
        stem = (f"seg{item.segment_seq:016d}_bundle{item.bundle_index:06d}" if item.segment_seq is not None
                else f"wal{item.wal_sequence:020d}")
        for slot, batch in item.bundle.slots.items():
            name = f"{stem}_slot{slot:02d}.arrow"
            try:  # streamed into the staged file, not built in memory first
                with staged.open(name) as sink, pa.ipc.new_file(sink, batch.schema) as writer:
                    writer.write_batch(batch)
            except OSError as exc:
                raise QuiverError(f"cannot write {os.path.join(args.output, name)}: {exc.strerror or exc}") from None
        dumped += 1
    try:
        staged.publish()
    except PublishError as exc:
        if exc.published:
            raise QuiverError(f"--output {args.output}: the dumped files are in it, but cleaning up failed ({exc.failure}); "
                              f"{exc.state('--output')}") from None
        raise QuiverError(f"--output {args.output}: cannot move the dumped files into it ({exc.failure}); "
                          f"{exc.state('--output')}") from None
    return None


def _salvaged(staged: StagedDir, dumped: int) -> str:
    """Publish the `dumped` bundles read before a store's damage, when there are any; the end of
    the message that says so."""
    if dumped == 0:
        return "no bundle before it was dumped"
    try:
        staged.publish()
    except PublishError as exc:
        if exc.published:
            return (f"the {dumped} bundle(s) before it were dumped into {staged.out}, but cleaning up failed "
                    f"({exc.failure}); {exc.state('--output')}")
        return (f"the {dumped} bundle(s) before it were dumped but could not be moved into {staged.out} "
                f"({exc.failure}); {exc.state('--output')}")
    return f"the {dumped} bundle(s) before it were dumped into {staged.out}"


def _recreated_intact(plan: RecoveryPlan | None, path: str) -> str | None:
    """Why recovery recreates this WAL file when that loses nothing (no damage reported for it)."""
    if plan is None or any(e.path == path for e in plan.corruptions):
        return None
    return next((a.reason for a in plan.actions if a.kind == "recreate" and a.path == path), None)


def _open_plan(fs: FileSystem, wal_dir: str, seg_dir: str) -> RecoveryPlan | None:
    """What point-in-time recovery would do on QuiverStore.open; None when the plan cannot be made
    or there is no WAL. Quiet: verify and inspect report the damage the planning meets themselves
    (replay, whose subject it is, lets its notes through)."""
    logger = logging.getLogger("quiver_store")
    was = logger.disabled
    logger.disabled = True
    try:
        return recovery_plan(fs, wal_dir, seg_dir, "point_in_time")[0]
    except QuiverError:
        return None
    finally:
        logger.disabled = was


NON_FINITE = {"NaN": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _json_line(row: dict) -> str:
    """One RFC 8259 JSON line: NaN and the infinities, which JSON has no token for, as the strings
    "NaN", "Infinity" and "-Infinity" (the rare row holding one is walked a second time)."""
    try:
        return json.dumps(row, default=_json_default, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(row), default=_json_default, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[str(value).replace("nan", "NaN")]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


DUMP_FILE = re.compile(r"(seg\d{16}_bundle\d{6}|wal\d{20})_slot\d{2}\.arrow")


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
    wal_status = _replay_wal(args, console, fs)
    ack_status = _replay_ack_log(args, console, fs)
    return 2 if 2 in (wal_status, ack_status) else max(wal_status, ack_status)


def _replay_wal(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    wal_dir, seg_dir = check_store_dir(args.path)
    try:
        plan, covered = recovery_plan(fs, wal_dir, seg_dir, args.recovery)
    except CorruptionError as exc:
        console.print(f"[red]recovery mode {args.recovery!r} would refuse to open:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    if plan is None:
        console.print(f"{escape(wal_dir)}: no WAL files; recovery would start an empty log")
        return 0
    console.print(escape(f"sidecar: {plan.sidecar_point or 'none'}" + (f" ({plan.sidecar_problem})" if plan.sidecar_problem else "")))
    console.print(f"entries already in segments: WAL sequence <= {covered}")
    table = Table(title=f"what recovery ({args.recovery}) would do — nothing is modified")
    for col in ("file", "scan from", "valid entries", "in segments", "direct markers", "unknown type", "hole bytes", "last seq"):
        table.add_column(col)
    for f in plan.files:
        table.add_row(
            os.path.basename(f.path), str(f.start), str(f.valid), str(f.covered), str(f.direct), str(f.unknown), str(f.holes),
            "-" if f.last_sequence is None else str(f.last_sequence),
        )
    console.print(table)
    console.print(f"entries to replay into the open segment: {len(plan.entries)}")
    if plan.torn:
        console.print(f"torn tail: {escape(str(plan.torn[0]))} at offset {plan.torn[1]} ({plan.torn[2]} bytes) — a normal end of log")
    for err in plan.corruptions:
        console.print(f"[red]corruption:[/red] {escape(str(err))}", soft_wrap=True)
    if plan.sidecar_reset is not None:
        console.print(escape(f"would reset the sidecar to {plan.sidecar_reset} (the file it names starts again)"))
    for act in plan.actions:
        if act.kind == "recreate":  # the whole file goes; a new empty log takes its place
            what = f"would recreate: {act.path} ({fs.file_size(act.path)} bytes) — {act.reason}"
        else:
            what = f"would {act.kind}: {act.path} offset {act.offset} length {act.length} — {act.reason}"
        console.print(escape(what), soft_wrap=True)
    console.print(f"bytes that would be quarantined: {plan.quarantined_bytes}")
    for lo, hi, kind in absent.merge(plan.absent):
        console.print(f"would record in the next segment: WAL sequence(s) {absent.label(lo, hi)} {kind}")
    return 1 if plan.corruptions else 0


def _replay_ack_log(args: argparse.Namespace, console: Console, fs: FileSystem) -> int:
    """What opening does with the ack log: a damaged checkpoint, or one the log proves is gone,
    refuses the store (2); a damaged record followed by more is corruption (1), which strict
    refuses (2) and the other modes repair."""
    try:
        ack_log.read_untouched(args.path, fs)
        damage = [d for _, _, d in ack_log.check_files(args.path, fs) if d is not None]
    except QuiverError as exc:
        console.print(f"[red]the ack log: opening would refuse the store:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    for d in damage:
        if args.recovery == "strict":
            console.print(f"[red]the ack log: recovery mode 'strict' would refuse to open:[/red] {escape(str(d))}", soft_wrap=True)
            return 2
        action = ("skips the damaged bytes and keeps the records after them" if args.recovery == "skip_corrupt"
                  else "moves the records from here on aside, losing those outcomes")
        console.print(f"[red]ack log corruption:[/red] {escape(str(d))}; opening {action}", soft_wrap=True)
    return 1 if damage else 0


OPEN_ELSEWHERE = (
    "note: another process has this store open (its LOCK is held); the files may change while they are read"
)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


DESCRIPTION = """Inspect and check a Quiver store (read-only).

exit status:
  0    fine
  1    damage found (verify, replay, an unreadable segment or a WAL header that opening refuses in
       inspect: damaged, or of a format version this build cannot read; a damaged segment or WAL
       that stops dump), or standard output cannot be written
  2    bad arguments, not a store, refused (replay: opening would refuse the store, as
       --recovery strict does on damage), or a file that cannot be read or written: one of the
       store's, or dump's --output directory or a file in it
  130  Ctrl-C
  141  the reader of a pipe went away"""
INTERRUPTED_EXIT = 128 + 2  # what a shell reports for a command Ctrl-C (SIGINT) ended


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quiver", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    path_help = "the store directory (the one holding wal/ and segments/)"

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        parser_ = sub.add_parser(name, help=help_text, description=help_text)
        parser_.add_argument("path", help=path_help)
        return parser_

    p = command("inspect", "segments, streams, schemas, time ranges and sizes")
    p.add_argument("--streams", action="store_true", help="also list every stream of every segment")
    p.add_argument("--schemas", action="store_true", help="print each slot's representative schema over every segment")
    command("verify", "full checksum pass; non-zero exit naming file and offset on damage")
    p = command("dump", "every stored bundle (segments, then the WAL) as JSON lines or Arrow IPC files")
    p.add_argument("--format", choices=("json", "arrow"), default="json",
                   help="json: one line per bundle on stdout; arrow: one Arrow IPC file per bundle and slot in "
                        "--output (default: json)")
    p.add_argument("--segment", type=int, default=None, help="only this segment sequence number")
    p.add_argument("--output", help="directory for --format arrow")
    p = command("replay", "what WAL recovery would do (read-only)")
    p.add_argument("--recovery", choices=("point_in_time", "skip_corrupt", "strict"), default="point_in_time",
                   help="the wal.recovery mode to simulate (default: point_in_time)")
    args = parser.parse_args(argv)
    console = Console(width=max(Console().width, 160))  # piped: wide enough that no table wraps a cell
    handler = {"inspect": cmd_inspect, "verify": cmd_verify, "dump": cmd_dump, "replay": cmd_replay}[args.command]
    if os.path.isdir(args.path) and held_open(args.path):
        _stderr().print(OPEN_ELSEWHERE)
    try:
        with guarded_stdout():
            return handler(args, console, DEFAULT_FS)
    except StdoutError as exc:  # a full disk: one line, exit 1; a reader gone (`quiver dump | head`): quietly
        return stdout_failure(f"quiver {args.command}", exc)
    except KeyboardInterrupt:  # Ctrl-C: the commands only read the store (dump discards the files it staged)
        _stderr().print(f"quiver {args.command}: interrupted")
        return INTERRUPTED_EXIT
    except (QuiverError, OSError) as exc:  # one line on stderr, never a traceback
        return _failed(args.command, exc)


def _failed(command: str, exc: QuiverError | OSError, more: str = "") -> int:
    """One line on stderr for a command that failed; the exit status: 1 for damage found, else 2
    (bad arguments, not a store, refused, or a file of the store or of dump's --output that cannot
    be read or written)."""
    _stderr().print(f"[red]quiver {command}:[/red] {escape(str(exc) + more)}")
    return 1 if isinstance(exc, CorruptionError) else 2


if __name__ == "__main__":
    sys.exit(main())
