"""``--queries``: a run starts only the chosen queries over ``events/``; a query added to a
later run catches up from ``events/`` to the same outputs as a run that had it from the start,
and the queries that ran before write nothing twice."""

from __future__ import annotations

import pytest
from tests.pipeline.helpers import PARQUET_OUTPUTS, config, nasa_lines, write_chunks

from logstream.dashboard.data import read_snapshot
from logstream.pipeline import Pipeline
from logstream.serving import ServingStore


def run(spark, tmp, queries):
    pipeline = Pipeline(spark, config(tmp, tmp / "in", queries=queries))
    try:
        pipeline.run()
    finally:
        pipeline.stop()
    return pipeline


def rows(spark, pipeline, name):
    # a HyperLogLog sketch's bytes depend on insertion order (its estimate does not); the
    # two runs read their input from different directories
    return spark.read.parquet(str(pipeline.cfg.output_dir / name)).drop("sketch", "source_file")


def same(a, b) -> bool:
    return a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


@pytest.fixture(scope="module")
def runs(spark, nasa_day, tmp_path_factory):
    lines = nasa_lines(nasa_day)[:8000]
    staged, fresh = tmp_path_factory.mktemp("staged"), tmp_path_factory.mktemp("fresh")
    for tmp in (staged, fresh):
        write_chunks(lines, tmp / "in", per_file=4000)
    first = run(spark, staged, "traffic_per_minute")
    snapshot = read_snapshot(first.cfg.store_path)
    traffic = rows(spark, first, "traffic_per_minute").cache()
    traffic.count()
    started = sorted(p.name for p in first.cfg.state_dir.iterdir())
    written = sorted(p.name for p in first.cfg.output_dir.iterdir())
    second = run(spark, staged, "all")
    return {
        "started": started,
        "written": written,
        "snapshot": snapshot,
        "traffic": traffic,
        "second": second,
        "fresh": run(spark, fresh, "all"),
    }


def test_only_the_chosen_queries_run(runs):
    assert runs["started"] == ["ingest", "traffic_per_minute"]
    # (the ingest query creates its three outputs at start, empty or not)
    assert runs["written"] == ["events", "late_events", "quarantine", "traffic_per_minute"]
    snap = runs["snapshot"]
    assert snap.queries == {"traffic_per_minute"}
    assert snap.query_off("sessions") and snap.query_off("alerts")
    assert not snap.query_off("traffic_per_minute")


def test_a_query_that_ran_before_writes_nothing_twice(spark, runs):
    assert runs["traffic"].count() > 0
    assert same(runs["traffic"], rows(spark, runs["second"], "traffic_per_minute"))


@pytest.mark.parametrize("name", [n for n in PARQUET_OUTPUTS if n != "traffic_per_minute"])
def test_a_query_added_later_catches_up_to_the_same_output(spark, runs, name):
    fresh = rows(spark, runs["fresh"], name)
    assert fresh.count() > 0
    assert same(rows(spark, runs["second"], name), fresh)


def test_a_query_added_later_reaches_the_store(runs):
    sql = "SELECT window_start, sessions, bounces, pages FROM session_stats ORDER BY window_start"
    got, want = (
        ServingStore(runs[k].cfg.store_path, read_only=True).query(sql) for k in ("second", "fresh")
    )
    assert want and got == want
    assert read_snapshot(runs["second"].cfg.store_path).queries == set(runs["second"].cfg.queries)
