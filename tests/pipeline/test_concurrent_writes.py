"""The writes of a micro-batch run at once (logstream.pipeline.ingest.publish.run_concurrently)."""

from __future__ import annotations

import threading

import pytest

from logstream.pipeline.ingest.publish import run_concurrently


class Failed(Exception):
    pass


def test_a_failure_is_raised_once_every_task_has_ended(spark):
    started, finished = threading.Event(), threading.Event()

    def fails() -> None:
        started.set()
        raise Failed("the first write failed")

    def still_writing() -> None:
        assert started.wait(30)  # runs beside the failing task, and ends after it
        finished.set()

    with pytest.raises(Failed, match="first write failed"):
        run_concurrently([fails, still_writing], 2, spark)
    assert finished.is_set()  # nothing left running under the batch's cached frames


def test_the_tasks_run_at_once_with_the_callers_spark_properties(spark):
    sc = spark.sparkContext
    sc.setLocalProperty("logstream.test.batch", "batch 7")  # as the query's job group is
    barrier = threading.Barrier(3, timeout=30)  # three tasks that must all be running at once
    seen: list[tuple[str | None, str]] = []

    def task() -> None:
        barrier.wait()
        seen.append((sc.getLocalProperty("logstream.test.batch"), threading.current_thread().name))

    try:
        run_concurrently([task, task, task], 3, spark)
    finally:
        sc.setLocalProperty("logstream.test.batch", None)
    assert [value for value, _ in seen] == ["batch 7"] * 3
    assert len({name for _, name in seen}) == 3
    assert all(name.startswith("logstream-writer") for _, name in seen)


def test_one_writer_runs_the_tasks_in_turn_on_the_calling_thread(spark):
    order: list[tuple[int, str]] = []
    tasks = [lambda i=i: order.append((i, threading.current_thread().name)) for i in range(3)]
    run_concurrently(tasks, 1, spark)
    assert order == [(i, threading.current_thread().name) for i in range(3)]
