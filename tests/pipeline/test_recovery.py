"""Killed with SIGKILL mid-run and restarted on the same state, the pipeline ends with the
same Parquet outputs and serving store as an uninterrupted run: nothing lost, nothing twice.

The killed runs are ``logstream run`` processes (a SIGKILL takes the driver and its JVM); the
uninterrupted reference and the last restart after the kills run in the test's own Spark
session, whose JVM is already up (a process start is most of a short run's time). The restart
of a process that died after delivering a micro-batch is a ``logstream run`` process too.

The kill drill's short form is here too, on the same input and reference run: a SIGKILL at a
seeded random moment rather than at a chosen write. ``python bench/drill_kill.py --kills 20``
is its long form (the whole day, 24 micro-batches)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from tests.conftest import DATA_DIR
from tests.pipeline.helpers import (
    PARQUET_OUTPUTS,
    load_bench,
    nasa_lines,
    run_in_process,
    write_chunks,
)

from logstream.pipeline.ingest import FAULT_ENV

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


#: The first lines of the NASA day, in three 3,000-line files: three ingest micro-batches.
LINES = 9_000


@pytest.fixture(scope="module")
def chunks(nasa_day, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recovery-input")
    write_chunks(nasa_lines(nasa_day)[:LINES], directory, per_file=3000)
    return directory


@pytest.fixture(scope="module")
def reference(spark, chunks, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("recovery-reference")
    run_in_process(spark, tmp, chunks)
    return tmp


@pytest.fixture(scope="module")
def reference_rows(spark, reference) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """The uninterrupted run's Parquet outputs and store tables as multisets, read once for
    the module's tests."""
    return {name: parquet_rows(spark, reference, name) for name in PARQUET_OUTPUTS}, store_rows(
        reference
    )


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
    ]


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


#: (step, micro-batch): successive starts are SIGKILLed there, between two writes of the batch
#: (``logstream.pipeline.ingest.fault_hook``): after its windows went to the store ahead of
#: the ledger (no output yet), after its events are published (other outputs not yet), before
#: the store commits (every Parquet output written), and after the store committed but before
#: the analytics snapshot. Batch 1 is the first whose watermark passes windows, so windows,
#: sessions and alerts are published from it; the next starts replay batch 1 and die in it
#: again, later.
KILL_POINTS = [
    ("committed_views", 1),
    ("published_events", 1),
    ("before_commit", 1),
    ("before_snapshot", 2),
]


def run_killed_at(tmp: Path, chunks: Path, step: str, batch: int) -> None:
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false", FAULT_ENV: f"{step}:{batch}"}
    proc = subprocess.Popen(
        cli_args(tmp, chunks),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.wait(timeout=300) == -signal.SIGKILL, f"no fault injected at {step}:{batch}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_sigkills_between_writes_then_restart_end_identical_to_an_uninterrupted_run(
    spark, chunks, reference_rows, tmp_path
):
    for step, batch in KILL_POINTS:  # each start resumes the previous one's state
        run_killed_at(tmp_path, chunks, step, batch)
    # the restart on the state the last kill left: batch 2 replayed, then the end
    run_in_process(spark, tmp_path, chunks)
    want_parquet, want_store = reference_rows
    for name in PARQUET_OUTPUTS:
        got, want = parquet_rows(spark, tmp_path, name), want_parquet[name]
        assert got == want, (
            f"{name}: {sum((got - want).values())} extra, {sum((want - got).values())} missing"
        )
    assert store_rows(tmp_path) == want_store
    events = spark.read.parquet(str(tmp_path / "out" / "events"))
    assert events.count() == LINES
    assert events.groupBy("batch_id").count().where(F.col("count") == 0).count() == 0


def test_a_batch_replayed_after_it_was_delivered_changes_nothing(
    spark, chunks, reference, reference_rows, tmp_path
):
    """The process died after micro-batch N was delivered (outputs, store, snapshot) but
    before Spark recorded its commit: Spark replays N, which finds its snapshot and writes
    nothing twice."""
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
    with sqlite3.connect(tmp_path / "store.db") as conn:
        last = conn.execute("SELECT MAX(batch_id) FROM ledger WHERE query = 'ingest'").fetchone()
    for path in (tmp_path / "state" / "ingest" / "commits").iterdir():
        number = path.name.removeprefix(".").removesuffix(".crc")  # and its checksum
        if number.isdigit() and int(number) >= last[0]:
            path.unlink()
    finish(tmp_path, chunks)
    want_parquet, want_store = reference_rows
    assert store_rows(tmp_path) == want_store
    for name in PARQUET_OUTPUTS:
        assert parquet_rows(spark, tmp_path, name) == want_parquet[name]


def test_a_kill_at_a_random_moment_changes_no_output(
    spark, chunks, reference, tmp_path, monkeypatch
):
    """The kill drill's short form: one SIGKILL of the whole ``logstream run`` process group
    at a seeded moment (about half a micro-batch after its first commit, with two left to
    run), a restart to the end, and every Parquet output and store table equal to the
    uninterrupted run's (:func:`bench.drill_kill.compare`)."""
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(DATA_DIR))
    result = load_bench("drill_kill").drill(
        spark,
        kills=1,
        seed=3,
        work=tmp_path,
        chunks=chunks,
        reference=reference,
        run_rest=lambda root, input_dir: run_in_process(spark, root, input_dir),
    )
    assert result.lines == LINES
    # a kill lands while the pipeline runs (a restart with little left may end before its
    # moment: -1)
    assert any(n >= 0 for n in result.committed_at_kill), result
    assert result.differences == {}
