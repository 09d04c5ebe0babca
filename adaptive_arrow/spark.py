"""The adaptive encoder inside Spark: one stream-mode ``Encoder`` per partition (``mapInArrow``).

Spark reads a Python task's output by a schema fixed per DataFrame and rejects unsigned, fixed-size
binary and dictionary columns, so adaptive records cannot leave a task as Spark columns. Each input
row (one serialized OTLP export request, as a Kafka ``value`` or a ``binaryFile`` ``content``
column carries it; or, in a string column, one OTLP/JSON request, as ``spark.read.text`` reads the
lines the OpenTelemetry Collector's ``file`` exporter writes) therefore leaves as one OTAP envelope (``BatchArrowRecords`` bytes) in a binary
column. Envelopes of one task form one OTAP stream: schemas and dictionaries travel once, so the
reader must decode a stream's envelopes in ``sequence`` order with one ``Decoder`` per ``stream``
(the task attempt id, unique within a Spark application; a retried task starts a new stream).

pyspark is imported lazily: ``import adaptive_arrow`` never needs it. Install the ``spark`` extra.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pyarrow as pa

from otap_model import (
    OtapBundle,
    OtapModelError,
    PayloadType,
    Signal,
    from_otlp,
    from_otlp_json,
    signal_of,
    to_otlp,
)
from quiver_store import QuiverStore, StoreConfig, core_numbers, core_path, with_progress

from .config import EncoderConfig
from .decoder import Decoder
from .encoder import Encoder
from .envelope import BatchArrowRecords
from .errors import AdaptiveArrowError, SparkJobError
from .spark_types import spark_schema, to_spark_types

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ErrorPolicy = Literal["raise", "record"]
T = TypeVar("T")

# encode_otlp's default: envelope bodies zstd-compressed. Every envelope byte crosses from the Python
# worker into the JVM (measured on 32 logs requests: the job cost the JVM 1.24 s of CPU with 40 MB of
# uncompressed envelopes, 0.42 s with zstd ones, for 0.1 s more worker CPU), and is usually written
# out from there.
SPARK_ENCODER_CONFIG = EncoderConfig(ipc_compression="zstd")

# Columns every encoded row carries, after the caller's `keep` columns (Arrow types Spark accepts).
ENCODED_FIELDS = (
    pa.field("partition", pa.int32(), nullable=False),  # Spark partition of the input row
    pa.field("stream", pa.int64(), nullable=False),  # task attempt id: one OTAP stream per task attempt
    pa.field("sequence", pa.int32(), nullable=False),  # envelope position in its stream, from 0
    pa.field("records", pa.int64(), nullable=False),  # root records (log records, spans, metrics)
    pa.field("otlp_bytes", pa.int64(), nullable=False),  # size of the input request (JSON: its UTF-8 bytes)
    pa.field("otap", pa.binary()),  # the envelope; null when the row was rejected
    pa.field("error", pa.string()),  # why the row was rejected (errors="record"), else null
)
STORED_FIELDS = (
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("store", pa.string(), nullable=False),  # the partition's Quiver store directory
    pa.field("bundles", pa.int64(), nullable=False),  # bundles ingested (durable once the task ended)
    pa.field("records", pa.int64(), nullable=False),
    pa.field("otlp_bytes", pa.int64(), nullable=False),
    pa.field("empty", pa.int64(), nullable=False),  # requests without records: valid, nothing to store
    pa.field("rejected", pa.int64(), nullable=False),  # rows rejected (errors="record")
    pa.field("errors", pa.list_(pa.string())),  # why, one message per rejected row
    pa.field("skipped", pa.int64(), nullable=False),  # rows an earlier run of the same job_id got through (up to its last stored row)
)
DECODED_FIELDS = (
    pa.field("stream", pa.int64(), nullable=False),
    pa.field("sequence", pa.int32(), nullable=False),
    pa.field("otlp", pa.binary(), nullable=False),
)

# Settings that matter for mapInArrow jobs (reference/python-stack-notes.md section 2.2).
SESSION_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.validateSchema.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
}


def spark_session(master: str = "local[2]", app_name: str = "adaptive-arrow", **conf: str) -> SparkSession:
    """A SparkSession set up for this package: workers run this interpreter (so they import the
    same pyarrow and adaptive_arrow), Arrow output is validated against the declared schema, and
    in local mode shuffles use as many partitions as local cores. ``conf`` overrides any setting.
    SparkJobError for a master Spark refuses (check_master), a standalone master nobody answers
    at (check_standalone_master), or when Spark does not start."""
    check_master(master)
    check_standalone_master(master)
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkJobError("pyspark is not installed; install the project's 'spark' extra") from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = dict(SESSION_DEFAULTS)
    cores = local_cores(master)
    if cores is not None:
        settings.update({"spark.sql.shuffle.partitions": str(cores), "spark.default.parallelism": str(cores)})
    settings.update(conf)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except (PySparkException, Py4JError) as exc:  # the JVM's own report, if any, is on stderr above
        java = getattr(exc, "java_exception", None)  # Py4JJavaError: the Java exception says why
        reason = (str(java) if java is not None else str(exc)).strip().splitlines()[0]
        raise SparkJobError(f"master {master!r}: Spark did not start: {reason}") from exc


def check_master(master: str) -> None:
    """SparkJobError for a master Spark would refuse only after starting a JVM (seconds, and a Java
    stack trace): spark-submit takes yarn and masters starting with spark, k8s or local, and of the
    local ones local, local[N], local[N,F], local[*] and local-cluster[...] (N >= 1)."""
    if not (master == "yarn" or master.startswith(("spark", "k8s", "local"))):
        raise SparkJobError(f"master {master!r}: expected local, local[N], local[*], yarn, spark://HOST:PORT or k8s://URL")
    if master.startswith("local") and not master.startswith("local-cluster[") and local_cores(master) is None:
        raise SparkJobError(f"master {master!r}: expected local, local[N] or local[*]")


STANDALONE_PORT = 7077  # spark-submit's default for spark://HOST


def check_standalone_master(master: str, timeout: float = 5.0) -> None:
    """For ``spark://HOST[:PORT][,HOST[:PORT]...]``: SparkJobError unless one of the listed masters
    accepts a TCP connection. Spark itself retries registering for about a minute, printing a
    screen of JVM log, and then reports only that its context was stopped."""
    if not master.startswith("spark://"):
        return
    failures = []
    for address in (a.strip() for a in master[len("spark://") :].split(",")):
        host, colon, port = address.rpartition(":")
        if not colon or host.endswith(":") or "]" in port:  # no port, or a bare IPv6 address
            host, port = address, str(STANDALONE_PORT)
        if not port.isdigit():
            failures.append(f"{address}: port {port!r} is not a number")
            continue
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or exc}")
    raise SparkJobError(
        f"master {master!r}: no standalone master accepts connections ({'; '.join(failures)}); start one "
        "(Spark's sbin/start-master.sh) or choose another master, e.g. local[2]"
    )


def local_cores(master: str) -> int | None:
    """The task slots of a ``local``, ``local[N]``, ``local[*]`` or ``local[N, F]`` master; None for
    any other master (a cluster decides its own parallelism)."""
    if master == "local":
        return 1
    if not (master.startswith("local[") and master.endswith("]")):
        return None
    slots = master[len("local[") : -1].split(",")[0].strip()
    if slots == "*":
        return os.cpu_count() or 1
    if not slots.isdigit() or int(slots) < 1:  # Spark: "Asked to run locally with 0 threads"
        raise SparkJobError(f"master {master!r}: expected local[N] or local[*] (N >= 1 task slots)")
    return int(slots)


def encode_otlp(
    df: DataFrame,
    signal: Signal | str,
    *,
    column: str = "value",
    keep: Sequence[str] = (),
    config: EncoderConfig | None = None,
    errors: ErrorPolicy = "raise",
) -> DataFrame:
    """Encode each row's OTLP export request into one OTAP envelope: ``column`` is binary (OTLP
    protobuf) or string (OTLP/JSON, one request per row, as ``spark.read.text`` gives the lines of
    the Collector's file exporter output).

    Returns a DataFrame with the ``keep`` columns of the input, then ``ENCODED_FIELDS``. Each task
    keeps one stream-mode encoder (``config``, by default ``SPARK_ENCODER_CONFIG``: zstd IPC
    compression); its rows come out in input order, numbered by ``sequence``.
    ``errors="raise"`` fails the job on the first bad request (the message names partition, row
    and the problem); ``errors="record"`` emits the row with a null envelope and the reason in
    ``error``, and the stream goes on (a rejected request leaves the encoder unchanged).
    """
    sig = _signal(signal)
    _check_options(config, errors)
    kept = _keep_names(keep, "encode_otlp")
    names = _check_columns(df, column, kept, "encode_otlp")
    _check_clashes(kept, ENCODED_FIELDS, "encode_otlp")
    schema = _output_schema(df, kept, ENCODED_FIELDS)
    task = _EncodeTask(sig, names[column], [names[k] for k in kept], config or SPARK_ENCODER_CONFIG, errors)
    return df.select(*dict.fromkeys([*kept, column])).mapInArrow(task, schema)


def ingest_otlp(
    df: DataFrame,
    signal: Signal | str,
    root: str | os.PathLike[str],
    *,
    column: str = "value",
    config: EncoderConfig | None = None,
    store_config: StoreConfig | None = None,
    errors: ErrorPolicy = "raise",
    job_id: str | None = None,
) -> DataFrame:
    """Encode each partition's OTLP requests (``column`` as in encode_otlp: protobuf or OTLP/JSON)
    and ingest them, inside the task, into that
    partition's own Quiver store ``quiver_store.core_path(root, partition)``, so no envelope
    travels back through Spark (the bulk path; the driver only gets one ``STORED_FIELDS`` row per
    partition). Every store must be on a file system the tasks can write and readers can reach
    (local mode, or a shared mount).

    Each task opens its store, ingests one ``encode_records`` bundle per request (acknowledged
    once durable under ``store_config``), closes it (sealing the open segment) and then reports.
    A request without records (valid OTLP, such as an empty export) stores nothing and is counted
    in ``empty``. Store errors (I/O, a full store) fail the job whatever ``errors`` says.
    With ``job_id`` (a name that stays the same when the job runs again over the same input),
    every request is stored exactly once across task retries and runs of the job: each bundle
    carries its partition's progress (``quiver_store.progress``: rows consumed, durable in the same
    WAL entry as the data), and a task first asks its store how far an earlier attempt got and skips
    those rows (counted in ``skipped``). The rows of a partition must come in the same order every
    time (a file or table source, not a random shuffle). Without ``job_id`` a retried task or a
    second run ingests its partition again (at-least-once). Turn speculative execution off either
    way: two attempts cannot hold one store's lock. The result is lazy and every action on it
    ingests again (with ``job_id``, an action after a complete one stores nothing and counts every
    row as skipped): run one action (``collect()``) on it. ``errors`` works as in ``encode_otlp``.
    """
    sig = _signal(signal)
    _check_options(config, errors)
    if store_config is not None and not isinstance(store_config, StoreConfig):
        raise SparkJobError(f"store_config must be a quiver_store StoreConfig, got {type(store_config).__name__}")
    _check_columns(df, column, (), "ingest_otlp")
    if not isinstance(root, str | os.PathLike) or not os.fspath(root):
        raise SparkJobError(f"ingest_otlp: root must be a non-empty str or os.PathLike directory, got {root!r}")
    if os.path.lexists(root) and not os.path.isdir(root):  # seen from the driver; tasks would each fail on it
        raise SparkJobError(f"ingest_otlp: root {os.fsdecode(root)}: exists and is not a directory; name the directory that holds the stores")
    if job_id is not None and (not isinstance(job_id, str) or not job_id):
        raise SparkJobError(f"ingest_otlp: job_id must be a non-empty string or None, got {job_id!r}")
    task = _IngestTask(sig, os.fsdecode(root), config or EncoderConfig(), store_config, errors, job_id)
    return df.select(column).mapInArrow(task, _output_schema(df, [], STORED_FIELDS))


def decode_otap(df: DataFrame, signal: Signal | str | None = None, *, keep: Sequence[str] = ()) -> DataFrame:
    """Decode the envelopes of ``encode_otlp`` back to OTLP export requests: the ``keep`` columns,
    then ``DECODED_FIELDS``.

    The rows of each stream are brought into one partition in ``sequence`` order first, since an
    envelope can only be decoded after the ones before it. Rows with a null envelope are skipped.
    ``keep`` may name ``stream`` and ``sequence`` (always in the output) but not ``otlp``.
    """
    sig = _signal(signal) if signal is not None else None
    kept = [k for k in _keep_names(keep, "decode_otap") if k not in ("stream", "sequence")]
    _check_columns(df, "otap", ("stream", "sequence", *kept), "decode_otap", requests=False)
    _check_clashes(kept, DECODED_FIELDS, "decode_otap")
    return _in_stream_order(df, kept).mapInArrow(_DecodeTask(sig, len(kept)), _output_schema(df, kept, DECODED_FIELDS))


def decode_table(df: DataFrame, payload_type: PayloadType | int | str, *, keep: Sequence[str] = ()) -> DataFrame:
    """One OTAP table of the envelopes of ``encode_otlp`` as Spark rows, for queries over the
    records themselves: the ``keep`` columns, ``stream``, ``sequence``, then the columns of
    ``spark_types.spark_schema(payload_type)`` (the reference columns in types Spark reads, values
    unchanged: ids widen to signed types, fixed-size ids become binary, timestamps int64
    nanoseconds). One row per row of that table in every envelope; an envelope without it adds none.

    Ids (``id``, ``parent_id``, ``resource.id``, ``scope.id``) are unique within one envelope
    only, so join tables on ``(stream, sequence, id)``. As in decode_otap, each stream is decoded
    in one partition in ``sequence`` order and rows with a null envelope are skipped.
    """
    pt = _payload_type(payload_type)
    kept = [k for k in _keep_names(keep, "decode_table") if k not in ("stream", "sequence")]
    _check_columns(df, "otap", ("stream", "sequence", *kept), "decode_table", requests=False)
    fields = (*DECODED_FIELDS[:2], *spark_schema(pt))
    _check_clashes(kept, fields, "decode_table")
    return _in_stream_order(df, kept).mapInArrow(_TableTask(pt, len(kept)), _output_schema(df, kept, fields))


STORE_TABLE_FIELDS = (
    pa.field("core", pa.int32(), nullable=False),  # N of the store root/core_N
    pa.field("bundle", pa.int64(), nullable=False),  # position of the bundle in its store, from 0
    pa.field("segment_seq", pa.int64()),  # where the bundle is; null for one only the WAL holds yet
    pa.field("bundle_index", pa.int32()),
)


def store_table(spark: SparkSession, root: str | os.PathLike[str], payload_type: PayloadType | int | str) -> DataFrame:
    """One OTAP table of every bundle in the stores ``ingest_otlp`` wrote under ``root``
    (``core_0/``, ``core_1/``, ...), as Spark rows: ``STORE_TABLE_FIELDS``, then the columns of
    ``spark_types.spark_schema(payload_type)``, as decode_table gives them.

    One task per store reads it without opening it (``quiver_store.offline``: no lock, nothing
    written, so a store being written is read as far as it is durable): its finalized segments in
    order, then the acknowledged bundles only its WAL holds. ``bundle`` numbers them as
    ``adaptive-arrow decode STORE`` numbers its files; ids are unique within one bundle, so tables
    join on ``(core, bundle, id)``. Bundles of another signal (a store may hold several) add no
    rows. A damaged segment or WAL fails the job naming the file and offset rather than return
    part of a store.
    """
    pt = _payload_type(payload_type, "store_table")
    if not isinstance(root, str | os.PathLike) or not os.fspath(root):
        raise SparkJobError(f"store_table: root must be a non-empty str or os.PathLike directory, got {root!r}")
    base = os.fsdecode(root)
    cores = core_numbers(base)
    if not cores:
        raise SparkJobError(f"store_table: {base} holds no per-partition stores (core_0/, core_1/, ... as ingest_otlp writes them)")
    paths = pa.table({"core": pa.array(cores, pa.int32()), "path": [core_path(base, c) for c in cores]})
    stores = spark.createDataFrame(paths).repartition(len(cores), "core")
    fields = (*STORE_TABLE_FIELDS, *spark_schema(pt))
    return stores.mapInArrow(_StoreTableTask(pt), _output_schema(stores, [], fields))


def _payload_type(value: PayloadType | int | str, where: str = "decode_table") -> PayloadType:
    """A payload type with a reference schema, from the enum, its id or its name."""
    try:
        pt = PayloadType[value.upper()] if isinstance(value, str) else PayloadType(value)
        spark_schema(pt)
    except (KeyError, ValueError, OtapModelError):
        known = ", ".join(p.name for p in PayloadType if p.value and p is not PayloadType.MULTIVARIATE_METRICS)
        raise SparkJobError(f"{where}: {value!r} is not a payload type with a table to decode; expected one of {known}") from None
    return pt


def _in_stream_order(df: DataFrame, kept: Sequence[str]) -> DataFrame:
    """The (kept..., stream, sequence, otap) rows with an envelope, each stream in one partition in order."""
    return (
        df.where("otap IS NOT NULL")
        .select(*kept, "stream", "sequence", "otap")
        .repartition("stream")
        .sortWithinPartitions("stream", "sequence")
    )


@dataclass(frozen=True)
class EncodedRow:
    """One row of ``encode_otlp`` output, as the driver sees it."""

    partition: int
    stream: int
    sequence: int
    records: int
    otlp_bytes: int
    otap: bytes | None
    error: str | None
    kept: dict[str, Any]


def collect_streams(df: DataFrame) -> Iterator[EncodedRow]:
    """The rows of ``encode_otlp`` output on the driver, stream by stream in ``sequence`` order,
    ready for one ``Decoder`` (or ``Decoder.read_records``) per stream."""
    fields = {f.name for f in ENCODED_FIELDS}
    for row in df.orderBy("stream", "sequence").toLocalIterator():
        values = row.asDict()
        kept = {k: v for k, v in values.items() if k not in fields}
        yield EncodedRow(
            values["partition"], values["stream"], values["sequence"], values["records"],
            values["otlp_bytes"], values["otap"], values["error"], kept,
        )


def stream_decoders(
    rows: Iterable[EncodedRow], signal: Signal | str | None = None
) -> Iterator[tuple[EncodedRow, Decoder]]:
    """Pair each row with the decoder of its stream (a new one whenever the stream changes).
    ``signal`` pins the decoders' signal, which an envelope of a request without records (the
    first of its stream, or after rejected rows) needs in order to decode."""
    sig = _signal(signal) if signal is not None else None
    decoder, current = Decoder(sig), None
    for row in rows:
        if row.stream != current:
            decoder, current = Decoder(sig), row.stream
        yield row, decoder


# -- task side ------------------------------------------------------------------------------------
def _signal(signal: Signal | str) -> Signal:
    try:
        return Signal(signal)
    except ValueError:
        raise SparkJobError(f"unknown signal {signal!r}; expected one of {[s.value for s in Signal]}") from None


def _check_options(config: EncoderConfig | None, errors: str) -> None:
    if config is not None and not isinstance(config, EncoderConfig):
        raise SparkJobError(f"config must be an EncoderConfig, got {type(config).__name__}")
    if errors not in ("raise", "record"):
        raise SparkJobError(f"errors must be 'raise' or 'record', got {errors!r}")


def _keep_names(keep: Sequence[str], where: str) -> list[str]:
    """``keep`` as a list of distinct names; a bare string would be read as its characters."""
    if isinstance(keep, str) or not all(isinstance(name, str) for name in keep):
        raise SparkJobError(f"{where}: keep must be a list of column names, got {keep!r}" +
                            (f"; for one column pass keep=[{keep!r}]" if isinstance(keep, str) else ""))
    return list(dict.fromkeys(keep))


def _check_columns(df: DataFrame, column: str, keep: Sequence[str], where: str, *, requests: bool = True) -> dict[str, int]:
    """Column positions by name, after checking that ``keep`` exists and ``column`` is binary or,
    for OTLP ``requests`` (not envelopes), string (OTLP/JSON)."""
    from pyspark.sql.types import BinaryType, StringType

    fields = {f.name: f for f in df.schema.fields}
    if column not in fields:
        raise SparkJobError(f"{where}: no column {column!r}; the DataFrame has {sorted(fields)}")
    if not isinstance(fields[column].dataType, BinaryType | StringType if requests else BinaryType):
        expected = ("binary (serialized OTLP export requests) or string (OTLP/JSON export requests)" if requests
                    else "binary (OTAP envelopes)")
        raise SparkJobError(f"{where}: column {column!r} is {fields[column].dataType.simpleString()}, expected {expected}")
    for name in keep:
        if name not in fields:
            raise SparkJobError(f"{where}: keep names {name!r}, which is not a column of {sorted(fields)}")
    selected = list(dict.fromkeys([*keep, column]))
    return {name: i for i, name in enumerate(selected)}


def _check_clashes(kept: Sequence[str], fields: Sequence[pa.Field], where: str) -> None:
    """Refuse on the driver ``keep`` names the output repeats: Spark would fail the job in the JVM."""
    clashes = sorted(set(kept) & {f.name for f in fields})
    if clashes:
        raise SparkJobError(f"{where}: keep names {clashes}, which clash with output columns of the same names")


def _output_schema(df: DataFrame, kept: Sequence[str], fields: Sequence[pa.Field]) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    ours = from_arrow_schema(pa.schema(list(fields)))
    return StructType([df.schema[name] for name in kept] + list(ours.fields))


class _EncodeTask:
    """The function ``mapInArrow`` runs per partition (pickled to the workers)."""

    def __init__(self, signal: Signal, column: int, keep: list[int], config: EncoderConfig, errors: ErrorPolicy):
        self.signal, self.column, self.keep, self.config, self.errors = signal, column, keep, config, errors

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        stream = context.taskAttemptId() if context else 0
        encoder = Encoder(self.signal, self.config)
        sequence = 0
        for batch in batches:
            rows = []  # one tuple of ENCODED_FIELDS values per input row
            for value in batch.column(self.column).to_pylist():
                otap, error, records = self._encode(encoder, value, f"partition {partition}, row {sequence}")
                rows.append((partition, stream, sequence, records, _size(value), otap, error))
                sequence += 1
            values = list(zip(*rows, strict=True)) if rows else [()] * len(ENCODED_FIELDS)
            columns = [batch.column(i) for i in self.keep]
            columns += [pa.array(column, f.type) for column, f in zip(values, ENCODED_FIELDS, strict=True)]
            schema = pa.schema([batch.schema.field(i) for i in self.keep] + list(ENCODED_FIELDS))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    def _encode(self, encoder: Encoder, value: bytes | str | None, where: str) -> tuple[bytes | None, str | None, int]:
        bundle, error = _convert(value, self.signal, self.errors, where)
        if bundle is None:
            return None, error, 0
        try:
            return encoder.encode(bundle).to_bytes(), None, bundle.num_rows
        except AdaptiveArrowError as exc:
            return None, _reject(f"{where}: {exc}", self.errors), 0


def _convert(value: bytes | str | None, signal: Signal, errors: ErrorPolicy, where: str) -> tuple[OtapBundle | None, str | None]:
    """The request (protobuf bytes, or OTLP/JSON text from a string column) as plain tables, or
    (with errors="record") why it could not be converted."""
    if value is None:
        return None, _reject(f"{where}: the request is null", errors)
    try:
        return (from_otlp_json(value, signal) if isinstance(value, str) else from_otlp(value, signal)), None
    except OtapModelError as exc:
        return None, _reject(f"{where}: {exc}", errors)


def _size(value: bytes | str | None) -> int:
    """Bytes of an input request: protobuf as it is, OTLP/JSON as UTF-8."""
    if value is None:
        return 0
    return len(value.encode()) if isinstance(value, str) else len(value)


def _reject(message: str, errors: ErrorPolicy) -> str:
    if errors == "raise":
        raise SparkJobError(message)
    return message


class _IngestTask:
    """Encodes a partition into records and ingests them into the partition's own store; with a
    job id, each bundle carries the partition's progress and rows stored before are skipped."""

    def __init__(
        self, signal: Signal, root: str, config: EncoderConfig, store_config: StoreConfig | None, errors: ErrorPolicy,
        job_id: str | None = None,
    ):
        self.signal, self.root, self.config, self.store_config, self.errors = signal, root, config, store_config, errors
        self.job_id = job_id

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        from .store_layout import OTAP_LAYOUT

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        path = core_path(self.root, partition)
        producer = None if self.job_id is None else f"{self.job_id}/partition-{partition}"
        encoder = Encoder(self.signal, self.config)
        bundles = records = otlp_bytes = empty = row = 0
        rejected: list[str] = []
        with QuiverStore.open(path, self.store_config, layout=OTAP_LAYOUT) as store:
            done = 0 if producer is None else store.committed_offset(producer)
            for batch in batches:
                first = min(max(done - row, 0), batch.num_rows)  # rows of this batch stored before
                row += first
                for value in batch.column(0).slice(first).to_pylist():
                    where = f"partition {partition}, row {row}"
                    row += 1
                    bundle, error = _convert(value, self.signal, self.errors, where)
                    if bundle is not None and bundle.num_rows == 0:
                        empty += 1  # a RecordBundle without slots: nothing to store
                    elif bundle is not None:
                        try:
                            stored = encoder.encode_records(bundle)
                        except AdaptiveArrowError as exc:
                            error = _reject(f"{where}: {exc}", self.errors)
                        else:
                            store.ingest(stored if producer is None else with_progress(stored, producer, row))
                            bundles, records, otlp_bytes = bundles + 1, records + bundle.num_rows, otlp_bytes + _size(value)
                    if error is not None:
                        rejected.append(error)
            if done > row:
                raise SparkJobError(
                    f"partition {partition}: store {path} holds {done} rows of job_id {self.job_id!r} for this partition, "
                    f"but the partition has only {row}: the input or its partitioning changed since that run. Give this "
                    "input a new job_id"
                )
        summary = (partition, path, bundles, records, otlp_bytes, empty, len(rejected), rejected, done)
        yield pa.RecordBatch.from_arrays(
            [pa.array([v], f.type) for v, f in zip(summary, STORED_FIELDS, strict=True)],
            schema=pa.schema(list(STORED_FIELDS)),
        )


class _StreamDecoders:
    """One ``Decoder`` per stream, over rows that come stream by stream in ``sequence`` order (as
    _in_stream_order puts them), kept across a task's batches."""

    def __init__(self, signal: Signal | None, where: str = "") -> None:
        self.signal, self.where = signal, where
        self.stream: int | None = None
        self.decoder = Decoder(signal)

    def rows(self, batch: pa.RecordBatch, kept: int, convert: Callable[[OtapBundle | None], T]) -> Iterator[tuple[int, T]]:
        """(row, convert(bundle)) for each (kept..., stream, sequence, otap) row; the bundle is None
        for a request without records whose stream's signal is not known yet (its envelope carries
        no table to tell it). SparkJobError naming stream and sequence when a row fails."""
        streams, sequences = batch.column(kept).to_pylist(), batch.column(kept + 1).to_pylist()
        for row, (stream, sequence, otap) in enumerate(zip(streams, sequences, batch.column(kept + 2).to_pylist(), strict=True)):
            if stream != self.stream:
                self.stream, self.decoder = stream, Decoder(self.signal)
            try:
                bar = BatchArrowRecords.from_bytes(otap)
                bundle = self.decoder.decode(bar) if bar.payloads or self.decoder.signal is not None else None
                yield row, convert(bundle)
            except (OtapModelError, AdaptiveArrowError) as exc:
                raise SparkJobError(f"{self.where}stream {stream}, sequence {sequence}: {exc}") from None


class _DecodeTask:
    """Decodes ordered (kept..., stream, sequence, otap) rows to OTLP request bytes."""

    def __init__(self, signal: Signal | None, kept: int):
        self.signal, self.kept = signal, kept

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoders = _StreamDecoders(self.signal)
        for batch in batches:
            # an export request without records is zero bytes whatever its signal
            otlp = [data for _, data in decoders.rows(batch, self.kept, _otlp_bytes)]
            columns = [*batch.columns[: self.kept + 2], pa.array(otlp, pa.binary())]
            schema = pa.schema([*batch.schema][: self.kept] + list(DECODED_FIELDS))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _otlp_bytes(bundle: OtapBundle | None) -> bytes:
    return b"" if bundle is None else to_otlp(bundle).SerializeToString()


class _TableTask:
    """Decodes ordered (kept..., stream, sequence, otap) rows and emits the rows of one payload
    type's table in Spark's types, each after its envelope's kept, stream and sequence values."""

    def __init__(self, payload_type: PayloadType, kept: int):
        self.payload_type, self.kept = payload_type, kept

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoders = _StreamDecoders(signal_of(self.payload_type), f"decode_table({self.payload_type.name}): ")
        spark_rows = functools.partial(_spark_rows, payload_type=self.payload_type)
        for batch in batches:
            schema = pa.schema([*batch.schema][: self.kept + 2] + list(spark_schema(self.payload_type)))
            for row, rows in decoders.rows(batch, self.kept, spark_rows):
                if rows is not None:
                    prefix = [pa.repeat(column[row], rows.num_rows) for column in batch.columns[: self.kept + 2]]
                    yield pa.RecordBatch.from_arrays([*prefix, *rows.columns], schema=schema)


def _spark_rows(bundle: OtapBundle | None, payload_type: PayloadType) -> pa.RecordBatch | None:
    """The bundle's table of `payload_type` in Spark's types; None when it has no rows of it."""
    table = None if bundle is None else bundle.get(payload_type)
    return None if table is None or table.num_rows == 0 else to_spark_types(table, payload_type)


class _StoreTableTask:
    """Reads the stores of its (core, path) rows offline and emits one payload type's rows."""

    def __init__(self, payload_type: PayloadType):
        self.payload_type = payload_type

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from quiver_store import PROGRESS_SLOT, QuiverError
        from quiver_store.offline import StoredBundles

        schema = pa.schema([*STORE_TABLE_FIELDS, *spark_schema(self.payload_type)])
        decoder = Decoder()
        for batch in batches:
            for core, path in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                where = f"store_table({self.payload_type.name}): store {path}"
                try:
                    stored = StoredBundles(path)
                    for number, item in enumerate(stored):
                        if set(item.bundle.slots) <= {PROGRESS_SLOT}:
                            continue  # only a producer-progress record: input without records
                        rows = _spark_rows(decoder.decode_records(item.bundle), self.payload_type)
                        if rows is None:
                            continue
                        prefix = [pa.repeat(pa.scalar(value, f.type), rows.num_rows) for value, f in
                                  zip((core, number, item.segment_seq, item.bundle_index), STORE_TABLE_FIELDS, strict=True)]
                        yield pa.RecordBatch.from_arrays([*prefix, *rows.columns], schema=schema)
                except (QuiverError, OtapModelError, AdaptiveArrowError) as exc:
                    raise SparkJobError(f"{where}: {exc}") from None
                damage = stored.wal_error or stored.wal_damage
                if damage is not None:
                    raise SparkJobError(f"{where}: its WAL {'could not be read' if stored.wal_error else 'is damaged'} ({damage}); "
                                        f"see quiver verify {path}")
