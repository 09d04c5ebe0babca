"""An Encoder or Decoder used by two threads at once refuses the second call (EncodingError /
DecodingError) and stays correct. Before, the calls interleaved: builtin ArrowInvalid/IndexError,
an encoder that failed every later batch, streams no Decoder could read, and envelopes that
decoded to other data."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adaptive_arrow import Decoder, DecodingError, Encoder, EncodingError
from otap_model import OtapBundle, generate, to_otlp
from otap_model.otlp.order import canonical_order


@pytest.fixture(scope="module")
def bundles() -> list[OtapBundle]:
    return list(generate("logs", 6 * 300, batch_size=300, seed=5))


def same(a: OtapBundle, b: OtapBundle) -> bool:
    return canonical_order(to_otlp(a)) == canonical_order(to_otlp(b))


def held_inside(obj: Any, name: str, call: Callable[[], object]) -> Iterator[threading.Event]:
    """Run `call` in a thread that pauses inside `obj.<name>` until the yielded event is set."""
    inside, release = threading.Event(), threading.Event()
    original = getattr(obj, name)

    def paused(*args: object, **kwargs: object) -> object:
        inside.set()
        release.wait(10)
        return original(*args, **kwargs)

    setattr(obj, name, paused)
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(call()))
    worker.start()
    assert inside.wait(10)
    yield release
    release.set()
    worker.join(10)
    setattr(obj, name, original)
    assert len(result) == 1


def test_a_second_encode_during_one_is_refused_and_changes_nothing(bundles: list[OtapBundle]) -> None:
    encoder = Encoder("logs")
    first: list[object] = []
    held = held_inside(encoder, "_prepare", lambda: first.append(encoder.encode(bundles[0])))
    next(held)
    for method in ("encode", "encode_records"):
        with pytest.raises(EncodingError) as info:
            getattr(encoder, method)(bundles[1])
        assert str(info.value) == (
            f"Encoder.{method}: this Encoder is in use by another thread. One Encoder is one OTAP stream: give "
            "each thread its own Encoder, or hold one lock around each call and the send (or receive) of its "
            "envelope, so the stream's order is the order on the wire"
        )
    next(held, None)
    envelopes = [first[0]] + [encoder.encode(b) for b in bundles[1:3]]
    assert [bar.batch_id for bar in envelopes] == [0, 1, 2]  # type: ignore[attr-defined]
    decoder = Decoder()
    assert all(same(decoder.decode(bar.to_bytes()), b) for bar, b in zip(envelopes, bundles[:3], strict=True))  # type: ignore[attr-defined]


def test_a_second_decode_during_one_is_refused_and_changes_nothing(bundles: list[OtapBundle]) -> None:
    encoder = Encoder("logs")
    wire = [encoder.encode(b).to_bytes() for b in bundles[:3]]
    decoder = Decoder()
    decoded: list[OtapBundle] = []
    held = held_inside(decoder, "_envelope", lambda: decoded.append(decoder.decode(wire[0])))
    next(held)
    for method, arg in (("decode", wire[1]), ("read_records", wire[1]), ("decode_records", Encoder("logs").encode_records(bundles[1]))):
        with pytest.raises(DecodingError, match=rf"^Decoder\.{method}: this Decoder is in use by another thread\. "):
            getattr(decoder, method)(arg)
    next(held, None)
    decoded += [decoder.decode(w) for w in wire[1:]]
    assert all(same(got, b) for got, b in zip(decoded, bundles[:3], strict=True))


def test_threads_sharing_an_encoder_get_refusals_or_correct_envelopes(bundles: list[OtapBundle]) -> None:
    """Whatever the interleaving: each call either raises EncodingError or yields an envelope, and the
    envelopes, read in batch order, decode to exactly the bundles they were made from."""
    encoder = Encoder("logs")
    made: list[tuple[Any, OtapBundle]] = []
    refused: list[Exception] = []
    lock = threading.Lock()

    def produce(part: list[OtapBundle]) -> None:
        for _ in range(4):
            for bundle in part:
                try:
                    bar = encoder.encode(bundle)
                except Exception as exc:
                    refused.append(exc)
                    continue
                with lock:
                    made.append((bar, bundle))

    threads = [threading.Thread(target=produce, args=(bundles[i::2],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(exc, EncodingError) and "in use by another thread" in str(exc) for exc in refused)
    assert len(made) + len(refused) == 4 * len(bundles)
    made.sort(key=lambda pair: pair[0].batch_id)
    assert [bar.batch_id for bar, _ in made] == list(range(len(made)))
    decoder = Decoder()
    assert all(same(decoder.decode(bar.to_bytes()), bundle) for bar, bundle in made)
