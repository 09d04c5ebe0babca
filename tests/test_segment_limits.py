"""Segment files whose checksums are right but whose contents cannot be: damage, never a crash.

Found by the `segment_fields` fuzz target (fuzz/segment_fields.py), which edits the fields of a
segment and rebuilds it with the writer's encoders. Each test builds the exact file with the
format's encoders (`segment` below), so every CRC holds and only the named content is wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from quiver_store import CorruptionError, QuiverStore, RecordBundle, SegmentConfig, absent, cli
from quiver_store.engine import META_WAL_FIRST, META_WAL_LAST, list_segment_seqs, newest_covered_sequence
from quiver_store.fs import DEFAULT_FS
from quiver_store.presence import SegmentSpan, segment_span
from quiver_store.segment import OpenSegment, SegmentReader, write_segment
from quiver_store.segment import format as fmt

Stream = tuple[int, list[pa.RecordBatch]]  # slot, record batches
Ref = tuple[int, int, int, int]  # stream id, record batch, row offset, row count


def ipc_file(batches: list[pa.RecordBatch]) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def segment(
    streams: list[Stream], bundles: list[list[Ref]], *, slices: list[bytes] | None = None, metadata: bytes | None = None
) -> bytes:
    """Segment 0 holding `streams` and one bundle per item of `bundles` (ingestion times 1, 2, ...),
    every checksum right. `slices` replaces the streams' IPC files (the directory keeps the
    streams' batch counts), `metadata` the metadata section."""
    files = [ipc_file(batches) for _, batches in streams]
    refs = np.array([r for b in bundles for r in b], fmt.MANIFEST_REF)
    body = bytearray(fmt.encode_header(0))
    entries = np.zeros(len(streams), fmt.DIRECTORY_ENTRY)
    for i, ((slot, batches), data) in enumerate(zip(streams, slices or files)):
        body += bytes(fmt.pad_to(len(body), fmt.ALIGNMENT))
        mine = refs["stream_id"] == i
        entries[i] = (i, slot, 0, bytes(32), len(body), len(data), int(refs["row_count"][mine].sum()), int(mine.sum()),
                      len(batches), fmt.crc(data), i, 0, 0)  # fmt: skip
        body += data
    bitmaps = bytes([(1 << len(batches[0].schema)) - 1 for _, batches in streams])  # every column present (< 8)
    rows = np.array([(t + 1, sum(1 << streams[r[0]][0] for r in b)) for t, b in enumerate(bundles)], fmt.MANIFEST_BUNDLE)
    if metadata is None:
        metadata = fmt.encode_metadata({}, {}, {slot: batches[0].schema for slot, batches in streams})
    return bytes(body) + fmt.encode_tail(
        len(body), fmt.encode_directory(entries, bitmaps), fmt.encode_manifest(rows, refs), metadata,
        seq=0, stream_count=len(streams), bundle_count=len(bundles), ingestion_time_min_ns=1,
        ingestion_time_max_ns=len(bundles), created_at_ns=0, opened_at_ns=0,
    )  # fmt: skip


def store_with(root: Path, data: bytes) -> str:
    """A store directory holding only segment 0 with `data`; returns the segment's path."""
    (root / "segments").mkdir()
    path = root / "segments" / "0000000000000000.qseg"
    path.write_bytes(data)
    return str(path)


def test_a_batch_whose_offsets_go_backwards_is_damage_not_returned(tmp_path: Path) -> None:
    """The CRC is computed over the bad bytes, so only validating the batch finds them. Before,
    bundle() returned the batch and `quiver dump` raised SystemError ("Negative size passed to
    PyUnicode_New") reading its strings (the fuzz target's first finding, in a seed input)."""
    offsets = pa.py_buffer(np.array([0, 5, 2, 5], np.int32).tobytes())  # row 1 ends before it starts
    strings = pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"hello"))
    path = store_with(tmp_path, segment([(0, [pa.record_batch({"s": strings})])], [[(0, 0, 0, 3)]]))
    with SegmentReader.open(path) as reader:  # metadata only: it is right
        with pytest.raises(CorruptionError, match=r"stream 0: record batch 0 is invalid: .*offset") as caught:
            reader.bundle(0)
        assert (caught.value.path, caught.value.offset) == (path, fmt.HEADER_SIZE)
        with pytest.raises(CorruptionError, match="stream 0: record batch 0 is invalid"):
            reader.verify()
    assert cli.main(["verify", str(tmp_path)]) == 1
    assert cli.main(["dump", str(tmp_path)]) == 1


def test_ipc_flatbuffers_that_fail_verification_are_damage(tmp_path: Path) -> None:
    """pyarrow raises OSError, not an ArrowException, for a flatbuffer that fails verification and
    for a compressed body that does not decompress: it left `store.bundles()` (fuzz input: bytes
    inside a slice), record batch reads and `SegmentReader.open` (a representative schema's bytes)."""
    batch = pa.record_batch({"s": pa.array(["a", "b"])})
    data = bytearray(ipc_file([batch]))
    footer_at = len(data) - 10 - int.from_bytes(data[-10:-6], "little")
    data[footer_at : footer_at + 4] = (0xFFFF).to_bytes(4, "little")  # the IPC footer's root table offset
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 2)]], slices=[bytes(data)]))
    with SegmentReader.open(path) as reader:
        with pytest.raises(CorruptionError, match="stream 0 is not a valid Arrow IPC file: Verification of flatbuffer") as caught:
            reader.bundle(0)
        assert caught.value.offset == fmt.HEADER_SIZE
    assert cli.main(["verify", str(tmp_path)]) == 1

    sink = pa.BufferOutputStream()  # a zstd body whose uncompressed length (the i64 before it) is 2**33
    ints = pa.record_batch({"i": pa.array(np.zeros(1000, np.int64))})
    with pa.ipc.new_file(sink, ints.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_batch(ints)
    data = bytearray(sink.getvalue().to_pybytes())
    at = data.index((8000).to_bytes(8, "little"))
    data[at : at + 8] = (1 << 33).to_bytes(8, "little")
    (tmp_path / "segments" / "0000000000000000.qseg").write_bytes(segment([(0, [ints])], [[(0, 0, 0, 1000)]], slices=[bytes(data)]))
    with SegmentReader.open(path) as reader, pytest.raises(CorruptionError, match="record batch 0 does not decode: Corrupt ZSTD"):
        reader.bundle(0)

    schema = bytearray(batch.schema.serialize().to_pybytes())
    schema[8:12] = (0x7FFFFFF0).to_bytes(4, "little")
    metadata = fmt.encode_metadata_section(fmt.encode_document({}, {}), [(0, bytes(schema))])
    (tmp_path / "segments" / "0000000000000000.qseg").write_bytes(segment([(0, [batch])], [[(0, 0, 0, 2)]], metadata=metadata))
    with pytest.raises(CorruptionError, match="metadata section: schema of slot 0 does not decode \\(Invalid flatbuffers"):
        SegmentReader.open(path)


def test_a_record_batch_with_other_rows_than_its_chunks_is_damage(tmp_path: Path) -> None:
    """Two streams of one slot with their slices swapped (each slice's CRC right): bundle 0 was
    given stream 1's first two rows ("c", "d", bundle 1's) under its own fingerprint and time,
    with no error; only verify() compared a stream's row count with the directory."""
    first, second = pa.record_batch({"s": pa.array(["a", "b"])}), pa.record_batch({"s": pa.array(["c", "d", "e"])})
    streams: list[Stream] = [(0, [first]), (0, [second])]
    swapped = [ipc_file([second]), ipc_file([first])]
    path = store_with(tmp_path, segment(streams, [[(0, 0, 0, 2)], [(1, 0, 0, 3)]], slices=swapped))
    with SegmentReader.open(path) as reader:
        with pytest.raises(CorruptionError, match="stream 0: record batch 0 holds 3 rows, the manifest's chunks 2") as caught:
            reader.bundle(0)
        assert caught.value.offset == fmt.HEADER_SIZE
        with pytest.raises(CorruptionError, match="stream 1: record batch 0 holds 2 rows, the manifest's chunks 3"):
            reader.bundle(1)
    assert cli.main(["verify", str(tmp_path)]) == 1


def test_a_slice_holding_another_slots_columns_is_damage(tmp_path: Path) -> None:
    """Two slots' slices swapped, with equal row counts and each CRC right: bundle 0 was given
    slot 1's rows as its slot 0 batch, with no error; only verify() compared a stream's columns
    with the directory's."""
    names, numbers = pa.record_batch({"s": pa.array(["a", "b"])}), pa.record_batch({"n": pa.array([1, 2])})
    streams: list[Stream] = [(0, [names]), (1, [numbers])]
    swapped = [ipc_file([numbers]), ipc_file([names])]
    path = store_with(tmp_path, segment(streams, [[(0, 0, 0, 2), (1, 0, 0, 2)]], slices=swapped))
    with SegmentReader.open(path) as reader:
        with pytest.raises(CorruptionError, match=r"stream 0: directory lists columns \('s',\), the data has \['n'\]") as caught:
            reader.bundle(0)
        assert caught.value.offset == reader._footer.directory_offset
    assert cli.main(["verify", str(tmp_path)]) == 1


@pytest.mark.parametrize(
    ("slots", "patch", "message"),
    [
        ([0, 0], None, "schema of slot 0 follows slot 0: slots must be strictly ascending"),
        ([1, 0], None, "schema of slot 0 follows slot 1: slots must be strictly ascending"),
        ([0], ("table", 1), "schema table reserved field is 1, not 0"),
        ([0], ("entry", 1), "schema entry of slot 0: reserved field is 1, not 0"),
    ],
    ids=["slot-twice", "slots-unordered", "table-reserved", "entry-reserved"],
)
def test_a_schema_table_the_writer_never_writes_is_damage(tmp_path: Path, slots: list[int], patch: tuple[str, int] | None, message: str) -> None:
    """Before, a second schema of a slot silently replaced the first, and the reserved fields were ignored."""
    batch = pa.record_batch({"s": pa.array(["a"])})
    document = fmt.encode_document({}, {})
    section = bytearray(fmt.encode_metadata_section(document, [(slot, batch.schema.serialize().to_pybytes()) for slot in slots]))
    table = 4 + len(document) + fmt.pad_to(4 + len(document), fmt.SECTION_ALIGNMENT)
    if patch is not None:
        where, value = patch
        struct.pack_into("<I" if where == "table" else "<H", section, table + 4 if where == "table" else table + 8 + 2, value)
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 1)]], metadata=bytes(section)))
    with pytest.raises(CorruptionError, match=f"metadata section: {message}"):
        SegmentReader.open(path)
    assert cli.main(["verify", str(tmp_path)]) == 1


@pytest.mark.parametrize("where", ["after-document", "after-schema"])
def test_a_non_zero_padding_byte_in_the_metadata_section_is_damage(tmp_path: Path, where: str) -> None:
    """The writer pads the document and each schema with zeros; before, the reader skipped those bytes
    unread, so only `verify()`'s metadata CRC stood between them and a file no writer wrote."""
    batch = pa.record_batch({"s": pa.array(["a"])})
    document = fmt.encode_document({}, {})
    blob = batch.schema.serialize().to_pybytes() + b"\0"  # a length no multiple of 8: padding follows it (read_schema takes it)
    section = bytearray(fmt.encode_metadata_section(document, [(0, blob)]))
    end = 4 + len(document)  # the first padding byte after the document, or after the schema
    if where == "after-schema":
        end += fmt.pad_to(end, fmt.SECTION_ALIGNMENT) + 8 + fmt.SCHEMA_ENTRY.size + len(blob)
    assert fmt.pad_to(end, fmt.SECTION_ALIGNMENT) > 0, "no padding to damage"
    section[end] = 7
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 1)]], metadata=bytes(section)))
    with pytest.raises(CorruptionError, match="metadata section: padding byte is 7, not 0") as raised:
        SegmentReader.open(path)
    assert raised.value.offset is not None and Path(path).read_bytes()[raised.value.offset] == 7  # names the byte
    assert cli.main(["verify", str(tmp_path)]) == 1


def test_a_deeply_nested_metadata_document_is_damage(tmp_path: Path) -> None:
    """json.loads raises RecursionError, which decode_metadata did not catch."""
    batch = pa.record_batch({"s": pa.array(["a"])})
    metadata = fmt.encode_metadata_section(b"[" * 100_000, [(0, batch.schema.serialize().to_pybytes())])
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 1)]], metadata=metadata))
    with pytest.raises(CorruptionError, match="metadata section: invalid JSON document \\(maximum recursion depth"):
        SegmentReader.open(path)
    assert cli.main(["verify", str(tmp_path)]) == 1


@pytest.mark.parametrize(
    ("values", "covered"),
    [
        ({META_WAL_FIRST: "0", META_WAL_LAST: "\u00b2"}, -1),  # str.isdigit() takes it, int() does not
        ({META_WAL_FIRST: "\u00b2", META_WAL_LAST: "2"}, 2),
        ({META_WAL_FIRST: "0", META_WAL_LAST: "--5"}, -1),  # was read as "5" with its dashes stripped
        ({META_WAL_FIRST: "0", META_WAL_LAST: "9" * 5000}, -1),  # more digits than int() converts
        ({absent.META_KEY: "\u00b2-\u00b3 lost"}, -1),
    ],
    ids=["last-superscript", "first-superscript", "dashes", "5000-digits", "absent-superscript"],
)
def test_sequence_values_that_do_not_parse_are_another_writers(tmp_path: Path, values: dict[str, str], covered: int) -> None:
    """The store's own sequence keys in a segment's metadata are ASCII decimal numbers; anything
    else is ignored like another writer's pair. Before, int() raised ValueError out of
    QuiverStore.open, `quiver replay`, `verify` and `inspect` (fuzz input: a metadata string)."""
    batch = pa.record_batch({"s": pa.array(["a"])})
    with QuiverStore.open(tmp_path) as store:  # a store whose segment 0 is then rewritten
        store.ingest(RecordBundle({0: batch}))
        store.flush()
    path = tmp_path / "segments" / "0000000000000000.qseg"
    path.write_bytes(segment([(0, [batch])], [[(0, 0, 0, 1)]], metadata=fmt.encode_metadata(values, {}, {0: batch.schema})))
    with SegmentReader.open(str(path)) as reader:
        assert segment_span(reader.info) == SegmentSpan(0, None, None, ())
    assert newest_covered_sequence(DEFAULT_FS, str(tmp_path / "segments")) == covered
    for command in ("verify", "inspect", "replay"):
        assert cli.main([command, str(tmp_path)]) == 0, command
    with QuiverStore.open(tmp_path) as store:
        assert [b.slots[0]["s"].to_pylist() for _, _, b in store.bundles()] == [["a"]]


def test_field_names_that_are_not_utf8_are_damage(tmp_path: Path) -> None:
    """pyarrow reads a schema without decoding its field names and decodes one when asked for it:
    UnicodeDecodeError left SegmentReader.open (fuzz input: a representative schema's bytes), and
    for a stream's own schema, verify() and `quiver verify`, after bundle() had handed the batch out."""
    batch = pa.record_batch({"zz": pa.array([1])})
    blob = batch.schema.serialize().to_pybytes().replace(b"zz", b"\xccz")
    metadata = fmt.encode_metadata_section(fmt.encode_document({}, {}), [(0, blob)])
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 1)]], metadata=metadata))
    with pytest.raises(CorruptionError, match="metadata section: schema of slot 0 does not decode \\('utf-8' codec"):
        SegmentReader.open(path)

    nested = pa.record_batch({"s": pa.StructArray.from_arrays([pa.array([1])], names=["zz"])})
    for named in (batch, nested):  # the representative schema is right, the stream's is not
        data = ipc_file([named]).replace(b"zz", b"\xccz")
        Path(path).write_bytes(segment([(0, [named])], [[(0, 0, 0, 1)]], slices=[data]))
        with SegmentReader.open(path) as reader:
            with pytest.raises(CorruptionError, match="stream 0 is not a valid Arrow IPC file: 'utf-8' codec") as caught:
                reader.bundle(0)
            assert caught.value.offset == fmt.HEADER_SIZE
        assert cli.main(["verify", str(tmp_path)]) == 1


def test_an_event_time_column_past_the_i64_nanosecond_range_has_no_range(tmp_path: Path) -> None:
    """Found by reading stats.py: a timestamp[s] event-time column whose values do not fit i64
    nanoseconds made event_time_range raise ArrowInvalid (it promises None), so verify() of such
    a segment raised it, and write_segment of such a bundle failed the finalize."""
    batch = pa.record_batch({"t": pa.array([1, 1 << 62], pa.timestamp("s"))})
    metadata = fmt.encode_metadata({}, {0: "t"}, {0: batch.schema})
    path = store_with(tmp_path, segment([(0, [batch])], [[(0, 0, 0, 2)]], metadata=metadata))
    with SegmentReader.open(path) as reader:
        reader.verify()
        assert reader.info.streams[0].event_time_min_ns is None
    open_segment = OpenSegment(SegmentConfig())
    open_segment.append(RecordBundle({0: batch}, ingestion_time_ns=1))
    info = write_segment(open_segment, str(tmp_path / "1.qseg"), 1, event_time_columns={0: "t"})
    assert info.event_time_range_ns() is None


def test_segment_file_names_of_non_ascii_digits_are_not_segments(tmp_path: Path) -> None:
    """Found reading: str.isdigit() takes "\u00b2\u00b3" and int() refuses it, so a file named
    `segments/\u00b2\u00b3.qseg` raised ValueError out of list_segment_seqs (QuiverStore.open and every
    quiver command) and out of SegmentReader.open of that path. It is not a segment's name."""
    batch = pa.record_batch({"s": pa.array(["a"])})
    with QuiverStore.open(tmp_path) as store:
        store.ingest(RecordBundle({0: batch}))
        store.flush()
    data = (tmp_path / "segments" / "0000000000000000.qseg").read_bytes()
    (tmp_path / "segments" / "\u00b2\u00b3.qseg").write_bytes(data)
    assert list_segment_seqs(DEFAULT_FS, str(tmp_path / "segments")) == [0]
    with SegmentReader.open(str(tmp_path / "segments" / "\u00b2\u00b3.qseg")) as reader:
        assert reader.info.seq == 0
    assert cli.main(["verify", str(tmp_path)]) == 0
    with QuiverStore.open(tmp_path) as store:
        assert [b.slots[0]["s"].to_pylist() for _, _, b in store.bundles()] == [["a"]]
