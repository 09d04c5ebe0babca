"""The encoder inside Spark: what leaves the tasks decodes back to the input, equals what the same
encoder gives in this process, and bad rows or a bad setup fail with a clear error."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from pyspark.errors import PythonException

import otap_model
from adaptive_arrow import Decoder, Encoder, EncoderConfig
from adaptive_arrow.errors import SparkJobError
from adaptive_arrow.pipeline import run_pipeline
from adaptive_arrow.spark import (
    SPARK_ENCODER_CONFIG,
    collect_streams,
    decode_otap,
    encode_otlp,
    ingest_otlp,
    local_cores,
    stream_decoders,
)
from adaptive_arrow.store_layout import OTAP_LAYOUT
from otap_model import Signal, normalize_otlp, to_otlp
from otap_model.otlp.decode import REQUEST_TYPES
from otap_model.otlp.order import canonical_order
from quiver_store import QuiverStore, core_path


def _requests(signal: str, count: int = 3_000, batch_size: int = 500, seed: int = 5) -> list[bytes]:
    return [r.SerializeToString() for r in otap_model.generate_otlp(signal, count, batch_size=batch_size, seed=seed)]


def _frame(spark, requests: list[bytes | None]):  # type: ignore[no-untyped-def]
    table = pa.table({"request": pa.array(range(len(requests)), pa.int64()), "value": pa.array(requests, pa.binary())})
    return spark.createDataFrame(table).repartition(2, "request").sortWithinPartitions("request")


def _canonical(signal: str, data: bytes):  # type: ignore[no-untyped-def]
    return canonical_order(normalize_otlp(REQUEST_TYPES[Signal(signal)].FromString(data)))


def _stored(stores: list[str]) -> list[bytes]:
    """Every bundle of the stores, as canonical OTLP bytes."""
    out = []
    for path in stores:
        with QuiverStore.open(path, layout=OTAP_LAYOUT) as store:
            store.flush()  # a task Spark killed when the job failed left its bundles in the WAL only
            out += [canonical_order(to_otlp(Decoder().decode_records(b))).SerializeToString(deterministic=True)
                    for _, _, b in store.bundles()]
    return out


@pytest.mark.parametrize("signal", ["logs", "traces", "metrics"])
def test_envelopes_decode_to_the_input_and_equal_the_local_encoder(spark, signal: str) -> None:
    requests = _requests(signal)
    rows = list(collect_streams(encode_otlp(_frame(spark, requests), signal, keep=["request"])))

    assert sorted(r.kept["request"] for r in rows) == list(range(len(requests)))
    streams: dict[int, list] = {}
    for row in rows:
        streams.setdefault(row.stream, []).append(row)
    assert len(streams) == 2  # one OTAP stream per partition
    for stream_rows in streams.values():
        assert [r.sequence for r in stream_rows] == list(range(len(stream_rows)))
        assert [r.kept["request"] for r in stream_rows] == sorted(r.kept["request"] for r in stream_rows)
        # The same encoder in this process, fed the same requests in the same order, gives the same bytes.
        local = Encoder(signal, SPARK_ENCODER_CONFIG)
        for row in stream_rows:
            bundle = otap_model.from_otlp(requests[row.kept["request"]], signal)
            assert local.encode(bundle).to_bytes() == row.otap
            assert (row.records, row.otlp_bytes, row.error) == (bundle.num_rows, len(requests[row.kept["request"]]), None)

    for row, decoder in stream_decoders(rows):
        assert canonical_order(to_otlp(decoder.decode(row.otap))) == _canonical(signal, requests[row.kept["request"]])


def test_decode_otap_in_spark_restores_every_request(spark) -> None:
    requests = _requests("traces", 2_000, 400, seed=9)
    encoded = encode_otlp(_frame(spark, requests), "traces", keep=["request"], config=EncoderConfig(sort=False))
    decoded = decode_otap(encoded, keep=["request"]).collect()

    assert sorted(r.request for r in decoded) == list(range(len(requests)))
    for row in decoded:
        got = canonical_order(REQUEST_TYPES[Signal.TRACES].FromString(row.otlp))
        assert got == _canonical("traces", requests[row.request])


def test_a_bad_request_fails_the_job_naming_partition_and_row(spark) -> None:
    requests: list[bytes | None] = list(_requests("logs", 1_000, 500))
    requests.insert(1, b"\x0a\x05oops!")  # a length-delimited field whose bytes are not a ResourceLogs
    frame = spark.createDataFrame(pa.table({"value": pa.array(requests, pa.binary())}).to_pandas()).coalesce(1)
    with pytest.raises(PythonException) as caught:
        encode_otlp(frame, "logs").collect()
    message = str(caught.value)
    assert "SparkJobError" in message
    assert "partition 0, row 1:" in message


def test_bad_requests_are_recorded_and_the_stream_goes_on(spark) -> None:
    good = _requests("logs", 1_500, 500)
    requests: list[bytes | None] = [good[0], b"\xff\xff\xff", None, good[1], good[2]]
    frame = spark.createDataFrame(pa.table({"value": pa.array(requests, pa.binary())}).to_pandas()).coalesce(1)
    rows = list(collect_streams(encode_otlp(frame, "logs", errors="record")))

    assert [r.otap is None for r in rows] == [False, True, True, False, False]
    assert "partition 0, row 1:" in rows[1].error and rows[1].records == 0
    assert rows[2].error == "partition 0, row 2: the request is null"
    decoder = Decoder()
    decoded = [decoder.decode(r.otap) for r in rows if r.otap is not None]
    for bundle, data in zip(decoded, good, strict=True):
        assert canonical_order(to_otlp(bundle)) == _canonical("logs", data)


def test_otlp_json_lines_read_as_text_encode_and_ingest(spark, tmp_path) -> None:
    """The Collector's file exporter output (one OTLP/JSON request per line) read with
    spark.read.text: a string column, each row encoded like its protobuf request; a bad line is
    named; ingest_otlp stores every request."""
    bundles = list(otap_model.generate("traces", 1_500, batch_size=500, seed=4))
    lines = [otap_model.to_otlp_json(b) for b in bundles]
    (tmp_path / "collector.json").write_text("\n".join([lines[0], '{"resourceSpans": [', *lines[1:]]) + "\n")
    frame = spark.read.text(str(tmp_path / "collector.json")).coalesce(1)
    rows = list(collect_streams(encode_otlp(frame, "traces", errors="record")))

    assert [r.otap is None for r in rows] == [False, True, False, False]
    assert rows[1].error.startswith("partition 0, row 1: invalid JSON: ")
    protobuf = [to_otlp(b).SerializeToString() for b in bundles]
    decoder = Decoder()
    good = [r for r in rows if r.otap is not None]
    assert [r.otlp_bytes for r in good] == [len(line.encode()) for line in lines]
    for row, data in zip(good, protobuf, strict=True):
        assert canonical_order(to_otlp(decoder.decode(row.otap))) == _canonical("traces", data)
    summary = ingest_otlp(frame, "traces", tmp_path / "stores", errors="record").collect()
    assert [(r.bundles, r.rejected) for r in summary] == [(3, 1)]
    assert sorted(_stored([summary[0].store])) == sorted(_canonical("traces", d).SerializeToString(deterministic=True) for d in protobuf)


def test_tasks_ingest_each_partition_into_its_own_store(spark, tmp_path) -> None:
    requests = _requests("metrics", 4_000, 500, seed=2)
    bad: list[bytes | None] = [*requests[:3], b"\x12\x01", *requests[3:]]
    frame = _frame(spark, bad)
    summary = sorted(ingest_otlp(frame, "metrics", tmp_path, errors="record").collect(), key=lambda r: r.partition)

    assert [(r.partition, r.store) for r in summary] == [(p, core_path(str(tmp_path), p)) for p in (0, 1)]
    assert sum(r.bundles for r in summary) == len(requests)
    assert sum(r.otlp_bytes for r in summary) == sum(map(len, requests))
    errors = [e for r in summary for e in r.errors]
    assert sum(r.rejected for r in summary) == len(errors) == 1
    assert errors[0].startswith("partition ") and ", row " in errors[0]
    stored = []
    for row in summary:
        with QuiverStore.open(row.store, layout=OTAP_LAYOUT) as store:
            bundles = [bundle for _, _, bundle in store.bundles()]
        assert len(bundles) == row.bundles
        assert sum(Decoder().decode_records(b).num_rows for b in bundles) == row.records
        stored += [canonical_order(to_otlp(Decoder().decode_records(b))).SerializeToString(deterministic=True) for b in bundles]
    expected = [_canonical("metrics", data).SerializeToString(deterministic=True) for data in requests]
    assert sorted(stored) == sorted(expected)


def test_a_bad_request_stops_the_ingest_and_keeps_what_was_stored(spark, tmp_path) -> None:
    good = _requests("logs", 1_500, 500)
    requests: list[bytes | None] = [good[0], good[1], b"\xff\xff\xff", good[2]]
    frame = spark.createDataFrame(pa.table({"value": pa.array(requests, pa.binary())}).to_pandas()).coalesce(1)
    with pytest.raises(PythonException, match=r"SparkJobError: partition 0, row 2:"):
        ingest_otlp(frame, "logs", tmp_path).collect()

    with QuiverStore.open(core_path(str(tmp_path), 0), layout=OTAP_LAYOUT) as store:
        stored = [bundle for _, _, bundle in store.bundles()]
    assert [canonical_order(to_otlp(Decoder().decode_records(b))) for b in stored] == [
        _canonical("logs", data) for data in good[:2]
    ]


def test_setup_errors_name_the_problem(spark, tmp_path) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    frame = spark.createDataFrame(pa.table({"value": pa.array([b"x"]), "text": pa.array(["a"]), "sequence": pa.array([1])}).to_pandas())
    cases = [
        (lambda: encode_otlp(frame, "logs", column="missing"), "encode_otlp: no column 'missing'"),
        (lambda: encode_otlp(frame, "logs", column="sequence"), "encode_otlp: column 'sequence' is bigint, expected binary "
                                                                "(serialized OTLP export requests) or string (OTLP/JSON export requests)"),
        (lambda: encode_otlp(frame, "profiles"), "unknown signal 'profiles'"),
        (lambda: encode_otlp(frame, "logs", keep=["sequence"]), "clash with output columns"),
        (lambda: encode_otlp(frame, "logs", keep=["nope"]), "keep names 'nope', which is not a column"),
        (lambda: encode_otlp(frame, "logs", keep="text"), "encode_otlp: keep must be a list of column names, got 'text'; for one column pass keep=['text']"),
        (lambda: encode_otlp(frame, "logs", keep=[1]), "encode_otlp: keep must be a list of column names, got [1]"),
        (lambda: decode_otap(frame, keep="text"), "decode_otap: keep must be a list of column names, got 'text'"),
        (lambda: encode_otlp(frame, "logs", errors="ignore"), "errors must be 'raise' or 'record'"),
        (lambda: encode_otlp(frame, "logs", config={"sort": True}), "config must be an EncoderConfig"),
        (lambda: decode_otap(frame), "decode_otap: no column 'otap'"),
        (lambda: ingest_otlp(frame, "logs", "/tmp/x", column="sequence"), "ingest_otlp: column 'sequence' is bigint"),
        (lambda: ingest_otlp(frame, "logs", "/tmp/x", store_config={}), "store_config must be a quiver_store StoreConfig"),
        (lambda: ingest_otlp(frame, "logs", tmp_path / "a-file"), f"ingest_otlp: root {tmp_path}/a-file: exists and is not a directory"),
    ]
    for call, expected in cases:
        with pytest.raises(SparkJobError, match=re.escape(expected)):
            call()


def test_pipeline_with_spark_stores_and_verifies_every_bundle(spark, tmp_path) -> None:
    result = run_pipeline(tmp_path / "store", count=1_200, batch_size=300, seed=3, spark=spark)

    assert result.ok
    assert [(r.signal.value, r.batches, r.verified, r.delivered) for r in result.reports] == [
        ("logs", 4, 4, 4), ("traces", 4, 4, 4), ("metrics", 4, 4, 4),
    ]


def test_the_session_has_the_settings_the_jobs_rely_on(spark) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.sql.execution.arrow.pyspark.validateSchema.enabled") == "true"
    assert conf.get("spark.sql.shuffle.partitions") == "2"  # local[2]: one per task slot
    assert conf.get("spark.ui.enabled") == "false"


@pytest.mark.parametrize(
    ("master", "slots"),
    [("local", 1), ("local[1]", 1), ("local[3]", 3), ("local[2, 4]", 2), ("spark://host:7077", None)],
)
def test_local_cores_reads_the_task_slots_of_a_master(master: str, slots: int | None) -> None:
    assert local_cores(master) == slots


@pytest.mark.parametrize("master", ["local[two]", "local[0]", "local[-1]"])
def test_a_malformed_local_master_is_refused(master: str) -> None:
    """local[0] was taken for one slot, and Spark then refused it with a Java stack trace."""
    with pytest.raises(SparkJobError, match=rf"master '{re.escape(master)}': expected local\[N\] or local\[\*\] \(N >= 1 task slots\)"):
        local_cores(master)


def _empty_logs_requests() -> list[bytes]:
    """Two valid requests without a single log record: an empty export and a resource with an empty scope."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs, ScopeLogs

    resource_only = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs()])])
    return [ExportLogsServiceRequest().SerializeToString(), resource_only.SerializeToString()]


@pytest.mark.parametrize("errors", ["raise", "record"])
def test_empty_requests_store_nothing_and_are_counted(spark, tmp_path, errors: str) -> None:
    good = _requests("logs", 1_500, 500, seed=4)
    empty = _empty_logs_requests()
    requests: list[bytes | None] = [good[0], empty[0], good[1], empty[1], good[2], empty[0]]
    summary = ingest_otlp(_frame(spark, requests), "logs", tmp_path, errors=errors).collect()  # type: ignore[arg-type]

    assert sum(r.bundles for r in summary) == len(good)
    assert sum(r.empty for r in summary) == 3
    assert sum(r.rejected for r in summary) == 0 and all(r.errors == [] for r in summary)
    assert sum(r.records for r in summary) == 1_500
    assert sum(r.otlp_bytes for r in summary) == sum(map(len, good))
    stored = _stored([r.store for r in summary])
    assert sorted(stored) == sorted(_canonical("logs", data).SerializeToString(deterministic=True) for data in good)


def test_a_job_run_again_with_its_job_id_stores_every_request_exactly_once(spark, tmp_path) -> None:
    """The first run fails at a bad row part way; the second run over the mended input resumes
    where each partition's store says it stopped; a third run stores nothing."""
    good = _requests("logs", 4_000, 500, seed=6)
    broken: list[bytes | None] = [*good[:5], b"\xff\xff\xff", *good[6:]]
    with pytest.raises(PythonException, match=r"SparkJobError: partition \d, row \d+:"):
        ingest_otlp(_frame(spark, broken), "logs", tmp_path, job_id="nightly-1").collect()
    first = {p: len(_stored([core_path(str(tmp_path), p)])) for p in (0, 1)}
    assert 0 < sum(first.values()) < len(good)

    summary = ingest_otlp(_frame(spark, list(good)), "logs", tmp_path, job_id="nightly-1").collect()
    assert {r.partition: r.skipped for r in summary} == first
    assert sum(r.bundles for r in summary) == len(good) - sum(first.values())
    expected = sorted(_canonical("logs", data).SerializeToString(deterministic=True) for data in good)
    assert sorted(_stored([r.store for r in summary])) == expected

    again = ingest_otlp(_frame(spark, list(good)), "logs", tmp_path, job_id="nightly-1").collect()
    assert sum(r.bundles for r in again) == 0 and sum(r.skipped for r in again) == len(good)
    assert sorted(_stored([r.store for r in again])) == expected

    with pytest.raises(PythonException, match=r"holds \d+ rows of job_id 'nightly-1' for this partition, but the partition has only"):
        ingest_otlp(_frame(spark, list(good[:2])), "logs", tmp_path, job_id="nightly-1").collect()
    with pytest.raises(SparkJobError, match=r"^ingest_otlp: job_id must be a non-empty string or None, got ''$"):
        ingest_otlp(_frame(spark, list(good)), "logs", tmp_path, job_id="")


def test_decode_otap_refuses_keep_names_of_its_output_on_the_driver(spark) -> None:
    encoded = encode_otlp(_frame(spark, _requests("logs", 500, 500)), "logs").withColumnRenamed("otlp_bytes", "otlp")
    with pytest.raises(SparkJobError, match=r"^decode_otap: keep names \['otlp'\], which clash with output columns of the same names$"):
        decode_otap(encoded, keep=["otlp"])
    assert decode_otap(encoded, keep=["stream", "sequence", "records"]).columns == ["records", "stream", "sequence", "otlp"]


def test_ingest_otlp_refuses_a_root_that_is_no_path(spark) -> None:
    frame = spark.createDataFrame(pa.table({"value": pa.array([b""], pa.binary())}))
    for root in (None, "", 5):
        with pytest.raises(SparkJobError, match=rf"^ingest_otlp: root must be a non-empty str or os\.PathLike directory, got {root!r}$"):
            ingest_otlp(frame, "logs", root)  # type: ignore[arg-type]


def test_requests_without_records_decode_in_spark_and_on_the_driver(spark) -> None:
    """Was: decode_otap failed the job ("cannot tell the signal (an envelope without payloads)")
    when a stream's first decodable envelope came from a request without records (here after a
    rejected null row), and stream_decoders had no way to pass the signal."""
    good = _requests("logs", 1_000, 500, seed=6)
    empty = _empty_logs_requests()
    requests: list[bytes | None] = [None, empty[0], good[0], empty[1], good[1]]
    frame = spark.createDataFrame(pa.table({"request": pa.array(range(5), pa.int64()), "value": pa.array(requests, pa.binary())}).to_pandas()).coalesce(1)
    encoded = encode_otlp(frame, "logs", keep=["request"], errors="record").cache()

    decoded = {r.request: r.otlp for r in decode_otap(encoded, keep=["request"]).collect()}
    assert sorted(decoded) == [1, 2, 3, 4]  # the null request was rejected, so it has no envelope
    assert decoded[1] == decoded[3] == b""  # an export request without records is zero bytes
    for i in (2, 4):
        assert canonical_order(REQUEST_TYPES[Signal.LOGS].FromString(decoded[i])) == _canonical("logs", requests[i])  # type: ignore[arg-type]

    rows = [r for r in collect_streams(encoded) if r.otap is not None]
    got = {row.kept["request"]: to_otlp(decoder.decode(row.otap)) for row, decoder in stream_decoders(rows, "logs")}
    assert got[1].SerializeToString() == got[3].SerializeToString() == b""
    assert canonical_order(got[2]) == _canonical("logs", good[0])


@pytest.mark.parametrize(("signal", "tables"), [
    ("logs", ["LOGS", "LOG_ATTRS", "RESOURCE_ATTRS"]),
    ("traces", ["SPANS", "SPAN_EVENTS", "SPAN_LINKS"]),
    ("metrics", ["UNIVARIATE_METRICS", "HISTOGRAM_DATA_POINTS", "EXP_HISTOGRAM_DATA_POINTS"]),
])
def test_decode_table_gives_every_row_of_a_table_in_spark_types(spark, signal: str, tables: list[str]) -> None:
    """Each envelope's table, in Spark, equals what the stream's own decoder gives on the driver
    cast to spark_schema (values unchanged: uint64 counts, fixed-size ids, nanosecond times)."""
    from adaptive_arrow.spark import decode_table
    from adaptive_arrow.spark_types import to_spark_types
    from otap_model import PayloadType

    requests = _requests(signal, 2_000, 500, seed=8)
    encoded = encode_otlp(_frame(spark, requests), signal, keep=["request"]).cache()
    local: dict[str, dict[tuple[int, int], list[dict]]] = {name: {} for name in tables}
    for row, decoder in stream_decoders(list(collect_streams(encoded))):
        bundle = decoder.decode(row.otap)
        for name in tables:
            table = bundle.get(PayloadType[name])
            if table is not None and table.num_rows:
                local[name][(row.stream, row.sequence)] = to_spark_types(table, PayloadType[name]).to_pylist()
    for name in tables:
        assert local[name], f"the generator made no {name} rows; pick another table"
        got = decode_table(encoded, name, keep=["request"]).toArrow()
        assert got.column_names == ["request", "stream", "sequence", *spark_schema_names(name)]
        rows: dict[tuple[int, int], list[dict]] = {}
        for record in got.to_pylist():
            key = (record.pop("stream"), record.pop("sequence"))
            record.pop("request")
            rows.setdefault(key, []).append(record)
        assert rows == local[name]
    encoded.unpersist()


def spark_schema_names(name: str) -> list[str]:
    from adaptive_arrow.spark_types import spark_schema
    from otap_model import PayloadType

    return spark_schema(PayloadType[name]).names


def test_decode_table_refuses_what_has_no_table_and_names_a_wrong_signal(spark) -> None:
    from adaptive_arrow.spark import decode_table

    encoded = encode_otlp(_frame(spark, _requests("logs", 500, 500)), "logs")
    for value in ("nope", 25, 0):
        with pytest.raises(SparkJobError, match=rf"^decode_table: {re.escape(repr(value))} is not a payload type with a table to decode; expected one of RESOURCE_ATTRS, "):
            decode_table(encoded, value)
    with pytest.raises(PythonException, match=r"decode_table\(SPANS\): stream \d+, sequence 0: "):
        decode_table(encoded, "spans").collect()
    with pytest.raises(SparkJobError, match=r"^decode_table: column 'otap' is string, expected binary \(OTAP envelopes\)$"):
        decode_table(encoded.withColumn("otap", encoded.error), "logs")


def test_store_table_reads_the_stores_ingest_otlp_wrote(spark, tmp_path) -> None:
    """Every row of the table in the per-partition stores, in Spark types, equal to the store's
    bundles decoded on the driver (numbered as `adaptive-arrow decode STORE` numbers them), and
    LOG_ATTRS joins LOGS on (core, bundle, id)."""
    from adaptive_arrow.spark import store_table
    from adaptive_arrow.spark_types import to_spark_types
    from otap_model import PayloadType
    from quiver_store.offline import StoredBundles

    requests = _requests("logs", 3_000, 500, seed=12)
    summary = ingest_otlp(_frame(spark, requests), "logs", tmp_path, job_id="t").collect()
    assert sum(r.bundles for r in summary) == len(requests)
    for name in ("LOGS", "LOG_ATTRS"):
        local: dict[tuple[int, int], list[dict]] = {}
        for row in summary:
            for number, item in enumerate(StoredBundles(row.store)):
                table = Decoder().decode_records(item.bundle).get(PayloadType[name])
                if table is not None and table.num_rows:
                    local[(row.partition, number)] = to_spark_types(table, PayloadType[name]).to_pylist()
        got: dict[tuple[int, int], list[dict]] = {}
        for record in store_table(spark, tmp_path, name).toArrow().to_pylist():
            key = (record.pop("core"), record.pop("bundle"))
            assert record.pop("segment_seq") is not None and record.pop("bundle_index") is not None
            got.setdefault(key, []).append(record)
        assert got == local and len(got) == len(requests)
    logs, attrs = store_table(spark, tmp_path, "LOGS"), store_table(spark, tmp_path, "LOG_ATTRS")
    joined = attrs.join(logs, (attrs.core == logs.core) & (attrs.bundle == logs.bundle) & (attrs.parent_id == logs.id))
    assert joined.count() == attrs.count()  # every attribute row has its log record


def test_store_table_refuses_a_root_without_stores_and_names_a_damaged_one(spark, tmp_path) -> None:
    from adaptive_arrow.spark import store_table

    with pytest.raises(SparkJobError, match=rf"^store_table: {re.escape(str(tmp_path))} holds no per-partition stores "):
        store_table(spark, tmp_path, "LOGS")
    with pytest.raises(SparkJobError, match=r"^store_table: 'SPAN' is not a payload type with a table to decode"):
        store_table(spark, tmp_path, "SPAN")
    ingest_otlp(_frame(spark, _requests("logs", 1_000, 500)).coalesce(1), "logs", tmp_path).collect()
    (segment,) = (tmp_path / "core_0" / "segments").glob("*.qseg")
    data = bytearray(segment.read_bytes())
    data[200] ^= 0xFF  # inside the first stream's Arrow bytes
    segment.write_bytes(bytes(data))
    with pytest.raises(PythonException, match=r"store_table\(LOGS\): store .*core_0: .*qseg"):
        store_table(spark, tmp_path, "LOGS").collect()
