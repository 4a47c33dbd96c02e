"""Killed with SIGKILL mid-run and restarted on the same state, the pipeline ends with the
same Parquet outputs and serving store as an uninterrupted run: nothing lost, nothing twice."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import PARQUET_OUTPUTS, config, nasa_lines, write_chunks

from logstream.pipeline import Pipeline
from logstream.serving import ServingStore

STORE_TABLES = {
    "traffic_per_minute": "SELECT * FROM traffic_per_minute",
    "trending_pages": "SELECT * FROM trending_pages",
    "unique_visitors": "SELECT window_start, window_end, visitors FROM unique_visitors",
    "top_clients": "SELECT * FROM top_clients",
    # (a KLL sketch's quantiles depend on the order of merges, which a restart may change)
    "session_stats": "SELECT window_start, window_end, sessions, bounces, pages FROM session_stats",
    "alerts": "SELECT series, metric, window_start, value, mean, std FROM alerts",
    "counters": "SELECT * FROM counters",
    # the stateful queries may cut their micro-batches elsewhere after a restart
    "ledger": "SELECT batch_id, events, late_events, quarantined FROM ledger "
    "WHERE query = 'ingest'",
    "max_event": "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'",
}


@pytest.fixture(scope="module")
def chunks(nasa_day, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recovery-input")
    write_chunks(nasa_lines(nasa_day), directory, per_file=6000)
    return directory


@pytest.fixture(scope="module")
def reference(spark, chunks, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("recovery-reference")
    pipeline = Pipeline(spark, config(tmp, chunks, dedup=True))
    try:
        pipeline.run()
    finally:
        pipeline.stop()
    return tmp


def cli_args(tmp: Path, chunks: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "logstream",
        "run",
        "--input-dir",
        str(chunks),
        "--output-dir",
        str(tmp / "out"),
        "--state-dir",
        str(tmp / "state"),
        "--store",
        f"sqlite:///{tmp / 'store.db'}",
        "--trigger",
        "available-now",
        "--max-files-per-trigger",
        "1",
        "--format",
        "common",
        "--quiet",
        "--dedup",  # its operator's state and count must survive a kill too
    ]


def ledger_size(tmp: Path) -> int:
    try:
        with sqlite3.connect(tmp / "store.db", timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]
    except sqlite3.Error:
        return 0


def run_and_kill(tmp: Path, chunks: Path, ready: Callable[[], bool], limit_s: float = 120) -> None:
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    proc = subprocess.Popen(
        cli_args(tmp, chunks),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + limit_s
    try:
        while not ready():
            assert proc.poll() is None, "the run ended before the kill point"
            assert time.monotonic() < deadline, "kill point never reached"
            time.sleep(0.05)  # polling a child process's progress, not waiting for results
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no clean-up
        proc.wait()


def finish(tmp: Path, chunks: Path) -> None:
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    done = subprocess.run(
        cli_args(tmp, chunks), env=env, capture_output=True, text=True, timeout=300
    )
    # the cause, not the logical plan Spark appends to a query's failure
    causes = [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line]
    assert done.returncode == 0, "\n".join(causes[:20])[:4000] or done.stderr[-3000:]


def parquet_rows(spark, root: Path, name: str) -> Counter:
    df = spark.read.parquet(str(root / "out" / name))
    df = df.drop("batch_id", "sketch") if name != "events" else df.drop("batch_id")
    return Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())


def store_rows(root: Path) -> dict[str, Counter]:
    with sqlite3.connect(root / "store.db") as conn:
        return {name: Counter(conn.execute(sql).fetchall()) for name, sql in STORE_TABLES.items()}


KILL_POINTS = {
    "after_two_ingest_batches": lambda tmp: ledger_size(tmp) >= 2,
    "after_ingest_before_windows": lambda tmp: (
        ledger_size(tmp) >= 6 and not (tmp / "state" / "trending_pages" / "commits" / "0").exists()
    ),
    "during_window_queries": lambda tmp: (
        tmp / "state" / "trending_pages" / "offsets" / "0"
    ).exists(),
}


@pytest.mark.parametrize("kill_point", list(KILL_POINTS))
def test_sigkill_then_restart_ends_identical_to_an_uninterrupted_run(
    spark, chunks, reference, tmp_path, kill_point
):
    run_and_kill(tmp_path, chunks, lambda: KILL_POINTS[kill_point](tmp_path))
    finish(tmp_path, chunks)
    for name in PARQUET_OUTPUTS:
        got, want = parquet_rows(spark, tmp_path, name), parquet_rows(spark, reference, name)
        assert got == want, (
            f"{name}: {sum((got - want).values())} extra, {sum((want - got).values())} missing"
        )
    assert store_rows(tmp_path) == store_rows(reference)
    # the copies dropped are committed with their micro-batch: exact after a kill too
    got = ServingStore(tmp_path / "store.db").counters()["duplicates"]
    assert got == ServingStore(reference / "store.db").counters()["duplicates"] == 10
    events = spark.read.parquet(str(tmp_path / "out" / "events"))
    assert events.count() == 35262  # the 10 lines the NASA day holds twice count once
    assert events.groupBy("batch_id").count().where(F.col("count") == 0).count() == 0


def test_a_batch_replayed_after_its_outputs_were_written_still_commits_its_state(
    spark, chunks, reference, tmp_path
):
    """The process died after a sink wrote micro-batch N but before Spark recorded its
    commit: Spark replays N, the writers find it done, and must still run the stateful plan
    (deduplication, session windows) or Spark fails the query."""
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
    for query in ("ingest", "sessions"):
        with sqlite3.connect(tmp_path / "store.db") as conn:
            last = conn.execute(
                "SELECT MAX(batch_id) FROM ledger WHERE query = ?", (query,)
            ).fetchone()[0]
        for path in (tmp_path / "state" / query / "commits").iterdir():
            number = path.name.removeprefix(".").removesuffix(".crc")  # and its checksum
            if number.isdigit() and int(number) >= last:
                path.unlink()
    finish(tmp_path, chunks)  # used to fail: STATE_STORE_COMMIT_VALIDATION_FAILED
    assert store_rows(tmp_path) == store_rows(reference)
