"""The DStream edition survives kill -9: ``logstream dstream run --dir`` is killed with a batch
in flight, restarted on the same checkpoint (``StreamingContext.getOrCreate``), and the store's
totals equal an uninterrupted count of the same real lines: nothing lost, nothing twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from logstream.dashboard.data import read_snapshot
from logstream.dstream.weblog import DSTREAM_QUERY, parse_line
from logstream.parsing import compile_format
from logstream.replay import iter_lines
from tests.conftest import NASA_JUL_2000, data_file

BATCH_S = 2
DEADLINE_S = 240


def status_totals(db: Path) -> Counter:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            rows = conn.execute(
                "SELECT status_class, SUM(requests) FROM dstream_status GROUP BY status_class"
            ).fetchall()
    except sqlite3.Error:  # not created yet
        return Counter()
    return Counter(dict(rows))


def host_totals(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db, timeout=5) as conn:
        requests, size = conn.execute(
            "SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(bytes), 0) FROM dstream_hosts"
        ).fetchone()
    return requests, size


def wait_for(condition, proc: subprocess.Popen, what: str, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"dstream run exited ({proc.returncode}) before {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {DEADLINE_S} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def test_kill_and_restart_count_every_line_once(tmp_path):
    lines = list(iter_lines(str(data_file(NASA_JUL_2000))))
    fmt = compile_format("common")
    import re

    regex = re.compile(fmt.regex)
    parsed = [r for r in (parse_line(line, regex, fmt.fields) for line in lines) if r]
    expected = Counter(f"{r[2] // 100}xx" for r in parsed)
    expected_bytes = sum(r[3] for r in parsed)
    listed = [h for h, _ in Counter(r[0] for r in parsed).most_common(2)]
    expected_listed = sum(1 for r in parsed if r[0] in listed)
    parts = [lines[:700], lines[700:1400], lines[1400:]]

    watched, staging = tmp_path / "in", tmp_path / "staging"
    watched.mkdir()
    staging.mkdir()
    db, checkpoint, log = tmp_path / "store.db", tmp_path / "checkpoint", tmp_path / "run.log"
    hosts = tmp_path / "listed.txt"
    hosts.write_text("".join(h + "\n" for h in listed))

    def drop(i: int) -> None:  # written aside, then renamed in: textFileStream sees it whole
        path = staging / f"part-{i}.log"
        path.write_text("".join(line + "\n" for line in parts[i]))
        os.replace(path, watched / path.name)

    cmd = [
        *(sys.executable, "-m", "logstream", "dstream", "run", "--dir", str(watched)),
        *("--batch", f"{BATCH_S}s", "--window", f"{3 * BATCH_S}s", "--slide", f"{BATCH_S}s"),
        *("--checkpoint", str(checkpoint), "--store", str(db), "--master", "local[2]"),
        *("--listed-hosts", str(hosts)),
    ]
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}

    def start() -> subprocess.Popen:
        with log.open("a") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=out, env=env, start_new_session=True)

    def counted() -> int:
        return sum(status_totals(db).values())

    first = start()
    try:
        wait_for(lambda: "checkpoint in" in log.read_text(), first, "the start", log)
        drop(0)
        wait_for(lambda: counted() == len(parts[0]), first, "the first file counted", log)
        drop(1)
        time.sleep(BATCH_S)  # the second file's batch is being generated or processed
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()

    second = start()
    try:
        wait_for(lambda: "recovered from" in log.read_text(), second, "the recovery", log)
        drop(2)
        wait_for(lambda: counted() >= len(parsed), second, "every line counted", log)
        time.sleep(3 * BATCH_S)  # a replayed batch would come now: it must change nothing
        assert status_totals(db) == expected
        assert host_totals(db) == (len(parsed), expected_bytes)
        # the transform() join's static RDD is re-created by the recovered context
        with sqlite3.connect(db) as conn:
            sql = "SELECT SUM(listed_requests) FROM dstream_batches"
            assert conn.execute(sql).fetchone()[0] == expected_listed > 0
        # the StreamingListener's figures, in the store and as the dashboard reads them
        health = read_snapshot(db).health
        assert health is not None
        (query,) = health.queries
        assert query["query"] == DSTREAM_QUERY and query["batch_duration_ms"] > 0
        # a DStream has no watermark: the listener's scheduling delay is read as what it is
        assert query["watermark"] is None and query["scheduling_delay_ms"] >= 0
        assert health.duration_ms and all(d is None or d >= 0 for d in health.duration_ms)
        # (a file stream reports 0 records to the listener: Spark counts a receiver's only)
    finally:
        second.send_signal(signal.SIGINT)
        try:
            second.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
