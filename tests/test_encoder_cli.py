"""`adaptive-arrow encode` / `decode`: OTLP files -> envelope file -> OTLP files."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from adaptive_arrow import BatchArrowRecords, EnvelopeError
from adaptive_arrow.cli import main
from adaptive_arrow.envelope_file import read_envelopes, write_envelopes

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "otlp-examples"


def _requests(tmp_path: Path, name: str, copies: int) -> list[Path]:
    otap_model = pytest.importorskip("otap_model")
    if not hasattr(otap_model, "from_otlp_json") or not (DATA / name).exists():
        pytest.skip("OTLP/JSON conversion or samples not available")
    request = otap_model.to_otlp(otap_model.from_otlp_json((DATA / name).read_bytes()))
    paths = []
    for i in range(copies):
        p = tmp_path / f"in-{i}.pb"
        p.write_bytes(request.SerializeToString())
        paths.append(p)
    return paths


@pytest.mark.parametrize(("name", "signal"), [("logs.json", "logs"), ("trace.json", "traces"), ("metrics.json", "metrics")])
def test_encode_decode_round_trip(tmp_path: Path, name: str, signal: str, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _requests(tmp_path, name, 3)
    out = tmp_path / "x.otap"
    assert main(["encode", "--signal", signal, *map(str, inputs), "--out", str(out), "--no-sort", "--quiet"]) == 0
    assert "3 message(s)" in capsys.readouterr().out
    with out.open("rb") as f:
        messages = [BatchArrowRecords.from_bytes(m) for m in read_envelopes(f)]
    assert [m.batch_id for m in messages] == [0, 1, 2]
    assert main(["decode", str(out), "--out", str(tmp_path / "dec")]) == 0
    decoded = sorted((tmp_path / "dec").glob("*.pb"))
    assert [p.read_bytes() for p in decoded] == [p.read_bytes() for p in inputs]


def test_truncated_file_names_the_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _requests(tmp_path, "logs.json", 2)
    out = tmp_path / "x.otap"
    assert main(["encode", "--signal", "logs", *map(str, inputs), "--out", str(out), "--quiet"]) == 0
    data = out.read_bytes()
    (first_len,) = struct.unpack_from("<I", data)
    out.write_bytes(data[: 4 + first_len + 10])
    assert main(["decode", str(out), "--out", str(tmp_path / "dec")]) == 2
    assert f"message at offset {4 + first_len} declares" in capsys.readouterr().err


def test_bad_input_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xff\xff")
    assert main(["encode", "--signal", "logs", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert str(bad) in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_framing() -> None:
    buf = io.BytesIO()
    bars = [BatchArrowRecords(i) for i in range(3)]
    assert write_envelopes(buf, bars) == 4 + 0 + 4 + 2 + 4 + 2
    assert [BatchArrowRecords.from_bytes(m) for m in read_envelopes(io.BytesIO(buf.getvalue()))] == bars
    with pytest.raises(EnvelopeError, match="truncated length prefix at offset 10"):
        list(read_envelopes(io.BytesIO(buf.getvalue()[:12])))
