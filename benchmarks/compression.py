"""Compression benchmark: OTAP (adaptive Arrow, sorted or not, stream or unary) against OTLP protobuf,
each with and without zstd, the way the OTel Arrow Phase 1 benchmark measured it.

For every input and batch size the input is cut into OTLP export requests of ``batch_size`` root
records (log records, spans; data points for generated metrics, metrics for metric files) and each
request is measured four ways:

* OTLP: the serialized ``Export*ServiceRequest``, and the same bytes zstd-compressed;
* OTAP: ``BatchArrowRecords.to_bytes()`` of the encoded bundle (Arrow IPC body compression off,
  as the Go benchmark ran it), and the same bytes zstd-compressed;

OTAP in stream mode (one ``Encoder`` for all batches of the run: schemas and dictionaries are sent
once) and unary mode (a fresh ``Encoder`` per batch), with ``EncoderConfig(sort=True)`` and
``sort=False``. Every message is compressed on its own, at the same zstd level on both sides
(``ZSTD_LEVEL``, the zstandard package). Reported sizes are means over the batches of a run.

Nothing is estimated: a component the run needs (generator, converter, encoder) that cannot be
imported stops the run with ``MissingComponent`` naming it.
"""

from __future__ import annotations

import csv
import importlib
import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import zstandard

ZSTD_LEVEL = 3
BATCH_SIZES = (10, 100, 500, 1000, 2000, 4000, 5000)
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
MODES = ("stream", "unary")

_LAYOUT = {
    "resource_logs": ("scope_logs", "log_records"),
    "resource_spans": ("scope_spans", "spans"),
    "resource_metrics": ("scope_metrics", "metrics"),
}


class MissingComponent(RuntimeError):
    """A component the benchmark needs is not importable (not built yet, or broken)."""


def component(module: str, name: str) -> Any:
    """``module.name``, or MissingComponent saying which one is missing and why."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise MissingComponent(f"{module}.{name} is not available ({exc}); the benchmark cannot run without it") from None


# ---------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class Dataset:
    """One benchmark input: a name, its signal, and a way to produce requests of a batch size.

    ``batches(batch_size)`` returns serialized OTLP requests; ``whole`` is the number of root
    records a file holds (None for generated data, which has no end).
    """

    name: str
    signal: str
    batches: Callable[[int], list[bytes]]
    whole: int | None = None


def generator_datasets(signals: Sequence[str], profiles: Sequence[str] | None, batches_per_run: Callable[[int], int],
                       seed: int) -> list[Dataset]:
    """Every (signal, profile) the generator offers, or the given profiles only."""
    generate_otlp = component("otap_model", "generate_otlp")
    all_profiles = component("otap_model.generator", "PROFILES")
    out = []
    for signal in signals:
        for name, profile in all_profiles.items():
            if profiles is not None and name not in profiles:
                continue
            if signal not in {s.value for s in profile.signals}:
                continue

            def batches(batch_size: int, signal: str = signal, name: str = name) -> list[bytes]:
                count = batch_size * batches_per_run(batch_size)
                return [r.SerializeToString() for r in
                        generate_otlp(signal, count, batch_size=batch_size, seed=seed, profile=name)]

            out.append(Dataset(f"{signal}/{name}", signal, batches))
    return out


def file_dataset(name: str, request: Any) -> Dataset:
    """A dataset cut out of one OTLP request (a file): batches of ``batch_size`` root records."""
    whole = sum(len(getattr(sx, _LAYOUT[_res_field(request)][1]))
                for rx in getattr(request, _res_field(request))
                for sx in getattr(rx, _LAYOUT[_res_field(request)][0]))
    signal = {"resource_logs": "logs", "resource_spans": "traces", "resource_metrics": "metrics"}[_res_field(request)]
    return Dataset(name, signal, lambda bs: [r.SerializeToString() for r in rebatch(request, bs)], whole)


def zipkin_datasets() -> list[Dataset]:
    """Every Zipkin v2 JSON sample (the two smartthings files are the production traces)."""
    from_zipkin_json = component("otap_model", "from_zipkin_json")
    to_otlp = component("otap_model", "to_otlp")
    return [file_dataset(f"zipkin/{p.name}", to_otlp(from_zipkin_json(p.read_bytes())))
            for p in sorted((DATA_DIR / "zipkin").glob("*.json"))]


def otlp_example_datasets() -> list[Dataset]:
    from_otlp_json = component("otap_model", "from_otlp_json")
    to_otlp = component("otap_model", "to_otlp")
    return [file_dataset(f"otlp-example/{p.name}", to_otlp(from_otlp_json(p.read_bytes())))
            for p in sorted((DATA_DIR / "otlp-examples").glob("*.json"))]


def _res_field(request: Any) -> str:
    return request.DESCRIPTOR.fields[0].name


def rebatch(request: Any, batch_size: int) -> list[Any]:
    """Cut one export request into requests of ``batch_size`` root records each (the last holds the
    rest), keeping every record under a copy of its own resource and scope."""
    res_field = _res_field(request)
    scope_field, items_field = _LAYOUT[res_field]
    out: list[Any] = []
    count = batch_size
    for rx in getattr(request, res_field):
        rx_out = None
        for sx in getattr(rx, scope_field):
            items = getattr(sx, items_field)
            sx_out = None
            start = 0
            while start < len(items):
                if count == batch_size:  # open the next request
                    out.append(type(request)())
                    count, rx_out, sx_out = 0, None, None
                if rx_out is None:
                    rx_out = _copy_without(rx, getattr(out[-1], res_field).add(), scope_field)
                if sx_out is None:
                    sx_out = _copy_without(sx, getattr(rx_out, scope_field).add(), items_field)
                take = min(batch_size - count, len(items) - start)
                getattr(sx_out, items_field).extend(items[start : start + take])
                start += take
                count += take
    return out


def _copy_without(source: Any, target: Any, skip: str) -> Any:
    """Copy every set field of ``source`` but ``skip`` into ``target``; return ``target``."""
    for f, value in source.ListFields():
        if f.name == skip:
            continue
        if f.is_repeated:
            getattr(target, f.name).extend(value)
        elif f.message_type is not None:
            getattr(target, f.name).CopyFrom(value)
        else:
            setattr(target, f.name, value)
    return target


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Result:
    """Mean message sizes (bytes) of one (dataset, batch size, mode, sorted) run."""

    dataset: str
    signal: str
    batch_size: int
    batches: int
    records: int
    mode: str
    sorted: bool
    otlp: float
    otlp_zstd: float
    otap: float
    otap_zstd: float
    ratio: float = field(init=False)
    ratio_zstd: float = field(init=False)

    def __post_init__(self) -> None:
        self.ratio = self.otlp / self.otap if self.otap else float("nan")
        self.ratio_zstd = self.otlp_zstd / self.otap_zstd if self.otap_zstd else float("nan")


def measure(dataset: Dataset, batch_size: int, zstd_level: int = ZSTD_LEVEL,
            sort_orders: Mapping[int, tuple[str, ...]] | None = None, **encoder_options: Any) -> list[Result]:
    """The four OTAP runs (stream/unary x sorted/unsorted) of one dataset at one batch size;
    ``sort_orders`` replaces the transport's default orders in the sorted runs and
    ``encoder_options`` are further ``EncoderConfig`` fields (e.g. ``dictionary_max_distinct_ratio=None``
    to compare an encoder option before/after in one run)."""
    from_otlp = component("otap_model", "from_otlp")
    encoder_cls = component("adaptive_arrow", "Encoder")
    config_cls = component("adaptive_arrow", "EncoderConfig")
    compressor = zstandard.ZstdCompressor(level=zstd_level)
    requests = dataset.batches(batch_size)
    if not requests:
        return []
    bundles = [from_otlp(r) for r in requests]
    records = sum(b.num_rows for b in bundles)
    otlp = statistics.fmean(len(r) for r in requests)
    otlp_zstd = statistics.fmean(len(compressor.compress(r)) for r in requests)
    results = []
    for mode in MODES:
        for sort in (True, False):
            config = config_cls(sort=sort, ipc_compression=None, sort_orders=sort_orders if sort else None,
                                **encoder_options)
            stream = encoder_cls(dataset.signal, config)
            sizes, zsizes = [], []
            for bundle in bundles:
                encoder = stream if mode == "stream" else encoder_cls(dataset.signal, config)
                payload = encoder.encode(bundle).to_bytes()
                sizes.append(len(payload))
                zsizes.append(len(compressor.compress(payload)))
            results.append(Result(dataset.name, dataset.signal, batch_size, len(requests), records, mode, sort,
                                  otlp, otlp_zstd, statistics.fmean(sizes), statistics.fmean(zsizes)))
    return results


def batch_sizes_for(dataset: Dataset, batch_sizes: Iterable[int]) -> list[int]:
    """The batch sizes worth running: for a file, sizes past its length repeat the whole-file run
    and are dropped (the first size that covers the whole file is kept)."""
    out = []
    for bs in sorted(batch_sizes):
        out.append(bs)
        if dataset.whole is not None and bs >= dataset.whole:
            break
    return out


# ---------------------------------------------------------------------------------------------
# Reports


def write_csv(results: Sequence[Result], path: Path) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(results[0])))
        writer.writeheader()
        for r in results:
            writer.writerow(asdict(r))


def write_json(results: Sequence[Result], path: Path, meta: dict[str, Any]) -> None:
    path.write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]}, indent=1))


def plot_name(dataset: str) -> str:
    """The file name of a dataset's plot."""
    return f"compression-{dataset.replace('/', '-').replace('.json', '')}.png"


def plot(results: Sequence[Result], out_dir: Path) -> list[Path]:
    """One PNG per dataset: OTLP+zstd / OTAP+zstd against batch size, a line per (mode, sorted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name in dict.fromkeys(r.dataset for r in results):
        rows = [r for r in results if r.dataset == name]
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for mode in MODES:
            for sort in (True, False):
                line = sorted((r.batch_size, r.ratio_zstd) for r in rows if r.mode == mode and r.sorted == sort)
                if line:
                    ax.plot(*zip(*line), marker="o", linestyle="-" if sort else "--",
                            label=f"{mode}, {'sorted' if sort else 'unsorted'}")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("batch size (root records)")
        ax.set_ylabel("OTLP+zstd / OTAP+zstd (higher is better)")
        ax.set_title(name)
        ax.legend(fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = out_dir / plot_name(name)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# Where the bytes go (python -m benchmarks.compression SIGNAL PROFILE)

FLOOR_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "logs": {"LOGS": ("body.str", "time_unix_nano", "observed_time_unix_nano", "trace_id", "span_id")},
    "traces": {"SPANS": ("span_id", "parent_span_id", "trace_id", "start_time_unix_nano", "duration_time_unix_nano")},
    "metrics": {
        "NUMBER_DATA_POINTS": ("int_value", "double_value"),
        "HISTOGRAM_DATA_POINTS": ("count", "sum", "bucket_counts", "min", "max"),
        "EXP_HISTOGRAM_DATA_POINTS": ("count", "sum", "positive.bucket_counts", "min", "max"),
        "SUMMARY_DATA_POINTS": ("count", "sum"),
    },
}
"""The columns whose content is (close to) random in generated data: ids, nanosecond timestamps,
free-text bodies, measured values."""


def _content(column: Any) -> bytes:
    """The data bytes of a column without offsets or validity: string / binary characters, list
    values, fixed-width values of the non-null slots."""
    import pyarrow as pa

    column = column.drop_null()
    if pa.types.is_list(column.type):
        return _content(column.flatten())
    if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
        return b"".join(column.cast(pa.binary()).to_pylist())
    width = column.type.bit_width // 8
    return column.buffers()[1].to_pybytes()[column.offset * width : (column.offset + len(column)) * width]


def where_bytes_go(signal: str, profile: str, batch_size: int = 5000, seed: int = 1,
                   zstd_level: int = ZSTD_LEVEL) -> dict[str, Any]:
    """One generated batch: OTLP+zstd, OTAP+zstd (unary, sorted), each OTAP payload and column
    compressed alone, and the zstd size of the raw content of ``FLOOR_COLUMNS`` (what any
    encoding that keeps those values verbatim must pay)."""
    import io

    import pyarrow as pa

    generate_otlp = component("otap_model", "generate_otlp")
    from_otlp = component("otap_model", "from_otlp")
    encoder_cls = component("adaptive_arrow", "Encoder")
    payload_type = component("otap_model", "PayloadType")
    get_column = component("adaptive_arrow.transport.columns", "get_column")
    z = zstandard.ZstdCompressor(level=zstd_level)
    request = next(iter(generate_otlp(signal, batch_size, batch_size=batch_size, seed=seed, profile=profile)))
    raw = request.SerializeToString()
    bundle = from_otlp(raw)
    bar = encoder_cls(signal).encode(bundle)
    columns = []
    for payload in bar.payloads:
        table = pa.ipc.open_stream(payload.record).read_all().combine_chunks()
        name = payload_type(payload.type).name
        columns.append((name, "*", len(z.compress(payload.record))))
        for column_field in table.schema:
            leaves = [(column_field.name, table.column(column_field.name).chunk(0))] if table.num_rows else []
            while leaves and pa.types.is_struct(leaves[0][1].type):
                path, struct = leaves.pop(0)
                leaves += [(f"{path}.{f.name}", struct.field(i)) for i, f in enumerate(struct.type)]
            for path, leaf in leaves:
                sink = io.BytesIO()
                one = pa.record_batch([leaf], ["c"])
                with pa.ipc.new_stream(sink, one.schema) as writer:
                    writer.write_batch(one)
                columns.append((name, path, len(z.compress(sink.getvalue()))))
    floor = {}
    for table_name, paths in FLOOR_COLUMNS[signal].items():
        table = bundle.tables.get(payload_type[table_name])
        for path in paths if table is not None else ():
            column = get_column(table, path)
            if column is not None and len(column.drop_null()):
                floor[f"{table_name}.{path}"] = len(z.compress(_content(column)))
    return {"otlp_zstd": len(z.compress(raw)), "otap_zstd": len(z.compress(bar.to_bytes())),
            "columns": sorted(columns, key=lambda c: -c[2]), "floor": floor}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Where the bytes of one generated batch go, OTLP vs OTAP.")
    parser.add_argument("signal")
    parser.add_argument("profile", nargs="?", default="default")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    r = where_bytes_go(args.signal, args.profile, args.batch_size)
    floor = sum(r["floor"].values())
    print(f"{args.signal}/{args.profile} batch {args.batch_size}: OTLP+zstd {r['otlp_zstd']:,}  "
          f"OTAP+zstd (unary, sorted) {r['otap_zstd']:,}  ratio {r['otlp_zstd'] / r['otap_zstd']:.2f}")
    print(f"content floor (raw values of {', '.join(r['floor'])}): {floor:,} bytes "
          f"= {100 * floor / r['otap_zstd']:.0f}% of OTAP+zstd; OTLP+zstd / floor = {r['otlp_zstd'] / floor:.2f}")
    for column, size in r["floor"].items():
        print(f"  floor {column:50} {size:9,}")
    print("OTAP columns, each written alone as an Arrow IPC stream and zstd-compressed ('*': whole payload):")
    for table, path, size in r["columns"][: args.top]:
        print(f"  {table:28} {path:32} {size:9,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
