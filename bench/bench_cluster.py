"""Where Spark users are, measured in one file: Spark Connect, a cluster that loses a worker,
and rule alerts in real-time mode (``bench/results/cluster.json``, one run each).

``--run connect``
    The NASA day's report against a warm Spark Connect server, a cold local ``logstream
    batch`` and GoAccess, in one run (:mod:`bench.bench_connect`).
``--run real-time``
    Line-to-alert latency of ``logstream rules`` from Kafka to Kafka in real-time mode, under
    the continuous trigger and with 1 s micro-batches, in one run, and the refusals of
    Spark's real-time mode (:mod:`bench.bench_rules_realtime`).
``--run worker-loss``
    ``spark-submit`` of ``logstream run`` on a master and two workers, one executor killed in
    the middle of a micro-batch, and the driver killed then started again: the outputs
    against a local run's (:mod:`bench.drill_cluster`).

Usage::

    python bench/bench_cluster.py                      # every run (about 20 minutes)
    python bench/bench_cluster.py --run connect        # one (repeatable)

Each run is kept under ``runs`` in the result file (the other runs it holds stay), and prints
its table. Exit status 1 when a run's check fails (reports not equal, an alert missing or
twice, an output differing from the local run's).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_connect, bench_rules_realtime, drill_cluster, harness

PARTS = {
    "connect": bench_connect,
    "real-time": bench_rules_realtime,
    "worker-loss": drill_cluster,
}


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, "cluster")
    parser.add_argument(
        "--run", action="append", choices=list(PARTS), help="the run (default: every one)"
    )
    for part in PARTS.values():
        part.add_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault("LOGSTREAM_SPARK_UI", "false")
    failed = []
    for name in args.run or list(PARTS):
        part = PARTS[name]
        result = part.measure(args)
        harness.write_result(result, args.out, show=False, run=name)
        part.print_table(result)
        if not part.passed(result):
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    harness.run(main)
