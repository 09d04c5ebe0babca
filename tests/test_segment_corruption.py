"""Segment files under damage: flipped bytes in every region, truncations, random bytes, absurd
metadata. Always CorruptionError naming the file and an offset inside the damaged region."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiver_store.bundle import RecordBundle
from quiver_store.config import SegmentConfig
from quiver_store.errors import CorruptionError
from quiver_store.fs import DEFAULT_FS
from quiver_store.segment import OpenSegment, SegmentReader, write_segment
from quiver_store.segment import format as fmt
from tests.test_segment_support import attrs, dict_array, logs_l1, logs_l2

_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


_CACHE: dict[str, bytes] = {}


def _segment_bytes(tmp_path_factory, compression: str | None = None) -> bytes:
    """A small segment of four streams with dictionaries and a nested column, written with
    `compression` (segment.compression: every stream body compressed)."""
    key = f"good-{compression}"
    if key in _CACHE:
        return _CACHE[key]
    config = SegmentConfig(compression=compression)  # type: ignore[arg-type]
    seg = OpenSegment(config)
    seg.append(RecordBundle({30: logs_l1(5), 31: attrs(4, ["a", "b"])}, ingestion_time_ns=1))
    seg.append(RecordBundle({30: logs_l2(3), 1: attrs(1, ["h"])}, ingestion_time_ns=2))
    nested = pa.StructArray.from_arrays([dict_array([0, 1], ["x", "y"])], names=["s"])
    seg.append(RecordBundle({31: attrs(2, ["c"]), 40: pa.record_batch({"st": nested})}, ingestion_time_ns=3))
    path = str(tmp_path_factory.mktemp("good") / "1.qseg")
    write_segment(seg, path, 1, fs=DEFAULT_FS, metadata={"signal": "logs"}, event_time_columns={30: "time_unix_nano"},
                  compression=config.codec())
    with open(path, "rb") as f:
        _CACHE[key] = f.read()
    return _CACHE[key]


@pytest.fixture(scope="module", params=[None, "zstd", "lz4"], ids=["uncompressed", "zstd", "lz4"])
def good(tmp_path_factory, request) -> bytes:
    return _segment_bytes(tmp_path_factory, request.param)


@pytest.fixture(scope="module")
def layout(good, tmp_path_factory) -> list[tuple[str, int, int]]:
    path = tmp_path_factory.mktemp("layout") / "s.qseg"
    path.write_bytes(good)
    with SegmentReader.open(str(path)) as reader:
        reader.verify()
        return reader.regions()


def _check(path: str) -> None:
    with SegmentReader.open(path) as reader:
        reader.verify()


def _damaged(tmp_path, data: bytes, name: str = "d.qseg") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_layout_covers_every_byte(good, layout):
    pos = 0
    names = [name for name, _, _ in layout]
    for _, offset, length in layout:
        assert offset == pos
        pos += length
    assert pos == len(good)
    assert {"header", "directory", "manifest", "metadata", "footer", "trailer", "padding"} <= set(names)
    assert sum(n.startswith("stream ") for n in names) == 5
    assert all(offset % 64 == 0 for name, offset, _ in layout if name.startswith("stream "))


def _flip_and_check(tmp_path, good: bytes, layout, at: int) -> CorruptionError:
    data = bytearray(good)
    data[at] ^= 0x5A
    path = _damaged(tmp_path, bytes(data))
    with pytest.raises(CorruptionError) as info:
        _check(path)
    err = info.value
    assert err.path == path and err.offset is not None
    (region,) = [(n, o, ln) for n, o, ln in layout if o <= at < o + ln]
    _name, offset, length = region
    assert offset <= err.offset < offset + length, (at, region, str(err))
    assert str(err).startswith(f"{path} at offset {err.offset}: ")
    return err


def test_flip_in_every_region_is_detected_at_its_offset(tmp_path, good, layout):
    for _name, offset, length in layout:
        for at in sorted({offset, offset + length // 2, offset + length - 1}):
            _flip_and_check(tmp_path, good, layout, at)


def test_metadata_damage_is_caught_by_open(tmp_path, good, layout):
    for name, offset, length in layout:
        if name.startswith("stream ") or name == "padding":
            continue
        data = bytearray(good)
        data[offset + length // 2] ^= 1
        with pytest.raises(CorruptionError):
            SegmentReader.open(_damaged(tmp_path, bytes(data)))


def test_stream_damage_is_caught_on_first_read(tmp_path, good, layout):
    _name, offset, length = next(r for r in layout if r[0] == "stream 0")
    data = bytearray(good)
    data[offset + length // 2] ^= 1
    with SegmentReader.open(_damaged(tmp_path, bytes(data))) as reader, pytest.raises(
        CorruptionError, match=r"stream 0 .* checksum mismatch"
    ) as info:
        reader.bundle(0)
    assert info.value.offset == offset


def test_flip_of_every_byte_is_detected(tmp_path, good, layout):
    for at in range(len(good)):
        _flip_and_check(tmp_path, good, layout, at)


def test_every_truncation_is_rejected(tmp_path, good):
    for size in range(len(good)):
        path = _damaged(tmp_path, good[:size])
        with pytest.raises(CorruptionError) as info:
            SegmentReader.open(path)
        assert info.value.path == path


def test_wrong_magic_and_unknown_version(tmp_path, good):
    with pytest.raises(CorruptionError, match="not a Quiver segment: bad trailer magic"):
        SegmentReader.open(_damaged(tmp_path, good[:-8] + b"ARROW1\0\0"))
    trailer = bytearray(good[-fmt.TRAILER_SIZE :])
    struct.pack_into("<H", trailer, 8, 2)
    struct.pack_into("<I", trailer, 12, fmt.crc(bytes(trailer[:12])))
    with pytest.raises(CorruptionError, match=r"unsupported segment format version 2 .*supports 1") as info:
        SegmentReader.open(_damaged(tmp_path, good[: -fmt.TRAILER_SIZE] + bytes(trailer)))
    assert info.value.offset == len(good) - fmt.TRAILER_SIZE + 8


@_FUZZ
@given(st.binary(min_size=0, max_size=4096))
def test_random_bytes_are_rejected(tmp_path, data):
    with pytest.raises(CorruptionError):
        SegmentReader.open(_damaged(tmp_path, data))


@_FUZZ
@given(st.binary(min_size=0, max_size=600))
def test_random_bytes_behind_a_valid_header_and_trailer_magic(tmp_path, data):
    raw = fmt.encode_header(1) + data + fmt.encode_trailer(data[-fmt.FOOTER_SIZE :])
    with pytest.raises(CorruptionError):
        SegmentReader.open(_damaged(tmp_path, raw))


def _reseal(good: bytes, footer: bytes) -> bytes:
    """Replace the footer and recompute footer and trailer checksums (valid envelope, bad content)."""
    body = good[: -fmt.TRAILER_SIZE - fmt.FOOTER_SIZE]
    return body + footer + fmt.encode_trailer(footer)


@_FUZZ
@given(st.integers(0, 16), st.integers(0, 2**64 - 1))
def test_absurd_footer_values_are_rejected(tmp_path_factory, field, value):
    good = _segment_bytes(tmp_path_factory)
    raw = good[-fmt.TRAILER_SIZE - fmt.FOOTER_SIZE : -fmt.TRAILER_SIZE]
    values = list(fmt.FOOTER.unpack(raw))
    code = fmt.FOOTER.format[1 + field]
    limits = {"Q": (0, 2**64 - 1), "q": (-(2**63), 2**63 - 1), "I": (0, 2**32 - 1)}
    lo, hi = limits[code]
    new = lo + value % (hi - lo + 1)
    if new == values[field]:
        return
    values[field] = new
    path = _damaged(tmp_path_factory.mktemp("f"), _reseal(good, fmt.FOOTER.pack(*values)))
    if field in (5, 6):  # created / opened timestamps are informative only
        _check(path)
        return
    with pytest.raises(CorruptionError):
        _check(path)


@_FUZZ
@given(st.data())
def test_absurd_directory_and_manifest_with_valid_checksums(tmp_path_factory, data):
    """Sections re-checksummed after random edits: cross-checks still catch the damage."""
    good = _segment_bytes(tmp_path_factory)
    raw = good[-fmt.TRAILER_SIZE - fmt.FOOTER_SIZE : -fmt.TRAILER_SIZE]
    footer = fmt.Footer.decode(raw, "x", 0)
    section = data.draw(st.sampled_from(["directory", "manifest"]))
    off, length = getattr(footer, f"{section}_offset"), getattr(footer, f"{section}_length")
    buf = bytearray(good)
    at = data.draw(st.integers(off, off + length - 1))
    new_byte = data.draw(st.integers(0, 255).filter(lambda b: b != buf[at]))
    buf[at] = new_byte
    crcs = {"directory_crc32c": fmt.crc(bytes(buf[footer.directory_offset : footer.directory_offset + footer.directory_length])),
            "manifest_crc32c": fmt.crc(bytes(buf[footer.manifest_offset : footer.manifest_offset + footer.manifest_length]))}  # fmt: skip
    fixed = fmt.Footer(**{**footer.__dict__, **crcs}).encode()
    path = _damaged(tmp_path_factory.mktemp("s"), _reseal(bytes(buf), fixed))
    rel = at - off
    entry = fmt.DIRECTORY_ENTRY
    fp_at = entry.fields["fingerprint"][1]
    informative = section == "directory" and rel < footer.stream_count * entry.itemsize and (
        fp_at <= rel % entry.itemsize < fp_at + 32
    )
    bundle_times = fmt.MANIFEST_COUNTS.size + footer.bundle_count * fmt.MANIFEST_BUNDLE.itemsize
    if section == "manifest" and fmt.MANIFEST_COUNTS.size <= rel < bundle_times:
        at_bundle = (rel - fmt.MANIFEST_COUNTS.size) % fmt.MANIFEST_BUNDLE.itemsize
        if at_bundle < 8:  # an ingestion time inside the footer's range is informative, like a fingerprint
            start = at - at_bundle
            value = int.from_bytes(bytes(buf[start : start + 8]), "little", signed=True)
            informative = footer.ingestion_time_min_ns <= value <= footer.ingestion_time_max_ns
    if informative:  # a fingerprint is the embedder's value: nothing in the file can contradict it
        _check(path)
        return
    with pytest.raises(CorruptionError):
        _check(path)
