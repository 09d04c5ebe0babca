"""``adaptive-arrow decode``: an OTAP envelope file -> OTLP files (one per message), or a Quiver
store of OTAP records -> OTLP files (one per bundle); protobuf (``.pb``), or with ``--output-format
otlp-json`` OTLP/JSON on one line (``.json``, as the OpenTelemetry Collector's ``otlpjsonfile``
receiver reads it).

A store is read without opening it (quiver_store.offline: no lock, nothing written, so it works
beside a live store, which a note on stderr then says, as the `quiver` commands do): its finalized
segments in order, then the acknowledged bundles only its WAL holds, the bundles `quiver dump` lists. A store may hold several signals, so each file is named
``<index>-<signal>.pb``; a bundle holding only a producer-progress record is the empty request,
``<index>.pb``. For an envelope file the signal comes from the messages themselves. An envelope
without payloads (what `encode` makes of an empty request) decodes to the empty request, whose
bytes are the same for every signal (protobuf: none; OTLP/JSON: ``{}``), so a file of empty
requests, or one that starts with them, needs no signal either. A directory holding
``<index>[-<signal>].pb`` or ``.json`` files of an earlier decode is refused unless --overwrite,
which deletes those files and nothing else. The files are staged (quiver_store/staged_dir.py): written
into a hidden directory in --out and moved into it once every message or bundle decoded, so a
decode that fails or is interrupted leaves --out as it was (a directory it created is removed),
except that a store whose segment or WAL is damaged keeps the bundles before the damage, which
the message says.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import outputs

if TYPE_CHECKING:
    from otap_model import OtapBundle, Signal
    from quiver_store.offline import StoredBundles
    from quiver_store.staged_dir import StagedDir

    from ..envelope import BatchArrowRecords

NAME = "adaptive-arrow decode"
RUN_FILE = re.compile(r"\d{6}(-(logs|traces|metrics))?\.(pb|json)")
SUFFIXES = {"otlp-proto": ".pb", "otlp-json": ".json"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=outputs.nonempty_path,
                        help="OTAP envelope file written by `adaptive-arrow encode`, or a Quiver store directory of OTAP records")
    parser.add_argument("--out", required=True, type=outputs.nonempty_path, help="directory for the OTLP files (created if missing)")
    parser.add_argument("--output-format", choices=list(SUFFIXES), default="otlp-proto",
                        help="otlp-proto: <index>.pb files; otlp-json: <index>.json files, each one line of OTLP/JSON")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the <index>.pb and <index>.json files of an earlier decode in --out (deleted once "
                             "this decode succeeded)")


def run(args: argparse.Namespace) -> int:
    from quiver_store.errors import QuiverError
    from quiver_store.held_open import held_open
    from quiver_store.offline import StoredBundles
    from quiver_store.staged_dir import StagedDir, stale_note
    from quiver_store.store_dir import output_inside

    stored = None
    if args.input.is_dir():
        try:
            stored = StoredBundles(str(args.input))
        except QuiverError as exc:  # not a store: says what the directory is instead
            print(f"{NAME}: {exc}", file=sys.stderr)
            return 2
        inside = output_inside(args.out, args.input)
        if inside is not None:
            print(f"{NAME}: --out {args.out} is {inside} {args.input} being read; choose a directory outside it",
                  file=sys.stderr)
            return 2
    elif not args.input.is_file():
        what = "no such file" if not args.input.exists() else "not a regular file"
        print(f"{NAME}: {args.input}: {what}", file=sys.stderr)
        return 2
    refused = outputs.refusal(NAME, args.out, RUN_FILE, args.overwrite)
    if refused is not None:
        return refused
    if stored is not None and held_open(args.input):
        print(f"{NAME}: note: another process has this store open (its LOCK is held); decoding what is durable when "
              "each file is read", file=sys.stderr)
    stale = stale_note(NAME, args.out)
    if stale is not None:
        print(stale, file=sys.stderr)
    try:
        staging = StagedDir.create(args.out, outputs.earlier_run(args.out, RUN_FILE))
    except OSError as exc:
        print(f"{NAME}: cannot create --out {args.out}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        return decode_envelopes(args, staging) if stored is None else decode_store(args, stored, staging)
    finally:
        staging.discard()  # unless published: a failed or interrupted decode leaves --out as it was


def serialize(bundle: OtapBundle | None, output_format: str) -> bytes:
    """The request file's bytes; None is the empty request, the same for every signal."""
    from otap_model import to_otlp, to_otlp_json

    if output_format == "otlp-json":
        return (to_otlp_json(bundle) if bundle is not None else "{}").encode() + b"\n"
    return to_otlp(bundle).SerializeToString() if bundle is not None else b""


def decode_envelopes(args: argparse.Namespace, staging: StagedDir) -> int:
    """Every message of the envelope file at args.input as an OTLP request file, published into
    --out once all decoded."""
    from otap_model.errors import OtapModelError

    from ..decoder import Decoder
    from ..envelope import BatchArrowRecords
    from ..envelope_file import read_envelopes
    from ..errors import AdaptiveArrowError, EnvelopeError

    decoder = Decoder()
    number = 0  # 1-based number of the message being decoded
    try:
        with args.input.open("rb") as source:
            messages = read_envelopes(source, str(args.input))
            while True:
                try:
                    message = next(messages)
                except EnvelopeError as exc:  # framing: names the file and message itself
                    print(f"{NAME}: {exc}{_requests_hint(args.input) if number == 0 else ''}", file=sys.stderr)
                    return 2
                except StopIteration:
                    break
                number += 1
                bar = BatchArrowRecords.from_bytes(message)
                held = _signal_held(bar)
                if decoder.signal is not None and held not in (None, decoder.signal):
                    print(f"{NAME}: {args.input}: message {number} holds {held.value}, but the messages before it hold "
                          f"{decoder.signal.value}; an OTAP envelope file holds one signal, as adaptive-arrow encode writes "
                          "it: decode each signal's envelope file separately", file=sys.stderr)
                    return 2
                data = serialize(decoder.decode(bar) if bar.payloads else None, args.output_format)
                staging.write(f"{number - 1:06d}{SUFFIXES[args.output_format]}", data)
    except OSError as exc:
        print(f"{NAME}: {exc.filename or args.input}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except (AdaptiveArrowError, OtapModelError) as exc:
        hint = _requests_hint(args.input) if number == 1 else ""
        print(f"{NAME}: {args.input}: message {number}: {exc}{hint}", file=sys.stderr)
        return 2
    failed = outputs.publish(NAME, staging)
    if failed is not None:
        return failed
    print(f"{number} message(s) decoded into {args.out}")
    return 0


def _signal_held(bar: BatchArrowRecords) -> Signal | None:
    """The one signal an envelope's payload types belong to; None for none, several or an unknown
    type (the decoder reports those in its own words)."""
    from otap_model import PayloadType
    from otap_model.payload import signal_of

    known = {int(pt) for pt in PayloadType}
    signals = {signal_of(PayloadType(p.type)) for p in bar.payloads if p.type in known} - {None}
    return signals.pop() if len(signals) == 1 else None


def _requests_hint(path: Path) -> str:
    """An envelope file whose first message fails may be no envelope file at all but the OTLP or
    Zipkin input that encode takes; say so when its first request reads as such."""
    from .inputs import InputError, read_input, to_bundles

    try:
        first = next(to_bundles(path, read_input(path), "auto", None), None)
    except (InputError, OSError):
        return ""
    if first is None:
        return ""
    request, bundle = first
    return (f"; the file holds {bundle.signal.value} export requests (read as {request.read_as}), not OTAP envelopes: "
            "encode it first with adaptive-arrow encode")


def decode_store(args: argparse.Namespace, stored: StoredBundles, staging: StagedDir) -> int:
    """Every bundle of the store at args.input as an OTLP request file, published into --out once
    all decoded, or those before a damaged segment or WAL entry (salvage)."""
    from otap_model.errors import OtapModelError
    from quiver_store.errors import QuiverError
    from quiver_store.progress import PROGRESS_SLOT

    from ..decoder import Decoder
    from ..errors import AdaptiveArrowError

    decoder = Decoder()
    number = 0
    items = iter(stored)
    try:
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except QuiverError as exc:  # a damaged segment: the error names its file and offset
                print(f"{NAME}: {exc}; {_salvaged(staging, number)}", file=sys.stderr)
                return 2
            try:
                suffix = SUFFIXES[args.output_format]
                if set(item.bundle.slots) <= {PROGRESS_SLOT}:  # progress over input without records: the empty request
                    name, data = f"{number:06d}{suffix}", serialize(None, args.output_format)
                else:
                    bundle = decoder.decode_records(item.bundle)
                    name, data = f"{number:06d}-{bundle.signal.value}{suffix}", serialize(bundle, args.output_format)
            except (AdaptiveArrowError, OtapModelError) as exc:
                where = (f"segment {item.segment_seq} bundle {item.bundle_index}" if item.segment_seq is not None
                         else f"WAL entry {item.wal_sequence}")
                print(f"{NAME}: {args.input}: {where}: {exc}", file=sys.stderr)
                return 2
            staging.write(name, data)
            number += 1
    except OSError as exc:
        print(f"{NAME}: {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for seq in stored.deleted:
        print(f"{NAME}: note: segment {seq} was deleted by the store's retention while decoding; skipped", file=sys.stderr)
    if stored.wal_only:
        print(f"{NAME}: note: the last {stored.wal_only} bundle(s) are only in the WAL (acknowledged, not in a "
              "segment yet); decoded too", file=sys.stderr)
    damage = stored.wal_error or stored.wal_damage
    if damage is not None:
        print(f"{NAME}: {args.input}: the WAL {'could not be read' if stored.wal_error else 'is damaged'} ({damage}); "
              f"{_salvaged(staging, number)}: see quiver verify {args.input}", file=sys.stderr)
        return 2
    failed = outputs.publish(NAME, staging)
    if failed is not None:
        return failed
    print(f"{number} bundle(s) decoded into {args.out}")
    return 0


def _salvaged(staging: StagedDir, number: int) -> str:
    """Publish the `number` bundles decoded before a store's damage, when there are any; the end
    of the message that says so."""
    if number == 0:
        return "no bundle before it was decoded"
    if outputs.publish(NAME, staging) is not None and not staging.published:  # its own line on stderr
        return f"the {number} bundle(s) before it were decoded but could not be moved into {staging.out}"
    return f"the {number} bundle(s) before it were decoded into {staging.out}"
