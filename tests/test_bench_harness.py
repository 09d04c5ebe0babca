"""Smoke test of the compression benchmark harness on tiny inputs (no figures are asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptive_arrow.cli import main
from benchmarks import compression as c
from otap_model import generate_otlp


def test_bench_command_writes_table_csv_json_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = next(iter(generate_otlp("traces", 30, batch_size=30, seed=3)))
    extra = tmp_path / "traces.pb"
    extra.write_bytes(request.SerializeToString())
    out = tmp_path / "out"
    code = main(["bench", str(extra), "--signals", "logs", "--profiles", "sparse", "--batch-sizes", "10,20",
                 "--max-records", "20", "--min-batches", "2", "--no-samples", "--out", str(out)])
    assert code == 0
    data = json.loads((out / "results.json").read_text())
    rows = data["results"]
    assert data["meta"]["zstd_level"] == c.ZSTD_LEVEL
    # 2 inputs x 2 batch sizes x (stream, unary) x (sorted, unsorted)
    assert len(rows) == 16
    assert {r["dataset"] for r in rows} == {"logs/sparse", "file/traces.pb"}
    file_rows = [r for r in rows if r["dataset"] == "file/traces.pb" and r["batch_size"] == 10]
    assert all(r["batches"] == 3 and r["records"] == 30 for r in file_rows)
    for r in rows:
        assert r["otlp_zstd"] > 0 and r["otap_zstd"] > 0
        assert r["ratio_zstd"] == pytest.approx(r["otlp_zstd"] / r["otap_zstd"])
    assert (out / "results.csv").read_text().startswith("dataset,signal,batch_size")
    assert sorted(p.name for p in out.glob("*.png")) == ["compression-file-traces.pb.png", "compression-logs-sparse.png"]
    assert "OTLP+zstd / OTAP+zstd" in capsys.readouterr().out


def test_rebatch_keeps_every_record_under_its_resource_and_scope() -> None:
    request = next(iter(generate_otlp("logs", 25, batch_size=25, seed=5)))
    parts = c.rebatch(request, 7)
    assert [sum(len(s.log_records) for r in p.resource_logs for s in r.scope_logs) for p in parts] == [7, 7, 7, 4]
    flat = [(r.resource.SerializeToString(), s.scope.SerializeToString(), lr.SerializeToString())
            for p in parts for r in p.resource_logs for s in r.scope_logs for lr in s.log_records]
    original = [(r.resource.SerializeToString(), s.scope.SerializeToString(), lr.SerializeToString())
                for r in request.resource_logs for s in r.scope_logs for lr in s.log_records]
    assert flat == original


def test_file_sizes_past_the_whole_file_are_dropped() -> None:
    request = next(iter(generate_otlp("logs", 25, batch_size=25, seed=5)))
    dataset = c.file_dataset("f", request)
    assert dataset.whole == 25
    assert c.batch_sizes_for(dataset, [10, 100, 500]) == [10, 100]


def test_a_missing_component_stops_the_run() -> None:
    with pytest.raises(c.MissingComponent, match=r"otap_model\.no_such_thing is not available"):
        c.component("otap_model", "no_such_thing")


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OFF = ["--no-generator", "--no-samples", "--batch-sizes", "10"]


def _bench(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["bench", *argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--signals", "foo"], "--signals: unknown signal 'foo'; expected one of logs, traces, metrics"),
    (["--signals", "logs,foo"], "--signals: unknown signal 'foo'; expected one of logs, traces, metrics"),
    (["--signals", ","], "--signals: give at least one of logs, traces, metrics"),
    (["--profiles", "bogus"], "--profiles: unknown profile 'bogus'; expected one of default, high-cardinality, sparse, multivariate"),
    (["--profiles", "default,bogus"], "--profiles: unknown profile 'bogus'; expected one of default, high-cardinality, sparse, multivariate"),
    (["--signals", "logs", "--profiles", "multivariate"], "--profiles: 'multivariate' applies to metrics only, not to --signals logs"),
    (["--signals", "logs,metrics", "--profiles", "multivariate"], "--signals: none of --profiles multivariate applies to logs"),
    (["--no-generator", "--no-samples"], "nothing to measure: --no-generator and --no-samples, and no input files"),
])
def test_bad_signals_and_profiles_are_refused_up_front(tmp_path: Path, argv: list[str], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _bench([*argv, "--out", str(out)], capsys) == (2, f"adaptive-arrow bench: {message}\n")
    assert not out.exists()


def test_missing_input_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    absent = tmp_path / "absent.pb"
    assert _bench([str(absent), *OFF, "--out", str(tmp_path / "o")], capsys) == (
        2, f"adaptive-arrow bench: {absent}: no such file\n")


def test_unusable_input_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty, otap = tmp_path / "empty.pb", tmp_path / "x.otap"
    empty.write_bytes(b"")
    otap.write_bytes(b"\x04\x00\x00\x00\x08\x01\x12\x00")
    out = ["--out", str(tmp_path / "o")]
    assert _bench([str(empty), *OFF, *out], capsys) == (2, f"adaptive-arrow bench: {empty}: the file is empty: no records to measure\n")
    assert _bench([str(tmp_path), *OFF, *out], capsys) == (2, f"adaptive-arrow bench: {tmp_path}: not a regular file (a directory); pass the files in it, such as {tmp_path}/*\n")
    code, err = _bench([str(otap), *OFF, *out], capsys)
    assert (code, err) == (2, f"adaptive-arrow bench: {otap} (read as OTLP protobuf): "
                              "not one Export{Logs,Trace,Metrics}ServiceRequest of a single signal; "
                              "the file is an OTAP envelope file (adaptive-arrow encode's output): read it with adaptive-arrow decode\n")
    assert not (tmp_path / "o").exists()


def test_zipkin_and_otlp_json_inputs_are_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zipkin, otlp_json = DATA / "zipkin" / "yelp.json", DATA / "otlp-examples" / "logs.json"
    out = tmp_path / "out"
    assert _bench([str(zipkin), str(otlp_json), *OFF, "--out", str(out)], capsys) == (0, "")
    rows = json.loads((out / "results.json").read_text())["results"]
    assert {(r["dataset"], r["signal"]) for r in rows} == {("file/yelp.json", "traces"), ("file/logs.json", "logs")}


def test_a_json_lines_file_is_measured_as_all_of_its_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Collector's file exporter output (one OTLP/JSON request per line): every line's records
    are measured, in batches like any input."""
    import otap_model

    lines = [otap_model.to_otlp_json(b) for b in otap_model.generate("logs", 30, batch_size=10, seed=2)]
    jsonl = tmp_path / "collector.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert _bench([str(jsonl), "--no-generator", "--no-samples", "--batch-sizes", "15", "--out", str(out)], capsys) == (0, "")
    rows = json.loads((out / "results.json").read_text())["results"]
    assert {(r["dataset"], r["batches"], r["records"]) for r in rows} == {("file/collector.jsonl", 2, 30)}


def test_out_is_checked_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    # with the generator on, measuring would take minutes: these return at once
    assert _bench(["--out", str(a_file)], capsys) == (2, f"adaptive-arrow bench: --out {a_file}: exists and is not a directory\n")
    assert _bench(["--out", str(a_file / "sub")], capsys) == (1, f"adaptive-arrow bench: cannot create --out {a_file / 'sub'}: Not a directory\n")


def test_repeated_signals_profiles_and_batch_sizes_are_measured_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): each repeat was measured again, doubling rows and table lines."""
    out = tmp_path / "out"
    argv = ["--signals", "logs,logs", "--profiles", "sparse,sparse", "--batch-sizes", "20,10,20", "--max-records", "20",
            "--min-batches", "2", "--no-samples", "--out", str(out)]
    assert _bench(argv, capsys) == (0, "")
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["batch_sizes"] == [20, 10]
    assert [(r["dataset"], r["batch_size"]) for r in data["results"]] == [("logs/sparse", 10)] * 4 + [("logs/sparse", 20)] * 4


@pytest.mark.parametrize("level", ["99", "23", "-131073"])
def test_a_zstd_level_out_of_range_is_refused_up_front(tmp_path: Path, level: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): --zstd-level 99 started measuring and failed with a traceback
    (23 and above); zstandard takes levels below zstd's fastest and silently uses the fastest."""
    out = tmp_path / "out"
    assert _bench(["--zstd-level", level, "--out", str(out)], capsys) == (
        2, f"adaptive-arrow bench: --zstd-level: expected an integer from -131072 to 22 (negative: zstd's fast levels), got {level}\n")
    assert not out.exists()


@pytest.mark.parametrize("level", ["-131072", "22"])
def test_the_extreme_zstd_levels_are_measured(tmp_path: Path, level: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _bench([str(DATA / "zipkin" / "yelp.json"), *OFF, "--zstd-level", level, "--out", str(out)], capsys) == (0, "")
    assert json.loads((out / "results.json").read_text())["meta"]["zstd_level"] == int(level)


@pytest.mark.parametrize(("argv", "message"), [
    (["--min-batches", "50", "--max-batches", "10"], "--min-batches 50 is above --max-batches 10; give --min-batches <= --max-batches"),
    (["--min-batches", "0"], "--min-batches: expected an integer >= 1, got 0"),
    (["--max-batches", "-3"], "--max-batches: expected an integer >= 1, got -3"),
    (["--max-records", "0"], "--max-records: expected an integer >= 1, got 0"),
    (["--seed", "-1"], "--seed: expected an integer >= 0, got -1"),
])
def test_bad_batch_counts_are_refused_up_front(tmp_path: Path, argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): --min-batches above --max-batches was silently accepted (the
    minimum won), as were counts below 1."""
    out = tmp_path / "out"
    assert _bench([*argv, "--out", str(out)], capsys) == (2, f"adaptive-arrow bench: {message}\n")
    assert not out.exists()


@pytest.mark.parametrize("listed", [True, False])
def test_out_holds_this_runs_plots_only(tmp_path: Path, listed: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (fresh-user review 12): a run into the --out of an earlier one left the earlier run's plots
    of inputs it did not measure next to its own. The plots the earlier results.json names (or, for
    one written before it named them, the plots of its inputs) go; files bench did not write stay."""
    zipkin, otlp_json = DATA / "zipkin" / "yelp.json", DATA / "otlp-examples" / "logs.json"
    out = tmp_path / "out"
    assert _bench([str(zipkin), str(otlp_json), *OFF, "--out", str(out)], capsys) == (0, "")
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["plots"] == ["compression-file-yelp.png", "compression-file-logs.png"]
    if not listed:  # as bench wrote it before results.json named its plots
        del data["meta"]["plots"]
        (out / "results.json").write_text(json.dumps(data))
    for mine in ("mine.png", "compression-mine.png"):
        (out / mine).write_bytes(b"user's")
    assert _bench([str(zipkin), *OFF, "--out", str(out)], capsys) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == [
        "compression-file-yelp.png", "compression-mine.png", "mine.png", "results.csv", "results.json"]
    assert json.loads((out / "results.json").read_text())["meta"]["plots"] == ["compression-file-yelp.png"]


# -- names of the input files ----------------------------------------------------------------------
def _request_file(path: Path, signal: str, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(next(iter(generate_otlp(signal, 20, batch_size=20, seed=seed))).SerializeToString())
    return path


def test_inputs_sharing_a_file_name_get_distinct_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: both were named file/x.pb, so their results merged under one name, their table and CSV
    rows could not be told apart and the second plot overwrote the first."""
    a = _request_file(tmp_path / "a" / "x.pb", "logs", 1)
    b = _request_file(tmp_path / "b" / "x.pb", "traces", 2)
    other = _request_file(tmp_path / "a" / "y.pb", "metrics", 3)
    out = tmp_path / "out"
    assert _bench([str(a), str(b), str(other), *OFF, "--out", str(out)], capsys) == (0, "")
    data = json.loads((out / "results.json").read_text())
    assert [(r["dataset"], r["signal"]) for r in data["results"][::4]] == [
        ("file/a/x.pb", "logs"), ("file/b/x.pb", "traces"), ("file/y.pb", "metrics")]
    assert data["meta"]["plots"] == ["compression-file-a-x.pb.png", "compression-file-b-x.pb.png", "compression-file-y.pb.png"]
    assert sorted(p.name for p in out.glob("*.png")) == sorted(data["meta"]["plots"])
    csv_names = [line.split(",")[0] for line in (out / "results.csv").read_text().splitlines()[1:]]
    assert csv_names == ["file/a/x.pb"] * 4 + ["file/b/x.pb"] * 4 + ["file/y.pb"] * 4


def test_the_same_file_given_twice_is_measured_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: measured twice under one name (duplicate rows, one plot)."""
    a = _request_file(tmp_path / "a" / "x.pb", "logs", 1)
    out = tmp_path / "out"
    same = tmp_path / "a" / ".." / "a" / "x.pb"
    assert _bench([str(a), str(same), str(a), *OFF, "--out", str(out)], capsys) == (0, "")
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [r["dataset"] for r in rows] == ["file/x.pb"] * 4


def test_inputs_whose_plots_would_share_a_file_are_refused_up_front(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """x and x.json in one directory have distinct names (file/x, file/x.json) but the plot file name
    drops .json: the second plot would overwrite the first. Refused before measuring, naming both."""
    proto = _request_file(tmp_path / "d" / "x", "logs", 1)
    as_json = tmp_path / "d" / "x.json"
    as_json.write_bytes((DATA / "otlp-examples" / "logs.json").read_bytes())
    out = tmp_path / "out"
    assert _bench([str(proto), str(as_json), *OFF, "--out", str(out)], capsys) == (
        2, f"adaptive-arrow bench: {proto} and {as_json} would share the plot compression-file-x.png "
           "(as inputs file/x and file/x.json); rename or copy one of them\n")
    assert not out.exists()
    # in different directories the names grow until the plots differ too
    elsewhere = tmp_path / "e" / "x.json"
    elsewhere.parent.mkdir()
    as_json.rename(elsewhere)
    assert _bench([str(proto), str(elsewhere), *OFF, "--out", str(out)], capsys) == (0, "")
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["plots"] == ["compression-file-d-x.png", "compression-file-e-x.png"]
    assert [r["dataset"] for r in data["results"][::4]] == ["file/d/x", "file/e/x.json"]


@pytest.mark.parametrize(("paths", "names"), [
    (["x.pb"], ["file/x.pb"]),
    (["a/x.pb", "b/x.pb", "b/y.pb"], ["file/a/x.pb", "file/b/x.pb", "file/y.pb"]),
    (["a/c/x.pb", "b/c/x.pb", "b/d/x.pb"], ["file/a/c/x.pb", "file/b/c/x.pb", "file/d/x.pb"]),
    (["c/x.pb", "x.pb"], ["file/c/x.pb", "file/r/x.pb"]),
    (["a/x.pb", "./a/x.pb", "b/../a/x.pb"], ["file/x.pb"]),
])
def test_input_names_are_the_shortest_distinguishing_path_ends(tmp_path: Path, paths: list[str],
                                                               names: list[str]) -> None:
    from adaptive_arrow.commands.bench import input_names

    root = tmp_path / "r"
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).touch()
    assert [name for _, name in input_names([root / p for p in paths])] == names


def test_help_says_how_inputs_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(a/x.json and b/x.json: file/a/x.json and file/b/x.json); a file given twice is measured once" in text


def test_an_input_without_records_or_signal_does_not_ask_for_a_missing_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: '... an empty request holds no records to tell its signal by; pass --signal', an option
    bench does not have; and for an OTLP/JSON request of two signals '...; pass signal=', a Python
    keyword."""
    empty, both = tmp_path / "empty.json", tmp_path / "both.json"
    empty.write_text("{}\n")
    both.write_text('{"resourceLogs": [], "resourceSpans": []}\n')
    out = ["--out", str(tmp_path / "o")]
    assert _bench([str(empty), *OFF, *out], capsys) == (
        2, f"adaptive-arrow bench: {empty} (read as OTLP/JSON): an empty request holds no records to tell its signal "
           "by; nothing to measure\n")
    assert _bench([str(both), *OFF, *out], capsys) == (
        2, f"adaptive-arrow bench: {both} (read as OTLP/JSON): the request holds several signals (resourceLogs, "
           "resourceSpans); an OTLP request holds one\n")
