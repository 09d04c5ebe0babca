"""OTAP envelope files: a sequence of BatchArrowRecords messages, each prefixed by its length.

Layout (docs/formats.md, "OTAP envelope files"): repeated ``u32 little-endian length`` followed by
that many bytes of one serialized BatchArrowRecords. No header; an empty file holds no messages.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from .envelope import BatchArrowRecords
from .errors import EnvelopeError

_LEN = struct.Struct("<I")
MAX_MESSAGE = 2**32 - 1


def write_envelopes(out: BinaryIO, messages: Iterable[BatchArrowRecords | bytes]) -> int:
    """Append length-prefixed messages to `out`; returns the bytes written."""
    if not callable(getattr(out, "write", None)) or isinstance(out, io.TextIOBase):
        raise EnvelopeError(f"write_envelopes(out): expected a file opened for binary writing ('wb'), got {_what(out)}")
    try:
        items = iter(messages)
    except TypeError:
        raise EnvelopeError(
            f"write_envelopes(messages): expected an iterable of BatchArrowRecords or bytes, got {_what(messages)}"
        ) from None
    written = 0
    for number, message in enumerate(items, 1):
        if isinstance(message, BatchArrowRecords):
            data = message.to_bytes()
        elif isinstance(message, bytes | bytearray | memoryview):
            data = bytes(message)
        else:
            raise EnvelopeError(
                f"write_envelopes(messages): message {number} is {_what(message)}, expected BatchArrowRecords or bytes"
            )
        if len(data) > MAX_MESSAGE:
            raise EnvelopeError(f"envelope of {len(data)} bytes does not fit a u32 length prefix")
        out.write(_LEN.pack(len(data)))
        out.write(data)
        written += _LEN.size + len(data)
    return written


def read_envelopes(source: BinaryIO, name: str = "<stream>") -> Iterator[bytes]:
    """Yield each message's bytes; a truncated prefix or message raises EnvelopeError naming the
    file, the message number (1-based, as every message of the command line) and its offset."""
    if not callable(getattr(source, "read", None)) or isinstance(source, io.TextIOBase):  # text mode would decode
        raise EnvelopeError(f"read_envelopes(source): expected a file opened for binary reading ('rb'), got {_what(source)}")
    offset = 0
    number = 1
    while True:
        head = source.read(_LEN.size)
        if not isinstance(head, bytes | bytearray):
            raise EnvelopeError(
                f"read_envelopes(source): {name}: read() returned {_what(head)}, not bytes: open the file in binary mode ('rb')"
            )
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


def _what(value: object) -> str:
    """A short description of a wrong argument for error messages."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"
