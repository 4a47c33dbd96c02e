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
[--max-bytes-per-trigger N] [--out FILE]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def build_inputs(tmp: Path, copies: int) -> tuple[Path, Path, int]:
    """One file of ``copies`` days and a directory of ``copies`` one-day files (same bytes);
    returns them and their size in bytes."""
    day = harness.nasa_day_bytes()
    assert day.count(b"\n") == harness.NASA_DAY_LINES and day.endswith(b"\n")
    growing = tmp / "follow" / "access.log"
    growing.parent.mkdir(parents=True)
    directory = tmp / "dir"
    directory.mkdir()
    with open(growing, "wb") as fh:
        for i in range(copies):
            fh.write(day)  # appended day by day, as a server would
            (directory / f"access-{i:03d}.log").write_bytes(day)
    return growing, directory, len(day) * copies


def measure(start) -> dict:
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

    return measure(
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

    return measure(
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


def figures(m: dict, lines: int) -> dict:
    """A source's measures as lines per second, overall and inside micro-batches."""
    return {
        "seconds": round(m["seconds"], 2),
        "lines_per_s": round(lines / m["seconds"]),
        "batch_seconds": round(m["batch_seconds"], 2),
        "lines_per_batch_s": round(lines / m["batch_seconds"]),
        "micro_batches": m["micro_batches"],
    }


def main() -> None:
    parser = harness.parser(__doc__, "follow")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument(
        "--max-bytes-per-trigger",
        type=int,
        default=None,
        help="admission control of the follow source (default: all available at once)",
    )
    args = parser.parse_args()
    with harness.scratch("bench-follow-") as tmp:
        spark = harness.spark_session()
        warm, warm_dir, _ = build_inputs(tmp / "warm", 1)
        run_follow(spark, warm, tmp / "warm" / "ck-follow", None)
        run_dir(spark, warm_dir, tmp / "warm" / "ck-dir")

        growing, directory, size = build_inputs(tmp / "run", args.copies)
        lines = harness.NASA_DAY_LINES * args.copies
        follow = run_follow(spark, growing, tmp / "run" / "ck-follow", args.max_bytes_per_trigger)
        text_dir = run_dir(spark, directory, tmp / "run" / "ck-dir")
    assert follow["rows"] == lines, follow
    assert text_dir["rows"] == lines, text_dir
    result = {
        "input": f"NASA 1995-07-09 x {args.copies}: one growing file vs "
        f"{args.copies} files in a directory",
        "lines": lines,
        "bytes": size,
        "machine": harness.machine(),
        "follow": figures(follow, lines) | {"max_bytes_per_trigger": args.max_bytes_per_trigger},
        "text_dir": figures(text_dir, lines),
        "ratio_follow_to_text_dir": round(text_dir["seconds"] / follow["seconds"], 2),
        "ratio_follow_to_text_dir_in_batches": round(
            text_dir["batch_seconds"] / follow["batch_seconds"], 2
        ),
    }
    harness.write_result(result, args.out)


if __name__ == "__main__":
    harness.run(main)
