"""Decoder misuse found by the second API review: envelopes of another stream or signal, a child
table without its parent, empty batches, skipped envelopes, bad envelope fields. Each rejection
is a DecodingError (EnvelopeError for the envelope) naming what and where, and the decoder's
stream state is unchanged: the next envelope of the stream still decodes to its source."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import otap_model
from adaptive_arrow import BatchArrowRecords, Decoder, DecodingError, Encoder, EnvelopeError
from adaptive_arrow.envelope import ArrowPayload, _varint
from otap_model import OtapBundle, PayloadType
from otap_model.otlp.order import canonical_order
from quiver_store import RecordBundle

P = PayloadType
SOURCE = list(otap_model.generate("logs", 500, batch_size=100, seed=1))
OTHER = list(otap_model.generate("logs", 300, batch_size=100, seed=9))
TRACES = list(otap_model.generate("traces", 100, batch_size=50, seed=1))


def _wires(bundles: list[OtapBundle], signal: str = "logs") -> list[bytes]:
    enc = Encoder(signal)
    return [enc.encode(b).to_bytes() for b in bundles]


WIRES = _wires(SOURCE)
OTHER_WIRES = _wires(OTHER)
TRACE_WIRES = _wires(TRACES, "traces")


def _canon(bundle: OtapBundle) -> object:
    return canonical_order(otap_model.to_otlp(bundle))


def _rest_round_trips(dec: Decoder, start: int) -> None:
    for wire, source in zip(WIRES[start:], SOURCE[start:]):
        assert _canon(dec.decode(wire)) == _canon(source)


def _replaced(wire: bytes, index: int, record: bytes | None) -> BatchArrowRecords:
    """The envelope with payload ``index`` given another record (or dropped when None)."""
    bar = BatchArrowRecords.from_bytes(wire)
    payloads = list(bar.payloads)
    if record is None:
        del payloads[index]
    else:
        p = payloads[index]
        payloads[index] = ArrowPayload(p.schema_id, p.type, record)
    return BatchArrowRecords(bar.batch_id, tuple(payloads), bar.headers)


def test_an_envelope_of_another_stream_leaves_the_stream_intact() -> None:
    dec = Decoder()
    dec.decode(WIRES[0])
    with pytest.raises(DecodingError, match=r"batch 1 payload 0 \(LOGS, schema_id '0'\): bad Arrow IPC data: .*out of bounds"):
        dec.decode(OTHER_WIRES[1])
    _rest_round_trips(dec, 1)


@pytest.mark.parametrize("index", [1, 2])
def test_a_payload_rejected_after_others_were_read_rolls_them_back(index: int) -> None:
    dec = Decoder()
    dec.decode(WIRES[0])
    with pytest.raises(DecodingError, match=rf"batch 1 payload {index} .*bad Arrow IPC data"):
        dec.decode(_replaced(WIRES[1], index, b"\x00" * 24))
    _rest_round_trips(dec, 1)


def test_a_child_table_without_its_root_is_rejected_and_rolled_back() -> None:
    dec = Decoder()
    dec.decode(WIRES[0])
    with pytest.raises(
        DecodingError,
        match=r"batch 1: RESOURCE_ATTRS\.parent_id: \d+ row\(s\) reference LOGS\.resource\.id, but the bundle has no LOGS table",
    ):
        dec.decode(_replaced(WIRES[1], 0, None))
    _rest_round_trips(dec, 1)


def test_records_without_their_root_slot_are_rejected() -> None:
    records = Encoder("logs").encode_records(SOURCE[0])
    slots = {slot: batch for slot, batch in records.slots.items() if slot != int(P.LOGS)}
    with pytest.raises(DecodingError, match=r"record bundle: RESOURCE_ATTRS\.parent_id: .*but the bundle has no LOGS table"):
        Decoder().decode_records(RecordBundle(slots))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, len(WIRES) - 1), st.data())
def test_any_rejected_envelope_mid_stream_leaves_the_stream_intact(k: int, data: st.DataObject) -> None:
    bar = BatchArrowRecords.from_bytes(WIRES[k])
    index = data.draw(st.integers(0, len(bar.payloads) - 1))
    record = bytearray(bar.payloads[index].record)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(record) - 1))
        record[pos] ^= 1 << data.draw(st.integers(0, 7))
    dec = Decoder()
    for wire in WIRES[:k]:
        dec.decode(wire)
    try:
        dec.decode(_replaced(WIRES[k], index, bytes(record)))
    except DecodingError:
        pass
    else:
        assume(False)  # the flips hit bytes nothing checks: that envelope was (wrongly) accepted
    _rest_round_trips(dec, k)


def test_a_decoder_of_one_signal_rejects_another_and_goes_on() -> None:
    with pytest.raises(DecodingError, match=r"batch 0: logs payloads \['LOGS', .*\], but this Decoder decodes traces"):
        Decoder(signal="traces").decode(WIRES[0])
    dec = Decoder()
    dec.decode(WIRES[0])
    with pytest.raises(DecodingError, match=r"batch 1: traces payloads \['SPANS', .*\], but this Decoder decodes logs"):
        dec.decode(TRACE_WIRES[1])
    with pytest.raises(DecodingError, match=r"record bundle: traces payloads .* but this Decoder decodes logs"):
        Decoder(signal="logs").decode_records(Encoder("traces").encode_records(TRACES[0]))
    _rest_round_trips(dec, 1)


def test_unknown_signal_is_a_decoding_error() -> None:
    with pytest.raises(DecodingError, match=r"unknown signal 'bogus'; expected one of \['logs', 'traces', 'metrics'\]"):
        Decoder(signal="bogus")


def test_empty_batches_decode_when_the_signal_is_known() -> None:
    empty = OtapBundle("logs", {})
    wire = Encoder("logs").encode(empty).to_bytes()
    with pytest.raises(DecodingError, match=r"batch 0: cannot tell the signal \(an envelope without payloads\); pass Decoder\(signal=\.\.\.\)"):
        Decoder().decode(wire)
    assert Decoder(signal="logs").decode(wire) == empty
    records = Encoder("logs").encode_records(empty)
    with pytest.raises(DecodingError, match=r"record bundle: cannot tell the signal \(a bundle without slots\)"):
        Decoder().decode_records(records)
    decoded = Decoder(signal="logs").decode_records(records)
    assert decoded == empty and decoded.signal == "logs"
    dec = Decoder()  # a stream's signal, once seen, covers its later empty batches
    enc = Encoder("logs")
    assert _canon(dec.decode(enc.encode(SOURCE[0]).to_bytes())) == _canon(SOURCE[0])
    assert dec.decode(enc.encode(empty).to_bytes()) == empty
    assert _canon(dec.decode(enc.encode(SOURCE[1]).to_bytes())) == _canon(SOURCE[1])


def test_one_decoder_decodes_records_of_every_signal() -> None:
    dec = Decoder()
    for signal, source in (("logs", SOURCE[0]), ("traces", TRACES[0])):
        assert _canon(dec.decode_records(Encoder(signal).encode_records(source))) == _canon(source)


def _plain_records(attrs: pa.RecordBatch) -> RecordBundle:
    return RecordBundle({**{int(pt): t for pt, t in SOURCE[0].tables.items()}, int(P.LOG_ATTRS): attrs})


def test_nulls_in_not_null_columns_and_unknown_type_codes_are_rejected_on_decode() -> None:
    attrs = SOURCE[0][P.LOG_ATTRS]
    keys = attrs["key"].to_pylist()
    keys[2] = None
    with_null = attrs.set_column(1, attrs.schema.field("key"), pa.array(keys, pa.string()))
    with pytest.raises(DecodingError, match=r"record bundle: LOG_ATTRS\.key: 1 null value\(s\) in a not-null column \(e\.g\. rows \[2\]\)"):
        Decoder().decode_records(_plain_records(with_null))
    codes = attrs["type"].to_pylist()
    codes[4] = 99
    bad_code = attrs.set_column(2, attrs.schema.field("type"), pa.array(codes, pa.uint8()))
    with pytest.raises(DecodingError, match=r"record bundle: LOG_ATTRS\.type: unknown AnyValue type code 99 at row 4"):
        Decoder().decode_records(_plain_records(bad_code))
    assert _canon(Decoder().decode_records(_plain_records(attrs))) == _canon(SOURCE[0])


def test_skipped_envelopes_are_named_in_the_error() -> None:
    dec = Decoder()
    with pytest.raises(DecodingError, match=r"batch 1 payload 0 \(LOGS, schema_id '0'\): the payload continues an Arrow IPC "
                       r"stream whose start \(its Schema message\) this Decoder has not seen: an earlier envelope"):
        dec.decode(WIRES[1])
    dec.decode(WIRES[0])
    with pytest.raises(DecodingError, match=r"out of bounds.*\(the last envelope this Decoder decoded was batch 0\)"):
        for wire in WIRES[2:]:  # some later envelope needs a dictionary entry batch 1 brought
            dec.decode(wire)
    _rest_round_trips(dec, 1)


def test_bad_envelope_fields_are_envelope_errors() -> None:
    with pytest.raises(EnvelopeError, match=r"ArrowPayload\.record must be bytes, got str"):
        BatchArrowRecords(0, (ArrowPayload("0", 30, "abc"),), b"")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"BatchArrowRecords\.payloads must be a sequence of ArrowPayload, got NoneType"):
        BatchArrowRecords(0, None, b"")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"BatchArrowRecords\.payloads\[0\] must be an ArrowPayload, got bytes"):
        BatchArrowRecords(0, (b"x",), b"")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"BatchArrowRecords\.batch_id must be an integer, got str"):
        BatchArrowRecords("1", ())  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"BatchArrowRecords\.headers must be bytes, got str"):
        BatchArrowRecords(1, (), "h")  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"ArrowPayload\.type \(payload type id\) 1099511627776 does not fit an int32"):
        ArrowPayload("0", 2**40, b"x")
    inner = b"\x0a\x010\x10" + _varint(2**40) + b"\x1a\x01x"
    with pytest.raises(EnvelopeError, match=r"arrow_payloads\[0\]\.type: payload type 1099511627776 does not fit the int32"):
        Decoder().decode(b"\x12" + bytes([len(inner)]) + inner)
    assert BatchArrowRecords(3, [ArrowPayload("0", 30, bytearray(b"r"))]).payloads[0].record == b"r"


def test_an_envelope_and_a_record_bundle_given_to_the_other_call_say_which_call_takes_them() -> None:
    bundle = next(otap_model.generate("logs", 10, batch_size=10, seed=1))
    with pytest.raises(EnvelopeError, match=r"^expected a BatchArrowRecords envelope or its bytes, got RecordBundle: "
                                            r"decode a Quiver RecordBundle with Decoder\.decode_records$"):
        Decoder().decode(Encoder("logs").encode_records(bundle))
    for envelope in (Encoder("logs").encode(bundle), Encoder("logs").encode(bundle).to_bytes()):
        with pytest.raises(DecodingError, match=rf"^expected a quiver_store RecordBundle, got {type(envelope).__name__}: "
                                                r"decode an OTAP envelope with Decoder\.decode$"):
            Decoder().decode_records(envelope)
