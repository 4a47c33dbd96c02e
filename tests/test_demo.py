"""The main job end to end: ``logstream run`` with no source replays the real NASA day onto
the dashboard through a growing, rotated access.log that the pipeline follows; Ctrl-C stops
everything; the outputs agree with the batch report.

``make run DURATION=35s`` (:func:`make_run`) is started as the module's first test starts and
runs beside it: both demos spend most of their time waiting on a clock (the 35 s of
``--duration``; the replay's event clock up to the first rotation), so they overlap instead of
queueing (each has its own JVM, output directory, cache and dashboard port; only the Ctrl-C
demo serves Spark's UI).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from logstream import analytics
from logstream.parsing import compile_format, parse
from logstream.replay import ListSink, ManualClock, ReplayOptions, replay_files
from logstream.report import build_report
from logstream.sources import read_lines
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
#: Marks of a stack trace in a process's output: Java's and Python's.
STACK_TRACE_MARKS = ("Exception in thread", "Traceback", "\tat ")


def stack_trace_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(m in line for m in STACK_TRACE_MARKS)]


def ingest_batches(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM ledger WHERE events > 0").fetchone()[0]
    except sqlite3.Error:
        return 0


def metric_values(text: str) -> dict[str, float]:
    """``name{labels}`` → value of a Prometheus text exposition (comments left out)."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def component_prop(node: Any, component_id: str, prop: str) -> Any:
    """A property of the component ``component_id`` in a Dash layout (JSON), or None."""
    if isinstance(node, dict):
        props = node.get("props", {})
        if isinstance(props, dict) and props.get("id") == component_id:
            return props.get(prop)
        children = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = component_prop(child, component_id, prop)
        if found is not None:
            return found
    return None


def scrape_during_the_run(port: int, db: Path) -> dict[str, float]:
    """Scrape the dashboard's /metrics/prometheus/ while the demo runs: logstream's counters
    equal the store's at that moment, and the streaming metrics of the ingest query are there;
    then Spark's own servlet on the driver's UI (its address from the dashboard's link)."""
    url = f"http://127.0.0.1:{port}/metrics/prometheus/"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        got = metric_values(resp.read().decode())
    with sqlite3.connect(db, timeout=5) as conn:
        counters = dict(conn.execute("SELECT name, value FROM counters").fetchall())
        batches = conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]
    # the pipeline may commit a micro-batch between the scrape and the read: never fewer
    assert 0 < got["logstream_events_total"] <= counters["events"]
    assert got["logstream_late_events_total"] == counters["late_events"] == 0
    assert got["logstream_quarantined_lines_total"] == counters["quarantined"] == 0
    assert 3 <= got["logstream_micro_batches_total"] <= batches
    for name in (
        "logstream_input_rows_per_second",
        "logstream_processed_rows_per_second",
        "logstream_batch_duration_seconds",
    ):
        assert got[f'{name}{{query="ingest"}}'] >= 0, name
    assert got['logstream_state_rows{query="ingest"}'] > 0  # open panes, sessions, series
    assert got["logstream_watermark_seconds"] < got["logstream_max_event_time_seconds"]

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=10) as resp:
        ui = component_prop(json.load(resp), "spark-ui-link", "href")
    assert ui is not None and ui.startswith("http://")
    with urllib.request.urlopen(f"{ui}/metrics/prometheus/", timeout=10) as resp:
        spark_metrics = resp.read().decode()
    for gauge in ("inputRate_total", "processingRate_total", "latency"):
        assert re.search(rf"_driver_spark_streaming_ingest_{gauge}_Value", spark_metrics), gauge
    return got


def replayed_lines(log: Path, n: int) -> list[str]:
    """The first ``n`` lines the demo writes: ``log`` in order, then again in the next pass
    with its times shifted past the first (the demo loops a real log; a slow machine that takes
    more than the day's 86 s at ×1000 to reach the test's stop sees the second pass begin)."""
    sink = ListSink()
    options = ReplayOptions(speedup=1000, loop=True, limit_lines=n)
    replay_files([log], sink, options, clock=ManualClock())
    return sink.lines


@dataclass
class MakeRun:
    """A ``make run DURATION=35s`` process, its output (standard output and error) and the
    demo's directory."""

    proc: subprocess.Popen[bytes]
    output_log: Path
    out: Path

    def wait(self, timeout: float = 240) -> str:
        """Wait for make to end by itself (``--duration``); its output."""
        self.proc.wait(timeout)
        return self.output_log.read_text(errors="replace")


@pytest.fixture(scope="module")
def make_run(nasa_day, tmp_path_factory) -> Iterator[MakeRun]:
    """``make run DURATION=35s`` on the real day, started now and left running (it stops by
    itself); killed with its process group if a test did not wait for its end."""
    tmp = tmp_path_factory.mktemp("make-run")
    out = tmp / "demo"
    env = {
        **os.environ,
        "LOGSTREAM_SPARK_UI": "false",
        "LOGSTREAM_DATA_DIR": str(nasa_day.parent),
        "LOGSTREAM_CACHE_DIR": str(tmp / "cache"),
    }
    args = f"--demo-out {out} --port {free_port()} --speedup 1000"
    output_log = tmp / "make-run.log"
    with output_log.open("wb") as fh:
        proc = subprocess.Popen(
            ["make", "-s", "run", "DURATION=35s", f"RUN_ARGS={args}"],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield MakeRun(proc, output_log, out)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # this run's own process group
            proc.wait(30)


# ``make run`` is started first: it runs beside this test (see the module docstring)
@pytest.mark.usefixtures("make_run")
def test_demo_runs_until_ctrl_c_and_its_outputs_agree_with_the_batch_report(
    spark, nasa_day, tmp_path
):
    out, port = tmp_path / "demo", free_port()
    env = {
        **os.environ,
        "LOGSTREAM_SPARK_UI": "true",  # Spark's own /metrics/prometheus/ is scraped below
        "LOGSTREAM_DATA_DIR": str(nasa_day.parent),
        "LOGSTREAM_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "logstream",
            "run",
            "--demo-out",
            str(out),
            "--port",
            str(port),
            "--speedup",
            "1000",
            "--duration",
            "300s",  # an upper bound: the test stops it with Ctrl-C once it has seen enough
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    page = None
    try:
        # three micro-batches and the first rotation (8 h into the day: ~29 s at ×1000); on a
        # busy 2-core machine (two test workers, make run beside) the first micro-batch alone
        # took over a minute
        deadline = time.monotonic() + 240
        rotated = out / "landing" / "access.log.1"
        while ingest_batches(out / "logstream.db") < 3 or not rotated.exists():
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "no data or no rotation within 4 minutes"
            time.sleep(0.2)  # watching a live process
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
            page = resp.status, resp.read().decode()
        scraped = scrape_during_the_run(port, out / "logstream.db")
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        log = proc.communicate(timeout=90)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, log[-3000:]
    assert "received SIGINT" in log and "done:" in log
    assert stack_trace_lines(log) == [], log[-3000:]
    assert "real logs (data-dir): NASA_access_log_Jul95_day09.log.gz" in log
    assert page is not None and page[0] == 200 and "logstream" in page[1].lower()
    assert scraped["logstream_up"] == 1.0
    # no stray process of the group is left: the driver's JVM follows Python within seconds
    deadline = time.monotonic() + 30
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "processes of the demo are still running"
        time.sleep(0.2)

    events = spark.read.parquet(str(out / "stream" / "events"))
    with sqlite3.connect(out / "logstream.db") as conn:
        counters = dict(conn.execute("SELECT name, value FROM counters").fetchall())
        store_traffic = conn.execute(
            "SELECT SUM(requests), SUM(bytes), SUM(status_2xx), SUM(status_3xx), SUM(status_4xx) "
            "FROM traffic_per_minute"
        ).fetchone()
    n = events.count()
    assert n == counters["events"] > 1000 and counters["quarantined"] == 0

    # issue 54 item 13: the summary says what the replay wrote and what was left unread
    in_landing = 0
    for path in (out / "landing").iterdir():
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            in_landing += sum(1 for _ in fh)
    said = re.search(r"the replay wrote ([\d,]+) lines(?:; ([\d,]+) of them not read yet)?", log)
    assert said is not None, log[-3000:]
    assert int(said[1].replace(",", "")) == in_landing
    read = counters["events"] + counters["late_events"] + counters["quarantined"]
    assert int((said[2] or "0").replace(",", "")) == in_landing - read

    # the demo wrote the day into a growing access.log, rotated every 12 h of event time (the
    # first rotation falls 8 h into the day, at 12:00 UTC), and the pipeline followed it: what
    # it counted is exactly the day's first n lines, each once, across the rotation
    landing = sorted(p.name for p in (out / "landing").iterdir())
    assert landing[:2] == ["access.log", "access.log.1"], landing
    read_from = {r.source_file for r in events.select("source_file").distinct().collect()}
    assert read_from <= {(out / "landing" / name).as_uri() for name in landing[:2]}, read_from
    first_n = tmp_path / "first_n.log"
    first_n.write_text("\n".join(replayed_lines(nasa_day, n)) + "\n")
    written = parse(read_lines(spark, [first_n]), compile_format("common"))
    fields = ["client_host", "event_time", "method", "url_path", "status", "bytes_sent"]
    assert events.select(*fields).exceptAll(written.select(*fields)).count() == 0
    assert written.select(*fields).exceptAll(events.select(*fields)).count() == 0

    # issue 1's batch report over the same lines agrees with the store (every line counts in
    # both: deduplication is opt-in)
    report = build_report(written, panels=())  # its totals and status classes
    assert report["general"]["total_requests"] == n
    assert report["general"]["bandwidth_bytes"] == store_traffic[1]
    classes = report["status_classes"]
    assert (store_traffic[0], store_traffic[2], store_traffic[3], store_traffic[4]) == (
        n,
        classes.get("2xx", 0),
        classes.get("3xx", 0),
        classes.get("4xx", 0),
    )

    # final windows in Parquet equal the same windows computed in batch from the events
    windows = spark.read.parquet(str(out / "stream" / "traffic_per_minute")).drop("batch_id")
    batch = analytics.traffic_per_window(events, "1 minute").select(*windows.columns)
    joined = windows.join(batch, "window_start", "left_anti")
    assert joined.count() == 0
    assert (
        windows.exceptAll(
            batch.join(windows.select("window_start"), "window_start").select(*windows.columns)
        ).count()
        == 0
    )
    assert events.agg(F.min("event_time")).first()[0].isoformat() == "1995-07-09T04:00:00"


def test_make_run_with_a_duration_ends_cleanly(make_run):
    """``make run DURATION=…`` (the README's main job) stops by itself with the summary line,
    exit status 0 and no Java or Python stack trace (issue 12)."""
    log = make_run.wait()
    assert make_run.proc.returncode == 0, log[-3000:]
    assert "done:" in log and "--duration 35s reached" in log, log[-3000:]
    assert stack_trace_lines(log) == [], log[-3000:]
    assert ingest_batches(make_run.out / "logstream.db") >= 1
