"""The store fuzz targets' template and read-back property (fuzz/store_files.py, fuzz/readback.py):
the template holds producer progress in its ledger, segments and WAL tail, and the property fails
on a silent wrong-data read (a reader that skips a checksum) but allows what the input changed
with its checksums made right again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import crc32c
import pytest

from adaptive_arrow.store_layout import OTAP_LAYOUT
from fuzz import (  # needs the "fuzz" extra (atheris), which make test installs
    readback,
    segment_fields,
    store_files,
)
from quiver_store import CorruptionError, QuiverStore, SegmentReader, progress_ledger
from quiver_store.fs import DEFAULT_FS
from quiver_store.wal import format as wal
from quiver_store.wal.bundle_codec import decode_bundle
from quiver_store.wal.format import Entry
from quiver_store.wal.reader import scan


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("fuzz") / "template")
    store_files.make_template(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FUZZ_STORE_TEMPLATE", path)
        store_files.template.cache_clear()
        yield path
    store_files.template.cache_clear()


def read(template: str, name: str) -> bytearray:
    with open(os.path.join(template, name), "rb") as f:
        return bytearray(f.read())


def progress_offset_at(path: str) -> int:
    """The file offset of the progress offset (an int64) of segment bundle 0."""
    with SegmentReader.open(path) as reader:
        return reader.bundle(0).slots[63].column(1).buffers()[1].address - reader._require_open().address


def test_the_template_records_progress_in_its_ledger_segments_and_wal_tail(template: str, tmp_path) -> None:
    assert progress_ledger.read(DEFAULT_FS, os.path.join(template, "segments")) == {"import/0": 1, "import/1": 41}
    shutil.copytree(template, tmp_path / "store")
    with QuiverStore.open(tmp_path / "store", store_files.CONFIG, layout=OTAP_LAYOUT) as store:
        offsets = {p: store.committed_offset(p) for p in store_files.PRODUCERS}
    assert offsets == {"import/0": 4, "import/1": 43, "import/2": 7, "import/3": 0}  # 4 and 7: replayed


def test_a_reader_that_skips_a_stream_checksum_fails_the_property(template: str, tmp_path) -> None:
    name = store_files.SEGMENTS[0]
    data = read(template, name)
    data[progress_offset_at(os.path.join(template, name))] ^= 0x40  # import/0's offset 2 is now 66
    path = tmp_path / "0000000000000001.qseg"
    path.write_bytes(data)
    with SegmentReader.open(str(path)) as reader, pytest.raises(CorruptionError, match="checksum mismatch"):
        reader.bundle(0)
    store_files.check_with(name, bytes(data))  # the store refuses it
    with SegmentReader.open(str(path), verify_streams=False) as reader:  # the injected fault
        bundle = reader.bundle(0)
        with pytest.raises(AssertionError, match=r"other rows in slot 63, read through failing checksums \(stream 3\)"):
            readback.Edited(template, {name: bytes(data)}).check(1, 0, bundle)


def test_data_may_differ_where_the_input_made_its_checksum_right(template: str, tmp_path) -> None:
    name = store_files.SEGMENTS[0]
    seg = segment_fields.decompose(bytes(read(template, name)))
    at = progress_offset_at(os.path.join(template, name)) - int(seg.streams[3].entry["offset"][0])
    seg.streams[3].data[at] ^= 0x40  # import/0's offset 2 is now 66, every checksum made right
    remade = segment_fields.rebuild(seg)
    path = tmp_path / "0000000000000001.qseg"
    path.write_bytes(remade)
    with SegmentReader.open(str(path)) as reader:
        bundle = reader.bundle(0)
    assert bundle.slots[63].column(1)[0].as_py() == 66
    readback.Edited(template, {name: remade}).check(1, 0, bundle)
    store_files.check_with(name, remade)


def test_an_edit_of_padding_may_change_no_data(template: str, tmp_path) -> None:
    name = store_files.SEGMENTS[0]
    data = read(template, name)
    path = tmp_path / "0000000000000001.qseg"
    with SegmentReader.open(os.path.join(template, name)) as reader:
        _, at, _ = next(r for r in reader.regions() if r[0] == "padding")
    data[at] = 0xFF  # no checksum covers it: only verify() reads it
    path.write_bytes(data)
    store_files.check_with(name, bytes(data))
    with SegmentReader.open(str(path)) as reader:
        other = reader.bundle(1)
    with pytest.raises(AssertionError, match="though every part it is built from is the template's"):
        readback.Edited(template, {name: bytes(data)}).check(1, 0, other)  # a reader giving bundle 1 as 0


def test_a_wal_frame_read_without_its_crc_fails_the_property(template: str) -> None:
    name = store_files.WALS[2]
    data = read(template, name)
    last = [f for f in scan(memoryview(bytes(data)), wal.HEADER_LEN, resync=False) if isinstance(f, Entry)][-1]
    body = last.offset + wal.LEN.size
    at = data.index(b"import/0", body) + 8  # the progress record's offset, 4
    data[at] ^= 0x40
    damaged = bytes(data[body : body + len(last.body)])
    entry = Entry(*wal.ENTRY_HEAD.unpack_from(damaged), memoryview(damaged), last.offset, last.size)
    bundle = decode_bundle(entry, OTAP_LAYOUT, name)  # what a replay skipping the CRC check would give
    with pytest.raises(AssertionError, match="no new CRC-valid frame"):
        readback.Edited(template, {name: bytes(data)}).check(19, 1, bundle)
    store_files.check_with(name, bytes(data))
    crc_at = body + len(last.body)
    data[crc_at : crc_at + 4] = wal.CRC.pack(crc32c.crc32c(damaged))
    readback.Edited(template, {name: bytes(data)}).check(19, 1, bundle)  # its CRC made right: allowed
