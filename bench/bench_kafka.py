"""The NASA day through Kafka into the pipeline, beside the same lines through a directory, in
one run.

1. start a real Kafka broker (:class:`logstream.kafka.broker.LocalBroker`, KRaft, on free
   loopback ports) and time it;
2. publish the NASA day (35,272 lines) into a topic of 3 partitions with ``logstream
   replay``'s Kafka sink, as fast as it goes (one message a line, round-robin);
3. for each round (``--repeat``), one after the other: ``logstream run --kafka … --trigger
   available-now`` (the topic in one micro-batch) and ``logstream run --input-dir …`` on the
   same lines in one file (one micro-batch), every default output, each a new process with
   its own state. Each is timed as a whole process (JVM start included) and by its
   micro-batch's duration from its progress line.

Lines per second are the day's lines over each time. The connector's jars come from the cache
of ``make setup`` (``python -m logstream.kafka.maven``), whose fetch time and size are
recorded when this run had to fetch them. Writes ``bench/results/kafka.json`` (``--out``
another file).

Usage::

    python bench/bench_kafka.py [--repeat 1] [--out FILE]
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

TOPIC = "nasa-day"
PARTITIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jar_sets() -> dict[str, Any]:
    """The Kafka jar sets: versions, jars, MiB, and the fetch seconds when fetched now."""
    from logstream.kafka import maven

    out = {}
    for artifacts in (maven.connector(), maven.broker()):
        start = time.monotonic()
        fetched = maven.cached(artifacts) is None
        paths = maven.jars(artifacts)
        out[artifacts.name] = {
            "jars": len(paths),
            "mib": round(maven.size_bytes(paths) / 2**20, 1),
            "fetch_s": round(time.monotonic() - start, 1) if fetched else None,
        }
    return out


def publish(bootstrap: str, lines_file: Path) -> dict[str, Any]:
    """The day into the topic with the replay's Kafka sink, unpaced; its seconds and rate."""
    from logstream.replay import ReplayOptions, replay_files
    from logstream.replay.kafka import KafkaLineSink

    sink = KafkaLineSink(bootstrap, TOPIC, PARTITIONS)
    start = time.monotonic()
    summary = replay_files([lines_file], sink, ReplayOptions(rate_per_s=1e9))
    seconds = time.monotonic() - start
    assert summary.lines_sent == harness.NASA_DAY_LINES, summary.lines_sent
    return {
        "lines": summary.lines_sent,
        "partitions": sink.partitions,
        "seconds": round(seconds, 2),
        "lines_per_s": round(summary.lines_sent / seconds),
    }


def pipeline(root: Path, *source: str) -> dict[str, Any]:
    """One ``logstream run`` to the end of its input: wall seconds, micro-batch ms, rates."""
    out = ["--output-dir", str(root / "out"), "--state-dir", str(root / "state")]
    cmd = [
        *harness.LOGSTREAM,
        "run",
        *source,
        "--format",
        "common",
        "--trigger",
        "available-now",
        *out,
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=harness.bench_env(), capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    batches = [
        (int(rows.replace(",", "")), int(ms.replace(",", "")))
        for _, rows, ms in harness.BATCH_LINE.findall(done.stderr)
    ]
    lines = sum(rows for rows, _ in batches)
    assert lines == harness.NASA_DAY_LINES, (lines, done.stderr[-2000:])
    assert re.search(r"done: 35,272 on-time events, 0 late", done.stderr), done.stderr[-2000:]
    batch_ms = sum(ms for _, ms in batches)
    return {
        "wall_s": round(wall_s, 2),
        "lines_per_s": round(lines / wall_s),
        "micro_batches": len(batches),
        "batch_ms": batch_ms,
        "batch_lines_per_s": round(lines / (batch_ms / 1000)),
    }


def main() -> int:
    args_parser = harness.parser(__doc__, "kafka")
    args_parser.add_argument("--repeat", type=int, default=1, help="rounds of the two runs")
    args = args_parser.parse_args()
    from logstream.kafka.broker import LocalBroker
    from logstream.kafka.maven import BROKER_VERSION
    from logstream.session import KAFKA_PACKAGE

    result: dict[str, Any] = {
        "machine": harness.machine(),
        "broker": f"org.apache.kafka:kafka_2.13:{BROKER_VERSION}",
        "connector": KAFKA_PACKAGE,
        "jar_sets": jar_sets(),
    }
    with harness.scratch("bench-kafka-") as tmp:
        day = tmp / "access.log"
        day.write_bytes(harness.nasa_day_bytes())
        (tmp / "landing").mkdir()
        os.link(day, tmp / "landing" / "access.log")
        broker = LocalBroker(tmp / "broker", free_port(), free_port(), die_with_parent=True)
        start = time.monotonic()
        broker.start()
        try:
            result["broker_start_s"] = round(time.monotonic() - start, 1)
            result["publish"] = publish(broker.bootstrap, day)
            rounds: dict[str, list[dict[str, Any]]] = {"kafka": [], "directory": []}
            for n in range(args.repeat):
                rounds["kafka"].append(
                    pipeline(tmp / f"kafka-{n}", "--kafka", broker.bootstrap, "--topic", TOPIC)
                )
                rounds["directory"].append(
                    pipeline(tmp / f"dir-{n}", "--input-dir", str(tmp / "landing"))
                )
        finally:
            broker.stop()
    result["runs"] = rounds
    median = {
        name: {
            key: statistics.median(r[key] for r in runs)
            for key in ("wall_s", "lines_per_s", "batch_ms", "batch_lines_per_s")
        }
        for name, runs in rounds.items()
    }
    result["median"] = median
    result["kafka_over_directory"] = {
        key: round(median["kafka"][key] / median["directory"][key], 2)
        for key in ("lines_per_s", "batch_lines_per_s")
    }
    result["machine_after"] = harness.machine()
    harness.write_result(result, args.out)
    return 0


if __name__ == "__main__":
    harness.run(main)
