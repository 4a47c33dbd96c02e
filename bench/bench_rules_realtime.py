"""Benchmark: line-to-alert latency of ``logstream rules`` from Kafka to Kafka, in real-time
mode, under the continuous trigger and with 1 s micro-batches, in one run.

One real Kafka broker (:class:`logstream.kafka.broker.LocalBroker`, on free ports) serves
every run. For each trigger, in turn and on fresh topics:

1. ``logstream rules --kafka-bootstrap … --kafka-topic lines-N --sink kafka://…/alerts-N
   --trigger T`` starts in a subprocess (its own JVM, ``local[2]``; the lines topic has one
   partition, so the long-running task of real-time mode and of the continuous trigger takes
   one core and the other is left to the rest);
2. once it says its query runs, a producer in this process sends real log lines (the TWiki
   log cycled: about 8 % of its lines are 401s, ``auth_failure`` alerts) at ``--rate`` lines
   a second for ``--warmup`` then ``--seconds`` seconds, each message's timestamp the time it
   was sent (Kafka's ``CreateTime``), which the alert carries as ``received_at``;
3. the alerts topic is created with ``message.timestamp.type=LogAppendTime``: each alert's
   timestamp is the time the broker appended it. Latency of an alert = that time − its line's
   send time (both milliseconds, this machine's clock);
4. the alerts of lines sent in the measured window count; every flagged line sent then must
   have exactly one alert (the count is checked against the rules run in Python,
   :func:`logstream.rules.match_rules`).

The refusals of real-time mode met on the way (another source, a too-short duration, the
append output mode) are recorded with Spark's own message, from a session in this process.

Usage (the ``real-time`` run of ``bench/results/cluster.json``, :mod:`bench.bench_cluster`)::

    python bench/bench_rules_realtime.py                 # 500 lines/s, 15 s warm-up, 60 s
    python bench/bench_rules_realtime.py --seconds 20    # a quick look

Prints a table. Spark's own benchmark of
real-time mode (``RTMKafkaWindowAggregationBenchmark`` and its stateless siblings in
apache/spark) is the anchor it compares with (docs/triggers.md).
"""

from __future__ import annotations

import gzip
import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

SAMPLE = "monitorware_twiki_access_log_2004.log.gz"
#: (label, --trigger): the runs, in order.
RUNS: tuple[tuple[str, str], ...] = (
    ("real-time 5 s", "real-time:5s"),
    ("continuous 1 s", "continuous:1s"),
    ("micro-batch 1 s", "1s"),
)
#: Seconds a ``logstream rules`` process may take to say its query runs.
START_TIMEOUT_S = 300


def sample_lines() -> list[str]:
    with gzip.open(harness.data_file(SAMPLE), "rt", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\r\n") for line in fh if line.strip()]


def flagged(lines: list[str]) -> list[bool]:
    """Whether each line raises an alert (the rules in Python: tests/rules' oracle)."""
    sys.path.insert(0, str(harness.REPO))
    from tests.rules.test_rules import _oracle

    return [bool(_oracle([line])) for line in lines]


def produce(bootstrap: str, topic: str, lines: list[str], rate: int, seconds: float) -> list:
    """Send ``lines`` cycled at ``rate`` a second for ``seconds``; ``(send_ms, index)`` of
    each line sent (its index in ``lines``)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    sent: list[tuple[int, int]] = []
    start = time.monotonic()
    n = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate) + 1
        while n < due:
            now_ms = int(time.time() * 1000)
            producer.produce(topic, value=lines[n % len(lines)].encode(), timestamp=now_ms)
            sent.append((now_ms, n % len(lines)))
            n += 1
        producer.poll(0)
        time.sleep(0.002)  # the pace of the feed
    if producer.flush(120):
        raise RuntimeError("Kafka did not take every line within 120 s")
    return sent


def alerts_with_times(bootstrap: str, topic: str) -> list[tuple[int, dict[str, Any]]]:
    """Every alert of ``topic``: (the broker's append time in ms, the alert)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    idle = time.monotonic()
    while time.monotonic() - idle < 5:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        idle = time.monotonic()
        out.append((msg.timestamp()[1], json.loads(msg.value())))
    consumer.close()
    return out


def run_trigger(broker: Any, n: int, trigger: str, args: Any, lines: list[str]) -> dict:
    """One run (module docstring); its latencies and counts."""
    from logstream.kafka.client import ensure_topic, partition_offsets

    source, sink = f"lines-{n}", f"alerts-{n}"
    ensure_topic(broker.bootstrap, source, 1)
    ensure_topic(broker.bootstrap, sink, 1, {"message.timestamp.type": "LogAppendTime"})
    cmd = [sys.executable, "-m", "logstream", "rules", "--kafka-bootstrap", broker.bootstrap]
    cmd += ["--kafka-topic", source, "--format", "common", "--trigger", trigger]
    cmd += ["--sink", f"kafka://{broker.bootstrap}/{sink}", "--master", "local[2]"]
    env = {**harness.bench_env(), "PYTHONPATH": str(harness.REPO / "src")}
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    errors: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            text = raw.decode("utf-8", "replace")
            errors.append(text)
            if text.startswith("rule alerts:"):
                started.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not started.wait(START_TIMEOUT_S):
            return {"error": "".join(errors)[-3000:]}
        warm = produce(broker.bootstrap, source, lines, args.rate, args.warmup_s)
        measured = produce(broker.bootstrap, source, lines, args.rate, args.seconds)
        flagged_lines = flagged(lines)
        wanted = sum(1 for _, i in warm + measured if flagged_lines[i])
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:  # the last alerts arrive
            if sum(hi for _, hi in partition_offsets(broker.bootstrap, sink).values()) >= wanted:
                break
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    result = summarise(alerts_with_times(broker.bootstrap, sink), warm, measured, lines)
    if result["alerts_measured"] != result["alerts_expected"]:
        result["stderr_tail"] = "".join(errors)[-2000:]
    return result


def summarise(alerts: list, warm: list, measured: list, lines: list[str]) -> dict:
    """Latencies of the alerts of the measured lines, and the check that each flagged line of
    the measured window has exactly one alert."""
    is_flagged = flagged(lines)
    first_ms, last_ms = measured[0][0], measured[-1][0]
    expected = sum(1 for _, i in measured if is_flagged[i])
    latencies = []
    for appended_ms, alert in alerts:
        if not alert.get("received_at"):
            continue
        sent = datetime.fromisoformat(alert["received_at"].replace("Z", "+00:00"))
        sent_ms = round(sent.timestamp() * 1000)
        if first_ms <= sent_ms <= last_ms:
            latencies.append(appended_ms - sent_ms)
    latencies.sort()

    def q(p: float) -> int:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    third = max(1, len(latencies) // 3)
    return {
        "lines_sent": len(warm) + len(measured),
        "lines_measured": len(measured),
        "alerts_expected": expected,
        "alerts_measured": len(latencies),
        "alerts_total": len(alerts),
        "p50_ms": q(0.5) if latencies else None,
        "p90_ms": q(0.9) if latencies else None,
        "p99_ms": q(0.99) if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
        "min_ms": latencies[0] if latencies else None,
        "mean_ms": round(statistics.mean(latencies), 1) if latencies else None,
        "p50_first_third_ms": statistics.median(latencies[:third]) if latencies else None,
    }


def refusals(bootstrap: str, topic: str) -> dict[str, str]:
    """Spark 4.2's own refusals of real-time mode (at start, or at the first batch's
    planning: the query then ends with the error), each the first line of its message."""
    from pyspark.sql import functions as F

    spark = harness.spark_session(master="local[2]", kafka=True)
    rate = spark.readStream.format("rate").load()

    def kafka() -> Any:
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        return reader.option("subscribe", topic).load()

    cases = {
        "rate source → console, update": (rate, "update", "5 seconds"),
        "Kafka source → console, append": (kafka(), "append", "5 seconds"),
        "Kafka source → console, update, 1 s": (kafka(), "update", "1 second"),
        "Kafka source, an aggregation → console, update": (
            kafka().groupBy(F.col("partition")).count(),
            "update",
            "5 seconds",
        ),
    }
    found = {}
    for label, (df, mode, duration) in cases.items():
        try:
            query = df.writeStream.format("console").outputMode(mode)
            query = query.trigger(realTime=duration).start()
            query.awaitTermination(60)
            error = query.exception()
            query.stop()
            found[label] = "ran" if error is None else str(error).strip().splitlines()[0][:400]
        except Exception as exc:  # Spark's refusal is the result
            found[label] = str(exc).strip().splitlines()[0][:400]
    return found


def add_arguments(parser: Any) -> None:
    parser.add_argument("--rate", type=int, default=500, help="real-time: lines a second")
    parser.add_argument(
        "--warmup-s", type=float, default=15.0, help="real-time: seconds left out first"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="real-time: seconds measured")
    parser.add_argument("--only", help="real-time: one trigger of RUNS (e.g. real-time:5s)")


def measure(args: Any) -> dict[str, Any]:
    """The runs of the module docstring, then Spark's refusals; the result."""
    from logstream.kafka.broker import LocalBroker
    from logstream.kafka.client import ensure_topic

    lines = sample_lines()
    runs = {}
    with harness.scratch("bench-rules-rt-") as work:
        broker = LocalBroker(
            work / "kafka", port=free_port(), controller_port=free_port(), die_with_parent=True
        ).start()
        try:
            for n, (label, trigger) in enumerate(RUNS):
                if args.only and trigger != args.only:
                    continue
                runs[label] = {"trigger": trigger, **run_trigger(broker, n, trigger, args, lines)}
                print(label, json.dumps(runs[label]), file=sys.stderr, flush=True)
            ensure_topic(broker.bootstrap, "lines-0", 1)
            refused = refusals(broker.bootstrap, "lines-0")
        finally:
            broker.stop()
    return {
        "rate_lines_per_s": args.rate,
        "warmup_s": args.warmup_s,
        "measured_s": args.seconds,
        "runs": runs,
        "refusals": refused,
        "machine": harness.machine(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def passed(result: dict[str, Any]) -> bool:
    return all(
        "error" not in r and r["alerts_measured"] == r["alerts_expected"]
        for r in result["runs"].values()
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def print_table(result: dict[str, Any]) -> None:
    runs = result["runs"]
    print("| trigger | alerts (expected) | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, r in runs.items():
        if "error" in r:
            print(f"| {label} | failed | | | | |")
            continue
        print(
            f"| {label} | {r['alerts_measured']:,} ({r['alerts_expected']:,}) | {r['p50_ms']:,} "
            f"| {r['p90_ms']:,} | {r['p99_ms']:,} | {r['max_ms']:,} |"
        )


if __name__ == "__main__":
    from bench import bench_cluster

    harness.run(lambda: bench_cluster.main(["--run", "real-time", *sys.argv[1:]]))
