"""The floor of a whole Spark process on the 31-day input, beside GoAccess, in one run.

Issue 13 asks a streaming backfill of the 31-day NASA input (``bench/build_july.py``,
1,093,432 lines, plain text), every output on, to run at >= 0.5x GoAccess as a whole process
(>= 1.0x to be met). This benchmark measures what any Spark program on this machine pays
before logstream's own analytics start, each step a whole process of its own (``python
bench/bench_floor.py --step NAME``), timed from outside, one after the other:

1. ``goaccess``: GoAccess 1.x fed the 31 files on stdin, as ``bench_vs_goaccess.py`` runs it;
2. ``python``: the Python interpreter importing pyspark and logstream, no JVM;
3. ``session``: :func:`logstream.session.get_spark`, then stop (the JVM and SparkContext start,
   with the class-data archive of ``make setup``);
4. ``read``: the 31 files read as lines and counted (``spark.read.text``; Spark prunes every
   column, so no line is copied);
5. ``parse``: the lines parsed by :func:`logstream.parsing.parser.parse` (the one regex
   pass, typed fields, the quarantine reason) and a checksum of every parsed column
   (``bit_xor`` of ``xxhash64``), so nothing is pruned: the parse's whole cost, nothing
   written;
6. ``parse_agg``: the events (:func:`logstream.parsing.parser.events`) plus one aggregation
   into 1-minute panes (requests, bytes and errors per minute and status class): the
   smallest analytics a report needs;
7. ``parse_write``: the events written as the ``events/`` Parquet output, nothing else.

``--logstream-rows`` adds rows of ``bench_vs_goaccess.py`` to the same run, so logstream's
ratios and the floor's are measured together: ``batch`` (``logstream batch DIR --json``),
``backfill_ingest`` and ``backfill_full`` (``logstream run``'s available-now backfill, every
file in one micro-batch; ingest only, every output).

Each step is a lower bound for every step after it; ``parse_write`` is the least a backfill
that writes its events does. Ratios are GoAccess's wall time over the step's (> 1: faster).
Writes ``bench/results/floor.json`` (``--out`` another file).

Usage::

    python bench/bench_floor.py [--days 31] [--repeat 1] [--out FILE]
        [--logstream-rows batch,backfill_ingest,backfill_full]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_vs_goaccess import (
    backfill,
    batch_seconds,
    ensure_goaccess,
    goaccess_seconds,
    timed,
)
from bench.build_july import build_july, input_dir

RESULTS = Path(__file__).resolve().parent / "results"
STEPS = ("python", "session", "read", "parse", "parse_agg", "parse_write")
#: Rows of ``bench_vs_goaccess.py`` that ``--logstream-rows`` adds to the run.
LOGSTREAM_ROWS = ("batch", "backfill_ingest", "backfill_full")


def run_step(step: str, folder: Path, out: Path) -> None:
    """Run one step in this process (the child of :func:`timed_step`)."""
    from pyspark.sql import functions as F

    import logstream  # noqa: F401  (the import every logstream command pays)

    if step == "python":
        return
    from logstream.parsing.detect import resolve_format
    from logstream.parsing.parser import REASON_COLUMN, events, parse
    from logstream.session import get_spark
    from logstream.sources.files import read_lines

    spark = get_spark()
    try:
        if step == "session":
            return
        lines = read_lines(spark, [str(folder)])
        if step == "read":
            print(lines.count())
            return
        parsed = parse(lines, resolve_format("common"))
        if step == "parse":
            row = parsed.select(
                F.count("*").alias("n"),
                F.count(REASON_COLUMN).alias("quarantined"),
                F.bit_xor(F.xxhash64(*parsed.columns)).alias("checksum"),
            ).first()
            print(row)
        elif step == "parse_agg":
            panes = (
                events(parsed)
                .groupBy(
                    F.date_trunc("minute", "event_time").alias("minute"),
                    (F.col("status") / 100).cast("int").alias("status_class"),
                )
                .agg(
                    F.count("*").alias("requests"),
                    F.sum("bytes_sent").alias("bytes"),
                    F.count_if(F.col("status") >= 400).alias("errors"),
                )
            )
            panes.write.mode("overwrite").parquet(str(out / "panes"))
        elif step == "parse_write":
            events(parsed).write.mode("overwrite").parquet(str(out / "events"))
        else:
            raise SystemExit(f"unknown step {step!r}: choose one of {', '.join(STEPS)}")
    finally:
        spark.stop()


def timed_step(step: str, folder: Path) -> float:
    """Wall seconds of ``python bench/bench_floor.py --step STEP`` as a whole process (the
    environment of :func:`bench.bench_vs_goaccess.timed`: no Spark UI)."""
    out = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    try:
        child = [sys.executable, __file__, "--step", step, "--folder", str(folder)]
        return timed([*child, "--step-out", str(out)])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def time_logstream(row: str, files: list[Path]) -> float:
    """Wall seconds of one of :data:`LOGSTREAM_ROWS`, as ``bench_vs_goaccess.py`` runs it."""
    if row != "batch":
        return backfill(files, len(files), "none" if row == "backfill_ingest" else "all")
    out = Path(tempfile.mkdtemp(prefix="bench-floor-batch-"))
    try:
        return batch_seconds(files, out / "r.json")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def timed_goaccess(files: list[Path]) -> float:
    """Wall seconds of GoAccess on ``files``, as ``bench_vs_goaccess.py`` runs it."""
    out = Path(tempfile.mkdtemp(prefix="bench-floor-goaccess-"))
    try:
        return goaccess_seconds(ensure_goaccess(), files, out / "r.json")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each step (median reported)")
    ap.add_argument("--out", dest="results", type=Path, default=RESULTS / "floor.json")
    ap.add_argument(
        "--logstream-rows",
        default="",
        help="also time these logstream commands in the same run, comma-separated: "
        f"{', '.join(LOGSTREAM_ROWS)}",
    )
    ap.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--step-out", dest="step_out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    rows_asked = [r.strip() for r in args.logstream_rows.split(",") if r.strip()]
    unknown = set(rows_asked) - set(LOGSTREAM_ROWS)
    if unknown:
        raise SystemExit(f"unknown rows {sorted(unknown)}: choose from {', '.join(LOGSTREAM_ROWS)}")
    if args.step:
        run_step(args.step, args.folder, args.step_out)
        return
    files = build_july(input_dir(args.days), args.days)
    lines = sum(1 for f in files for _ in f.open("rb"))
    runs: dict[str, list[float]] = {"goaccess": []}
    for _ in range(args.repeat):
        runs["goaccess"].append(timed_goaccess(files))
        for step in STEPS:
            runs.setdefault(step, []).append(timed_step(step, input_dir(args.days)))
        for row in rows_asked:  # as bench_vs_goaccess.py runs them
            runs.setdefault(row, []).append(time_logstream(row, files))
    goaccess = statistics.median(runs["goaccess"])
    rows = {}
    for step, times in runs.items():
        wall = statistics.median(times)
        rows[step] = {
            "wall_s": round(wall, 2),
            "runs_s": [round(t, 2) for t in times],
            "vs_goaccess": round(goaccess / wall, 3),
        }
        print(f"{step:<16} {wall:7.2f} s  {goaccess / wall:6.3f}x GoAccess")
    result = {
        "input": f"NASA day x{len(files)} (bench/build_july.py), {lines:,} lines",
        "machine": (
            f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
        ),
        "budget_at_0_5x_s": round(goaccess / 0.5, 2),
        "rows": rows,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
