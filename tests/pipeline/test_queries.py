"""``--queries``: a run computes only the chosen outputs; an output turned on by a later run on
the same state starts with the first windows that hold every event (those starting after the
newest event of the earlier run), equal to a run that had it from the start, and the outputs
that ran before write nothing twice."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import nasa_lines, run_pipeline, write_chunks

from logstream.dashboard.data import read_snapshot
from logstream.serving import ServingStore

#: Outputs with a window_start column, and the column that says where their windows start.
WINDOWED = {
    "traffic_per_minute": "window_start",
    "trending_pages": "window_start",
    "unique_visitors": "window_start",
    "top_clients": "window_start",
    "sessions": "session_start",
}


def run(spark, tmp, queries, inputs="in"):
    return run_pipeline(spark, tmp, tmp / inputs, queries=queries)


def rows(spark, pipeline, name):
    path = str(pipeline.cfg.output_dir / name)
    spark.catalog.refreshByPath(path)  # the session caches a listing read by an earlier run
    # a HyperLogLog sketch's bytes depend on insertion order (its estimate does not)
    return spark.read.parquet(path).drop("sketch", "batch_id")


def same(a, b) -> bool:
    return a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


@pytest.fixture(scope="module")
def runs(spark, nasa_day, tmp_path_factory):
    lines = nasa_lines(nasa_day)[:16000]
    staged, fresh = tmp_path_factory.mktemp("staged"), tmp_path_factory.mktemp("fresh")
    for tmp in (staged, fresh):
        write_chunks(lines, tmp / "in", per_file=4000)
    # the first run sees the first two files only
    later = sorted((staged / "in").iterdir())[2:]
    assert len(later) == 2
    (staged / "later").mkdir()
    for path in later:
        path.rename(staged / "later" / path.name)
    first = run(spark, staged, "traffic_per_minute")
    since = first.store.max_event_time_ms()
    snapshot = read_snapshot(first.cfg.store_path)
    traffic = rows(spark, first, "traffic_per_minute").cache()
    traffic.count()
    written = sorted(p.name for p in first.cfg.output_dir.iterdir() if p.is_dir())
    for path in sorted((staged / "later").iterdir()):
        path.rename(staged / "in" / path.name)
    second = run(spark, staged, "all")
    return {
        "written": written,
        "snapshot": snapshot,
        "traffic": traffic,
        "since": since,
        "first": first,
        "second": second,
        "fresh": run(spark, fresh, "all"),
    }


def test_only_the_chosen_outputs_are_computed(runs):
    assert runs["written"] == ["events", "late_events", "quarantine", "traffic_per_minute"]
    snap = runs["snapshot"]
    assert snap.queries == {"traffic_per_minute"}
    assert snap.query_off("sessions") and snap.query_off("alerts")
    assert not snap.query_off("traffic_per_minute")


def test_an_output_that_ran_before_writes_nothing_twice(spark, runs):
    first = runs["traffic"]
    assert first.count() > 0
    second = rows(spark, runs["second"], "traffic_per_minute")
    assert same(second, rows(spark, runs["fresh"], "traffic_per_minute"))
    assert second.groupBy("window_start").count().where(F.col("count") > 1).count() == 0


@pytest.mark.parametrize("name", [n for n in WINDOWED if n != "traffic_per_minute"])
def test_an_output_turned_on_later_starts_with_complete_windows(spark, runs, name):
    since = F.timestamp_millis(F.lit(runs["since"]))
    column = WINDOWED[name]
    got = rows(spark, runs["second"], name)
    want = rows(spark, runs["fresh"], name)
    assert got.count() > 0
    assert got.where(F.col(column) <= since).count() == 0
    if name == "sessions":  # a visitor seen before may have started earlier
        since = F.timestamp_millis(F.lit(runs["since"] + 30 * 60 * 1000))
    assert same(got, want.where(F.col(column) > since))


def test_an_output_turned_on_later_reaches_the_store(runs):
    store = ServingStore(runs["second"].cfg.store_path, read_only=True)
    assert store.query("SELECT COUNT(*) AS n FROM session_stats")[0]["n"] > 0
    # the outputs it computes: --queries all less traffic_by_agent (NASA logs have no agents)
    outputs = set(runs["second"].cfg.queries) - {"traffic_by_agent"}
    assert set(runs["second"].outputs) == outputs
    assert read_snapshot(runs["second"].cfg.store_path).queries == outputs
