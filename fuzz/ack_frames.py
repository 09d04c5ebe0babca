"""Ack log records and ack checkpoints whose CRCs are right but whose contents are wrong (see
fuzz/__init__.py).

`store_files` replaces a whole file, so nearly every ack log it makes fails the first record's
CRC and replay never reads a record's fields. Here the input is a recipe of edits to the records
of the crashed template store's ack log (record types, every numeric field set to extreme values,
subscriber names, cut bodies, appended bytes, records duplicated, dropped, swapped or inserted with
any type and values, the header's generation, a rotation that splits the log into two files) and
to the template's ack checkpoint (every field of its header, segments and subscribers, its
counts, bytes, cuts). Every record is then framed with its correct length and CRC (the checkpoint
and the header too), and the store goes through the same tools and opens as in `store_files`."""

from __future__ import annotations

import functools
import os
import re
import struct
from collections.abc import Callable

import atheris
import crc32c

from quiver_store.subscriber import ack_log as log

from .harness import fuzz, seed_each_kind
from .store_files import check_with, template
from .wal_frames import number, put

EDITS = 10  # at most, per input
KINDS = 16
FIRST_CHECKPOINT_KIND = 12  # kinds from here on edit the checkpoint
BODIES = {
    log.SEGMENT: log._SEGMENT,
    log.SUBSCRIBE: log._SUBSCRIBE,
    log.UNSUBSCRIBE: log._UNSUBSCRIBE,
    log.OUTCOME: log._OUTCOME,
    log.ORPHANED: log._ORPHANED,
}
ENCODERS: dict[int, Callable[..., bytes]] = {  # record type -> the ack log's encoder of its fields
    log.SEGMENT: log.encode_segment,
    log.SUBSCRIBE: log.encode_subscribe,
    log.UNSUBSCRIBE: log.encode_unsubscribe,
    log.OUTCOME: log.encode_outcome,
    log.ORPHANED: log.encode_orphaned,
}
FRAME_HEAD = 5  # u32 length, u8 type
CRC = 4


def layout(fixed: struct.Struct) -> list[tuple[int, int]]:
    """(offset, width) of each field of a little-endian struct without padding."""
    fields = []
    at = 0
    for count, code in re.findall(r"(\d*)([a-zA-Z?])", fixed.format):
        width = struct.calcsize("<" + count + code)
        fields.append((at, width))
        at += width
    return fields


@functools.cache
def generation() -> int:
    """The generation in the template ack log's header."""
    with open(os.path.join(template(), log.LOG_NAME), "rb") as f:
        return int(log._HEADER.unpack(f.read(log._HEADER.size))[3])


@functools.cache
def original() -> tuple[tuple[int, bytes], ...]:
    """The template ack log's records as (type, body), read with the store's own scanner and
    encoded back with its encoders."""
    with open(os.path.join(template(), log.LOG_NAME), "rb") as f:
        records = log.iter_records(f.read())
    frames = [ENCODERS[rec[0]](*rec[1:]) for rec in records]
    return tuple((frame[FRAME_HEAD - 1], frame[FRAME_HEAD:-CRC]) for frame in frames)


@functools.cache
def checkpoint() -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """The template's checkpoint (without its CRC), with the (offset, width) of each of its numeric
    fields (counts included)."""
    with open(os.path.join(template(), log.CHECKPOINT_NAME), "rb") as f:
        payload = f.read()
    state = log.decode_checkpoint(payload, log.CHECKPOINT_NAME)
    fields = layout(log._CP_HEAD)[3:]  # after magic, version, reserved
    at = log._CP_HEAD.size
    fields.append((at, 4))
    at += 4
    for _ in state.catalog.items():
        fields += [(at, 8), (at + 8, 4)]
        at += 12
    fields.append((at, 4))
    at += 4
    for sub in state.subscribers:
        fields += [(at + o, w) for o, w in layout(log._CP_SUB)]
        at += log._CP_SUB.size + len(sub.name.encode())
        fields += [(at, 4)] + [(at + 4 + 8 * i, 8) for i in range(len(sub.done))]
        at += 4 + 8 * len(sub.done)
        fields.append((at, 4))
        at += 4
        for seq in sorted(sub.partial):
            k = len(sub.partial[seq])
            fields += [(at, 8), (at + 8, 4)] + [(at + 12 + 4 * i, 4) for i in range(k)]
            at += 12 + 4 * k
    assert at == len(payload) - CRC
    return payload[:-CRC], tuple(fields)


class Recipe:
    """The records, the log's generation and rotation point, and the checkpoint being edited."""

    def __init__(self) -> None:
        self.records = [(rtype, bytearray(body)) for rtype, body in original()]
        self.generation = generation()
        self.split: int | None = None  # records before it go to the rotated file ack.log.<generation>
        self.checkpoint = bytearray(checkpoint()[0])

    def files(self) -> dict[str, bytes]:
        """The ack log file(s) and checkpoint, every record, header and checkpoint CRC right."""
        framed = [log._frame(rtype, bytes(body)) for rtype, body in self.records]
        split = len(framed) if self.split is None else min(self.split, len(framed))
        newer = (self.generation + 1) % (1 << 64)
        out = {log.LOG_NAME: log.encode_header(self.generation) + b"".join(framed)}
        if self.split is not None:
            out = {
                f"{log.LOG_NAME}.{self.generation}": log.encode_header(self.generation) + b"".join(framed[:split]),
                log.LOG_NAME: log.encode_header(newer) + b"".join(framed[split:]),
            }
        body = bytes(self.checkpoint)
        out[log.CHECKPOINT_NAME] = body + crc32c.crc32c(body).to_bytes(CRC, "little")
        return out


def any_record(fdp: atheris.FuzzedDataProvider) -> tuple[int, bytearray]:
    """A record of any known type with every field as the input says (a name for SUBSCRIBE)."""
    rtype = sorted(BODIES)[fdp.ConsumeIntInRange(0, len(BODIES) - 1)]
    fixed = BODIES[rtype]
    body = bytearray(fixed.size)
    for offset, width in layout(fixed):
        put(body, offset, width, number(fdp, width))
    if rtype == log.SUBSCRIBE:
        body += fdp.ConsumeBytes(body[-1])
    return rtype, body


def edit(fdp: atheris.FuzzedDataProvider, recipe: Recipe) -> None:
    """One edit to one record, to the record list, to the log's files or to the checkpoint."""
    kind = fdp.ConsumeIntInRange(0, KINDS - 1)
    if kind >= FIRST_CHECKPOINT_KIND:
        edit_checkpoint(fdp, recipe, kind)
        return
    if kind == 10:
        recipe.generation = number(fdp, 8)  # of the active file, or of the rotated one when split
        return
    records = recipe.records
    if not records and kind != 9:
        return
    k = fdp.ConsumeIntInRange(0, len(records) - 1) if records else 0
    if kind == 0:
        records[k] = (fdp.ConsumeIntInRange(0, 255), records[k][1])  # record type
        return
    if kind == 9:  # a record of any type and values, anywhere
        records.insert(fdp.ConsumeIntInRange(0, len(records)), any_record(fdp))
        return
    rtype, body = records[k]
    if kind == 1:  # a numeric field, as its type lays it out (the name's length included)
        fields = layout(BODIES.get(rtype, log._OUTCOME))
        offset, width = fields[fdp.ConsumeIntInRange(0, len(fields) - 1)]
        put(body, offset, width, number(fdp, width))
    elif kind == 2:  # another subscriber name, its length byte right or as it was
        at = log._SUBSCRIBE.size
        name = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 80))
        body[at:] = name
        if fdp.ConsumeBool() and at <= len(body):
            body[at - 1] = len(name) % 256
    elif kind == 3:  # bytes anywhere in the body
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if body:
                body[fdp.ConsumeIntInRange(0, len(body) - 1)] = fdp.ConsumeIntInRange(0, 255)
    elif kind == 4:  # a cut body (the frame stays whole: its length and CRC are rewritten)
        del body[fdp.ConsumeIntInRange(0, len(body)) :]
    elif kind == 5:
        body += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
    elif kind == 6:
        records.insert(fdp.ConsumeIntInRange(0, len(records)), (rtype, bytearray(body)))  # a duplicate anywhere
    elif kind == 7:
        del records[k]
    elif kind == 8:
        j = fdp.ConsumeIntInRange(0, len(records) - 1)
        records[k], records[j] = records[j], records[k]
    else:
        recipe.split = k  # rotated before record k


def edit_checkpoint(fdp: atheris.FuzzedDataProvider, recipe: Recipe, kind: int) -> None:
    """One edit to the checkpoint."""
    fields = checkpoint()[1]
    cp = recipe.checkpoint
    if kind == 12:  # a field: generation, offset, times, marks, counts, segments, ids, gaps
        offset, width = fields[fdp.ConsumeIntInRange(0, len(fields) - 1)]
        put(cp, offset, width, number(fdp, width))
    elif kind == 13:  # bytes after the magic and version (names, flags, anything)
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if len(cp) > 12:  # (a cut may have left only the magic and version)
                cp[fdp.ConsumeIntInRange(12, len(cp) - 1)] = fdp.ConsumeIntInRange(0, 255)
    elif kind == 14:
        del cp[fdp.ConsumeIntInRange(12, len(cp)) :]
    else:
        cp += fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))


def one(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    recipe = Recipe()
    for _ in range(fdp.ConsumeIntInRange(1, EDITS)):
        edit(fdp, recipe)
    files = recipe.files()
    active = files.pop(log.LOG_NAME)
    check_with(log.LOG_NAME, active, files)


def first_kind(data: bytes) -> int:
    """The kind of the first edit `data` asks for (as `one` reads it)."""
    fdp = atheris.FuzzedDataProvider(data)
    fdp.ConsumeIntInRange(1, EDITS)
    return fdp.ConsumeIntInRange(0, KINDS - 1)


def seed(directory: str) -> None:
    seed_each_kind(directory, KINDS, first_kind, 48)


if __name__ == "__main__":
    fuzz(one)
