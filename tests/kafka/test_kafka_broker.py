"""The log through a real Kafka broker: replay, ``logstream run --kafka`` with a kill -9, the
Kafka sink, messages deleted before they were read, and ``logstream rules`` in real-time mode.

One broker for the module (``kafka_broker``, a real Apache Kafka, KRaft, on 127.0.0.1). The NASA
day (35,272 lines) is replayed into a topic of 3 partitions; ``logstream run --kafka`` reads it
in micro-batches of 12,000 offsets, is SIGKILLed mid-way (after micro-batch 1 published its
outputs and sent them to the Kafka sink, before its snapshot) and restarted. The pipeline runs
are ``logstream run`` processes: the suite's shared SparkSession has no Kafka connector. The
directory run of the same lines, in three files of 12,000 lines, runs in that shared session.

What is compared with the directory run: every event (the same multiset of rows, 35,272, none
late, none quarantined; ``source_file`` is null for Kafka), the serving store's counters and
per-minute traffic and visitors (live values of every window, final or not), and the window
outputs whose windows are final in both runs (``window_end`` up to the earlier run's last
final window; sessions that ended 30 minutes before it). Micro-batch boundaries differ by a
few lines (Spark shares ``maxOffsetsPerTrigger`` between the partitions with rounding), so the
``batch_id`` of a row and the last windows an available-now run leaves open are not compared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from logstream.cli import main
from logstream.kafka.client import delete_before, ensure_topic, partition_offsets, read_records
from logstream.pipeline.ingest import FAULT_ENV
from logstream.sources.kafka import unread_offsets
from tests.conftest import NASA_AUG_1000, data_file
from tests.pipeline.helpers import nasa_lines, run_in_process, write_chunks

TOPIC = "nasa-day"
SINK_TOPIC = "logstream-outputs"
PARTITIONS = 3
BATCH_OFFSETS = 12_000
#: The micro-batch whose process is SIGKILLed, after its outputs were published and sent to the
#: Kafka sink and the store committed, before its snapshot: the restart replays it whole.
KILLED_AT = ("before_snapshot", 1)
SINK_OUTPUTS = ("alerts", "traffic_per_minute")
#: Window outputs compared where their windows are final in both runs.
WINDOW_OUTPUTS = (
    "traffic_per_minute",
    "trending_pages",
    "unique_visitors",
    "top_clients",
    "alerts",
    "traffic_by_section",
    "traffic_by_panel",
)
SESSION_GAP_S = 30 * 60


def run_args(root: Path, bootstrap: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "logstream",
        "run",
        "--kafka",
        bootstrap,
        "--topic",
        TOPIC,
        "--format",
        "common",
        "--trigger",
        "available-now",
        "--output-dir",
        str(root / "out"),
        "--state-dir",
        str(root / "state"),
        "--store",
        f"sqlite:///{root / 'store.db'}",
        *extra,
    ]


def run_cli(args: list[str], fault: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    if fault:
        env[FAULT_ENV] = fault
    proc = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def causes(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if "Exception" in line or "rror" in line]
    return "\n".join(lines[:20])[:4000] or done.stderr[-3000:]


@pytest.fixture(scope="module")
def day_lines(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)


@pytest.fixture(scope="module")
def topic(kafka_broker, nasa_day) -> str:
    """The NASA day replayed into a 3-partition topic by ``logstream replay --kafka``."""
    status = main(
        [
            "replay",
            str(nasa_day),
            "--kafka",
            kafka_broker.bootstrap,
            "--topic",
            TOPIC,
            "--partitions",
            str(PARTITIONS),
            "--speedup",
            "1e9",
            "--quiet",
        ]
    )
    assert status == 0
    return TOPIC


@pytest.fixture(scope="module")
def kafka_run(kafka_broker, topic, tmp_path_factory) -> Path:
    """``logstream run --kafka``, SIGKILLed in micro-batch 1, then restarted to the end."""
    root = tmp_path_factory.mktemp("kafka-run")
    args = run_args(
        root,
        kafka_broker.bootstrap,
        "--max-offsets-per-trigger",
        str(BATCH_OFFSETS),
        "--sink",
        f"kafka://{kafka_broker.bootstrap}/{SINK_TOPIC}",
        "--sink-outputs",
        ",".join(SINK_OUTPUTS),
    )
    killed = run_cli([*args, "--quiet"], fault=f"{KILLED_AT[0]}:{KILLED_AT[1]}")
    assert killed.returncode == -signal.SIGKILL, causes(killed)
    assert unread_offsets(root / "state" / "ingest", TOPIC) is not None  # batch 0 committed
    done = run_cli(args)
    assert done.returncode == 0, causes(done)
    (root / "restart.log").write_text(done.stderr)
    return root


@pytest.fixture(scope="module")
def directory_run(spark, day_lines, tmp_path_factory) -> Path:
    """The same lines through a watched directory, three files of 12,000 lines."""
    root = tmp_path_factory.mktemp("kafka-directory-run")
    write_chunks(day_lines, root / "input", per_file=BATCH_OFFSETS)
    run_in_process(spark, root, root / "input")
    return root


def rows(spark, root: Path, name: str, where: str | None = None) -> Counter:
    df = spark.read.parquet(str(root / "out" / name))
    df = df.drop("batch_id", "sketch", "source_file")
    if where is not None:
        df = df.where(where)
    return Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())


def store_rows(root: Path, sql: str) -> Counter:
    import sqlite3

    with sqlite3.connect(root / "store.db") as conn:
        return Counter(conn.execute(sql).fetchall())


def last_final_window(spark, root: Path) -> str:
    df = spark.read.parquet(str(root / "out" / "traffic_per_minute"))
    return str(df.agg({"window_end": "max"}).first()[0])


def test_nasa_day_through_kafka_with_a_kill_equals_the_directory_run(
    spark, kafka_run, directory_run, kafka_broker
):
    events = rows(spark, kafka_run, "events")
    assert sum(events.values()) == 35_272
    assert events == rows(spark, directory_run, "events")  # none lost, none twice
    for name in ("late_events", "quarantine"):
        assert sum(rows(spark, kafka_run, name).values()) == 0
        assert sum(rows(spark, directory_run, name).values()) == 0
    # the restart replayed micro-batch 1 (its offsets were in the checkpoint) and went on
    assert "ingest batch 1:" in (kafka_run / "restart.log").read_text()
    read_to = unread_offsets(kafka_run / "state" / "ingest", TOPIC)
    assert read_to == {
        p: hi for p, (_, hi) in partition_offsets(kafka_broker.bootstrap, TOPIC).items()
    }
    for sql in (
        "SELECT name, value FROM counters",
        "SELECT * FROM traffic_per_minute",
        "SELECT window_start, window_end, visitors FROM unique_visitors",
        "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'",
    ):
        assert store_rows(kafka_run, sql) == store_rows(directory_run, sql), sql
    cutoff = min(last_final_window(spark, kafka_run), last_final_window(spark, directory_run))
    for name in WINDOW_OUTPUTS:
        where = f"window_end <= '{cutoff}'"
        got, want = rows(spark, kafka_run, name, where), rows(spark, directory_run, name, where)
        assert got == want, (
            f"{name}: {sum((got - want).values())} extra, {sum((want - got).values())} missing"
        )
    assert sum(rows(spark, directory_run, "traffic_per_minute", where).values()) > 1_300
    where = f"session_end <= timestamp'{cutoff}' - INTERVAL {SESSION_GAP_S} SECONDS"
    assert rows(spark, kafka_run, "sessions", where) == rows(
        spark, directory_run, "sessions", where
    )


def test_the_sink_topic_holds_every_output_row_at_least_once_and_exactly_after_dedup(
    spark, kafka_run, kafka_broker
):
    from logstream.sinks.kafka import kafka_records

    records = read_records(kafka_broker.bootstrap, SINK_TOPIC)
    by_output: dict[str, list] = {name: [] for name in SINK_OUTPUTS}
    for record in records:
        by_output[dict(record.headers)["output"]].append(record)
    # the killed micro-batch was sent before the kill and again by its replay: at least once
    replayed = [r for r in records if dict(r.headers)["batch_id"] == str(KILLED_AT[1])]
    assert len(replayed) > len({r.key for r in replayed}) > 0
    for name, sent in by_output.items():
        # docs/kafka.md: a consumer keeps one record per key; a replay's values are equal
        deduplicated = {(r.key, r.value) for r in sent}
        assert len({key for key, _ in deduplicated}) == len(deduplicated), name
        published = spark.read.parquet(str(kafka_run / "out" / name)).drop("batch_id")
        expected = {(r.key, r.value) for r in kafka_records(published, name).collect()}
        assert deduplicated == expected, name
        assert len(sent) >= len(expected)
    assert by_output["alerts"], "the NASA day has an alert"


def test_unread_messages_deleted_by_retention_stop_the_run_with_their_count(
    kafka_run, kafka_broker, tmp_path
):
    import shutil

    shutil.copytree(kafka_run, tmp_path, dirs_exist_ok=True)
    read_to = unread_offsets(tmp_path / "state" / "ingest", TOPIC)
    assert read_to is not None
    # later lines (August), then retention deletes the first 100 of each partition unread
    aug = data_file(NASA_AUG_1000)
    assert (
        main(
            [
                "replay",
                str(aug),
                "--kafka",
                kafka_broker.bootstrap,
                "--topic",
                TOPIC,
                "--speedup",
                "1e9",
                "--quiet",
            ]
        )
        == 0
    )
    delete_before(kafka_broker.bootstrap, TOPIC, {p: o + 100 for p, o in read_to.items()})
    refused = run_cli(run_args(tmp_path, kafka_broker.bootstrap))
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert "300 unread messages of Kafka topic 'nasa-day' were deleted" in message
    for p, o in sorted(read_to.items()):
        assert f"partition {p}: offsets {o:,}–{o + 99:,}" in message
    assert "--allow-data-loss" in message
    allowed = run_cli(run_args(tmp_path, kafka_broker.bootstrap, "--allow-data-loss"))
    assert allowed.returncode == 0, causes(allowed)
    summary = " ".join(allowed.stderr.split())
    assert "300 Kafka messages deleted before they were read" in summary
    assert "done: 700 on-time events, 0 late" in summary  # 1,000 − 300, in this process
    events = store_rows(tmp_path, "SELECT value FROM counters WHERE name = 'events'")
    assert events == Counter([(35_272 + 700,)])


def test_rules_in_real_time_mode_alert_every_flagged_line_of_a_topic_once(kafka_broker, tmp_path):
    """``logstream rules --trigger real-time:5s`` (Spark's real-time mode, Kafka source and
    sink): the real TWiki log replayed into a topic; every line the rules flag (the Python
    oracle of tests/rules) has exactly one alert in the sink topic, with its send time."""
    import json

    from tests.conftest import REPO, TWIKI_CRLF
    from tests.rules.test_rules import _oracle

    log = data_file(TWIKI_CRLF)
    source, sink = "twiki-lines", "twiki-rule-alerts"
    replay = ["replay", str(log), "--kafka", kafka_broker.bootstrap, "--topic", source]
    assert main([*replay, "--speedup", "1e9", "--quiet"]) == 0
    ensure_topic(kafka_broker.bootstrap, sink, 1)
    expected = Counter(line for (line, _), n in _oracle(nasa_lines(log)).items() for _ in range(n))
    cmd = [sys.executable, "-m", "logstream", "rules", "--kafka-bootstrap", kafka_broker.bootstrap]
    cmd += ["--kafka-topic", source, "--format", "common", "--trigger", "real-time:5s"]
    cmd += ["--sink", f"kafka://{kafka_broker.bootstrap}/{sink}", "--master", "local[2]"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "LOGSTREAM_SPARK_UI": "false"}
    proc = subprocess.Popen(
        [*cmd, "--checkpoint", str(tmp_path / "ck")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            ends = partition_offsets(kafka_broker.bootstrap, sink)
            if sum(hi for _, hi in ends.values()) >= sum(expected.values()):
                break
            time.sleep(0.5)  # the alerts arrive in the sink topic
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "rule alerts: kafka → kafka with the real-time trigger (5 seconds)" in err
    alerts = [json.loads(r.value) for r in read_records(kafka_broker.bootstrap, sink)]
    assert Counter(a["raw_line"] for a in alerts) == expected
    assert all(a["received_at"] and a.get("detected_at") is None for a in alerts)
