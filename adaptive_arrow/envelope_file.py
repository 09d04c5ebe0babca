"""OTAP envelope files: a sequence of BatchArrowRecords messages, each prefixed by its length.

Layout (docs/formats.md, "OTAP envelope files"): repeated ``u32 little-endian length`` followed by
that many bytes of one serialized BatchArrowRecords. No header; an empty file holds no messages.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from .envelope import BatchArrowRecords
from .errors import EnvelopeError

_LEN = struct.Struct("<I")
MAX_MESSAGE = 2**32 - 1


def write_envelopes(out: BinaryIO, messages: Iterable[BatchArrowRecords | bytes]) -> int:
    """Append length-prefixed messages to `out`; returns the bytes written."""
    written = 0
    for message in messages:
        data = message.to_bytes() if isinstance(message, BatchArrowRecords) else bytes(message)
        if len(data) > MAX_MESSAGE:
            raise EnvelopeError(f"envelope of {len(data)} bytes does not fit a u32 length prefix")
        out.write(_LEN.pack(len(data)))
        out.write(data)
        written += _LEN.size + len(data)
    return written


def read_envelopes(source: BinaryIO, name: str = "<stream>") -> Iterator[bytes]:
    """Yield each message's bytes; a truncated prefix or message raises EnvelopeError naming the
    file, the message number (1-based, as every message of the command line) and its offset."""
    offset = 0
    number = 1
    while True:
        head = source.read(_LEN.size)
        if not head:
            return
        if len(head) < _LEN.size:
            raise EnvelopeError(
                f"{name}: message {number}: truncated length prefix at offset {offset} ({len(head)} of 4 bytes)"
            )
        (length,) = _LEN.unpack(head)
        data = source.read(length)
        if len(data) < length:
            raise EnvelopeError(
                f"{name}: message {number}: at offset {offset} declares {length} bytes but only {len(data)} remain"
            )
        yield data
        offset += _LEN.size + length
        number += 1
