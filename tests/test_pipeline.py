"""The end-to-end job: generated telemetry goes through the encoder and the store and comes back
through a subscriber equal to its source."""

import re
from pathlib import Path

from adaptive_arrow.cli import main as cli_main
from adaptive_arrow.config import EncoderConfig
from adaptive_arrow.decoder import Decoder
from adaptive_arrow.pipeline import job_store_config, run_pipeline
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import Signal
from quiver_store import QuiverStore


def test_every_signal_comes_back_equal_through_the_store(tmp_path):
    result = run_pipeline(tmp_path / "store", count=600, batch_size=200, seed=7)
    assert [r.signal for r in result.reports] == list(Signal)
    for report in result.reports:
        assert report.batches >= 3
        assert report.delivered == report.batches
        assert report.verified == report.batches, report.mismatches
        assert report.otap_zstd_bytes > 0 and report.otlp_zstd_bytes > 0
    assert result.ok
    # every delivery was acknowledged durably: after a restart nothing is delivered again
    with QuiverStore.open(tmp_path / "store", layout=OTAP_LAYOUT) as store:
        assert store.subscribe("pipeline-verifier").next(timeout=0.5) is None


def test_the_store_keeps_the_runs_acknowledged_bundles(tmp_path):
    """The verifier acks every bundle; the job's store still holds them afterwards (up to
    KEEP_ACKED bytes), so `quiver inspect` / `dump` / `verify` have the run's data to show."""
    result = run_pipeline(tmp_path / "store", count=600, batch_size=200, seed=7)
    assert result.ok and result.store_stats["segments"] == result.store_stats["segments_written"] >= 1
    rows: dict[Signal, int] = dict.fromkeys(Signal, 0)
    with QuiverStore.open(tmp_path / "store", job_store_config(), layout=OTAP_LAYOUT) as store:
        for _, _, bundle in store.bundles():
            decoded = Decoder().decode_records(bundle)
            rows[decoded.signal] += decoded.num_rows
    assert rows == {r.signal: r.records for r in result.reports}


def test_unsorted_encoding_round_trips_too(tmp_path):
    result = run_pipeline(
        tmp_path / "store", signals=[Signal.TRACES], count=300, batch_size=100, seed=3,
        encoder_config=EncoderConfig(sort=False), profile="high-cardinality",
    )
    assert result.ok and result.reports[0].verified == 3


def test_a_second_run_into_the_same_store_verifies_only_its_own_bundles(tmp_path):
    first = run_pipeline(tmp_path / "store", signals=[Signal.LOGS], count=200, batch_size=100, seed=1)
    second = run_pipeline(tmp_path / "store", signals=[Signal.LOGS], count=300, batch_size=100, seed=2)
    assert first.ok and second.ok
    assert second.reports[0].verified == 3


def test_pipeline_command(tmp_path, capsys):
    code = cli_main(["pipeline", "--store", str(tmp_path / "s"), "--signal", "metrics",
                     "--count", "200", "--batch-size", "100"])
    out = capsys.readouterr().out
    assert code == 0
    assert "every bundle came back equal to its source" in out
    assert "metrics" in out


def test_pipeline_command_stores_compressed_segments_when_asked(tmp_path, capsys):
    sizes = {}
    for codec in ("none", "zstd"):
        store = tmp_path / codec
        code = cli_main(["pipeline", "--store", str(store), "--signal", "logs", "--count", "2000", "--batch-size", "1000",
                         "--segment-compression", codec])
        assert code == 0 and "every bundle came back equal to its source" in capsys.readouterr().out
        with QuiverStore.open(store, job_store_config(), layout=OTAP_LAYOUT) as opened:  # keeps the acked segments
            sizes[codec] = sum(s.size_bytes for s in opened.segments())
            assert sum(1 for _ in opened.bundles()) == 2
    assert sizes["zstd"] * 3 < sizes["none"], sizes


def test_a_repeated_signal_runs_once_in_order_of_first_appearance(tmp_path, capsys):
    """Was (fresh-user review 12): `--signal metrics --signal metrics` ran metrics twice and reported
    `verified 10/5`, exit 1."""
    argv = ["pipeline", "--store", str(tmp_path / "s"), "--signal", "metrics", "--signal", "logs", "--signal", "metrics",
            "--count", "200", "--batch-size", "100"]
    code = cli_main(argv)
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, "")
    rows = [line.split("│")[1:] for line in captured.out.splitlines() if line.startswith("│")]
    assert [(cells[0].strip(), cells[-2].strip()) for cells in rows] == [("metrics", "2/2"), ("logs", "2/2")]
    result = run_pipeline(tmp_path / "api", signals=["traces", Signal.TRACES], count=100, batch_size=100)
    assert result.ok and [(r.signal, r.batches, r.verified) for r in result.reports] == [(Signal.TRACES, 1, 1)]


def test_the_guide_quotes_the_store_figures_of_make_demo(tmp_path):
    """docs/user-guide.md's `make demo` transcript said 13 fsyncs when the demo made 12 (fresh-user
    review 12). The demo's arguments, encoded here instead of in Spark: the store does the same."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text()
    quoted = re.search(r"^store demo-output/store: (\d+) segments written, [\d,]+ segment bytes, (\d+) fsyncs; (\d+) segment\(s\) kept;", guide, re.M)
    assert quoted is not None
    stats = run_pipeline(tmp_path / "store").store_stats
    assert (int(quoted[1]), int(quoted[2]), int(quoted[3])) == (stats["segments_written"], stats["fsyncs"], stats["segments"])


def test_a_store_the_disk_refuses_is_an_io_error(tmp_path, capsys, monkeypatch):
    """Was: exit 2, as for a bad argument, when opening --store failed on the disk (EPERM from an
    immutable directory); encode, generate, decode and bench exit 1 for such I/O errors."""
    import errno

    store = tmp_path / "imm" / "st"

    def refused(self, path, *args):
        raise PermissionError(errno.EPERM, "Operation not permitted", path)

    monkeypatch.setattr(QuiverStore, "_init", refused)
    code = cli_main(["pipeline", "--store", str(store), "--signal", "logs", "--count", "10", "--batch-size", "10"])
    assert (code, capsys.readouterr().err) == (
        1, f"adaptive-arrow pipeline: {store}: opening the store failed ([Errno 1] Operation not "
           f"permitted: '{store}'); the store is not open; what it holds is kept, and a later open retries\n")


def test_a_run_without_records_shows_no_ratio(tmp_path, capsys):
    """--count 0 encodes nothing: 'smaller by 0.00x' would claim OTAP grew without bound."""
    assert cli_main(["pipeline", "--store", str(tmp_path / "s"), "--signal", "logs", "--count", "0"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│ logs"))
    assert [cell.strip() for cell in row.split("│")[1:-1]][7:] == ["-", "-", "-", "0/0"]
