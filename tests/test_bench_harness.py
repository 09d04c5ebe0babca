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


def test_missing_input_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", str(tmp_path / "absent.pb"), "--no-generator", "--no-samples", "--out", str(tmp_path)])
    assert code == 2
    assert "input not found" in capsys.readouterr().out
