"""The socket source fed by the replay server, and the rate source, end to end through the
streaming pipeline."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from pyspark.sql import functions as F

from logstream.pipeline import Pipeline
from logstream.sources import rate_sample
from tests import oracle
from tests.conftest import data_file, free_port
from tests.pipeline.helpers import config

FIRST_2000 = "NASA_access_log_Jul95_first2000.log.gz"


def listening(port: int) -> bool:
    """Whether a socket listens on ``port`` (read from /proc, without connecting: a probe
    connection would count as the replay server's first client)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for row in fh.readlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def run_until(pipeline: Pipeline, done, timeout_s: float = 120.0) -> None:
    """Run ``pipeline`` in a thread until ``done()`` holds (polled), then stop it."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            pipeline.run()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not done() and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.5)
    finally:
        pipeline.request_stop()
        thread.join(60)
        pipeline.stop()
    assert not errors, errors


def test_the_replay_server_feeds_the_socket_source_every_line_once(spark, tmp_path):
    """`logstream replay --tcp` serves the real NASA lines; `logstream run --socket` counts
    each once and its final windows equal a plain-Python count of the file."""
    path = data_file(FIRST_2000)
    lines = oracle.read_lines(path)
    port = free_port()
    command = [sys.executable, "-m", "logstream", "replay", str(path)]
    replay = subprocess.Popen(
        [*command, "--tcp", f"127.0.0.1:{port}", "--rate", "4000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not listening(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        cfg = config(
            tmp_path,
            None,
            source="socket",
            socket=f"127.0.0.1:{port}",
            trigger="1 second",
            max_files_per_trigger=None,
            queries="traffic_per_minute",
            watermark="1 minute",
        )
        pipeline = Pipeline(spark, cfg)
        totals = pipeline.totals
        run_until(pipeline, lambda: totals.events + totals.quarantined >= len(lines))
        assert replay.wait(60) == 0, replay.stderr.read() if replay.stderr else ""
    finally:
        replay.kill()
        replay.wait()

    refs = [r for r in map(oracle.parse_line, lines) if r is not None]
    assert (pipeline.totals.events, pipeline.totals.quarantined) == (len(refs), 0)
    assert len(refs) == len(lines) == 2000
    watermark_s = pipeline.ingest.watermark_for_next_batch() // 1000
    assert watermark_s == max(r.epoch for r in refs) - 60
    minutes = Counter(r.epoch // 60 * 60 for r in refs)
    traffic = spark.read.parquet(str(tmp_path / "out" / "traffic_per_minute"))
    got = {
        int(r[0].replace(tzinfo=UTC).timestamp()): r[1]
        for r in traffic.select("window_start", "requests").collect()
    }
    assert got == {m: n for m, n in minutes.items() if m + 60 <= watermark_s}
    assert len(got) >= 30


def test_the_rate_source_replays_the_sample_lines_in_order_stamped_now(spark, tmp_path):
    sample_path = data_file(FIRST_2000)
    sample = rate_sample(sample_path)
    started = datetime.now(UTC).replace(microsecond=0)
    cfg = config(
        tmp_path,
        None,
        source="rate",
        rate=1000,
        rate_sample=sample_path,
        log_format="auto",
        trigger="1 second",
        max_files_per_trigger=None,
        queries="none",
    )
    pipeline = Pipeline(spark, cfg)
    assert pipeline.fmt.name == "common"  # detected from the sample file
    run_until(pipeline, lambda: pipeline.totals.events >= 2500)
    n = pipeline.totals.events
    assert n >= 2500 and pipeline.totals.quarantined == 0
    ev = spark.read.parquet(str(tmp_path / "out" / "events"))
    # rate rows 0 … n-1: row i is sample line i mod len(sample), whatever the micro-batches
    refs = [oracle.parse_line(sample[i % len(sample)]) for i in range(n)]
    want = Counter((r.client_host, r.url_path, r.status, r.bytes_sent) for r in refs)
    got = Counter(
        tuple(r) for r in ev.select("client_host", "url_path", "status", "bytes_sent").collect()
    )
    assert got == want
    span = ev.agg(F.min("event_time"), F.max("event_time")).first()
    assert started <= span[0].replace(tzinfo=UTC) <= span[1].replace(tzinfo=UTC)
    assert span[1].replace(tzinfo=UTC) <= datetime.now(UTC)
