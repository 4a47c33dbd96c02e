"""Time ``logstream batch`` on the 31-day NASA input (the real day replicated across July).

Two figures: the whole command as a user runs it (JVM start included), and the report alone
in a warm session (parse + all aggregates). Results go to stdout and bench/results/batch.json.

Usage: python bench/bench_batch.py [--days 31]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.build_july import build_july, input_dir

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=31)
    args = parser.parse_args()
    files = build_july(input_dir(args.days), args.days)
    RESULTS.mkdir(exist_ok=True)
    lines = 35272 * len(files)
    logstream = Path(sys.executable).with_name("logstream")

    t0 = time.perf_counter()
    subprocess.run(
        [
            str(logstream),
            "batch",
            *map(str, files),
            "--format",
            "common",
            "--quiet",
            "--json",
            str(RESULTS / "batch-report.json"),
        ],
        check=True,
    )
    cli_s = time.perf_counter() - t0

    from logstream.config import SparkSettings
    from logstream.parsing import compile_format, parse
    from logstream.report import build_report
    from logstream.session import get_spark
    from logstream.sources import read_lines

    spark = get_spark(SparkSettings(ui_enabled=False))
    fmt = compile_format("common")
    build_report(parse(read_lines(spark, files[:1]), fmt))  # warm-up
    t0 = time.perf_counter()
    report = build_report(parse(read_lines(spark, files), fmt))
    warm_s = time.perf_counter() - t0
    assert report["general"]["total_requests"] == lines

    result = {
        "input": f"NASA 1995-07-09 replicated over {len(files)} days (bench/build_july.py)",
        "lines": lines,
        "cli_seconds": round(cli_s, 2),
        "cli_lines_per_s": round(lines / cli_s),
        "report_seconds_warm": round(warm_s, 2),
        "report_lines_per_s_warm": round(lines / warm_s),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "batch.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()  # let Spark's listener bus drain before Python exits
