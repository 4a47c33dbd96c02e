"""Where the batch report's time goes: per step of :func:`logstream.report.build_report`.

Runs the report in-process on the NASA day replicated over ``--days`` days
(``bench/build_july.py``; 284 days are 10,017,248 lines) and reports, per step (the job
descriptions ``logstream batch: STEP``: read, parse, aggregate; tables; sessions; quarantine;
reference), the Spark jobs, their summed wall time and the executor run time of their stages
(the Spark UI's REST API, ``/api/v1/applications/<id>/jobs``), and the dearest stages.

Usage::

    python bench/profile_batch.py                  # 31 days: bench/results/profile-batch-31d.json
    python bench/profile_batch.py --days 284       # 10M lines: profile-batch-284d.json

One run, ``local[2]``, a fresh session: the JVM's start is not in the figures, its warm-up is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bench.build_july import build_july, input_dir
from bench.profile_pipeline import spark_totals  # the Spark UI's REST API, summed

RESULTS = Path(__file__).resolve().parent / "results"


def profile(days: int) -> dict:
    """Run the report once on ``days`` days of input; return the per-step breakdown."""
    from logstream.parsing import compile_format, parse
    from logstream.report import build_report
    from logstream.session import get_spark
    from logstream.sources import read_lines

    build_july(input_dir(days), days)
    spark = get_spark()
    t0 = time.perf_counter()
    build_report(parse(read_lines(spark, [input_dir(days)]), compile_format("common")))
    wall = time.perf_counter() - t0

    totals, stages = spark_totals(
        spark, {"step": lambda job: job.get("description") or "(no description)"}
    )
    lines = 35272 * days
    return {
        "input": f"NASA day x{days} (bench/build_july.py), {lines:,} lines",
        "report_wall_s": round(wall, 1),
        "lines_per_s": round(lines / wall),
        "per_step_spark": {
            step: {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}
            for step, row in totals["step"].items()
        },
        "dearest_stages": sorted(stages, key=lambda s: -s["executor_run_s"])[:12],
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--out", type=Path, help="default: bench/results/profile-batch-<D>d.json")
    args = parser.parse_args()
    result = profile(args.days)
    out = args.out or RESULTS / f"profile-batch-{args.days}d.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("report_wall_s", "per_step_spark")}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()  # let Spark's listener bus drain before Python exits
