"""Recovery: what the WAL holds after a crash, and what to do about damage.

`plan_recovery` is read-only (the `quiver replay` command prints it); `apply_plan` performs the
actions: cut the torn tail, copy corrupt (and, in point-in-time mode, all later) bytes into
wal/quarantine/ before removing them from the log, delete rotated chunks the sidecar already covers.
The active file's zero-filled tail (the writer's pre-extension) is the clean end of the log and is
kept; trailing zeros are never copied into quarantine.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..absent import DAMAGED, LOST, UNACKNOWLEDGED, Range, uncovered
from ..errors import CorruptionError, QuiverError
from ..fs import FileSystem
from . import sidecar
from .format import (
    ENTRY_DIRECT,
    ENTRY_RECORD_BUNDLE,
    ENTRY_SYNCED,
    HEADER_LEN,
    VERSION,
    Entry,
    decode_header,
    encode_header,
)
from .reader import ZERO_TAIL, Damage, content_end, frame_at, scan
from .rotation import ACTIVE, QUARANTINE_DIR, chunk_name, list_chunks
from .writer import Position

log = logging.getLogger("quiver_store.wal")


@dataclass
class FileScan:
    path: str
    generation: int
    size: int
    start: int
    valid: int = 0
    covered: int = 0  # valid entries already in durable segments (skipped)
    unknown: int = 0  # entries of unknown type (skipped by length)
    direct: int = 0  # markers of bundles written straight into segment files (nothing to replay)
    holes: int = 0  # zero-filled bytes skipped (punched prefix, zeroed quarantine)
    last_sequence: int | None = None
    end: int | None = None  # where the zero-filled tail of the active file begins (None: no such tail)


class WalCutError(CorruptionError):
    """A WAL file shorter than the sidecar says it was written: the entries after that point are gone."""


class WalGapError(CorruptionError):
    """WAL sequence numbers missing between two intact frames (or between the segments and the first
    frame after the truncate point: `after_point`): the entries that held them are gone.
    `missing_generations`: rotated WAL files absent between the two frames' files (their loss)."""

    def __init__(self, message: str, path: str, offset: int, missing_generations: range = range(0), after_point: bool = False) -> None:
        super().__init__(message, path, offset)
        self.missing_generations = missing_generations
        self.after_point = after_point


@dataclass(frozen=True)
class Action:
    kind: str  # "truncate" | "quarantine" | "quarantine_file" | "zero" | "delete_covered" | "recreate"
    path: str
    offset: int = 0
    length: int = 0
    reason: str = ""


@dataclass
class RecoveryPlan:
    wal_dir: str
    mode: str
    sidecar_point: sidecar.TruncatePoint | None
    sidecar_problem: str | None
    active_generation: int
    files: list[FileScan] = field(default_factory=list)
    entries: list[tuple[Entry, Position, str]] = field(default_factory=list)  # to replay, in order
    torn: tuple[str, int, int] | None = None
    corruptions: list[CorruptionError] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    last_sequence: int = -1  # highest valid sequence seen anywhere (covered or not)
    absent: list[Range] = field(default_factory=list)  # sequences above the segments' with no bundle to replay
    synced: list[tuple[int, int]] = field(default_factory=list)  # sequence ranges synced frames vouch for
    sidecar_reset: sidecar.TruncatePoint | None = None  # written first by apply_plan: the sidecar named a
    # position past the end of a log that recovery cuts or recreates; scanning restarts at its header

    @property
    def active_end(self) -> int | None:
        """End of the log in the pre-extended active file (its zero tail starts there), if it has one."""
        active = os.path.join(self.wal_dir, ACTIVE)
        return next((f.end for f in self.files if f.path == active and f.end is not None), None)

    @property
    def quarantined_bytes(self) -> int:
        return sum(a.length for a in self.actions if a.kind in ("quarantine", "quarantine_file"))


def _check_header(data: bytes, path: str, cfg_hash: bytes) -> None:
    header = decode_header(data, path)
    if header.version != VERSION or header.reserved != 0:
        raise QuiverError(
            f"{path}: WAL format version {header.version} (reserved {header.reserved}) is not readable by this build "
            f"(version {VERSION}). Drain it with the build that wrote it, or move the wal/ directory aside."
        )
    if header.cfg_hash != cfg_hash:
        raise QuiverError(
            f"{path}: the WAL was written under a different layout contract (segment_cfg_hash "
            f"{header.cfg_hash.hex()}, this store's layout hashes to {cfg_hash.hex()}). Refusing to replay it: "
            "open the store with the layout that wrote it and flush() or close() it (every WAL entry is then in a "
            "segment file), then move the wal/ directory aside to start a fresh log; moving it aside without "
            "that loses the entries not yet in segments."
        )


def _holds_no_entry(data: bytes, cfg_hash: bytes) -> bool:
    """The active file is shorter than a header, or has a header other than this layout's and
    nothing but zeros after it: it holds no entry to replay, so recovery recreates it. Either the
    power went out between its creation and the fdatasync of its header (which precedes every
    append; a torn write may leave garbage in the header bytes), or every entry of a log written
    under another layout was reclaimed into segments (its prefix punched out). Whether entries
    were lost is the sidecar's to say (`_behind_sidecar`)."""
    if len(data) >= HEADER_LEN and data[:HEADER_LEN] == encode_header(cfg_hash):
        return False
    return len(data) < HEADER_LEN or not any(memoryview(data)[HEADER_LEN:])


def _no_entry_reason(data: bytes, plan: RecoveryPlan, path: str) -> str:
    if any(e.path == path for e in plan.corruptions):
        return "nothing of the log is left to read"
    try:
        header = decode_header(data, path)
    except CorruptionError:
        return "active WAL file was cut while being created (it holds no acknowledged entry)"
    return (f"its header names another layout (segment_cfg_hash {header.cfg_hash.hex()}) and every byte after it is "
            "zero: it holds no entry (all reclaimed into segments, or cut while being created)")


def _report(plan: RecoveryPlan, what: str, error: Callable[[str], CorruptionError]) -> None:
    """Damage `what` (the error built by `error(message)`): `strict` refuses to open, the other modes
    keep it in the plan's corruptions."""
    if plan.mode == "strict":
        raise error(f"{what}; wal.recovery='strict' refuses to open. Inspect it with `quiver replay`")
    plan.corruptions.append(error(what))


def _behind_sidecar(plan: RecoveryPlan, point: sidecar.TruncatePoint, path: str, size: int | None, durability: str) -> None:
    """The sidecar (checksummed) says the first `point.offset` bytes of this file were written, yet
    it is shorter (or gone). The store keeps the sidecar in step whenever it starts a file afresh,
    so under durability 'fsync' (every entry synced before the sidecar can pass it) the file was
    cut since and acknowledged entries after that point are lost: corruption. Under 'os' or 'none'
    a power loss leaves this too. Either way the sidecar goes back to the file's header (`apply_plan`),
    so the writer never takes the missing bytes for a reclaimable prefix of the new log."""
    plan.sidecar_reset = sidecar.TruncatePoint(HEADER_LEN, point.generation)
    plan.sidecar_problem = f"sidecar offset {point.offset} is past the end of {path} ({'missing' if size is None else f'{size} bytes'})"
    if durability != "fsync":
        plan.sidecar_problem += f"; under wal.durability={durability!r} a power loss leaves this"
        return
    what = ("the file is missing" if size is None else f"the file is {size} bytes") + (
        f", but the sidecar records that its first {point.offset} bytes were written (the entries before that are "
        f"in segments): it was {'deleted' if size is None else 'cut'} since, and any acknowledged entry after that "
        "point is lost")
    _report(plan, what, lambda message: WalCutError(message, path, size or 0))


def plan_recovery(
    fs: FileSystem, wal_dir: str, cfg_hash: bytes, mode: str, covered_sequence: int, durability: str = "fsync"
) -> RecoveryPlan:
    """Scan the WAL from the sidecar point; decide (without changing anything) what recovery does.

    `durability` is the policy the log was written under: with "fsync" a WAL file shorter than the
    sidecar's offset was cut (damage); with "os" or "none" a power loss leaves that too."""
    point, problem = sidecar.read(fs, wal_dir)
    gens = list_chunks(fs, wal_dir)
    active_path = os.path.join(wal_dir, ACTIVE)
    active_gen = max([g + 1 for g in gens] + [point.generation if point else 0])
    plan = RecoveryPlan(wal_dir, mode, point, problem, active_gen)
    if point is not None and point.generation > active_gen:
        plan.sidecar_problem = f"sidecar generation {point.generation} is newer than every WAL file; scanning all"
        point = None
    files = [(g, os.path.join(wal_dir, chunk_name(g))) for g in gens]
    if fs.exists(active_path):
        files.append((active_gen, active_path))
    elif point is not None and point.generation == active_gen and point.offset > HEADER_LEN:
        _behind_sidecar(plan, point, active_path, None, durability)
    if point is not None and point.generation < active_gen and point.generation not in gens:
        # A point inside a rotated chunk is always before its last frame (WalWriter.truncate_to
        # moves a point at a chunk's end to the next file), so that chunk still held entries.
        _behind_sidecar(plan, point, os.path.join(wal_dir, chunk_name(point.generation)), None, durability)
        plan.sidecar_reset = sidecar.TruncatePoint(HEADER_LEN, min([g for g in gens if g > point.generation] + [active_gen]))
    for g, path in files:
        if point is not None and g < point.generation:
            plan.actions.append(Action("delete_covered", path, reason="rotated chunk fully covered by the sidecar"))
    files = [(g, p) for g, p in files if point is None or g >= point.generation]
    follows = _Follows(covered_sequence, point is not None and plan.sidecar_reset is None, after_cut=bool(plan.corruptions))
    for index, (gen, path) in enumerate(files):
        data = fs.read_file(path)
        last_file = index == len(files) - 1
        named = point if point is not None and gen == point.generation else None  # the file the sidecar names
        if named is not None and named.offset > max(len(data), HEADER_LEN):  # an offset at the header promises no entry
            _behind_sidecar(plan, named, path, len(data), durability)
            follows.skip(CUT if durability == "fsync" else UNKNOWN)  # reported (or a power loss's): not again at the next frame
            if not last_file:  # a rotated chunk: what is left of it lies below the point, all in segments
                plan.sidecar_reset = sidecar.TruncatePoint(HEADER_LEN, files[index + 1][0])  # the next open deletes it
                continue
        if path == active_path and _holds_no_entry(data, cfg_hash):
            if named is not None and named.offset > HEADER_LEN:
                plan.sidecar_reset = sidecar.TruncatePoint(HEADER_LEN, gen)  # in step with the new file
            plan.actions.append(Action("recreate", path, reason=_no_entry_reason(data, plan, path)))
            continue
        _check_header(data, path, cfg_hash)
        view = memoryview(data)
        start = HEADER_LEN
        if named is not None:
            if named.offset > len(data) or named.offset < HEADER_LEN:
                plan.sidecar_problem = plan.sidecar_problem or (
                    f"sidecar offset {named.offset} is outside {path} ({len(data)} bytes); scanning it all")
            else:
                start = named.offset
            problem = _not_described(view, start, covered_sequence)
            if problem is not None:
                # The sidecar does not describe this file (all later chunks gone, so the active file
                # took the name of the one it names), or segments are gone. Frames before the point
                # may not be in any segment: read the whole file; it is in step with the sidecar from now on.
                plan.sidecar_problem = plan.sidecar_problem or f"{problem} at the sidecar's offset {start} of {path}; scanning the file from its header"
                plan.sidecar_reset = sidecar.TruncatePoint(HEADER_LEN, gen)
                start = HEADER_LEN
        fscan = FileScan(path, gen, len(data), start)
        plan.files.append(fscan)
        stop: str | None = None
        for item in scan(view, start, resync=mode == "skip_corrupt"):
            if isinstance(item, Entry) and item.entry_type == ENTRY_SYNCED:  # no sequence of its own
                _note_synced(plan, item)
                continue
            if isinstance(item, Entry):
                fscan.valid += 1
                fscan.last_sequence = item.sequence
                plan.last_sequence = max(plan.last_sequence, item.sequence)
                follows.check(plan, item, path, files[index - 1] if index and fscan.valid == 1 else None, gen)
                if item.entry_type == ENTRY_DIRECT:
                    fscan.direct += 1
                    if item.sequence > covered_sequence:  # its segment never became durable, so it was never acknowledged
                        plan.absent.append((item.sequence, item.sequence, UNACKNOWLEDGED))
                elif item.entry_type != ENTRY_RECORD_BUNDLE:
                    fscan.unknown += 1
                    follows.skip(UNKNOWN)  # a type from a newer build: its numbering is not ours to check
                elif item.sequence <= covered_sequence:
                    fscan.covered += 1
                else:
                    plan.entries.append((item, Position(gen, item.offset), path))
                continue
            reclaimed = item.kind == "hole" and named is not None and item.offset < named.offset  # the punched prefix
            follows.skip(RECLAIMED if reclaimed else HOLE if item.kind == "hole" else DAMAGE)  # no frame to follow
            stop = _damage(plan, fs, fscan, item, view, last_file, path == active_path, mode, files[index + 1 :])
            if stop == QUARANTINED:
                _read_quarantined(plan, follows, fs, view, item.offset, path, files[index + 1 :])
            if stop:
                break
        if stop:
            break
    _judge_unseen(plan, follows.unseen)
    return plan


def _not_described(view: memoryview, point: int, covered: int) -> str | None:
    """Why the sidecar's point cannot be this file's (None: it can). The point is where the frames
    after the segments' begin: a synced frame may come first, then a frame at most one past the
    newest segment's last sequence. A point inside a frame that the file's frames from its header
    run across is no frame boundary of this file either (below a valid point, they are zeros)."""
    at = frame_at(view, point) if point < len(view) else None
    if isinstance(at, Entry) and at.entry_type == ENTRY_SYNCED:
        point += at.size
        at = frame_at(view, point) if point < len(view) else None
    if isinstance(at, Entry):
        if at.sequence > covered + 1:
            return f"the frame has sequence {at.sequence}, more than one past the newest segment's last ({covered})"
        return None
    pos = HEADER_LEN
    while pos < point:
        frame = frame_at(view, pos)
        if not isinstance(frame, Entry):
            return None
        pos += frame.size
    return f"the frames from the header run across it (one ends at {pos})" if pos > point else None


def _note_synced(plan: RecoveryPlan, entry: Entry) -> None:
    vouched = entry.synced()
    if vouched is not None:
        plan.synced.append(vouched)


def _judge_unseen(plan: RecoveryPlan, unseen: list[Unseen]) -> None:
    """Record the sequences that vanished across damage, zeros or a cut file (`_Follows.unseen`),
    once every synced frame is read: what a synced frame vouches for was acknowledged and is lost
    (zeros there are reported here, damage already was); the rest is damaged (acknowledged or a
    power loss's interrupted commit: the log cannot tell). After a cut file all of it is lost."""
    for u in unseen:
        if u.cause == CUT:
            plan.absent.append((u.lo, u.hi, LOST))
            continue
        damaged = uncovered(u.lo, u.hi, plan.synced)
        lost = uncovered(u.lo, u.hi, damaged)  # what some synced frame vouches for
        plan.absent += [(a, b, LOST) for a, b in lost] + [(a, b, DAMAGED) for a, b in damaged]
        for a, b in lost if u.cause == HOLE else ():
            what = (f"WAL sequence(s) {a}..{b} missing before the frame of sequence {u.before} (zeros where their frames "
                    "stood, which a later synced frame says were fdatasynced); the acknowledged bundles they held are lost")
            _report(plan, what, partial(WalGapError, path=u.path, offset=u.offset))


def _read_quarantined(
    plan: RecoveryPlan, follows: _Follows, fs: FileSystem, view: memoryview, offset: int, path: str, later: list[tuple[int, str]]
) -> None:
    """Point-in-time recovery stops at damage and moves the rest of the log into quarantine: read
    the frames there, so that their sequences are judged like any others that vanished (`unseen`)
    and the log's next sequence numbers follow theirs instead of reusing them."""
    views = [(view, offset)] + [(memoryview(fs.read_file(p)), HEADER_LEN) for _, p in later]
    highest = -1
    for data, start in views:
        for item in scan(data, min(start, len(data)), resync=True) if len(data) >= HEADER_LEN else ():
            if isinstance(item, Entry) and item.entry_type == ENTRY_SYNCED:
                _note_synced(plan, item)
            elif isinstance(item, Entry) and item.entry_type in (ENTRY_RECORD_BUNDLE, ENTRY_DIRECT):
                highest = max(highest, item.sequence)
    if highest > follows.seen:
        follows.unseen.append(Unseen(follows.seen + 1, highest, DAMAGE, path, offset, highest + 1))
        plan.last_sequence = max(plan.last_sequence, highest)


# What lies before a frame, strongest first: a cut file, damage, zeros, the prefix below the sidecar's
# point (reclaimed into segments: any loss there is theirs, which verify reports), an unknown entry type.
CAUSES = CUT, DAMAGE, HOLE, RECLAIMED, UNKNOWN = "cut", "damage", "hole", "reclaimed", "unknown"
END, QUARANTINED = "end", "quarantined"  # why a scan stops at damage (`_damage`)


@dataclass(frozen=True)
class Unseen:
    """Sequences lo..hi above the segments' that vanished across `cause` before the frame of
    sequence `before` (at `offset` of `path`)."""

    lo: int
    hi: int
    cause: str
    path: str
    offset: int
    before: int


class _Follows:
    """Sequence continuity: every sequence number has a frame (a bundle's entry, or the marker of a
    bundle written straight into a segment file), in order, so a frame whose sequence is more than
    one past the intact frame right before it (in the same file, or the last of the file before)
    shows frames that are gone: a rotated chunk cut at a frame boundary, a deleted rotated chunk,
    frames removed from the middle of a file. Sequences already in segments are not missing. The
    first frame after the truncate point follows the frames a durable segment holds, so it may be
    at most one past the newest segment's last sequence. A gap between intact frames is lost.

    A gap across a cut file, damage or zeros goes into `unseen`, judged once every synced frame is
    read (`_judge_unseen`): zeros and damage are what a power loss leaves in frames it interrupted
    before their fdatasync, and which were never acknowledged. One across the reclaimed prefix or
    an entry of unknown type (whose numbering is a newer build's) is not judged."""

    def __init__(self, covered: int, check_first: bool, after_cut: bool) -> None:
        self.covered = covered
        self.first = check_first  # the next frame is the first read, and must follow the segments
        self.last: int | None = covered if check_first else None  # the frame before (None: skip the check)
        self.seen = covered  # the highest sequence the segments or the frames read so far hold
        self.cause: str | None = CUT if after_cut else None  # what lies between the frame before and the next
        self.unseen: list[Unseen] = []

    def skip(self, cause: str) -> None:
        """No frame to follow across `cause` (one of CAUSES) before the next one."""
        self.last = None
        if self.cause is None or CAUSES.index(cause) < CAUSES.index(self.cause):
            self.cause = cause

    def check(self, plan: RecoveryPlan, entry: Entry, path: str, previous: tuple[int, str] | None, gen: int) -> None:
        """`previous`: (generation, path) of the file before, when `entry` is the first frame of its file."""
        seen, self.seen = self.seen, max(self.seen, entry.sequence)
        cause, self.cause = self.cause, None
        last, self.last = self.last, entry.sequence
        first, self.first = self.first, False
        if last is None or entry.sequence <= max(last, self.covered) + 1:
            if cause in (CUT, DAMAGE, HOLE) and entry.sequence > seen + 1:
                self.unseen.append(Unseen(seen + 1, entry.sequence - 1, cause, path, entry.offset, entry.sequence))
            return
        lo, hi = max(last, self.covered) + 1, entry.sequence - 1
        plan.absent.append((lo, hi, LOST))
        gone: range = range(0)
        if first:
            where = (f"the first frame recovery reads; the segments hold sequences up to {self.covered}, so neither "
                     "they nor the WAL hold these")
        elif previous is None:
            where = f"the frame before it has sequence {last}: frames were removed from inside the file"
        else:
            gone = range(previous[0] + 1, gen)  # not a tuple: a stray file can name a generation near 2**63
            where = f"the file before it, {previous[1]}, ends with sequence {last}: " + (
                f"rotated WAL generation(s) {', '.join(map(str, gone[:10]))}{' ...' if len(gone) > 10 else ''} between the two are missing"
                if gone else "its last frames were cut off (a rotated file ends with its last frame)")
        what = (f"WAL sequence(s) {lo}..{hi} missing before the frame of sequence {entry.sequence} ({where}); "
                "the acknowledged bundles they held are lost")
        _report(plan, what, lambda message: WalGapError(message, path, entry.offset, gone, first))


def _damage(
    plan: RecoveryPlan, fs: FileSystem, fscan: FileScan, d: Damage, view: memoryview, last_file: bool, active: bool,
    mode: str, later: list[tuple[int, str]],
) -> str | None:
    """Record one damaged region; whether the scan stops here: None (it goes on), END (the log's
    end) or QUARANTINED (the rest of the log goes into quarantine). Only the active file may end
    in zeros (its pre-extension); rotation cuts them off before a file becomes a chunk."""
    path = fscan.path
    if d.kind == "hole":
        fscan.holes += d.length
        return None
    if d.kind == "torn" and last_file and active and d.reason == ZERO_TAIL:
        fscan.end = d.offset  # the clean end of a pre-extended file: nothing to do
        return END
    if d.kind == "torn" and last_file:
        plan.torn = (path, d.offset, d.length)
        plan.actions.append(Action("truncate", path, d.offset, d.length, f"torn tail: {d.reason}"))
        return END
    # Damage followed by more log (or a damaged rotated chunk) is corruption, not a torn write.
    reason = d.reason if d.kind == "corrupt" else f"rotated chunk ends in {d.length} invalid bytes ({d.reason})"
    extent = "until the next valid frame" if d.next_valid is not None else "to the end of the file"
    err = CorruptionError(f"corrupt WAL entry ({reason}); {d.length} bytes {extent}", path, d.offset)
    plan.corruptions.append(err)
    if mode == "strict":
        raise CorruptionError(
            f"corrupt WAL entry ({reason}); wal.recovery='strict' refuses to open. Inspect it with "
            "`quiver replay`, then reopen with recovery 'point_in_time' (keeps the log up to here and moves "
            "the rest to wal/quarantine/) or 'skip_corrupt'",
            path,
            d.offset,
        )
    if mode == "skip_corrupt" and d.next_valid is not None:
        plan.actions.append(Action("quarantine", path, d.offset, d.length, reason))
        plan.actions.append(Action("zero", path, d.offset, d.length, "corrupt bytes preserved in quarantine"))
        return None
    kept = content_end(view, d.offset) - d.offset  # the rest of the file, without its zero tail
    plan.actions.append(Action("quarantine", path, d.offset, kept, reason))
    plan.actions.append(Action("truncate", path, d.offset, fscan.size - d.offset, "point-in-time recovery stops here"))
    for _, later_path in later:  # whole files moved aside: their size counts as quarantined
        plan.actions.append(Action("quarantine_file", later_path, 0, fs.file_size(later_path), "follows a corrupt entry"))
    return QUARANTINED


def apply_plan(fs: FileSystem, plan: RecoveryPlan) -> None:
    """Perform the plan's actions; quarantined bytes are durable before they leave the log."""
    qdir = os.path.join(plan.wal_dir, QUARANTINE_DIR)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    if plan.sidecar_reset is not None:  # before the file changes: a crash in between leaves it in step
        sidecar.write(fs, plan.wal_dir, plan.sidecar_reset)
    for act in plan.actions:
        if act.kind in ("delete_covered", "recreate"):
            fs.unlink(act.path)
            fs.fsync_dir(plan.wal_dir)
        elif act.kind == "quarantine":
            fs.makedirs(qdir)
            data = _pread(fs, act.path, act.offset, act.length)
            target = os.path.join(qdir, f"{os.path.basename(act.path)}@{act.offset}.{stamp}.bin")
            fd = fs.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                fs.write(fd, data)
                fs.fdatasync(fd)
            finally:
                fs.close(fd)
            fs.fsync_dir(qdir)
            log.warning("quarantined %d bytes of %s from offset %d into %s (%s)", act.length, act.path, act.offset, target, act.reason)
        elif act.kind == "quarantine_file":
            fs.makedirs(qdir)
            target = os.path.join(qdir, f"{os.path.basename(act.path)}.{stamp}.bin")
            fs.rename(act.path, target)
            fs.fsync_dir(qdir)
            fs.fsync_dir(plan.wal_dir)
            log.warning("moved %s into quarantine as %s (%s)", act.path, target, act.reason)
        elif act.kind in ("truncate", "zero"):
            fd = fs.open(act.path, os.O_WRONLY)
            try:
                if act.kind == "truncate":
                    fs.truncate(fd, act.offset)
                else:
                    fs.pwrite(fd, bytes(act.length), act.offset)
                fs.fdatasync(fd)
            finally:
                fs.close(fd)


def _pread(fs: FileSystem, path: str, offset: int, length: int) -> bytes:
    fd = fs.open(path, os.O_RDONLY)
    try:
        return fs.pread(fd, length, offset)
    finally:
        fs.close(fd)
