"""A restart of the PostgreSQL server costs the pipeline a wait, never its run.

Against a real server of this module's own (``pg_ctl`` stops, starts and restarts it, so it
is not the session's shared one): a restart while the pipeline is idle (its pooled
connections broken: ``AdminShutdown`` on the next micro-batch, which used to end the run with
exit status 1), and the server stopped for seconds in the middle of the feed (the writes of
the running micro-batch wait for it, retrying). Both runs end with every line of the real
NASA day counted once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from tests.pipeline.helpers import config, nasa_lines, write_chunks
from tests.serving.conftest import PostgresServer, postgres_cluster
from tests.serving.test_store import batch

from logstream.pipeline import Pipeline
from logstream.serving import open_store

#: 4,500 real lines in three files, one micro-batch each.
LINES, PER_FILE = 4500, 1500
#: Seconds the server stays down in the middle of the feed (well within --store-retry), and
#: the pool's wait for a connection (``pool_timeout``; 10 s by default, which would absorb
#: the outage without a retry).
DOWN_S, POOL_TIMEOUT_S = 8.0, 2


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with postgres_cluster() as running:
        yield running


@pytest.fixture(scope="module")
def lines(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)[:LINES]


def _ingest_batches(url: str) -> list[int]:
    """The ingest micro-batches in the ledger ([] while the server is down)."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            rows = conn.execute("SELECT batch_id FROM ledger WHERE query = 'ingest'").fetchall()
    except psycopg.Error:
        return []
    return sorted(r[0] for r in rows)


def _wait(condition, timeout_s: float, failed: list[BaseException]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert not failed, f"the pipeline failed: {failed[0]!r}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _start(pipeline: Pipeline) -> tuple[threading.Thread, list[BaseException]]:
    failed: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run()
        except BaseException as exc:  # asserted by the test
            failed.append(exc)

    thread = threading.Thread(target=run, name="test-pipeline")
    thread.start()
    return thread, failed


def _counted(url: str) -> tuple[int, int]:
    store = open_store(url, read_only=True)
    try:
        total = store.query("SELECT SUM(requests) AS n FROM traffic_per_minute")[0]["n"]
        return store.counters()["events"], total
    finally:
        store.close()


def test_a_pooled_connection_a_restart_broke_is_replaced(server):
    store = open_store(server.new_database())
    try:
        assert store.commit_ingest_batch("ingest", batch(0)) is True
        server.pg_ctl("restart")  # the pool's idle connection is now broken
        assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is True
        assert store.counters()["events"] == 8
    finally:
        store.close()


def test_a_restart_while_the_pipeline_is_idle_costs_nothing(spark, server, lines, tmp_path):
    url = server.new_database()
    landing = tmp_path / "landing"
    write_chunks(lines[:PER_FILE], landing, per_file=PER_FILE)
    pipeline = Pipeline(spark, config(tmp_path, landing, store=url, trigger="1 second"))
    thread, failed = _start(pipeline)
    try:
        _wait(lambda: _ingest_batches(url) == [0], 180, failed)
        server.pg_ctl("restart")  # between micro-batches: the pool's connections break
        staged = tmp_path / "staged"
        write_chunks(lines[PER_FILE:], staged, per_file=LINES, start_mtime=2_000_000)
        for path in staged.iterdir():  # atomically into the watched directory
            os.replace(path, landing / f"late-{path.name}")
        _wait(lambda: _ingest_batches(url) == [0, 1], 180, failed)
    finally:
        pipeline.request_stop()
        thread.join(120)
        pipeline.stop()  # its queries, which run() leaves to the caller
        pipeline.store.close()
    assert not failed, failed
    assert _counted(url) == (LINES, LINES)


def test_the_server_down_in_the_middle_of_the_feed_delays_the_run(
    spark, server, lines, tmp_path, caplog
):
    url = server.new_database()
    landing = tmp_path / "landing"
    write_chunks(lines, landing, per_file=PER_FILE)
    pooled = f"{url}?pool_timeout={POOL_TIMEOUT_S}"
    pipeline = Pipeline(spark, config(tmp_path, landing, store=pooled))
    thread, failed = _start(pipeline)
    outage = threading.Thread(target=lambda: None)
    try:
        _wait(lambda: _ingest_batches(url) == [0], 180, failed)
        server.pg_ctl("stop")  # micro-batch 1 runs: its writes wait for the server

        def come_back() -> None:
            time.sleep(DOWN_S)
            server.pg_ctl("start")

        outage = threading.Thread(target=come_back)
        outage.start()
        thread.join(300)
    finally:
        if outage.ident is not None:  # started
            outage.join(120)
        pipeline.request_stop()
        thread.join(120)
        pipeline.stop()  # its queries, which run() leaves to the caller
        pipeline.store.close()
    assert not failed, failed
    # the outage hit the feed: a write waited for the server, and went through
    assert "cannot be reached" in caplog.text and "reached again" in caplog.text
    assert _ingest_batches(url) == [0, 1, 2]
    assert _counted(url) == (LINES, LINES)
    assert spark.read.parquet(str(tmp_path / "out" / "events")).count() == LINES
