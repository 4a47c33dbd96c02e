"""Time ``logstream batch`` on the 31-day NASA input (the real day replicated across July).

Two figures: the whole command as a user runs it (JVM start included), and the report alone
in a warm session (parse and every aggregate, after a warm-up on one day).

Usage: python bench/bench_batch.py [--days 31] [--out bench/results/batch.json]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def main() -> None:
    parser = harness.parser(__doc__, "batch", days=True)
    args = parser.parse_args()
    files = harness.july_files(args.days)
    lines = harness.NASA_DAY_LINES * len(files)
    cli_s = harness.batch_seconds(files)

    from logstream.parsing import compile_format, parse
    from logstream.report import build_report
    from logstream.sources import read_lines

    spark = harness.spark_session()
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
        "machine": harness.machine(),
    }
    harness.write_result(result, args.out)


if __name__ == "__main__":
    harness.run(main)
