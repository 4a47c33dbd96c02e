"""Where the batch report's time goes: per step of :func:`logstream.report.build_report`.

Runs the report in-process on the NASA day replicated over ``--days`` days
(``bench/build_july.py``; 284 days are 10,017,248 lines) and reports, per step (the job
descriptions ``logstream batch: STEP``: read, parse, aggregate; tables; sessions; quarantine;
reference), the Spark jobs, their summed wall time and the executor run time of their stages
(the Spark UI's REST API, ``/api/v1/applications/<id>/jobs``), and the dearest stages.

Usage::

    python bench/profile_batch.py             # 31 days: run 31d of bench/results/profile-batch.json
    python bench/profile_batch.py --days 284  # 10M lines: its run 284d

One run, ``local[2]``, a fresh session: the JVM's start is not in the figures, its warm-up is.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def profile(days: int) -> dict:
    """Run the report once on ``days`` days of input; return the per-step breakdown."""
    from logstream.parsing import compile_format, parse
    from logstream.report import build_report
    from logstream.sources import read_lines

    folder = harness.july_files(days)[0].parent
    spark = harness.spark_session(ui_enabled=True)
    t0 = time.perf_counter()
    fmt = compile_format("common")
    parsed = parse(read_lines(spark, [folder]), fmt, time_text=True)
    build_report(parsed, protocol_required=True, fields=fmt.fields)
    wall = time.perf_counter() - t0

    totals, stages = harness.spark_totals(
        spark, {"step": lambda job: job.get("description") or "(no description)"}
    )
    lines = harness.NASA_DAY_LINES * days
    return {
        "input": f"NASA day x{days} (bench/build_july.py), {lines:,} lines",
        "report_wall_s": round(wall, 1),
        "lines_per_s": round(lines / wall),
        "per_step_spark": harness.rounded(totals["step"]),
        "dearest_stages": sorted(stages, key=lambda s: -s["executor_run_s"])[:12],
        "machine": harness.machine(),
    }


def main() -> None:
    parser = harness.parser(__doc__, "profile-batch", days=True, runs=True)
    args = parser.parse_args()
    result = profile(args.days)
    harness.write_result(result, args.out, show=False, run=harness.run_name(args))
    print(json.dumps({k: result[k] for k in ("report_wall_s", "per_step_spark")}, indent=2))


if __name__ == "__main__":
    harness.run(main)
