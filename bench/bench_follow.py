"""Throughput of the follow source (``tail -F``) against Spark's directory text source.

Input: the real NASA day of 1995-07-09 (35,272 lines, 3.9 MB) replicated ``--copies`` times
(default 10), written once as one growing file (the follow source's case) and once as that
many files in a directory (the same bytes, Spark's file source's case). Each source is read by
one ``availableNow`` query into the ``noop`` sink, in one process, after a discarded warm-up of
both on one copy (the first query of a JVM pays for class loading and JIT); one measured run
each. Lines/s = rows in the query's progress / wall time from ``start()`` to termination
(start-up included: the follow source starts Spark's Python planner process), and / time
inside micro-batches (``triggerExecution``: the steady-state rate of a long-running query).

Writes bench/results/follow.json. Usage: python bench/bench_follow.py [--copies 10]
[--max-bytes-per-trigger N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results"
DATA_DIR = Path(
    os.environ.get("LOGSTREAM_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data")
)
NASA_DAY = DATA_DIR / "NASA_access_log_Jul95_day09.log.gz"
DAY_LINES = 35272


def build_inputs(tmp: Path, copies: int) -> tuple[Path, Path, int]:
    """One file of ``copies`` days and a directory of ``copies`` one-day files (same bytes)."""
    day = gzip.decompress(NASA_DAY.read_bytes())
    assert day.count(b"\n") == DAY_LINES and day.endswith(b"\n")
    growing = tmp / "follow" / "access.log"
    growing.parent.mkdir(parents=True)
    directory = tmp / "dir"
    directory.mkdir()
    with open(growing, "wb") as fh:
        for i in range(copies):
            fh.write(day)  # appended day by day, as a server would
            (directory / f"access-{i:03d}.log").write_bytes(day)
    return growing, directory, len(day) * copies


def timed(start) -> dict:
    """Run the ``availableNow`` query ``start()`` returns and measure it.

    Returns wall seconds from the call to termination (query start-up included: for the
    follow source, Spark's Python planner process), seconds inside micro-batches (the sum of
    ``durationMs.triggerExecution``, the steady-state cost), rows and non-empty micro-batches
    (from the query's progress).
    """
    t0 = time.perf_counter()
    query = start()
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    progress = [json.loads(p.json) for p in query.recentProgress]
    rows = [p["numInputRows"] for p in progress]
    return {
        "seconds": seconds,
        "batch_seconds": sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000,
        "rows": sum(rows),
        "micro_batches": sum(1 for r in rows if r),
    }


def run_follow(spark, path: Path, checkpoint: Path, max_bytes: int | None):
    from logstream.sources.follow import follow_lines

    return timed(
        lambda: (
            follow_lines(spark, [str(path)], max_bytes)
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    )


def run_dir(spark, directory: Path, checkpoint: Path):
    from pyspark.sql import functions as F

    return timed(
        lambda: (
            spark.readStream.format("text")
            .load(str(directory))
            .select("value", F.col("_metadata.file_path").alias("source_file"))
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument(
        "--max-bytes-per-trigger",
        type=int,
        default=None,
        help="admission control of the follow source (default: all available at once)",
    )
    args = parser.parse_args()
    if not NASA_DAY.is_file():
        sys.exit(f"missing {NASA_DAY}: set LOGSTREAM_DATA_DIR to the shared data directory")

    from logstream.config import SparkSettings
    from logstream.session import get_spark

    tmp = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    try:
        spark = get_spark(SparkSettings(ui_enabled=False))
        warm, warm_dir, _ = build_inputs(tmp / "warm", 1)
        run_follow(spark, warm, tmp / "warm" / "ck-follow", None)
        run_dir(spark, warm_dir, tmp / "warm" / "ck-dir")

        growing, directory, size = build_inputs(tmp / "run", args.copies)
        lines = DAY_LINES * args.copies
        follow = run_follow(spark, growing, tmp / "run" / "ck-follow", args.max_bytes_per_trigger)
        text_dir = run_dir(spark, directory, tmp / "run" / "ck-dir")
        assert follow["rows"] == lines, follow
        assert text_dir["rows"] == lines, text_dir

        def figures(m: dict) -> dict:
            return {
                "seconds": round(m["seconds"], 2),
                "lines_per_s": round(lines / m["seconds"]),
                "batch_seconds": round(m["batch_seconds"], 2),
                "lines_per_batch_s": round(lines / m["batch_seconds"]),
                "micro_batches": m["micro_batches"],
            }

        result = {
            "input": f"NASA 1995-07-09 x {args.copies}: one growing file vs "
            f"{args.copies} files in a directory",
            "lines": lines,
            "bytes": size,
            "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}",
            "follow": figures(follow) | {"max_bytes_per_trigger": args.max_bytes_per_trigger},
            "text_dir": figures(text_dir),
            "ratio_follow_to_text_dir": round(text_dir["seconds"] / follow["seconds"], 2),
            "ratio_follow_to_text_dir_in_batches": round(
                text_dir["batch_seconds"] / follow["batch_seconds"], 2
            ),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "follow.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()  # let Spark's listener bus drain before Python exits
