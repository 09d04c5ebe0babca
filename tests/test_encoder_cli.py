"""`adaptive-arrow encode` / `decode`: OTLP files -> envelope file -> OTLP files."""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow import BatchArrowRecords, EnvelopeError
from adaptive_arrow.cli import main
from adaptive_arrow.envelope_file import read_envelopes, write_envelopes
from adaptive_arrow.spark import check_standalone_master

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
    err = capsys.readouterr().err
    assert err.startswith(f"adaptive-arrow decode: {out}: message 2: at offset {4 + first_len} declares ")
    assert err.endswith(" bytes but only 6 remain\n") and err.count(str(out)) == 1
    assert not (tmp_path / "dec").exists()  # message 1 decoded, but a failed decode leaves nothing behind


def test_bad_input_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xff\xff")
    assert main(["encode", "--signal", "logs", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"adaptive-arrow encode: {bad} (read as OTLP protobuf): ")
    assert not (tmp_path / "o").exists()


def test_framing() -> None:
    buf = io.BytesIO()
    bars = [BatchArrowRecords(i) for i in range(3)]
    assert write_envelopes(buf, bars) == 4 + 0 + 4 + 2 + 4 + 2
    assert [BatchArrowRecords.from_bytes(m) for m in read_envelopes(io.BytesIO(buf.getvalue()))] == bars
    with pytest.raises(EnvelopeError, match="truncated length prefix at offset 10"):
        list(read_envelopes(io.BytesIO(buf.getvalue()[:12])))


# ---- fresh-user review 6: empty requests, numbering, input formats, --out, help, stdout


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("empty_first", [True, False])
def test_empty_requests_round_trip(tmp_path: Path, empty_first: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty file is an empty request (zero records); decode needs no signal for it, before or
    after messages that carry one."""
    empty = tmp_path / "e.pb"
    empty.write_bytes(b"")
    logs = _requests(tmp_path, "logs.json", 1)
    inputs = [empty, *logs, empty] if empty_first else [*logs, empty]
    out = tmp_path / "x.otap"
    assert _run(["encode", "--signal", "logs", *map(str, inputs), "--out", str(out), "--no-sort"], capsys)[0] == 0
    code, stdout, err = _run(["decode", str(out), "--out", str(tmp_path / "dec")], capsys)
    assert (code, err) == (0, "")
    assert stdout == f"{len(inputs)} message(s) decoded into {tmp_path / 'dec'}\n"
    assert [p.read_bytes() for p in sorted((tmp_path / "dec").glob("*.pb"))] == [p.read_bytes() for p in inputs]


def test_only_empty_requests_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "e.pb"
    empty.write_bytes(b"")
    out = tmp_path / "x.otap"
    code, stdout, _ = _run(["encode", str(empty), "--signal", "metrics", "--out", str(out)], capsys)
    assert code == 0 and stdout == f"1 message(s), 0 input bytes -> 4 OTAP bytes in {out}\n"
    assert _run(["decode", str(out), "--out", str(tmp_path / "d")], capsys)[:2] == (0, f"1 message(s) decoded into {tmp_path / 'd'}\n")
    assert (tmp_path / "d" / "000000.pb").read_bytes() == b""


@pytest.mark.parametrize("name,content", [("e.json", b""), ("blank.json", b" \n"), ("z.json", b"\xef\xbb\xbf\n")])
def test_an_empty_or_blank_json_file_is_an_empty_request(tmp_path: Path, name: str, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / name
    empty.write_bytes(content)
    out = tmp_path / "x.otap"
    code, stdout, err = _run(["encode", str(empty), "--signal", "traces", "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    assert stdout == f"1 message(s), {len(content)} input bytes -> 4 OTAP bytes in {out}\n"


def test_decode_failure_names_file_once_and_message_from_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.otap"
    write_envelopes(bad.open("wb"), [BatchArrowRecords(0), b"\x0a\x02\x08"])
    code, _, err = _run(["decode", str(bad), "--out", str(tmp_path / "d")], capsys)
    assert code == 2
    assert err.startswith(f"adaptive-arrow decode: {bad}: message 2: ")
    assert err.count(str(bad)) == 1
    bad.write_bytes(b"\x00\x00")
    code, _, err = _run(["decode", str(bad), "--out", str(tmp_path / "d2")], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: {bad}: message 1: truncated length prefix at offset 0 (2 of 4 bytes)\n")


def test_decode_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["decode", str(tmp_path / "no.otap"), "--out", str(tmp_path / "d")], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: {tmp_path / 'no.otap'}: no such file\n")
    envelope = tmp_path / "x.otap"
    envelope.write_bytes(b"")
    code, _, err = _run(["decode", str(envelope), "--out", str(envelope)], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: --out {envelope}: exists and is not a directory\n")


@pytest.mark.parametrize(("name", "signal", "fmt"), [("logs.json", "logs", "auto"), ("trace.json", "traces", "otlp-json"),
                                                     ("metrics.json", "metrics", "auto")])
def test_encode_reads_otlp_json(tmp_path: Path, name: str, signal: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    otap_model = pytest.importorskip("otap_model")
    out = tmp_path / "j.otap"
    code, _, err = _run(["encode", str(DATA / name), "--signal", signal, "--input-format", fmt, "--out", str(out),
                           "--no-sort"], capsys)
    assert (code, err) == (0, "")
    assert _run(["decode", str(out), "--out", str(tmp_path / "d")], capsys)[0] == 0
    expected = otap_model.to_otlp(otap_model.from_otlp_json((DATA / name).read_bytes())).SerializeToString()
    assert (tmp_path / "d" / "000000.pb").read_bytes() == expected


def test_encode_reads_zipkin_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zipkin = DATA.parent / "zipkin" / "yelp.json"
    code, stdout, _ = _run(["encode", str(zipkin), "--signal", "traces", "--out", str(tmp_path / "z.otap")], capsys)
    assert code == 0 and stdout.startswith("1 message(s)")
    code, _, err = _run(["encode", str(zipkin), "--signal", "logs", "--out", str(tmp_path / "z.otap")], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {zipkin} (read as Zipkin JSON): Zipkin spans are traces, not logs "
                              "(--signal logs); pass --signal traces if every request holds traces, else encode each "
                              "signal's requests separately (an OTAP envelope file holds one signal)\n")


def test_json_read_as_protobuf_says_it_looks_like_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    renamed = tmp_path / "logs.pb"
    renamed.write_bytes((DATA / "logs.json").read_bytes())
    code, _, err = _run(["encode", str(renamed), "--signal", "logs", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.startswith(f"adaptive-arrow encode: {renamed} (read as OTLP protobuf): ")
    assert err.endswith("; the file looks like JSON: pass --input-format otlp-json\n")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("name", "argv", "read_as"), [("logs.json", [], "OTLP/JSON"),
                                                    ("logs.pb", ["--input-format", "otlp-json"], "OTLP/JSON"),
                                                    ("logs.pb", ["--input-format", "zipkin-json"], "Zipkin JSON")])
def test_protobuf_read_as_json_says_it_looks_like_protobuf(tmp_path: Path, name: str, argv: list[str], read_as: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    renamed = tmp_path / name
    renamed.write_bytes(_requests(tmp_path, "logs.json", 1)[0].read_bytes())
    code, _, err = _run(["encode", str(renamed), *argv, "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.startswith(f"adaptive-arrow encode: {renamed} (read as {read_as}): ")
    assert err.endswith("; the file looks like an OTLP logs request in protobuf: pass --input-format otlp-proto\n")


@pytest.mark.parametrize("argv", [[], ["--signal", "logs"]])
def test_an_envelope_file_given_to_encode_says_to_decode_it(tmp_path: Path, argv: list[str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    envelopes = tmp_path / "x.otap"
    assert main(["encode", *map(str, _requests(tmp_path, "logs.json", 2)), "--out", str(envelopes), "--quiet"]) == 0
    capsys.readouterr()
    code, _, err = _run(["encode", str(envelopes), *argv, "--out", str(tmp_path / "again.otap")], capsys)
    assert code == 2
    assert err.startswith(f"adaptive-arrow encode: {envelopes} (read as OTLP protobuf): ")
    assert err.endswith("; the file is an OTAP envelope file (adaptive-arrow encode's output): read it with adaptive-arrow decode\n")


@pytest.mark.parametrize(("kind", "read_as"), [("protobuf", "OTLP protobuf"), ("json", "OTLP/JSON"), ("zipkin", "Zipkin JSON")])
def test_decode_of_an_otlp_file_says_to_encode_it(tmp_path: Path, kind: str, read_as: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = {"protobuf": lambda: _requests(tmp_path, "logs.json", 1)[0], "json": lambda: DATA / "logs.json",
            "zipkin": lambda: DATA.parent / "zipkin" / "yelp.json"}[kind]()
    signal = "traces" if kind == "zipkin" else "logs"
    code, _, err = _run(["decode", str(path), "--out", str(tmp_path / "d")], capsys)
    assert code == 2
    assert err.startswith(f"adaptive-arrow decode: {path}: message 1: ")
    assert err.endswith(f"; the file holds {signal} export requests (read as {read_as}), not OTAP envelopes: "
                        "encode it first with adaptive-arrow encode\n")


def test_wrong_signal_says_which_signal_the_file_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _requests(tmp_path, "logs.json", 1)
    code, _, err = _run(["encode", str(inputs[0]), "--signal", "traces", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err == (f"adaptive-arrow encode: {inputs[0]} (read as OTLP protobuf): the request holds logs, not traces "
                   "(--signal traces); pass --signal logs if every request holds logs, else encode each signal's "
                   "requests separately (an OTAP envelope file holds one signal)\n")


def test_logs_given_as_traces_are_refused_not_read_as_spans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Log records with a time, a severity text and a body were read as spans (all-zero ids, the
    serialized body as the name) and encoded with exit status 0: alone, as the first frame of a
    length-prefixed file, and as a logs request joined to a traces one."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    from otap_model.otlp.json import otlp_json_to_message

    request = ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add().scope_logs.add()
    for i in range(2):
        scope_logs.log_records.add(time_unix_nano=1_700_000_000_000_000_000 + i, severity_text="INFO").body.string_value = "hi"
    logs = request.SerializeToString()
    traces = otlp_json_to_message((DATA / "trace.json").read_text(), "traces").SerializeToString()
    single, framed, joined = tmp_path / "logs.pb", tmp_path / "framed.pb", tmp_path / "joined.pb"
    single.write_bytes(logs)
    framed.write_bytes(_framed([logs, traces]))
    joined.write_bytes(logs + traces)
    out = tmp_path / "o.otap"
    for path, where in ((single, f"{single} (read as OTLP protobuf)"),
                        (framed, f"{framed} message 1 (read as OTLP protobuf, length-prefixed)")):
        code, _, err = _run(["encode", str(path), "--signal", "traces", "--out", str(out)], capsys)
        assert (code, err) == (2, f"adaptive-arrow encode: {where}: the request holds logs, not traces (--signal traces); "
                                  "pass --signal logs if every request holds logs, else encode each signal's requests "
                                  "separately (an OTAP envelope file holds one signal)\n")
    code, _, err = _run(["encode", str(joined), "--signal", "traces", "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {joined} (read as OTLP protobuf): resource_spans[0].scope_spans[0]"
                              ".spans[0].trace_id: protobuf wire type 1 (64-bit), but the field is declared as a string "
                              "or bytes (wire type 2) (at byte 7)\n")
    assert not out.exists()
    assert _run(["encode", str(single), "--signal", "logs", "--out", str(out), "--quiet"], capsys)[0] == 0


def test_out_that_is_an_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _requests(tmp_path, "logs.json", 2)
    before = inputs[1].read_bytes()
    code, _, err = _run(["encode", *map(str, inputs), "--signal", "logs", "--out", str(inputs[1])], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: --out {inputs[1]} is one of the inputs; choose another output file\n")
    assert inputs[1].read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_input_or_directory_is_refused_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.otap"
    assert _run(["encode", str(tmp_path / "no.pb"), "--signal", "logs", "--out", str(out)], capsys)[::2] == (
        2, f"adaptive-arrow encode: {tmp_path / 'no.pb'}: no such file\n")
    assert _run(["encode", str(tmp_path), "--signal", "logs", "--out", str(out)], capsys)[::2] == (
        2, f"adaptive-arrow encode: {tmp_path}: not a regular file (a directory); pass the files in it, such as {tmp_path}/*\n")
    assert not out.exists()


def test_encode_prints_only_its_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Byte counts with thousands separators, as generate, bench and pipeline print them (review 26)."""
    inputs = _requests(tmp_path, "logs.json", 1)
    out = tmp_path / "x.otap"
    code, stdout, err = _run(["encode", str(inputs[0]), "--signal", "logs", "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    assert out.stat().st_size >= 1000  # so the separator shows
    assert stdout == f"1 message(s), {inputs[0].stat().st_size:,} input bytes -> {out.stat().st_size:,} OTAP bytes in {out}\n"


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"adaptive-arrow {version('otap-toolkit')} (otap-toolkit)\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "Encode OpenTelemetry data as OTAP" in text and "commands/" not in text
    for command, shown in (("encode", "(default: zstd)"), ("pipeline", "(default: 20000)"), ("generate", "(default: 5000)")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert shown in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    assert "back into OTLP files (protobuf or OTLP/JSON)" in " ".join(capsys.readouterr().out.split())


def test_generate_refuses_a_directory_of_an_earlier_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g"
    assert _run(["generate", "--signal", "logs", "--count", "10", "--batch-size", "3", "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    code, _, err = _run(["generate", "--signal", "logs", "--count", "3", "--batch-size", "3", "--out", str(out), "--quiet"], capsys)
    assert code == 2
    assert err == (f"adaptive-arrow generate: --out {out} already holds 4 file(s) of an earlier run (logs-000000.pb ...); "
                   "pass --overwrite to replace them, or choose another directory\n")
    assert len(list(out.glob("logs-*.pb"))) == 4
    argv = ["generate", "--signal", "traces", "--count", "3", "--batch-size", "3", "--out", str(out), "--quiet", "--overwrite"]
    assert _run(argv, capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "traces-000000.pb"]


GENERATOR_ARGUMENTS = [
    (["--profile", "multivariate", "--signal", "logs"], "--profile: 'multivariate' applies to metrics only, not to logs"),
    (["--count", "-1", "--signal", "logs"], "--count: expected an integer >= 0, got -1"),
    (["--batch-size", "0", "--signal", "logs"], "--batch-size: expected an integer >= 1, got 0"),
    (["--seed", "-2", "--signal", "logs"], "--seed: expected an integer >= 0, got -2"),
]


@pytest.mark.parametrize(("argv", "message"), GENERATOR_ARGUMENTS)
def test_pipeline_refuses_bad_generator_arguments(tmp_path: Path, argv: list[str], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The message names the option, not the generator's parameter (was `batch_size: ...`, fresh-user review 12)."""
    store = tmp_path / "store"
    assert _run(["pipeline", "--store", str(store), *argv], capsys)[::2] == (2, f"adaptive-arrow pipeline: {message}\n")
    assert not store.exists()


@pytest.mark.parametrize(("argv", "message"), GENERATOR_ARGUMENTS)
def test_generate_refuses_bad_generator_arguments(tmp_path: Path, argv: list[str], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--count", "10", *argv] if "--count" not in argv else argv
    out = tmp_path / "g"
    assert _run(["generate", *argv, "--out", str(out), "--quiet"], capsys)[::2] == (2, f"adaptive-arrow generate: {message}\n")
    assert not out.exists()


def test_pipeline_refuses_an_unknown_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["pipeline", "--store", str(tmp_path / "s"), "--profile", "bogus"])
    assert exit_.value.code == 2
    assert "argument --profile: invalid choice: 'bogus' (choose from 'default'," in capsys.readouterr().err


def test_pipeline_refuses_a_store_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "logs.otap"
    store.write_bytes(b"data")
    code, _, err = _run(["pipeline", "--store", str(store), "--count", "10", "--signal", "logs"], capsys)
    assert (code, err) == (2, f"adaptive-arrow pipeline: --store {store}: not a directory (an existing file); name a store directory\n")
    assert store.read_bytes() == b"data"


def test_pipeline_refuses_a_directory_that_is_not_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): a directory holding other files was silently made a store (wal/,
    segments/, LOCK, ... written among them). An empty directory or an existing store is taken."""
    store = tmp_path / "photos"
    store.mkdir()
    (store / "cat.jpg").write_bytes(b"meow")
    argv = ["--count", "10", "--signal", "logs"]
    code, _, err = _run(["pipeline", "--store", str(store), *argv], capsys)
    assert (code, err) == (2, f"adaptive-arrow pipeline: --store {store}: holds files and is not a Quiver store: it has no "
                              "wal/ or segments/ directory; name an empty or new directory or an existing store\n")
    assert [p.name for p in store.iterdir()] == ["cat.jpg"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run(["pipeline", "--store", str(empty), *argv], capsys)[::2] == (0, "")
    (empty / "notes.txt").write_text("mine")  # a store with a file of the user's in it is still a store
    assert _run(["pipeline", "--store", str(empty), *argv], capsys)[::2] == (0, "")


def test_pipeline_refuses_a_directory_with_an_unrelated_segments_folder(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a segments/ (or wal/) directory was enough to take --store for a store, so pipeline
    wrote wal/, LOCK and ack.log among another program's files. pipeline and the quiver commands
    apply one rule (quiver_store/store_dir.py) and say what is missing."""
    from quiver_store.cli import main as quiver

    video = tmp_path / "video"
    (video / "segments").mkdir(parents=True)
    (video / "segments" / "part-0001.ts").write_bytes(b"\x47" * 188)
    reason = ("is not a Quiver store: it has segments/ but no LOCK file, no wal/ directory and no segment files in "
              "segments/ (<seq>.qseg, next.seq)")
    code, _, err = _run(["pipeline", "--store", str(video), "--count", "10", "--signal", "logs"], capsys)
    assert (code, err) == (2, f"adaptive-arrow pipeline: --store {video}: holds files and {reason}; name an empty or "
                              "new directory or an existing store\n")
    assert sorted(str(p.relative_to(video)) for p in video.rglob("*")) == ["segments", "segments/part-0001.ts"]
    assert quiver(["inspect", str(video)]) == 2
    assert capsys.readouterr().err == f"quiver inspect: {video} {reason}\n"


def test_pipeline_takes_a_store_whose_creation_was_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a crash while QuiverStore.open created the store left (wal/ with the hole-punch probe,
    segments/, no LOCK yet): a store, which pipeline finishes creating."""
    store = tmp_path / "s"
    (store / "wal").mkdir(parents=True)
    (store / "segments").mkdir()
    (store / "wal" / ".punch_probe").write_bytes(b"\1" * 16384)
    assert _run(["pipeline", "--store", str(store), "--count", "10", "--signal", "logs"], capsys)[::2] == (0, "")
    assert (store / "LOCK").is_file() and (store / "wal" / "quiver.wal").is_file()


def test_generate_refuses_an_out_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "f"
    out.write_text("x")
    code, _, err = _run(["generate", "--signal", "logs", "--count", "3", "--out", str(out), "--quiet"], capsys)
    assert (code, err) == (2, f"adaptive-arrow generate: --out {out}: exists and is not a directory\n")


def test_decode_refuses_a_directory_of_an_earlier_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _requests(tmp_path, "logs.json", 3)
    three, one = tmp_path / "three.otap", tmp_path / "one.otap"
    assert _run(["encode", "--signal", "logs", *map(str, inputs), "--out", str(three), "--quiet"], capsys)[0] == 0
    assert _run(["encode", "--signal", "logs", str(inputs[0]), "--out", str(one), "--quiet"], capsys)[0] == 0
    out = tmp_path / "d"
    assert _run(["decode", str(three), "--out", str(out)], capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    code, _, err = _run(["decode", str(one), "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: --out {out} already holds 3 file(s) of an earlier run "
                              "(000000.pb ...); pass --overwrite to replace them, or choose another directory\n")
    assert _run(["decode", str(one), "--out", str(out), "--overwrite"], capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["000000.pb", "notes.txt"]


def test_out_that_is_a_fifo_or_a_symlink_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 6): the output replaced a FIFO, a device or a symbolic link with a
    regular file."""
    import os

    inputs = _requests(tmp_path, "logs.json", 1)
    fifo, link, target = tmp_path / "pipe.otap", tmp_path / "link.otap", tmp_path / "target.otap"
    os.mkfifo(fifo)
    target.write_bytes(b"keep")
    link.symlink_to(target)
    cases = [
        (fifo, f"--out {fifo}: is not a regular file (a device, FIFO or socket), which the output would replace; name a regular file"),
        (link, f"--out {link}: is a symbolic link, which the output would replace; name a regular file"),
    ]
    for out, message in cases:
        code, _, err = _run(["encode", str(inputs[0]), "--signal", "logs", "--out", str(out), "--quiet"], capsys)
        assert (code, err) == (2, f"adaptive-arrow encode: {message}\n")
    assert fifo.is_fifo() and link.is_symlink() and target.read_bytes() == b"keep"


def test_files_named_like_a_temporary_file_survive_encode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): encode wrote OUT.tmp and renamed it to OUT, deleting it on failure,
    so a file of the user's by that name was lost either way (a directory or a symbolic link there
    was refused). The temporary file now has a name no file had, and only it is ever deleted."""
    import os

    inputs = _requests(tmp_path, "logs.json", 1)
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xff\xff")
    out, target = tmp_path / "x.otap", tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "x.otap.tmp").write_bytes(b"mine")
    (tmp_path / "x.otap.tmp.d").mkdir()
    (tmp_path / "x.otap.link.tmp").symlink_to(target)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = _run(["encode", str(inputs[0]), str(bad), "--signal", "logs", "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.startswith(f"adaptive-arrow encode: {bad} (read as OTLP protobuf): ") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    code, _, err = _run(["encode", str(inputs[0]), "--signal", "logs", "--out", str(out), "--quiet"], capsys)
    assert (code, err) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "x.otap"])
    assert (tmp_path / "x.otap.tmp").read_bytes() == b"mine" and target.read_bytes() == b"keep"
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain open makes it (mkstemp's would be 0600)


# ---- temporary files an interrupted encode left behind

KILLED_ENCODE = """
import os, signal, sys
from adaptive_arrow.commands import encode

real = encode.create_temporary

def create_then_die(out):
    fd, path = real(out)
    os.write(fd, b"partial")
    os.kill(os.getpid(), signal.SIGKILL)  # as kill -9 while writing

encode.create_temporary = create_then_die
from adaptive_arrow.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_encode_notes_temporary_files_a_killed_run_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: the OUT.<hex>.tmp of an encode killed with SIGKILL stayed behind unmentioned, forever.
    The next encode to the same OUT names it on stderr and leaves it (another encode may be
    writing it); files of other names are not listed."""
    import subprocess
    import sys

    inputs = _requests(tmp_path, "logs.json", 2)
    out = tmp_path / "x.otap"
    argv = ["encode", "--signal", "logs", *map(str, inputs), "--out", str(out), "--quiet"]
    killed = subprocess.run([sys.executable, "-c", KILLED_ENCODE, *argv], capture_output=True, check=False)
    assert killed.returncode == -9
    (stale,) = tmp_path.glob("x.otap.*.tmp")
    assert stale.read_bytes() == b"partial" and not out.exists()
    for name in ("x.otap.tmp", "x.otap.mine.tmp", "x.otap.0123456789ABCDEF.tmp", "y.otap.0123456789abcdef.tmp"):
        (tmp_path / name).write_text("the user's")
    code, stdout, err = _run(argv, capsys)
    assert (code, err) == (0, f"adaptive-arrow encode: note: {stale} was left by an interrupted run; delete it if no "
                              "other encode is running\n")
    assert "2 message(s)" in stdout and out.is_file()
    assert stale.read_bytes() == b"partial"  # not deleted
    second = tmp_path / "x.otap.0123456789abcdef.tmp"
    second.write_bytes(b"")
    code, _, err = _run(argv, capsys)
    assert (code, err) == (0, f"adaptive-arrow encode: note: 2 files were left by interrupted runs: "
                              f"{', '.join(map(str, sorted([stale, second])))}; delete them if no other encode is running\n")
    stale.unlink()
    second.unlink()
    assert _run(argv, capsys)[::2] == (0, "")
    assert sorted(p.name for p in tmp_path.glob("x.otap*")) == [
        "x.otap", "x.otap.0123456789ABCDEF.tmp", "x.otap.mine.tmp", "x.otap.tmp"]


def test_signal_defaults_to_that_of_the_first_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --signal, the first file's content names the signal: the output is byte for byte the
    one --signal gives, for protobuf, OTLP/JSON and Zipkin inputs."""
    cases = [(_requests(tmp_path, "metrics.json", 2), "metrics"), ([DATA / "logs.json"], "logs"),
             ([DATA.parent / "zipkin" / "yelp.json", DATA / "trace.json"], "traces")]
    for i, (inputs, signal) in enumerate(cases):
        named, inferred = tmp_path / f"named-{i}.otap", tmp_path / f"inferred-{i}.otap"
        assert _run(["encode", *map(str, inputs), "--signal", signal, "--out", str(named)], capsys)[::2] == (0, "")
        assert _run(["encode", *map(str, inputs), "--out", str(inferred)], capsys)[::2] == (0, "")
        assert inferred.read_bytes() == named.read_bytes()


def test_without_signal_a_later_file_of_another_signal_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = _requests(tmp_path, "logs.json", 1)[0]
    zipkin = DATA.parent / "zipkin" / "yelp.json"
    out = tmp_path / "o.otap"
    code, _, err = _run(["encode", str(logs), str(zipkin), "--out", str(out)], capsys)
    separately = "encode each signal's requests separately (an OTAP envelope file holds one signal)"
    assert (code, err) == (2, f"adaptive-arrow encode: {zipkin} (read as Zipkin JSON): Zipkin spans are traces, not logs "
                              f"(every file must hold logs, the signal of the first one, {logs}); {separately}\n")
    code, _, err = _run(["encode", str(zipkin), str(logs), "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {logs} (read as OTLP protobuf): the request holds logs, not traces "
                              f"(every file must hold traces, the signal of the first one, {zipkin}); {separately}\n")
    assert not out.exists()


@pytest.mark.parametrize(("name", "content"), [("e.pb", b""), ("e.json", b""), ("e.json", b"{}\n")])
def test_without_signal_an_empty_first_file_asks_for_it(tmp_path: Path, name: str, content: bytes,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / name
    empty.write_bytes(content)
    code, _, err = _run(["encode", str(empty), "--out", str(tmp_path / "o")], capsys)
    fmt = "OTLP protobuf" if name.endswith(".pb") else "OTLP/JSON"
    assert (code, err) == (2, f"adaptive-arrow encode: {empty} (read as {fmt}): an empty request holds no records "
                              "to tell its signal by; pass --signal\n")


def test_decode_a_store_gives_back_every_request_it_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store the pipeline wrote (three signals, read without opening it) decodes to one OTLP file
    per bundle, in ingestion order, each equal to its source request (records compared in canonical
    order: sorting reorders them inside a batch)."""
    from adaptive_arrow.pipeline import run_pipeline
    from otap_model import Signal, generate_otlp, normalize_otlp
    from otap_model.otlp.decode import REQUEST_TYPES
    from otap_model.otlp.order import canonical_order

    assert run_pipeline(tmp_path / "store", count=300, batch_size=100, seed=5).ok
    code, stdout, err = _run(["decode", str(tmp_path / "store"), "--out", str(tmp_path / "d")], capsys)
    assert (code, err, stdout) == (0, "", f"9 bundle(s) decoded into {tmp_path / 'd'}\n")
    sources = [(s, r) for s in Signal for r in generate_otlp(s, 300, batch_size=100, seed=5)]
    files = sorted((tmp_path / "d").iterdir())
    assert [f.name for f in files] == [f"{i:06d}-{s.value}.pb" for i, (s, _) in enumerate(sources)]
    for path, (signal, request) in zip(files, sources, strict=True):
        decoded = REQUEST_TYPES[signal].FromString(path.read_bytes())
        assert canonical_order(decoded) == canonical_order(normalize_otlp(request)), path.name


def test_decode_a_store_includes_what_only_its_wal_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import otap_model
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store import QuiverStore

    bundles = list(otap_model.generate("traces", 30, batch_size=10, seed=2))
    encoder = Encoder("traces")
    store = QuiverStore.open(tmp_path / "s", layout=OTAP_LAYOUT)
    store.ingest(encoder.encode_records(bundles[0]))
    store.flush()
    for bundle in bundles[1:]:
        store.ingest(encoder.encode_records(bundle))
    store._abandon()  # a crash: the last two are acknowledged, in the WAL only
    code, stdout, err = _run(["decode", str(tmp_path / "s"), "--out", str(tmp_path / "d")], capsys)
    assert (code, stdout) == (0, f"3 bundle(s) decoded into {tmp_path / 'd'}\n")
    assert err == ("adaptive-arrow decode: note: the last 2 bundle(s) are only in the WAL (acknowledged, not in a "
                   "segment yet); decoded too\n")
    spans = [len(otap_model.from_otlp((tmp_path / "d" / f"{i:06d}-traces.pb").read_bytes()).tables[otap_model.PayloadType.SPANS])
             for i in range(3)]
    assert spans == [10, 10, 10]


def test_decode_refuses_a_store_of_other_records_and_a_directory_that_is_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa

    from quiver_store import QuiverStore, RecordBundle

    with QuiverStore.open(tmp_path / "s") as store:
        store.ingest(RecordBundle({5: pa.record_batch({"x": [1]})}))
    code, _, err = _run(["decode", str(tmp_path / "s"), "--out", str(tmp_path / "d")], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: {tmp_path / 's'}: segment 0 bundle 0: record bundle slot 5: "
                              "unknown payload type 5\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    code, _, err = _run(["decode", str(tmp_path / "plain"), "--out", str(tmp_path / "d2")], capsys)
    assert (code, err) == (2, f"adaptive-arrow decode: {tmp_path / 'plain'} is not a Quiver store: it has no wal/ or "
                              "segments/ directory\n")


def test_decode_a_store_stops_at_a_damaged_segment_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bundles before the damage are kept (salvage) and the message says where; with none before
    it, no --out is left behind."""
    import re

    import otap_model
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store import QuiverStore

    bundles = list(otap_model.generate("logs", 300, batch_size=100, seed=5))
    encoder = Encoder("logs")
    with QuiverStore.open(tmp_path / "store", layout=OTAP_LAYOUT) as store:
        store.ingest(encoder.encode_records(bundles[0]))
        store.flush()  # segment 0: one bundle; segment 1: the other two
        for bundle in bundles[1:]:
            store.ingest(encoder.encode_records(bundle))
    segments = sorted((tmp_path / "store" / "segments").glob("*.qseg"))
    assert len(segments) == 2
    for segment, kept in ((segments[1], 1), (segments[0], 0)):
        data = bytearray(segment.read_bytes())
        data[len(data) // 2] ^= 0x10  # inside some stream's data: only its checksum can tell
        segment.write_bytes(bytes(data))
        out = tmp_path / f"d{kept}"
        code, stdout, err = _run(["decode", str(tmp_path / "store"), "--out", str(out)], capsys)
        assert (code, stdout) == (2, "")
        end = f"the 1 bundle(s) before it were decoded into {out}" if kept else "no bundle before it was decoded"
        found = re.fullmatch(rf"adaptive-arrow decode: {re.escape(str(segment))} at offset \d+: .+; {re.escape(end)}\n", err)
        assert found is not None, err
        assert sorted(p.name for p in out.iterdir()) == ["000000-logs.pb"] if kept else not out.exists()


def test_decode_a_store_writes_a_progress_only_bundle_as_the_empty_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An exactly-once writer may record progress over input that held no records: a bundle whose
    only slot is the progress record. It decodes to the empty request, `<index>.pb`, between the
    telemetry bundles around it."""
    import otap_model
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store import QuiverStore, RecordBundle, with_progress

    bundle = next(otap_model.generate("logs", 10, batch_size=10, seed=3))
    encoder = Encoder("logs")
    with QuiverStore.open(tmp_path / "s", layout=OTAP_LAYOUT) as store:
        store.ingest(with_progress(encoder.encode_records(bundle), "job", 1))
        store.ingest(with_progress(RecordBundle({}), "job", 2))
        store.ingest(with_progress(encoder.encode_records(bundle), "job", 3))
    code, stdout, err = _run(["decode", str(tmp_path / "s"), "--out", str(tmp_path / "d")], capsys)
    assert (code, err, stdout) == (0, "", f"3 bundle(s) decoded into {tmp_path / 'd'}\n")
    files = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert files == ["000000-logs.pb", "000001.pb", "000002-logs.pb"]
    assert (tmp_path / "d" / "000001.pb").read_bytes() == b""
    assert otap_model.from_otlp((tmp_path / "d" / "000002-logs.pb").read_bytes()).num_rows == 10


def _json_lines(tmp_path: Path, signal: str, name: str = "in.jsonl") -> tuple[Path, list[bytes]]:
    """Three generated requests as OTLP/JSON Lines (CRLF endings and a blank line between two, as
    hand-edited files have them), and each request's protobuf bytes."""
    import otap_model

    bundles = list(otap_model.generate(signal, 30, batch_size=10, seed=3))
    lines = [otap_model.to_otlp_json(b) for b in bundles]
    path = tmp_path / name
    path.write_text(f"{lines[0]}\r\n\n{lines[1]}\n{lines[2]}\n")
    return path, [otap_model.to_otlp(otap_model.from_otlp_json(line)).SerializeToString() for line in lines]


@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_encode_reads_otlp_json_lines_one_message_per_line(tmp_path: Path, signal: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The OpenTelemetry Collector's file exporter writes one OTLP/JSON request per line: each line
    becomes one message, decoding gives each request back, and the output is byte for byte that of
    the same requests given as one file each."""
    jsonl, requests = _json_lines(tmp_path, signal)
    singles = []
    for i, request in enumerate(requests):
        singles.append(tmp_path / f"single-{i}.pb")
        singles[-1].write_bytes(request)
    code, stdout, err = _run(["encode", str(jsonl), "--out", str(tmp_path / "l.otap"), "--no-sort"], capsys)
    assert (code, err) == (0, "") and stdout.startswith("3 message(s), ")
    assert _run(["encode", *map(str, singles), "--out", str(tmp_path / "s.otap"), "--no-sort"], capsys)[0] == 0
    assert (tmp_path / "l.otap").read_bytes() == (tmp_path / "s.otap").read_bytes()
    assert _run(["decode", str(tmp_path / "l.otap"), "--out", str(tmp_path / "d")], capsys)[::2] == (0, "")
    assert [p.read_bytes() for p in sorted((tmp_path / "d").iterdir())] == requests


def test_a_bad_line_of_a_json_lines_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jsonl, _ = _json_lines(tmp_path, "logs", "in.json")
    text = jsonl.read_text()
    jsonl.write_text(text + '{"resourceLogs": [\n')
    out = tmp_path / "o.otap"
    code, _, err = _run(["encode", str(jsonl), "--out", str(out)], capsys)
    assert code == 2 and err.startswith(f"adaptive-arrow encode: {jsonl} line 5 (read as OTLP/JSON Lines): invalid JSON: ")
    spans = _json_lines(tmp_path, "traces", "spans.jsonl")[0].read_text().splitlines()[0]
    jsonl.write_text(text + spans + "\n")
    code, _, err = _run(["encode", str(jsonl), "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {jsonl} line 5 (read as OTLP/JSON Lines): the request holds traces, "
                              f"not logs (every request must hold logs, the signal of {jsonl} line 1); split {jsonl} into "
                              "one file per signal\n")
    assert not out.exists()


def test_a_pretty_printed_request_is_one_request_not_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads((DATA / "logs.json").read_text()), indent=2))
    code, stdout, err = _run(["encode", str(pretty), "--out", str(tmp_path / "o.otap")], capsys)
    assert (code, err) == (0, "") and stdout.startswith("1 message(s), ")


@pytest.mark.parametrize("source", ["envelopes", "store"])
def test_decode_writes_otlp_json_that_encode_reads_back(tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--output-format otlp-json: one line of OTLP/JSON per request, the same requests as the
    protobuf output; the files, or their lines joined into one JSON Lines file, encode again."""
    from otap_model import from_otlp_json, to_otlp
    from quiver_store import QuiverStore, with_progress

    jsonl, requests = _json_lines(tmp_path, "traces")
    if source == "envelopes":
        target = tmp_path / "t.otap"
        assert _run(["encode", str(jsonl), "--out", str(target), "--no-sort"], capsys)[0] == 0
        names = ["000000.json", "000001.json", "000002.json"]
    else:
        from adaptive_arrow import Encoder, EncoderConfig
        from adaptive_arrow.store_layout import OTAP_LAYOUT
        from otap_model import from_otlp

        target = tmp_path / "store"
        encoder = Encoder("traces", EncoderConfig(sort=False))
        with QuiverStore.open(target, layout=OTAP_LAYOUT) as store:
            for request in requests:
                store.ingest(encoder.encode_records(from_otlp(request, signal="traces")))
            store.ingest(with_progress(encoder.encode_records(from_otlp(b"", signal="traces")), "p", 3))
        names = ["000000-traces.json", "000001-traces.json", "000002-traces.json", "000003.json"]
    out = tmp_path / "j"
    assert _run(["decode", str(target), "--out", str(out), "--output-format", "otlp-json"], capsys)[0] == 0
    files = sorted(out.iterdir())
    assert [f.name for f in files] == names
    texts = [f.read_text() for f in files]
    assert all(t.endswith("\n") and t.count("\n") == 1 for t in texts)
    assert [to_otlp(from_otlp_json(t)).SerializeToString() for t in texts[:3]] == requests
    if source == "store":
        assert texts[3] == "{}\n"  # the empty request: the bundle held only a progress record
    joined = tmp_path / "joined.jsonl"
    joined.write_text("".join(texts[:3]))
    code, stdout, err = _run(["encode", str(joined), "--out", str(tmp_path / "again.otap")], capsys)
    assert (code, err) == (0, "") and stdout.startswith("3 message(s), ")
    code, _, err = _run(["decode", str(target), "--out", str(out), "--output-format", "otlp-proto"], capsys)
    assert code == 2 and "--overwrite" in err  # the .json files of the earlier decode are that run's output


def _framed(payloads: list[bytes]) -> bytes:
    """The Collector file exporter's framing: big-endian u32 length, then the request."""
    return b"".join(struct.pack(">I", len(p)) + p for p in payloads)


def _collector_file(kind: str, requests: list[bytes], lines: list[bytes]) -> bytes:
    """What the Collector's file exporter writes with each setting (format, compression, and the
    native-compression feature gate that compresses the whole file as one stream)."""
    import zstandard

    z = zstandard.ZstdCompressor()
    return {
        "format: proto": _framed(requests),
        "format: proto, compression: zstd": _framed([z.compress(r) for r in requests]),
        "format: json, compression: zstd": _framed([z.compress(line) for line in lines]),
        "native zstd, format: json": z.compress(b"\n".join(lines) + b"\n"),
        "native zstd, format: proto": b"".join(z.compress(c) for c in (_framed(requests[:1]), _framed(requests[1:]))),
    }[kind]


@pytest.mark.parametrize("kind", ["format: proto", "format: proto, compression: zstd", "format: json, compression: zstd",
                                  "native zstd, format: json", "native zstd, format: proto"])
def test_encode_reads_every_collector_file_exporter_format(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One message per request whatever the file exporter's settings; the envelopes are byte for
    byte those of the same requests given as one protobuf file each."""
    jsonl, requests = _json_lines(tmp_path, "logs")
    lines = [line for line in jsonl.read_bytes().splitlines() if line.strip()]
    collector = tmp_path / "collector-output"
    collector.write_bytes(_collector_file(kind, requests, lines))
    singles = []
    for i, request in enumerate(requests):
        singles.append(tmp_path / f"single-{i}.pb")
        singles[-1].write_bytes(request)
    code, stdout, err = _run(["encode", str(collector), "--out", str(tmp_path / "c.otap")], capsys)
    assert (code, err) == (0, "") and stdout.startswith("3 message(s), ")
    assert _run(["encode", *map(str, singles), "--out", str(tmp_path / "s.otap")], capsys)[0] == 0
    assert (tmp_path / "c.otap").read_bytes() == (tmp_path / "s.otap").read_bytes()


def test_damaged_collector_files_are_named_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zstandard

    _, requests = _json_lines(tmp_path, "logs")
    bad = tmp_path / "bad-frame"
    bad.write_bytes(_framed([requests[0], b"\x0a\x05oops!", requests[2]]))
    code, _, err = _run(["encode", str(bad), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.startswith(f"adaptive-arrow encode: {bad} message 2 (read as OTLP protobuf, length-prefixed): ")
    cut = tmp_path / "cut.zst"
    cut.write_bytes(zstandard.ZstdCompressor().compress(_framed(requests))[:-20])
    code, _, err = _run(["encode", str(cut), "--out", str(tmp_path / "o")], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {cut}: zstd-compressed data that ends inside a frame (truncated?)\n")
    corrupt = tmp_path / "corrupt"
    corrupt.write_bytes(_framed([requests[0], zstandard.ZstdCompressor().compress(requests[1])[:-6] + b"\xff" * 6]))
    code, _, err = _run(["encode", str(corrupt), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.startswith(f"adaptive-arrow encode: {corrupt} message 2: zstd-compressed data that ")
    assert not (tmp_path / "o").exists()


@given(st.sampled_from(["logs", "traces", "metrics"]), st.integers(0, 40), st.integers(0, 2**16))
@settings(max_examples=60, deadline=None)
def test_a_protobuf_request_is_never_read_as_collector_frames(signal: str, count: int, seed: int) -> None:
    from adaptive_arrow.commands.inputs import length_prefixed
    from otap_model import generate_otlp

    for request in generate_otlp(signal, count, batch_size=max(count, 1), seed=seed):
        data = request.SerializeToString()
        assert length_prefixed(data) is None  # its first byte, 0x0a (field 1), would declare > 160 MiB


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


_FRAMES = st.lists(st.binary(max_size=40).map(lambda b: b"\x0a" + b), min_size=1, max_size=4)


@given(st.one_of(st.binary(max_size=300), st.binary(max_size=60).map(lambda b: b"\x28\xb5\x2f\xfd" + b),
                 st.binary(max_size=200).map(_zstd), _FRAMES.map(_framed), _FRAMES.map(lambda f: _zstd(_framed(f)))))
@settings(max_examples=500, deadline=None)
def test_random_bytes_as_an_input_file_raise_input_error(data: bytes) -> None:
    """Whatever the container (zstd, length-prefixed frames) around random bytes: InputError
    naming the file, nothing else."""
    from adaptive_arrow.commands.inputs import InputError, to_bundles

    for name in ("x.pb", "x.json", "x"):
        try:
            for _ in to_bundles(Path(name), data, "auto", None):
                pass
        except InputError as exc:
            assert str(exc).startswith(name)


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc/self/mem (reading it at 0 fails with EIO)")
def test_a_read_error_names_the_input_not_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: 'adaptive-arrow encode: --out y.otap: cannot write: Input/output error' (a read error
    carries no file name, and the handler took it for the output's) and 'bench: None: cannot read'."""
    first = _requests(tmp_path, "logs.json", 1)[0]
    out = tmp_path / "y.otap"
    code, _, err = _run(["encode", str(first), "/proc/self/mem", "--out", str(out)], capsys)
    assert (code, err) == (1, "adaptive-arrow encode: /proc/self/mem: Input/output error\n")
    assert not out.exists() and list(tmp_path.glob("y.otap*")) == []
    code = main(["bench", "/proc/self/mem", "--no-generator", "--no-samples", "--out", str(tmp_path / "b")])
    assert (code, capsys.readouterr().err) == (1, "adaptive-arrow bench: /proc/self/mem: cannot read: Input/output error\n")


class _Unwritable(io.StringIO):
    """A standard output whose writes fail as a full disk or a closed pipe makes them fail."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


@pytest.mark.parametrize("command", ["encode", "decode", "generate"])
def test_an_unwritable_standard_output_is_one_line_or_quiet_for_a_closed_pipe(
        tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a traceback ending in 'OSError: [Errno 28] No space left on device' (`> /dev/full`) or
    BrokenPipeError (`| head -c1`) from the summary line. Now one line naming standard output,
    exit 1; a closed pipe ends quietly with 141, as the quiver commands do."""
    import errno
    import sys

    source = _requests(tmp_path, "logs.json", 1)[0]
    assert main(["encode", str(source), "--out", str(tmp_path / "x.otap"), "--quiet"]) == 0
    argv = {"encode": ["encode", str(source), "--out", str(tmp_path / "y.otap"), "--quiet"],
            "decode": ["decode", str(tmp_path / "x.otap"), "--out", str(tmp_path / "d"), "--overwrite"],
            "generate": ["generate", "--signal", "logs", "--count", "10", "--batch-size", "10",
                         "--out", str(tmp_path / "g"), "--overwrite"]}[command]
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", _Unwritable(OSError(errno.ENOSPC, "No space left on device")))
    assert (main(argv), capsys.readouterr().err) == (
        1, f"adaptive-arrow {command}: cannot write standard output: No space left on device\n")
    monkeypatch.setattr(sys, "stdout", _Unwritable(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert (main(argv), capsys.readouterr().err) == (141, "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_standard_output_warns_nothing_more_at_exit(tmp_path: Path) -> None:
    """What the summary left in stdout's buffer must not fail again when the interpreter flushes it
    at exit ('Exception ignored ... OSError' and exit status 120)."""
    import subprocess
    import sys

    source = _requests(tmp_path, "logs.json", 1)[0]
    script = "import sys; from adaptive_arrow.cli import main; sys.exit(main(sys.argv[1:]))"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", script, "encode", str(source), "--out", str(tmp_path / "y.otap"),
                               "--quiet"], stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert (done.returncode, done.stderr) == (1, "adaptive-arrow encode: cannot write standard output: No space left on device\n")


@pytest.mark.parametrize(("argv", "option"), [
    (["generate", "--signal", "logs", "--count", "10", "--out", ""], "--out"),
    (["decode", "x.otap", "--out", ""], "--out"),
    (["encode", "x.pb", "--out", ""], "--out"),
    (["pipeline", "--store", ""], "--store"),
    (["bench", "--out", ""], "--out"),
    (["encode", "", "--out", "x.otap"], "files"),
    (["decode", "", "--out", "d"], "input"),
    (["bench", "", "--out", "b"], "files"),
])
def test_an_empty_path_is_refused(tmp_path: Path, argv: list[str], option: str,
                                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: `--out ''` became Path('.'), so generate and bench wrote into the current directory and
    pipeline took it for --store '.'; an empty input was read as '.' too (decode took the current
    directory for a store)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"adaptive-arrow {argv[0]}: error: argument {option}: empty path"
    assert list(tmp_path.iterdir()) == []


def test_out_that_is_an_input_under_another_name_names_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '--out in-0.pb is one of the inputs' for --out hl.pb (a hard link to it), and '--out
    sl.pb is one of the inputs' for --out in-0.pb with input sl.pb (a symbolic link to it): the
    message showed the input's name as --out."""
    (source,) = _requests(tmp_path, "logs.json", 1)
    hard, soft = tmp_path / "hl.pb", tmp_path / "sl.pb"
    hard.hardlink_to(source)
    soft.symlink_to(source)
    before = source.read_bytes()
    code, _, err = _run(["encode", str(source), "--out", str(hard)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: --out {hard} is the same file as input {source}; "
                              "choose another output file\n")
    code, _, err = _run(["encode", str(soft), "--out", str(source)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: --out {source} is the same file as input {soft}; "
                              "choose another output file\n")
    assert source.read_bytes() == before and not list(tmp_path.glob("*.tmp"))


def test_out_ending_with_a_slash_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: exit 0 and a regular file named in-0.pb.d (Path() drops the slash)."""
    (source,) = _requests(tmp_path, "logs.json", 1)
    out = f"{source}.d/"
    code, _, err = _run(["encode", str(source), "--out", out], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: --out {out}: ends with a slash, which names a directory; "
                              "name the output file\n")
    assert not Path(out).exists()


def test_decode_refuses_an_out_inside_the_store_it_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: `decode S --out S/wal` wrote its .pb files among the store's own files."""
    import pyarrow as pa

    from quiver_store import QuiverStore, RecordBundle

    store = tmp_path / "s"
    with QuiverStore.open(store) as opened:
        opened.ingest(RecordBundle({5: pa.record_batch({"x": [1]})}))
    (tmp_path / "link").symlink_to(store)
    before = sorted(store.rglob("*"))
    for out, where in ((store / "wal", "inside the store"), (store / "new" / "d", "inside the store"),
                       (tmp_path / "link" / "segments", "inside the store"), (store, "the store")):
        code, _, err = _run(["decode", str(store), "--out", str(out)], capsys)
        assert (code, err) == (2, f"adaptive-arrow decode: --out {out} is {where} {store} being read; "
                                  "choose a directory outside it\n")
    assert sorted(store.rglob("*")) == before


def test_a_json_request_of_several_signals_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: 'cannot infer the signal: expected exactly one of resourceLogs, resourceSpans,
    resourceMetrics; pass signal=' (a Python keyword, and --signal would not help)."""
    both = tmp_path / "dupkey.json"
    both.write_text('{"resourceLogs": [], "resourceSpans": []}\n')
    for signal in ([], ["--signal", "logs"]):
        code, _, err = _run(["encode", str(both), *signal, "--out", str(tmp_path / "dk.otap")], capsys)
        assert (code, err) == (2, f"adaptive-arrow encode: {both} (read as OTLP/JSON): the request holds several "
                                  "signals (resourceLogs, resourceSpans); an OTLP request holds one\n")


@pytest.mark.parametrize(("master", "message"), [
    ("bogus://x", "expected local, local[N], local[*], yarn, spark://HOST:PORT or k8s://URL"),
    ("local[0]", "expected local[N] or local[*] (N >= 1 task slots)"),
    ("local[two]", "expected local[N] or local[*] (N >= 1 task slots)"),
    ("localhost", "expected local, local[N] or local[*]"),
])
def test_pipeline_refuses_a_spark_master_before_spark_starts(tmp_path: Path, master: str, message: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a traceback, after Spark's JVM started, ending in PySparkRuntimeError [JAVA_GATEWAY_EXITED]
    (bogus://x) or Py4JJavaError 'Asked to run locally with 0 threads' (local[0]), exit 1."""
    store = tmp_path / "store"
    argv = ["pipeline", "--store", str(store), "--signal", "logs", "--count", "10", "--batch-size", "10", "--spark", master]
    assert _run(argv, capsys)[::2] == (2, f"adaptive-arrow pipeline: --spark: master {master!r}: {message}\n")
    assert not store.exists()


def test_pipeline_reports_a_spark_that_does_not_start_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A master of the right form may still fail to start (no such cluster): one line, not a traceback."""
    pytest.importorskip("pyspark")
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    def gateway_exited(self: object) -> None:
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", gateway_exited)
    argv = ["pipeline", "--store", str(tmp_path / "s"), "--signal", "logs", "--count", "10", "--batch-size", "10",
            "--spark", "yarn"]
    assert _run(argv, capsys)[::2] == (2, "adaptive-arrow pipeline: --spark: master 'yarn': Spark did "
                                          "not start: [JAVA_GATEWAY_EXITED] Java gateway process exited before sending "
                                          "its port number.\n")


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pipeline_refuses_a_standalone_master_nobody_answers_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: Spark retried registering for about 65 s, printed some 230 lines of JVM log and ended in
    'Cannot call methods on a stopped SparkContext', which did not say the master was unreachable."""
    port = _closed_port()
    master = f"spark://127.0.0.1:{port},localhost:x"
    argv = ["pipeline", "--store", str(tmp_path / "s"), "--signal", "logs", "--count", "10", "--batch-size", "10",
            "--spark", master]
    assert _run(argv, capsys)[::2] == (2, f"adaptive-arrow pipeline: --spark: master {master!r}: no standalone master "
                                          f"accepts connections (127.0.0.1:{port}: Connection refused; localhost:x: port "
                                          "'x' is not a number); start one (Spark's sbin/start-master.sh) or choose "
                                          "another master, e.g. local[2]\n")
    assert not (tmp_path / "s").exists()


def test_a_standalone_master_list_needs_one_master_that_answers() -> None:
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        check_standalone_master(f"spark://127.0.0.1:{_closed_port()}, 127.0.0.1:{live.getsockname()[1]}")


# ---- fresh-user review 26: a failed decode leaves --out as it was


def _truncated_envelopes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An envelope file whose message 1 decodes and message 2 is cut short."""
    out = tmp_path / "cut.otap"
    assert _run(["encode", "--signal", "logs", *map(str, _requests(tmp_path, "logs.json", 2)), "--out", str(out), "--quiet"],
                capsys)[0] == 0
    data = out.read_bytes()
    (first_len,) = struct.unpack_from("<I", data)
    out.write_bytes(data[: 4 + first_len + 10])
    return out


def test_a_failed_decode_removes_the_directories_it_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: `decode cut.otap --out new/d` exited 2 and left new/d holding the messages before the
    failing one (an empty directory when message 1 failed)."""
    cut = _truncated_envelopes(tmp_path, capsys)
    before = sorted(tmp_path.iterdir())
    code, stdout, err = _run(["decode", str(cut), "--out", str(tmp_path / "new" / "d")], capsys)
    assert (code, stdout) == (2, "") and err.startswith(f"adaptive-arrow decode: {cut}: message 2: ")
    assert sorted(tmp_path.iterdir()) == before  # neither new/ nor new/d


def test_a_failed_decode_leaves_an_existing_out_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's files and, even with --overwrite, the earlier decode's files stay; nothing is added."""
    cut = _truncated_envelopes(tmp_path, capsys)
    whole = tmp_path / "whole.otap"
    assert _run(["encode", "--signal", "logs", *map(str, _requests(tmp_path, "logs.json", 3)), "--out", str(whole),
                 "--quiet"], capsys)[0] == 0
    out = tmp_path / "d"
    assert _run(["decode", str(whole), "--out", str(out)], capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["000000.pb", "000001.pb", "000002.pb", "notes.txt"]
    for overwrite in ([], ["--overwrite"]):
        code, _, err = _run(["decode", str(cut), "--out", str(out), *overwrite], capsys)
        assert code == 2, err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_interrupted_decode_removes_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from adaptive_arrow.commands import decode

    whole = tmp_path / "whole.otap"
    assert _run(["encode", "--signal", "logs", *map(str, _requests(tmp_path, "logs.json", 3)), "--out", str(whole),
                 "--quiet"], capsys)[0] == 0
    calls = []
    serialize = decode.serialize

    def interrupted_at_the_third(*args: object) -> bytes:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return serialize(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decode, "serialize", interrupted_at_the_third)
    existing = tmp_path / "existing"
    existing.mkdir()
    for out in (tmp_path / "new", existing):
        calls.clear()
        assert _run(["decode", str(whole), "--out", str(out)], capsys)[::2] == (130, "adaptive-arrow decode: interrupted\n")
    assert not (tmp_path / "new").exists() and list(existing.iterdir()) == []


def test_decode_names_a_staging_directory_a_killed_decode_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Never deleted: another decode into the same --out may be writing it."""
    whole = tmp_path / "whole.otap"
    assert _run(["encode", "--signal", "logs", *map(str, _requests(tmp_path, "logs.json", 1)), "--out", str(whole),
                 "--quiet"], capsys)[0] == 0
    out = tmp_path / "d"
    (out / ".staging-0123456789abcdef").mkdir(parents=True)
    code, stdout, err = _run(["decode", str(whole), "--out", str(out)], capsys)
    assert (code, stdout) == (0, f"1 message(s) decoded into {out}\n")
    assert err == (f"adaptive-arrow decode: note: {out / '.staging-0123456789abcdef'} was left by an interrupted run; "
                   f"delete it if no other adaptive-arrow decode is writing into {out}\n")
    assert sorted(p.name for p in out.iterdir()) == [".staging-0123456789abcdef", "000000.pb"]


# ---- fresh-user review 26: input of two signals, in command-line terms


def test_a_json_lines_file_of_two_signals_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... line 2 (read as OTLP/JSON Lines): signal=logs but the request holds resourceSpans
    (traces); its data would be dropped (...)': a Python argument the user never typed, and no way out."""
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text((DATA / "logs.json").read_text().replace("\n", "") + "\n" + (DATA / "trace.json").read_text().replace("\n", "") + "\n")
    out = tmp_path / "o.otap"
    code, _, err = _run(["encode", str(mixed), "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {mixed} line 2 (read as OTLP/JSON Lines): the request holds traces, "
                              f"not logs (every request must hold logs, the signal of {mixed} line 1); split {mixed} into "
                              "one file per signal\n")
    code, _, err = _run(["encode", str(mixed), "--signal", "traces", "--out", str(out)], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {mixed} line 1 (read as OTLP/JSON Lines): the request holds logs, "
                              "not traces (--signal traces); pass --signal logs if every request holds logs, else encode "
                              "each signal's requests separately (an OTAP envelope file holds one signal)\n")
    bad = tmp_path / "bad-logs.json"  # a request of another signal that is damaged too: --signal comes first
    bad.write_text('{"resourceLogs": 5}\n')
    code, _, err = _run(["encode", str(bad), "--signal", "traces", "--out", str(out)], capsys)
    assert code == 2 and err.startswith(f"adaptive-arrow encode: {bad} (read as OTLP/JSON): the request holds logs, "
                                        "not traces (--signal traces); pass --signal logs if ")
    assert not out.exists()


def test_decode_of_envelope_files_of_two_signals_joined_says_what_to_do(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... message 2: batch 0: traces payloads [...], but this Decoder decodes logs; keep one
    Decoder per stream': the library's advice, not the command line's."""
    logs, traces, joined = tmp_path / "l.otap", tmp_path / "t.otap", tmp_path / "lt.otap"
    assert _run(["encode", str(DATA / "logs.json"), "--out", str(logs)], capsys)[0] == 0
    assert _run(["encode", str(DATA / "trace.json"), "--out", str(traces)], capsys)[0] == 0
    joined.write_bytes(logs.read_bytes() + traces.read_bytes())
    code, stdout, err = _run(["decode", str(joined), "--out", str(tmp_path / "d")], capsys)
    assert (code, stdout) == (2, "")
    assert err == (f"adaptive-arrow decode: {joined}: message 2 holds traces, but the messages before it hold logs; an OTAP "
                   "envelope file holds one signal, as adaptive-arrow encode writes it: decode each signal's envelope "
                   "file separately\n")


def test_decode_of_a_store_another_process_has_open_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 26): silence, while `quiver` commands on the same store print a note.
    flock conflicts between separately opened descriptors in one process too, so a QuiverStore
    here holds the lock."""
    import otap_model
    from adaptive_arrow import Encoder
    from adaptive_arrow.store_layout import OTAP_LAYOUT
    from quiver_store import QuiverStore

    note = ("adaptive-arrow decode: note: another process has this store open (its LOCK is held); decoding what is "
            "durable when each file is read\n")
    bundles = list(otap_model.generate("logs", 20, batch_size=10, seed=4))
    encoder = Encoder("logs")
    store = QuiverStore.open(tmp_path / "s", layout=OTAP_LAYOUT)
    try:
        store.ingest(encoder.encode_records(bundles[0]))
        store.flush()
        code, stdout, err = _run(["decode", str(tmp_path / "s"), "--out", str(tmp_path / "d1")], capsys)
        assert (code, stdout, err) == (0, f"1 bundle(s) decoded into {tmp_path / 'd1'}\n", note)
        store.ingest(encoder.encode_records(bundles[1]))  # the probe took nothing from the writer
    finally:
        store.close()
    code, stdout, err = _run(["decode", str(tmp_path / "s"), "--out", str(tmp_path / "d2")], capsys)
    assert (code, stdout, err) == (0, f"2 bundle(s) decoded into {tmp_path / 'd2'}\n", "")


# ---- generate stages its files as decode does: a failed or interrupted generate leaves --out as it was


def _generate(out: Path, *more: str) -> list[str]:
    return ["generate", "--signal", "logs", "--count", "50", "--batch-size", "10", "--out", str(out), "--quiet", *more]


def _earlier_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, bytes]]:
    """A directory holding an earlier generate's 5 files and a file of the user's, and its contents."""
    out = tmp_path / "existing"
    assert _run(["generate", "--signal", "traces", "--count", "50", "--batch-size", "10", "--out", str(out), "--quiet"],
                capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def test_a_generate_that_cannot_write_leaves_out_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a full disk at the third file left the first two in --out (a new directory stayed
    behind), and --overwrite had deleted the earlier run's files before the new ones existed."""
    import errno

    existing, before = _earlier_generate(tmp_path, capsys)
    write_bytes = Path.write_bytes
    calls = []

    def full_at_the_third(self: Path, data: bytes) -> int:
        calls.append(self)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_at_the_third)
    for out, more in ((tmp_path / "new" / "g", []), (existing, ["--overwrite"])):
        calls.clear()
        code, stdout, err = _run(_generate(out, *more), capsys)
        assert (code, stdout, err) == (1, "", f"adaptive-arrow generate: cannot write {out / 'logs-000002.pb'}: "
                                             "No space left on device\n")
    assert not (tmp_path / "new").exists()
    assert {p.name: p.read_bytes() for p in existing.iterdir()} == before


def test_an_interrupted_generate_removes_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C at the third batch: exit 130, nothing of this run in --out, the earlier run's files
    kept even under --overwrite."""
    from adaptive_arrow.commands import generate

    existing, before = _earlier_generate(tmp_path, capsys)
    generate_otlp = generate.generate_otlp

    def interrupted_at_the_third(*args: object, **kwargs: object) -> object:
        for index, request in enumerate(generate_otlp(*args, **kwargs)):  # type: ignore[arg-type]
            if index == 2:
                raise KeyboardInterrupt
            yield request

    monkeypatch.setattr(generate, "generate_otlp", interrupted_at_the_third)
    for out, more in ((tmp_path / "new", []), (existing, ["--overwrite"])):
        assert _run(_generate(out, *more), capsys)[::2] == (130, "adaptive-arrow generate: interrupted\n")
    assert not (tmp_path / "new").exists()
    assert {p.name: p.read_bytes() for p in existing.iterdir()} == before


def test_generate_names_a_staging_directory_a_killed_generate_left(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g"
    (out / ".staging-0123456789abcdef").mkdir(parents=True)
    code, _, err = _run(_generate(out), capsys)
    assert (code, err) == (0, f"adaptive-arrow generate: note: {out / '.staging-0123456789abcdef'} was left by an "
                              f"interrupted run; delete it if no other adaptive-arrow generate is writing into {out}\n")
    assert sorted(p.name for p in out.iterdir()) == [".staging-0123456789abcdef", *(f"logs-{i:06d}.pb" for i in range(5))]


# ---- library wording translated: input whose signal cannot be told, damage in a later file


def test_an_otlp_json_object_naming_no_signal_with_bad_content_says_what_to_do(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... cannot infer the signal: the request names none (...); pass signal=': a Python
    argument, and nothing about the content that does not read either."""
    bad = tmp_path / "span.json"
    bad.write_text('{"traceId": "zz"}\n')
    code, _, err = _run(["encode", str(bad), "--out", str(tmp_path / "o.otap")], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {bad} (read as OTLP/JSON): the request names no signal (no "
                              "resourceLogs, resourceSpans or resourceMetrics key) and does not read as an OTLP/JSON "
                              "request (traceId: 'zz' is not a hex-encoded id); check the file, or pass --signal to read "
                              "it as that signal's request\n")
    assert not (tmp_path / "o.otap").exists()


def test_a_protobuf_file_of_two_signals_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... not one Export{Logs,Trace,Metrics}ServiceRequest of a single signal', and no more."""
    from otap_model import generate_otlp

    joined = tmp_path / "logs-and-metrics.pb"
    joined.write_bytes(b"".join(next(generate_otlp(s, 2, batch_size=2, seed=1)).SerializeToString() for s in ("logs", "metrics")))
    code, _, err = _run(["encode", str(joined), "--out", str(tmp_path / "o.otap")], capsys)
    assert (code, err) == (2, f"adaptive-arrow encode: {joined} (read as OTLP protobuf): not one "
                              "Export{Logs,Trace,Metrics}ServiceRequest of a single signal (requests of several signals "
                              "joined in one file read as none: give each its own file); check the file, or pass --signal "
                              "to read it as that signal's request\n")


def test_damage_in_a_later_file_is_not_blamed_on_the_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... (every file must hold logs, the signal of the first one, ...)' after any error in a
    later file, a truncated one too. Only an error about the signal gets it."""
    from otap_model import generate_otlp

    logs = tmp_path / "logs.pb"
    data = next(generate_otlp("logs", 2, batch_size=2, seed=1)).SerializeToString()
    logs.write_bytes(data)
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[:-3])
    span = tmp_path / "span.json"
    span.write_text('{"traceId": "zz"}\n')
    out = str(tmp_path / "o.otap")
    for damaged in (cut, span):
        code, _, alone = _run(["encode", str(damaged), "--signal", "logs", "--out", out], capsys)
        assert code == 2 and "every file must hold" not in alone
        assert _run(["encode", str(logs), str(damaged), "--out", out], capsys)[::2] == (2, alone)


def _replace_failing(monkeypatch: pytest.MonkeyPatch, out: Path, fails: Callable[[int], bool]) -> None:
    """os.replace raising EIO at the moves into and out of `out` (numbered from 1) `fails` picks."""
    import errno
    import os

    replace, calls = os.replace, []

    def patched(src: str, dst: str) -> None:
        if str(out) in (str(Path(src).parent), str(Path(dst).parent), str(Path(dst).parent.parent)):
            calls.append(src)
            if fails(len(calls)):
                raise OSError(errno.EIO, "Input/output error", src, None, dst)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", patched)


@pytest.mark.parametrize(("k", "failure"), [(3, "traces-000002.pb (moving the earlier file aside)"), (8, "logs-000002.pb")])
def test_a_generate_whose_files_cannot_be_moved_in_leaves_out_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str], k: int,
                                                                         failure: str) -> None:
    """Was: the k-th move failing left the files moved before it in --out (the earlier run's that
    --overwrite replaces still there too), deleted the rest with the staging directory, and said
    only 'cannot move the files written into --out ...: Input/output error'. Moves 1-5 put the
    earlier traces files aside, 6-10 move the new logs files in."""
    existing, before = _earlier_generate(tmp_path, capsys)
    _replace_failing(monkeypatch, existing, lambda n: n == k)
    assert _run(_generate(existing, "--overwrite"), capsys) == (
        1, "", f"adaptive-arrow generate: cannot move the files written into --out {existing} ({failure}: Input/output error); "
               "--out is left as it was\n")
    assert {p.name: p.read_bytes() for p in existing.iterdir()} == before


def test_a_generate_that_cannot_put_out_back_either_says_where_every_file_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Every move from the 8th on fails (the file system gave up): two new files are in --out, the
    rest and the earlier run's files stay in the staging directory, which is kept and named."""
    existing, before = _earlier_generate(tmp_path, capsys)
    _replace_failing(monkeypatch, existing, lambda n: n >= 8)
    code, stdout, err = _run(_generate(existing, "--overwrite"), capsys)
    staging = next(p for p in existing.iterdir() if p.name.startswith(".staging-"))
    assert (code, stdout, err) == (
        1, "", f"adaptive-arrow generate: cannot move the files written into --out {existing} (logs-000002.pb: Input/output "
               f"error); putting --out back failed too (logs-000001.pb: Input/output error), so nothing was deleted: --out "
               f"holds this run's logs-000000.pb, logs-000001.pb (2 files); {staging} holds this run's logs-000002.pb .. "
               f"logs-000004.pb (3 files); {staging}/.earlier holds --out's earlier traces-000000.pb .. traces-000004.pb "
               f"(5 files); move them back into place by hand, then delete {staging}\n")
    assert sorted(p.name for p in existing.iterdir()) == sorted([staging.name, "notes.txt", "logs-000000.pb", "logs-000001.pb"])
    assert {p.name: p.read_bytes() for p in (staging / ".earlier").iterdir()} == {n: b for n, b in before.items() if n != "notes.txt"}
    assert sorted(p.name for p in staging.iterdir()) == [".earlier", "logs-000002.pb", "logs-000003.pb", "logs-000004.pb"]
