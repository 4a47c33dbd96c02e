"""A shipper's retry — the same chunk file delivered again — changes no count."""

from __future__ import annotations

import os
import shutil

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import (
    PARQUET_OUTPUTS,
    nasa_lines,
    run_pipeline,
    write_chunks,
)

from logstream.serving import ServingStore
from logstream.sources import LINE_KEY, drop_duplicate_lines

STORE_TABLES = {
    "traffic_per_minute": "window_start",
    "trending_pages": "window_start, url_path",
    "unique_visitors": "window_start",
    "top_clients": "window_start, client_host",
    "session_stats": "window_start",
}


def run(spark, tmp, lines, retries):
    """Stream ``lines`` in 4 chunks; ``retries`` maps a chunk index to the mtime of a copy."""
    paths = write_chunks(lines, tmp / "in", per_file=len(lines) // 4)
    for index, mtime in retries.items():
        copy = tmp / "in" / f"retry-of-{paths[index].name}"
        shutil.copy(paths[index], copy)
        os.utime(copy, (mtime, mtime))
    return run_pipeline(spark, tmp, tmp / "in", max_files_per_trigger=2, dedup=True)


@pytest.fixture(scope="module")
def runs(spark, nasa_day, tmp_path_factory):
    lines = nasa_lines(nasa_day)[:12000]
    once = run(spark, tmp_path_factory.mktemp("once"), lines, {})
    # chunk 0 again right after itself (same micro-batch), chunk 2 again after everything
    twice = run(
        spark, tmp_path_factory.mktemp("twice"), lines, {0: 1_000_000 + 1, 2: 1_000_000 + 99_999}
    )
    return once, twice


def rows(spark, pipeline, name):
    # which copy of a line survives is arbitrary when both arrive in one micro-batch: the
    # line's fields are the same, its source_file may not be
    # (a HyperLogLog sketch's bytes depend on insertion order; its estimate does not)
    return spark.read.parquet(str(pipeline.cfg.output_dir / name)).drop(
        "batch_id", "source_file", "sketch"
    )


@pytest.mark.parametrize("name", PARQUET_OUTPUTS)
def test_every_parquet_output_is_the_same_with_the_retried_chunks(spark, runs, name):
    once, twice = (rows(spark, p, name) for p in runs)
    assert once.count() > 0
    assert once.exceptAll(twice).count() == 0 and twice.exceptAll(once).count() == 0


@pytest.mark.parametrize("table", STORE_TABLES)
def test_every_live_view_is_the_same_with_the_retried_chunks(runs, table):
    once, twice = (ServingStore(p.cfg.store_path, read_only=True) for p in runs)
    sql = f"SELECT * FROM {table} ORDER BY {STORE_TABLES[table]}"

    def strip(row):
        return {k: v for k, v in row.items() if k != "sketch"}

    assert [strip(r) for r in once.query(sql)] == [strip(r) for r in twice.query(sql)]
    assert once.query(sql)


def test_the_removed_copies_are_counted(runs, nasa_day):
    once, twice = (ServingStore(p.cfg.store_path, read_only=True).counters() for p in runs)
    lines = nasa_lines(nasa_day)[:12000]
    twins = len(lines) - len(set(lines))  # lines the server wrote twice also count once
    assert twins == 2
    assert once == {
        "events": 11998,
        "late_events": 0,
        "quarantined": 0,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": twins,
    }
    # two chunks of 3,000 lines sent twice
    assert twice == {**once, "duplicates": twins + 6000}
    assert runs[1].totals.events == 11998


def test_identical_lines_count_once_in_a_batch(spark):
    lines = spark.createDataFrame([("a",), ("b",), ("a",), ("c",), ("b",)], "value string")
    out = drop_duplicate_lines(lines)
    assert sorted(r.value for r in out.collect()) == ["a", "b", "c"]
    assert out.where(F.col(LINE_KEY).isNull()).count() == 0
