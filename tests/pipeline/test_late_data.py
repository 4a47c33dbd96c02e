"""Late events go to ``late_events`` with the watermark they missed, never into windows, and
their count equals Spark's own ``numRowsDroppedByWatermark`` for the same input."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import run_pipeline, write_chunks

from logstream.parsing import compile_format, events, parse
from logstream.serving import ServingStore


def line(n: int, hhmmss: str) -> str:
    return f'host{n} - - [09/Jul/1995:{hhmmss} +0000] "GET /page{n}.html HTTP/1.0" 200 100'


# Each file is one micro-batch (maxFilesPerTrigger=1). Watermark delay 10 minutes.
# Spark (3.4+) judges the rows of batch N against the watermark of batch N-1; logstream
# against the current one. The two agree when the batch before a late batch does not raise
# the maximum event time, which is how the files are laid out: b1 and b3 stay under 10:20.
BATCHES = [
    [line(i, f"10:{i:02d}:00") for i in range(21)],  # b0: max 10:20
    [line(100 + i, f"10:{12 + i:02d}:30") for i in range(5)],  # b1: below the max
    [
        line(200, "10:05:00"),
        line(201, "10:09:59"),
        line(202, "10:10:00"),  # b2: 3 late
        line(203, "10:10:01"),
        line(204, "10:19:00"),
    ],
    [line(300 + i, f"10:{15 + i:02d}:00") for i in range(3)],  # b3: below the max
    [line(400, "10:02:00"), line(401, "10:10:00"), line(402, "10:25:00")],  # b4: 2 late
]
LATE = {"host200", "host201", "host202", "host400", "host401"}


@pytest.fixture(scope="module")
def late_run(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("late")
    for i, batch in enumerate(BATCHES):
        write_chunks(batch, tmp / "in", per_file=len(batch), start_mtime=2_000_000 + 10 * i)
        (tmp / "in" / "chunk-0000.log").rename(tmp / "in" / f"b{i}.log")
    return tmp, run_pipeline(spark, tmp, tmp / "in")


def test_late_events_land_in_late_events_with_the_watermark_they_missed(spark, late_run):
    tmp, _ = late_run
    late = spark.read.parquet(str(tmp / "out" / "late_events"))
    rows = {
        r["client_host"]: r
        for r in late.select(
            "client_host", F.date_format("watermark", "HH:mm:ss").alias("wm"), "batch_id"
        ).collect()
    }
    assert set(rows) == LATE
    assert {h: (r["wm"], r["batch_id"]) for h, r in rows.items()} == {
        "host200": ("10:10:00", 2),
        "host201": ("10:10:00", 2),
        "host202": ("10:10:00", 2),
        "host400": ("10:10:00", 4),
        "host401": ("10:10:00", 4),
    }


def test_late_events_are_not_counted_in_any_window(spark, late_run):
    tmp, pipeline = late_run
    on_time = sum(len(b) for b in BATCHES) - len(LATE)
    store = ServingStore(tmp / "store.db", read_only=True)
    assert store.counters() == {
        "events": on_time,
        "late_events": 5,
        "quarantined": 0,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }
    assert store.query("SELECT SUM(requests) AS n FROM traffic_per_minute")[0]["n"] == on_time
    hosts = {r["client_host"] for r in spark.read.parquet(str(tmp / "out" / "events")).collect()}
    assert hosts.isdisjoint(LATE) and len(hosts) == on_time
    assert sum(r["dropped_by_watermark"] or 0 for r in pipeline.listener.history) == 0


def test_late_count_equals_sparks_num_rows_dropped_by_watermark(spark, late_run, tmp_path):
    tmp, pipeline = late_run
    raw = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", 1)
        .load(str(tmp / "in"))
        .select("value", F.lit(None).cast("string").alias("source_file"))
    )
    deduped = (
        events(parse(raw, compile_format("common")))
        .withWatermark("event_time", "10 minutes")
        .dropDuplicatesWithinWatermark(["client_host", "url_path"])
    )
    query = (
        deduped.writeStream.format("noop")
        .queryName("spark_reference_late")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        dropped = sum(
            op.numRowsDroppedByWatermark for p in query.recentProgress for op in p.stateOperators
        )
    finally:
        query.stop()
    assert dropped == pipeline.totals.late_events == 5
