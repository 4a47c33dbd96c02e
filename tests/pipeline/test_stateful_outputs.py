"""End to end: a generated flash crowd streamed through ``logstream run`` reaches the alert
outputs (Parquet, serving store, dashboard), and sessions and top clients are published."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import run_pipeline, write_chunks

from logstream.dashboard.data import read_snapshot
from logstream.generate import FlashCrowd, TrafficConfig, TrafficGenerator
from logstream.serving import ServingStore

CROWD_START_S = 3 * 3600 + 20


@pytest.fixture(scope="module")
def crowd_run(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crowd")
    traffic = TrafficConfig(
        rate_per_s=1.5,
        duration_s=4 * 3600,
        seed=3,
        flash_crowds=(FlashCrowd(start_offset_s=CROWD_START_S, duration_s=600, multiplier=8),),
        log_format="combined",
    )
    gen = TrafficGenerator(traffic)
    write_chunks([line.text for line in gen], tmp / "in", per_file=8000)
    pipeline = run_pipeline(spark, tmp, tmp / "in", log_format="combined")
    return pipeline, gen.flash_pages[0], traffic.start + timedelta(seconds=CROWD_START_S)


def test_the_flash_crowd_alerts_reach_parquet_store_and_dashboard(spark, crowd_run):
    pipeline, page, start = crowd_run
    store = ServingStore(pipeline.cfg.store_path, read_only=True)
    stored = store.query("SELECT series, metric, window_start, z FROM alerts ORDER BY seq")
    assert {a["series"] for a in stored} == {"site", page}
    # the first alert is for the crowd's first minute, at most 2 one-minute windows after
    first = datetime.fromisoformat(min(a["window_start"] for a in stored))
    assert timedelta(minutes=-1) < first - start <= timedelta(minutes=2)
    assert all(a["z"] > 5 for a in stored)
    parquet = spark.read.parquet(str(pipeline.cfg.output_dir / "alerts"))
    assert parquet.count() == len(stored)
    assert {r.series for r in parquet.select("series").collect()} == {"site", page}
    shown = read_snapshot(pipeline.cfg.store_path).alerts
    assert shown is not None and {a.series for a in shown.latest} == {"site", page}


def test_sessions_and_top_clients_are_published_with_user_agents(spark, crowd_run):
    pipeline, _, _ = crowd_run
    sessions = spark.read.parquet(str(pipeline.cfg.output_dir / "sessions"))
    # the combined format has user agents: a visitor is a host and its agent
    assert sessions.where(F.col("user_agent").isNull()).count() == 0
    assert sessions.count() > 500
    top = spark.read.parquet(str(pipeline.cfg.output_dir / "top_clients"))
    windows = top.select("window_start").distinct().count()
    assert top.where(F.col("rank_requests") == 1).count() == windows > 40
