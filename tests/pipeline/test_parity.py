"""The NASA day streamed in chunks gives the same windows, sessions and heavy hitters as the
batch computation (and, for sessions, as a plain-Python sessionization)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from pyspark.sql import functions as F
from tests import oracle
from tests.analytics.test_sessions import python_sessions, session_tuples
from tests.pipeline.helpers import config, nasa_lines, run_to_end, write_chunks

from logstream import analytics
from logstream.parsing import compile_format, events, parse
from logstream.pipeline import Pipeline
from logstream.pipeline.ingest import SINGLE_PARTITION_ROWS
from logstream.serving import ServingStore
from logstream.sources import read_lines

TRAFFIC_COLS = [
    "window_start",
    "window_end",
    "requests",
    "bytes",
    "status_1xx",
    "status_2xx",
    "status_3xx",
    "status_4xx",
    "status_5xx",
    "errors",
]


# every micro-batch (12,000 lines) delivered on the driver (the live path, the default for a
# micro-batch this small), through the Spark steps in one partition without a shuffle, and
# spread over the shuffle partitions (as a backfill's): the same windows, sessions and heavy
# hitters every way
@pytest.fixture(scope="module", params=["driver", "one_partition", "shuffled"])
def streamed(request, spark, nasa_day, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    write_chunks(nasa_lines(nasa_day), tmp / "in", per_file=6000)
    # the outputs the module compares with the batch computation (the alerts and the outputs
    # by section and agent class have their own parity tests)
    queries = "traffic_per_minute,trending_pages,unique_visitors,sessions,top_clients"
    pipeline = Pipeline(spark, config(tmp, tmp / "in", max_files_per_trigger=2, queries=queries))
    one_partition = request.param == "one_partition"
    on_driver = request.param == "driver"
    rows = SINGLE_PARTITION_ROWS if one_partition else 0
    pipeline.ingest.settings = replace(
        pipeline.ingest.settings,
        single_partition_rows=rows,
        driver_rows=pipeline.ingest.settings.driver_rows if on_driver else 0,
    )
    run_to_end(pipeline)
    # the path the batches took
    assert pipeline.ingest.paths["driver" if on_driver else "spark"] == 3
    if not on_driver:
        assert pipeline.ingest.single_partition is one_partition
    # adaptive execution is turned off for one-partition micro-batches in the query's own
    # session (a clone), never in the session that started it
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    # every line counts, in the stream as in the batch report (deduplication is opt-in)
    lines = read_lines(spark, [nasa_day])
    batch_events = events(parse(lines, compile_format("common")))
    return tmp, pipeline, batch_events


def test_every_final_traffic_window_equals_the_batch_computation(spark, streamed):
    tmp, pipeline, ev = streamed
    stream = spark.read.parquet(str(tmp / "out" / "traffic_per_minute")).select(*TRAFFIC_COLS)
    batch = analytics.traffic_per_window(ev, "1 minute").select(*TRAFFIC_COLS)
    watermark = F.timestamp_millis(F.lit(pipeline.ingest.watermark_for_next_batch()))
    final = batch.where(F.col("window_end") <= watermark)
    assert stream.count() == final.count() == 1422
    assert stream.exceptAll(final).count() == 0 and final.exceptAll(stream).count() == 0


def test_every_final_trending_window_equals_the_batch_computation(spark, streamed):
    tmp, pipeline, ev = streamed
    stream = spark.read.parquet(str(tmp / "out" / "trending_pages")).drop("batch_id")
    batch = analytics.page_counts_per_window(ev, "5 minutes", "1 minute")
    watermark = F.timestamp_millis(F.lit(pipeline.ingest.watermark_for_next_batch()))
    final = batch.where(F.col("window_end") <= watermark)
    assert stream.count() == final.count() > 40000
    assert stream.exceptAll(final).count() == 0 and final.exceptAll(stream).count() == 0


def test_serving_store_holds_every_window_including_open_ones(spark, streamed):
    tmp, _, ev = streamed
    store = ServingStore(tmp / "store.db", read_only=True)
    rows = store.query(f"SELECT {', '.join(TRAFFIC_COLS)} FROM traffic_per_minute")
    batch = (
        analytics.traffic_per_window(ev, "1 minute")
        .select(
            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            *TRAFFIC_COLS[1:],
        )
        .drop("window_end")
    )
    expected = {tuple(r) for r in batch.collect()}
    assert {tuple(v for k, v in r.items() if k != "window_end") for r in rows} == expected
    assert store.counters() == {
        "events": 35272,
        "late_events": 0,
        "quarantined": 0,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }
    top = store.query(
        "SELECT url_path, requests FROM trending_pages WHERE window_start = "
        "'1995-07-10T03:00:00Z' ORDER BY requests DESC, url_path LIMIT 1"
    )
    exact = (
        ev.where(analytics.is_content_page())
        .where(
            (F.col("event_time") >= "1995-07-10 03:00:00")
            & (F.col("event_time") < "1995-07-10 03:05:00")
        )
        .groupBy("url_path")
        .count()
        .orderBy(F.desc("count"), "url_path")
        .first()
    )
    assert (top[0]["url_path"], top[0]["requests"]) == (exact["url_path"], exact["count"])
    # the store keeps 2 hours of trending windows behind the newest event (03:59:59)
    span = store.query("SELECT MIN(window_end) AS lo, MAX(window_end) AS hi FROM trending_pages")
    assert span[0] == {"lo": "1995-07-10T02:00:00Z", "hi": "1995-07-10T04:04:00Z"}


def test_unique_visitors_are_within_hll_error_of_the_exact_count(spark, streamed):
    tmp, _, ev = streamed
    exact = {
        r["w"]: r["n"]
        for r in ev.groupBy(
            F.date_format(
                F.window("event_time", "1 minute").start, "yyyy-MM-dd'T'HH:mm:ss'Z'"
            ).alias("w")
        )
        .agg(F.count_distinct("client_host").alias("n"))
        .collect()
    }
    store = ServingStore(tmp / "store.db", read_only=True)
    live = {
        r["window_start"]: r["visitors"]
        for r in store.query("SELECT window_start, visitors FROM unique_visitors")
    }
    assert live.keys() == exact.keys()
    assert all(abs(live[w] - n) <= max(1, 0.05 * n) for w, n in exact.items())
    parquet = (
        spark.read.parquet(str(tmp / "out" / "unique_visitors"))
        .select(F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("w"), "visitors")
        .collect()
    )
    assert len(parquet) == 1422 and all(live[r["w"]] == r["visitors"] for r in parquet)


def test_every_line_is_an_on_time_event_of_exactly_one_micro_batch(spark, streamed):
    tmp, pipeline, ev = streamed
    assert pipeline.totals.events == 35272
    events = spark.read.parquet(str(tmp / "out" / "events"))
    events = events.drop("batch_id", "source_file")  # (the stream read chunks of the file)
    assert events.exceptAll(ev.drop("source_file")).count() == 0
    assert ev.drop("source_file").exceptAll(events).count() == 0


def _watermark(pipeline) -> int:
    """The watermark the windows were finalised with, epoch ms."""
    return pipeline.ingest.watermark_for_next_batch()


def test_closed_sessions_equal_a_plain_python_sessionization(spark, streamed, nasa_day):
    tmp, pipeline, _ = streamed
    refs, _ = oracle.parse_file(nasa_day)
    watermark = _watermark(pipeline) // 1000
    # a session is closed once the watermark reaches its last request + the 30-minute gap
    expected = Counter(s for s in python_sessions(refs) if s[2] + 1800 <= watermark)
    got = session_tuples(spark.read.parquet(str(tmp / "out" / "sessions")))
    assert sum(expected.values()) > 2500
    assert got == expected


def test_session_statistics_in_the_store_match_the_sessions_output(spark, streamed):
    tmp, _, _ = streamed
    closed = spark.read.parquet(str(tmp / "out" / "sessions"))
    exact = {
        r["w"]: r
        for r in closed.groupBy(
            F.date_format(
                F.window("session_start", "1 hour").start, "yyyy-MM-dd'T'HH:mm:ss'Z'"
            ).alias("w")
        )
        .agg(
            F.count("*").alias("n"),
            F.count_if("bounce").alias("bounces"),
            F.percentile("duration_s", 0.5).alias("median"),
            F.collect_list("duration_s").alias("durations"),
        )
        .collect()
    }
    store = ServingStore(tmp / "store.db", read_only=True)
    stats = {r["window_start"]: r for r in store.query("SELECT * FROM session_stats")}
    assert stats.keys() == exact.keys() and len(stats) >= 20
    for w, row in stats.items():
        assert (row["sessions"], row["bounces"]) == (exact[w]["n"], exact[w]["bounces"])
        # the KLL median is an element whose rank is within 1.3 % (k=200) of the middle
        durations = sorted(exact[w]["durations"])
        rank = sum(d <= row["median_duration_s"] for d in durations) / len(durations)
        assert abs(rank - 0.5) <= 0.02 + 1 / len(durations), (w, rank)


def test_top_clients_per_final_window_equal_the_batch_ranking(spark, streamed):
    tmp, pipeline, ev = streamed
    got = spark.read.parquet(str(tmp / "out" / "top_clients")).drop("batch_id")
    counts = analytics.client_counts_per_window(ev, "5 minutes")
    watermark = F.timestamp_millis(F.lit(_watermark(pipeline)))
    final = counts.where(F.col("window_end") <= watermark)
    expected = analytics.top_clients_per_window(final, 10)
    assert got.count() == expected.count() > 2000
    assert got.exceptAll(expected).count() == 0 and expected.exceptAll(got).count() == 0
    # an independent check of one window: the busiest client of 12:00-12:05 UTC
    busiest = (
        ev.where(F.col("event_time").between("1995-07-09 12:00:00", "1995-07-09 12:04:59"))
        .groupBy("client_host")
        .count()
        .orderBy(F.desc("count"), "client_host")
        .first()
    )
    top = got.where(
        (F.col("window_start") == F.lit("1995-07-09 12:00:00").cast("timestamp"))
        & (F.col("rank_requests") == 1)
    ).first()
    assert (top["client_host"], top["requests"]) == (busiest["client_host"], busiest["count"])
