"""The floor of a whole Spark process on the NASA input, beside GoAccess, and logstream's
distance to it, in one run.

The scale targets (issues #40 and #59) are ratios to this floor, measured in the same run
(2 cores): the 31-day streaming backfill with every default output within 2.0×
``parse_write`` and the ingest-only backfill within 1.2× (``--logstream-rows
backfill_ingest,backfill_full``); ``logstream batch`` on one NASA day within 1.5×
``session`` (``--days 1 --logstream-rows batch``). The result's ``targets`` holds each ratio
asked for, with its bound and whether it is met. This benchmark measures what any Spark
program on this machine pays before logstream's own analytics start, each step a whole
process of its own (``python bench/bench_floor.py --step NAME``), timed from outside, one
after the other:

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
7. ``parse_write``: the events written as the ``events/`` Parquet output, nothing else;
8. ``outputs`` (only with ``--design-floor``, kept as ``--run design``): another design's
   floor for the backfill, which asks whether *any* Spark program could write its default
   outputs within 2.0× ``parse_write``: the events cached and written, then each default
   output as the most direct DataFrame query computes it, into Parquet, with no state, no
   store and no reference joins (:func:`design_outputs`: traffic per minute; the top 10
   content pages per 5-minute window sliding every minute; an HLL sketch of the hosts per
   minute; sessions with a 30-minute gap and their statistics per hour; the top 10 clients per
   5 minutes with their bot features; each minute of the site's series and of each content
   page's against the mean and deviation of its hour before, by a window function; traffic
   per section and per user agent; the NASA log's GoAccess panels per minute with the
   pipeline's own panel columns, GeoIP included; the visitors per day). It is a lower bound
   of the work, not the same work: logstream also keeps the open windows' state, fills the
   serving store and scores alerts with a robust detector. The step prints each output's
   seconds.

``--logstream-rows`` adds rows of ``bench_vs_goaccess.py`` to the same run, so logstream's
ratios and the floor's are measured together: ``batch`` (``logstream batch DIR --json``),
``backfill_ingest`` and ``backfill_full`` (``logstream run``'s available-now backfill, every
file in one micro-batch; ingest only, every output).

Each step is a lower bound for every step after it; ``parse_write`` is the least a backfill
that writes its events does. Ratios are GoAccess's wall time over the step's (> 1: faster).
Writes ``bench/results/floor.json`` (``--out`` another file), under the run ``--run`` (default:
the days, ``31d``); the file keeps the latest result of each run.

Usage::

    python bench/bench_floor.py [--days 31] [--repeat 1] [--out FILE]
        [--logstream-rows batch,backfill_ingest,backfill_full]
    python bench/bench_floor.py --days 1 --repeat 3 --logstream-rows batch   # run 1d
    python bench/bench_floor.py --run design --design-floor --repeat 2 \
        --logstream-rows backfill_ingest,backfill_full
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

STEPS = ("python", "session", "read", "parse", "parse_agg", "parse_write")
#: The step of ``--design-floor``: another design's floor for the backfill's outputs.
DESIGN_STEP = "outputs"
#: Rows of ``bench_vs_goaccess.py`` that ``--logstream-rows`` adds to the run.
LOGSTREAM_ROWS = ("batch", "backfill_ingest", "backfill_full")
#: The scale targets (#40's, the ingest-only bound tightened by #59): (row, floor step, largest
#: ratio of their wall times, days it is for).
TARGETS = (
    ("backfill_full", "parse_write", 2.0, 31),
    ("backfill_ingest", "parse_write", 1.2, 31),
    ("batch", "session", 1.5, 1),
)


def targets(rows: dict[str, dict], days: int) -> list[dict]:
    """Each of :data:`TARGETS` whose row ran: its ratio to the floor step, its bound, whether
    it is met (a bound is for its number of days; on others the ratio is only reported)."""
    found = []
    for row, floor, bound, for_days in TARGETS:
        if row in rows:
            ratio = rows[row]["wall_s"] / rows[floor]["wall_s"]
            found.append(
                {
                    "figure": f"{row} / {floor}",
                    "ratio": round(ratio, 2),
                    "target": f"<= {bound}"
                    if days == for_days
                    else f"(<= {bound} on {for_days} d)",
                    "met": ratio <= bound if days == for_days else None,
                }
            )
    return found


def run_step(step: str, folder: Path, out: Path) -> None:
    """Run one step in this process (the child of :func:`timed_step`)."""
    from pyspark.sql import functions as F

    import logstream  # noqa: F401  (the import every logstream command pays)

    if step == "python":
        return
    from logstream.config import SparkSettings, short_input
    from logstream.parsing.detect import resolve_format
    from logstream.parsing.parser import REASON_COLUMN, events, parse
    from logstream.session import get_spark
    from logstream.sources.files import input_files, read_lines

    # the session settings logstream batch takes for the same files (the short run's JIT)
    files = input_files([str(folder)])
    short = short_input((f, Path(f).stat().st_size) for f in files)
    spark = get_spark(SparkSettings(short_run=short))
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
        elif step == DESIGN_STEP:
            print(json.dumps(design_outputs(events(parsed), out)))
    finally:
        spark.stop()


#: The GoAccess panels of the default backfill that a Common Log Format line has.
NASA_PANELS = ("requests", "static_requests", "not_found", "hosts", "remote_user", "geolocation")


def design_outputs(ev, out: Path) -> dict[str, float]:
    """The ``outputs`` step: the events ``ev`` (cached here) written, then every default output
    of the backfill as the most direct DataFrame query computes it, each into Parquet under
    ``out``; returns each write's seconds (the events' with the parse and cache)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from logstream.analytics.pages import ROBOTS_TXT, is_content_page, is_static_asset
    from logstream.analytics.panes import DAILY_VIEW, PANEL_VIEWS
    from logstream.analytics.sessions import session_stats_per_window, sessions
    from logstream.analytics.traffic import traffic_per_window
    from logstream.pipeline.ingest.panels import panel_columns

    ev = ev.persist(StorageLevel.MEMORY_AND_DISK)
    minute = F.window("event_time", "1 minute").alias("window")
    five = F.window("event_time", "5 minutes").alias("window")

    seconds: dict[str, float] = {}

    def write(name, frame):
        t0 = time.perf_counter()
        frame.write.mode("overwrite").parquet(str(out / name))
        seconds[name] = round(time.perf_counter() - t0, 2)

    def top(frame, n=10, by="requests"):
        rank = Window.partitionBy("window").orderBy(F.desc(by))
        return frame.withColumn("rank", F.row_number().over(rank)).where(F.col("rank") <= n)

    def traffic(*keys):
        status = F.col("status")
        return ev.groupBy(minute, *keys).agg(
            F.count("*").alias("requests"),
            F.sum("bytes_sent").alias("bytes"),
            *(F.count_if(F.floor(status / 100) == c).alias(f"status_{c}xx") for c in range(1, 6)),
            F.count_if(status >= 400).alias("errors"),
        )

    write("events", ev)
    write("traffic_per_minute", traffic_per_window(ev, "1 minute"))
    pages = ev.where(is_content_page()).groupBy(
        F.window("event_time", "5 minutes", "1 minute").alias("window"), "url_path"
    )
    write("trending_pages", top(pages.agg(F.count("*").alias("requests"))))
    visitors = ev.groupBy(minute).agg(F.hll_sketch_agg("client_host", 12).alias("sketch"))
    write("unique_visitors", visitors.withColumn("visitors", F.hll_sketch_estimate("sketch")))
    write("sessions", session_stats_per_window(sessions(ev, "30 minutes"), "1 hour"))
    clients = ev.groupBy(five, "client_host").agg(
        F.count("*").alias("requests"),
        F.sum("bytes_sent").alias("bytes"),
        F.count_if(F.col("status") >= 400).alias("errors"),
        F.count_if(is_static_asset()).alias("static_requests"),
        F.count_if(F.col("url_path") == ROBOTS_TXT).alias("robots_requests"),
        F.count_distinct("url_path").alias("pages"),
    )
    write("top_clients", top(clients))
    # the detector's series: the site's and each content page's, per minute
    page = F.when(is_content_page(), F.col("url_path"))
    series = (
        ev.select(
            F.date_trunc("minute", "event_time").alias("minute"),
            F.explode(F.array(F.lit(""), page)).alias("series"),
            "status",
        )
        .where(F.col("series").isNotNull())
        .groupBy("series", "minute")
        .agg(F.count("*").alias("requests"), F.count_if(F.col("status") >= 500).alias("server"))
    )
    hour = Window.partitionBy("series").orderBy("minute").rowsBetween(-60, -1)
    scored = series.select(
        "*",
        F.avg("requests").over(hour).alias("mean"),
        F.stddev("requests").over(hour).alias("sd"),
    )
    write("alerts", scored.where(F.col("requests") > F.col("mean") + 5 * F.col("sd")))
    section = F.coalesce(F.split(F.col("url_path"), "/")[1], F.lit("")).alias("section")
    write("traffic_by_section", traffic(section))
    write("traffic_by_agent", traffic(F.coalesce("user_agent", F.lit("unknown")).alias("agent")))
    panelled = panel_columns(ev, (*NASA_PANELS, DAILY_VIEW), {}, protocol_required=True)
    rows = F.explode(
        F.array(
            *(
                F.struct(F.lit(v).alias("view"), F.col(PANEL_VIEWS[v]).alias("key"))
                for v in NASA_PANELS
            )
        )
    ).alias("p")
    per_panel = (
        panelled.select(minute, rows)
        .where(F.col("p.key").isNotNull())
        .groupBy("window", "p.view", "p.key")
        .agg(F.count("*").alias("requests"))
    )
    write("traffic_by_panel", per_panel)
    daily = panelled.groupBy(F.window("event_time", "1 day").alias("window"), "p_visitor")
    write("visitors_daily", daily.agg(F.count("*").alias("requests")))
    return seconds


def timed_step(step: str, folder: Path) -> float:
    """Wall seconds of ``python bench/bench_floor.py --step STEP`` as a whole process."""
    with harness.scratch("bench-floor-") as out:
        child = [sys.executable, __file__, "--step", step, "--folder", str(folder)]
        return harness.timed([*child, "--step-out", str(out)])


def time_logstream(row: str, files: list[Path]) -> float:
    """Wall seconds of one of :data:`LOGSTREAM_ROWS`, as ``bench_vs_goaccess.py`` runs it."""
    if row == "batch":
        return harness.batch_seconds(files)
    queries = "none" if row == "backfill_ingest" else "all"
    return harness.backfill_seconds(files, len(files), queries)


def main() -> None:
    ap = harness.parser(__doc__.splitlines()[0], "floor", days=True, runs=True)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each step (median reported)")
    ap.add_argument(
        "--logstream-rows",
        default="",
        help="also time these logstream commands in the same run, comma-separated: "
        f"{', '.join(LOGSTREAM_ROWS)}",
    )
    ap.add_argument(
        "--design-floor",
        action="store_true",
        help=f"also time the {DESIGN_STEP!r} step: every default output of the backfill as plain "
        "batch queries (use with --run design)",
    )
    ap.add_argument("--step", choices=(*STEPS, DESIGN_STEP), help=argparse.SUPPRESS)
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
    files = harness.july_files(args.days)
    runs: dict[str, list[float]] = {"goaccess": []}
    for _ in range(args.repeat):
        runs["goaccess"].append(harness.goaccess_seconds(files))
        for step in (*STEPS, DESIGN_STEP) if args.design_floor else STEPS:
            runs.setdefault(step, []).append(timed_step(step, files[0].parent))
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
    found = targets(rows, len(files))
    for t in found:
        print(f"{t['figure']:<28} {t['ratio']:6.2f}x  target {t['target']}  met: {t['met']}")
    result = {
        "input": f"NASA day x{len(files)} (bench/build_july.py), "
        f"{harness.NASA_DAY_LINES * len(files):,} lines",
        "machine": harness.machine(),
        "rows": rows,
        "targets": found,
    }
    harness.write_result(result, args.out, show=False, run=harness.run_name(args))


if __name__ == "__main__":
    harness.run(main)
