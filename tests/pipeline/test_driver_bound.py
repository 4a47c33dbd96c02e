"""Which micro-batches are delivered on the driver: the bound ``logstream run`` sets
(:meth:`Pipeline._driver_rows`) and the guard on a micro-batch's text
(:data:`~logstream.pipeline.ingest.settings.DRIVER_TEXT_BYTES`), and the lines counted before the
collect."""

from __future__ import annotations

import pytest
from tests.pipeline.helpers import config, nasa_lines, pipeline_for, run_to_end, write_chunks

from logstream.pipeline.ingest import stage as stage_module
from logstream.pipeline.ingest.settings import DRIVER_ROWS, local_driver_rows


@pytest.fixture(scope="module")
def input_dir(nasa_day, tmp_path_factory):
    directory = tmp_path_factory.mktemp("driver-bound") / "in"
    write_chunks(nasa_lines(nasa_day)[:6_000], directory, per_file=3_000)
    return directory


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, local_driver_rows()),  # a local master computing outputs: sized to memory
        ({"queries": "none"}, DRIVER_ROWS),  # ingest only: one_pass writes a large one
        ({"driver_rows": 0}, 0),  # --driver-rows wins
        ({"driver_rows": 5_000}, 5_000),
    ],
    ids=["outputs", "ingest-only", "never", "set"],
)
def test_the_driver_bound_of_a_run(spark, tmp_path, input_dir, overrides, expected):
    pipeline = pipeline_for(spark, config(tmp_path, input_dir, **overrides))
    try:
        assert pipeline.settings.driver_rows == expected
    finally:
        pipeline.stop()
    assert local_driver_rows() >= DRIVER_ROWS


def test_a_micro_batch_of_more_text_than_the_guard_takes_the_spark_steps(
    spark, tmp_path, input_dir, monkeypatch
):
    size = sum(f.stat().st_size for f in input_dir.iterdir())  # one micro-batch of 6,000 lines
    one = {"queries": "traffic_per_minute", "max_files_per_trigger": 2}
    run = run_to_end(pipeline_for(spark, config(tmp_path / "under", input_dir, **one)))
    assert run.ingest.paths == {"driver": 1, "one_pass": 0, "spark": 0}
    monkeypatch.setattr(stage_module, "DRIVER_TEXT_BYTES", size - 1)
    over = run_to_end(pipeline_for(spark, config(tmp_path / "over", input_dir, **one)))
    assert over.ingest.paths == {"driver": 0, "one_pass": 0, "spark": 1}
    assert over.ingest.totals.events == run.ingest.totals.events == 6_000


def test_counted_lines_decide_the_path_and_are_collected_without_a_limit(
    spark, tmp_path, input_dir, monkeypatch
):
    """The files' 6,000 lines, counted on the driver: at a bound of 6,000 they are collected
    as the tasks make them (no limit), at 5,999 the Spark steps deliver them, and the driver
    never collects them."""
    collected = []
    real = stage_module.batch_rows

    def spy(stage, parsed, *, counted=False):
        collected.append(counted)
        return real(stage, parsed, counted=counted)

    monkeypatch.setattr(stage_module, "batch_rows", spy)
    one = {"queries": "traffic_per_minute", "max_files_per_trigger": 2}
    exact = run_to_end(
        pipeline_for(spark, config(tmp_path / "exact", input_dir, driver_rows=6_000, **one))
    )
    assert exact.ingest.paths == {"driver": 1, "one_pass": 0, "spark": 0}
    assert collected == [True]
    over = run_to_end(
        pipeline_for(spark, config(tmp_path / "over", input_dir, driver_rows=5_999, **one))
    )
    assert over.ingest.paths == {"driver": 0, "one_pass": 0, "spark": 1}
    assert collected == [True]
    assert over.ingest.totals.events == exact.ingest.totals.events == 6_000
