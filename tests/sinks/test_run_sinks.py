"""``logstream run`` with --sink (webhook, Kafka) and --output-format json/csv on real NASA lines.

One Parquet run with a webhook sink, crashed after its second micro-batch was published and
restarted, then a JSON and a CSV run through the CLI: the same rows in every format, every
final window and alert delivered to the webhook exactly once, and the Kafka records of the
published outputs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from logstream.cli import main
from logstream.pipeline import Pipeline
from logstream.sinks.kafka import kafka_records
from logstream.sinks.publish import read_output
from logstream.sinks.route import DEFAULT_SINK_OUTPUTS
from logstream.sinks.webhook import json_safe
from logstream.sources.stream import KAFKA_PACKAGE
from tests.conftest import NASA_JUL_2000, data_file
from tests.pipeline.helpers import config, nasa_lines, run_to_end, write_chunks
from tests.sinks.hook_server import HookServer

#: The outputs computed (fewer views, a faster run); alerts on the 23 minutes of the file: a
#: short warm-up and a low threshold.
QUERIES = "traffic_per_minute,unique_visitors,alerts"
ALERTS = {"alert_warmup": "5 minutes", "alert_sigma": 1.0, "queries": QUERIES}
COMPARED = ("traffic_per_minute", "unique_visitors", "alerts")


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def chunks(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("sinks-input")
    write_chunks(nasa_lines(data_file(NASA_JUL_2000)), directory, per_file=500)
    return directory


@pytest.fixture(scope="module")
def parquet_run(spark, chunks, tmp_path_factory):
    """Parquet + webhook, one micro-batch: crashed after its publish, before the store commit,
    then restarted with ``logstream run --sink URL`` (the micro-batch is replayed)."""
    tmp = tmp_path_factory.mktemp("sinks-parquet")
    with HookServer() as server:
        cfg = config(tmp, chunks, max_files_per_trigger=None, sinks=(server.url,), **ALERTS)

        def crash(step: str, batch_id: int) -> None:
            if step == "before_commit":
                raise Crash(f"crash after the publish of micro-batch {batch_id}")

        first = Pipeline(spark, cfg)
        first.ingest.step_hook = crash
        with pytest.raises(Exception, match="Crash"):
            run_to_end(first)
        sent_before_restart = len(server.accepted)
        cli_run(chunks, tmp, "parquet", "--sink", server.url)  # the restart, from the CLI
        accepted = list(server.accepted)
    return tmp / "out", accepted, sent_before_restart


def cli_run(chunks: Path, tmp: Path, fmt: str, *extra: str) -> Path:
    """``logstream run`` with the options of :func:`tests.pipeline.helpers.config`."""
    args = ["run", "--input-dir", str(chunks), "--output-dir", str(tmp / "out")]
    args += ["--state-dir", str(tmp / "state"), "--store", f"sqlite:///{tmp / 'store.db'}"]
    args += ["--trigger", "available-now", "--format", "common", "--queries", QUERIES]
    args += ["--alert-warmup", "5 minutes", "--alert-sigma", "1", "--output-format", fmt, "-q"]
    assert main([*args, *extra]) == 0
    return tmp / "out"


@pytest.fixture(scope="module")
def json_csv_runs(spark, chunks, tmp_path_factory):
    return {
        fmt: cli_run(chunks, tmp_path_factory.mktemp(f"sinks-{fmt}"), fmt)
        for fmt in ("json", "csv")
    }


def rows(df) -> Counter:
    return Counter(json.dumps(json_safe(r), sort_keys=True) for r in df.collect())


def test_the_parquet_run_has_windows_and_alerts(spark, parquet_run):
    out, _, _ = parquet_run
    counts = {name: spark.read.parquet(str(out / name)).count() for name in COMPARED}
    # the minutes the final watermark (newest event - 10 minutes) has passed, from the file
    stamps = sorted(
        datetime.strptime(m, "%d/%b/%Y:%H:%M:%S %z")
        for m in re.findall(r"\[([^]]+)\]", "\n".join(nasa_lines(data_file(NASA_JUL_2000))))
    )
    watermark = stamps[-1] - timedelta(minutes=10)
    minutes = {
        t.replace(second=0)
        for t in stamps
        if t.replace(second=0) + timedelta(minutes=1) <= watermark
    }
    assert counts["traffic_per_minute"] == len(minutes) == 23
    assert counts["alerts"] > 0 and all(counts.values())


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_outputs_hold_the_parquet_rows(spark, parquet_run, json_csv_runs, fmt):
    out, _, _ = parquet_run
    for name in (*COMPARED, "events"):
        parquet = spark.read.parquet(str(out / name)).drop("batch_id")
        other = read_output(spark, json_csv_runs[fmt] / name, fmt, parquet.schema)
        if fmt == "csv" and "sketch" in parquet.columns:
            parquet = parquet.withColumn("sketch", F.regexp_replace(F.base64("sketch"), r"\s", ""))
        other = other.drop("batch_id").select(*parquet.columns)
        assert rows(other) == rows(parquet), name


def test_the_files_are_json_lines_and_csv_with_a_header(json_csv_runs):
    json_file = next((json_csv_runs["json"] / "traffic_per_minute").glob("batch_id=*/*.json"))
    first = json.loads(json_file.read_text().splitlines()[0])
    assert first["window_start"].endswith(":00.000Z") and "requests" in first
    csv_file = next((json_csv_runs["csv"] / "unique_visitors").glob("batch_id=*/*.csv"))
    header, row = csv_file.read_text().splitlines()[:2]
    assert header == "window_start,window_end,visitors,sketch"
    assert row.split(",")[3].endswith("=")  # the HLL sketch in base64


def test_the_webhook_got_every_final_window_and_alert_once_across_the_restart(spark, parquet_run):
    out, accepted, sent_before_restart = parquet_run
    keys = [key for key, _ in accepted]
    assert sent_before_restart == len(keys) > 0  # all sent before the crash, none after
    assert len(keys) == len(set(keys))  # the replayed micro-batch was skipped by the ledger
    received: dict[str, Counter] = {}
    for key, batch in accepted:
        name = key.rsplit("-", 3)[0]
        received.setdefault(name, Counter()).update(json.dumps(r, sort_keys=True) for r in batch)
    written = [n for n in DEFAULT_SINK_OUTPUTS if (out / n).is_dir()]
    assert set(received) == set(written) == set(COMPARED)
    for name in written:
        assert received[name] == rows(spark.read.parquet(str(out / name)).drop("batch_id")), name


def test_kafka_records_are_keyed_per_window_and_carry_the_published_rows(spark, parquet_run):
    out, _, _ = parquet_run
    for name in COMPARED:
        published = spark.read.parquet(str(out / name)).drop("batch_id")
        records = kafka_records(published, name, batch_id=5)
        assert records.columns == ["key", "value", "headers"]
        back = records.select(
            "key", F.from_json("value", published.schema).alias("row"), "headers"
        ).collect()
        keys = [r["key"] for r in back]
        assert len(keys) == len(set(keys)) > 0, name  # one key per window (and key columns)
        assert Counter(json.dumps(json_safe(r["row"]), sort_keys=True) for r in back) == rows(
            published
        ), name
        assert [(h["key"], bytes(h["value"])) for h in back[0]["headers"]] == [
            ("output", name.encode()),
            ("batch_id", b"5"),
        ]
    traffic = spark.read.parquet(str(out / "traffic_per_minute")).drop("batch_id")
    first = kafka_records(traffic, "traffic_per_minute").orderBy("key").first()
    assert first["key"] == "traffic_per_minute|1995-07-01T04:00:00Z"
    assert json.loads(first["value"])["window_start"] == "1995-07-01T04:00:00.000Z"


def test_a_kafka_sink_without_the_connector_fails_at_start(chunks, tmp_path, capsys):
    args = ["run", "--input-dir", str(chunks), "--output-dir", str(tmp_path / "out")]
    args += ["--state-dir", str(tmp_path / "state"), "--trigger", "available-now"]
    args += ["--format", "common", "--sink", "kafka://localhost:9092/weblog-alerts"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "kafka:// sink needs Spark's Kafka connector" in err and KAFKA_PACKAGE in err
    assert not (tmp_path / "state" / "ingest").exists()  # no query started


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sink", "s3://bucket/x"], "--sink 's3://bucket/x' is not a sink URL"),
        (["--sink", "kafka://localhost/t"], "broker 'localhost' is not HOST:PORT"),
        (["--sink", "http://h/x", "--sink-outputs", "alerts,bogus"], "unknown output 'bogus'"),
        (["--sink-outputs", "traffic_by_network"], "not computed by this run"),
        (["--queries", "alerts", "--sink-outputs", "sessions"], "not computed by this run"),
        (["--output-format", "orc"], "--output-format 'orc' is not a file format"),
        (["--sink", "console", "--sink", "http://h/x"], "takes no sink URL"),
    ],
)
def test_bad_sink_options_exit_2_naming_the_value(chunks, tmp_path, capsys, extra, message):
    args = ["run", "--input-dir", str(chunks), "--output-dir", str(tmp_path / "out"), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err
