"""End to end on real lines: the continuous trigger (socket → console, through the CLI), the
processing-time-0 trigger (socket → webhook, exactly once), the Kafka sink and the real-time
trigger refused at start, and ``logstream run --trigger "0 seconds"``."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pyspark.sql import functions as F

from logstream.cli import main
from logstream.pipeline import PipelineConfig
from logstream.pipeline.config import trigger_value
from logstream.pipeline.run import Pipeline
from logstream.replay import TcpLineServer
from logstream.rules.config import RulesConfig, parse_trigger
from logstream.rules.query import start_alert_query
from logstream.sources.stream import KAFKA_PACKAGE
from tests.conftest import NASA_JUL_2000, REPO, TWIKI_CRLF, data_file, free_port
from tests.pipeline.helpers import config, nasa_lines, write_chunks
from tests.rules.test_rules import SAMPLES, _oracle

#: The real elastic Combined log and three labelled hand-written scanner lines.
LINES = SAMPLES["elastic"][1]
EXPECTED = Counter({line: n for (line, _), n in _oracle(LINES).items()})
DEADLINE_S = 180
_CLF_TIME = re.compile(r"\[[^\]]*\]")


def _feed(server: TcpLineServer, lines: list[str]) -> None:
    """Send ``lines`` in chunks of 500 once a client is connected."""
    assert server.wait_for_clients(1, timeout_s=DEADLINE_S), "the socket source never connected"
    for i in range(0, len(lines), 500):
        for line in lines[i : i + 500]:
            server.write(line)
        server.flush()


def test_the_continuous_trigger_prints_every_alert_once(tmp_path):
    """``logstream rules --trigger continuous:1s``: socket → console, one JSON per alert."""
    port = free_port()
    server = TcpLineServer(port=port)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "logstream", "rules", "--socket", f"127.0.0.1:{port}"]
    cmd += ["--format", "combined", "--trigger", "continuous:1s", "--master", "local[2]"]
    cmd += ["--checkpoint", str(tmp_path / "ck"), "--duration", f"{DEADLINE_S}s"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    got: Counter[str] = Counter()
    try:
        _feed(server, LINES)

        def read() -> None:
            assert proc.stdout is not None
            for text in proc.stdout:
                text = text.strip().strip("|").strip()
                if text.startswith('{"rule"'):
                    got[json.loads(text)["raw_line"]] += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + DEADLINE_S
        while sum(got.values()) < sum(EXPECTED.values()) and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.2)  # polling the subprocess's output with a deadline
        time.sleep(1.5)  # one more epoch: a duplicate would show up now
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        server.close()
    assert "continuous trigger" in err, err[-2000:]
    assert got == EXPECTED


class _Hook(BaseHTTPRequestHandler):
    received: list[tuple[str, list[dict]]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.headers["Idempotency-Key"], json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    httpd.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_processing_time_zero_posts_every_alert_once_to_the_webhook(spark, webhook, tmp_path):
    server = TcpLineServer(port=0)
    host, port = webhook.server_address[:2]
    cfg = RulesConfig(
        source="socket",
        socket=f"127.0.0.1:{server.address[1]}",
        trigger=parse_trigger("0 seconds"),
        sink=f"http://{host}:{port}/alerts",
        log_format="combined",
        checkpoint=tmp_path / "ck",
    )
    query = start_alert_query(spark, cfg)
    try:
        _feed(server, LINES)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if sum(len(rows) for _, rows in webhook.received) >= sum(EXPECTED.values()):
                break
            assert query.isActive, query.exception()
            time.sleep(0.2)  # polling the webhook server with a deadline
        query.processAllAvailable()
    finally:
        query.stop()
        server.close()
    keys = [key for key, _ in webhook.received]
    rows = [row for _, batch in webhook.received for row in batch]
    assert len(keys) == len(set(keys))
    assert Counter(row["raw_line"] for row in rows) == EXPECTED
    assert all(row["received_at"] and row["detected_at"] for row in rows)
    assert {row["rule"] for row in rows} == {"scanner", "auth_failure", "server_error"}


def test_the_kafka_sink_fails_at_start_naming_the_connector(spark, capsys):
    args = ["--socket", "127.0.0.1:9", "--format", "combined", "--trigger", "0s"]
    status = main(["rules", *args, "--sink", "kafka://127.0.0.1:9092/alerts"])
    assert status == 2
    assert KAFKA_PACKAGE in capsys.readouterr().err.replace("\n", "")
    assert not spark.streams.active


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trigger", "real-time:5s"], "STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED"),
        (["--kafka", "127.0.0.1:9", "--topic", "t", "--trigger", "real-time:1s"], "5 seconds"),
        (["--kafka", "127.0.0.1:9"], "needs both --kafka-bootstrap"),
        (["--trigger", "continuous:1s", "--sink", "http://127.0.0.1:9/h"], "IllegalThread"),
        (["--trigger", "soon"], "--trigger 'soon'"),
        (["--trigger", "continuous:0s"], "longer than zero"),
        (["--sink", "s3://bucket"], "--sink 's3://bucket'"),
        (["--sink", "kafka://broker"], "kafka://HOST:PORT/TOPIC"),
        (["--format", "auto"], "--format auto needs a file"),
        (["--rate", "5"], "--rate and --rate-sample belong to --source rate"),
    ],
)
def test_bad_options_are_refused_before_spark_starts(args, message, capsys):
    base = ["rules", "--socket", "127.0.0.1:9", "--format", "combined"]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err.replace("\n", "")


def test_the_rate_source_needs_a_rate_and_an_existing_sample(capsys, tmp_path):
    assert main(["rules", "--source", "rate"]) == 2
    assert "--rate N" in capsys.readouterr().err
    assert main(["rules", "--source", "rate", "--rate", "9", "--rate-sample", "nope.log"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0", "0s", "0 seconds", "0ms"])
def test_processing_time_zero_is_a_trigger_of_logstream_run(text):
    assert trigger_value(text) == "0 seconds"
    assert PipelineConfig.build(input_dir="in", trigger=text).trigger == "0 seconds"


def test_logstream_run_with_processing_time_zero_counts_every_line(spark, tmp_path):
    """The pipeline's ingest query under ``--trigger "0 seconds"`` on the real NASA lines."""
    lines = nasa_lines(data_file(NASA_JUL_2000))
    write_chunks(lines, tmp_path / "in", per_file=len(lines))
    cfg = config(tmp_path, tmp_path / "in", trigger="0 seconds", queries="traffic_per_minute")
    pipeline = Pipeline(spark, cfg)
    try:
        query = pipeline.start_ingest()
        query.processAllAvailable()
        batches = query.lastProgress["batchId"] + 1
    finally:
        pipeline.stop()
    events = spark.read.parquet(str(cfg.output_dir / "events"))
    assert events.count() == len(lines) == 2000
    hosts = {line.split(" ", 1)[0] for line in lines}
    assert events.agg(F.countDistinct("client_host")).first()[0] == len(hosts)
    assert batches == 1  # one file, one micro-batch (no empty batch while polling)


def test_the_rate_source_alerts_on_every_alert_line_of_its_sample(spark, webhook, tmp_path):
    """``--source rate --rate-sample``: the real TWiki lines, stamped now, cycled at 1,000/s."""
    sample = data_file(TWIKI_CRLF)
    with gzip.open(sample, "rt", encoding="utf-8") as fh:
        lines = [line.rstrip("\r\n") for line in fh]
    masked = {_CLF_TIME.sub("[]", line) for line, _ in _oracle(lines)}
    host, port = webhook.server_address[:2]
    cfg = RulesConfig(
        source="rate",
        rate=1000,
        rate_sample=sample,
        trigger=parse_trigger("0s"),
        sink=f"http://{host}:{port}/alerts",
        log_format="common",
        checkpoint=tmp_path / "ck",
    )
    query = start_alert_query(spark, cfg)
    try:
        deadline = time.monotonic() + DEADLINE_S
        rows: list[dict] = []
        while time.monotonic() < deadline:
            rows = [row for _, batch in list(webhook.received) for row in batch]
            if {_CLF_TIME.sub("[]", row["raw_line"].rstrip()) for row in rows} >= masked:
                break
            assert query.isActive, query.exception()
            time.sleep(0.2)  # polling the webhook server with a deadline
    finally:
        query.stop()
    assert {_CLF_TIME.sub("[]", row["raw_line"].rstrip()) for row in rows} == masked
    for row in rows:  # each line is stamped with the time the rate source made it
        assert row["raw_line"].split("[", 1)[1][:20] == _clf(row["received_at"])
        assert row["rules"] == ["auth_failure"] and row["status"] == 401


def _clf(iso: str) -> str:
    """``2026-11-24T21:00:05.123Z`` → ``24/Nov/2026:21:00:05`` (the CLF time of that second)."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).strftime("%d/%b/%Y:%H:%M:%S")
