"""Rich rendering of a pipeline run (shared by `make demo` and `adaptive-arrow pipeline`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .pipeline import ZSTD_LEVEL, PipelineResult


def render(result: PipelineResult, console: Console) -> None:
    table = Table(title=f"Generated -> OTAP -> Quiver -> subscriber -> OTLP (zstd level {ZSTD_LEVEL} on both sides)")
    for column in ("signal", "batches", "records", "OTLP", "OTLP+zstd", "OTAP", "OTAP+zstd", "smaller by",
                   "encode rec/s", "ingest bundles/s", "verified"):
        table.add_column(column, justify="left" if column == "signal" else "right")
    for r in result.reports:
        table.add_row(
            r.signal.value,
            f"{r.batches:,}",
            f"{r.records:,}",
            f"{r.otlp_bytes:,}",
            f"{r.otlp_zstd_bytes:,}",
            f"{r.otap_bytes:,}",
            f"{r.otap_zstd_bytes:,}",
            f"{r.ratio:.2f}x" if r.otap_zstd_bytes else "-",
            f"{r.records / r.encode_seconds:,.0f}" if r.encode_seconds else "-",
            f"{r.batches / r.ingest_seconds:,.0f}" if r.ingest_seconds else "-",
            f"{r.verified}/{r.batches}" + ("" if not r.mismatches else f" (mismatch: {r.mismatches[:5]})"),
        )
    console.print(table)
    stats = result.store_stats
    console.print(
        f"store {result.store_path}: {stats.get('segments_written', '?')} segments written, "
        f"{stats.get('segment_bytes_written', 0):,} segment bytes, {stats.get('fsyncs', '?')} fsyncs; "
        f"{stats.get('segments', '?')} segment(s) kept; inspect it with: quiver inspect {result.store_path}"
    )
    console.print("[bold green]every bundle came back equal to its source[/]" if result.ok
                  else "[bold red]some bundles did not come back equal[/]")
