"""logstream against GoAccess on the same input, as whole processes, in one run.

Input: the 31-day NASA input (``bench/build_july.py``: the real 1995-07-09 day replicated
across July, 1,093,432 lines, plain text). Every figure is the wall time of a whole process
(JVM start included for logstream), measured one after the other on the same machine:

1. ``goaccess``: ``goaccess - --log-format=COMMON --no-ip-validation -o r.json`` fed the 31
   files on stdin (GoAccess 1.x, single-threaded; installed with apt-get when missing);
2. ``batch``: ``logstream batch DIR --format common --json r.json --quiet``;
   ``batch_no_panels``: the same with every GoAccess panel left out (``--no-panel``): the
   panels' cost is its difference with ``batch``;
3. ``backfill_full``: ``logstream run --trigger available-now`` over the 31 files, every
   output on, ``--max-files-per-trigger`` files per micro-batch (default 31: one micro-batch);
4. ``backfill_ingest``: the same with ``--queries none`` (events, late events and quarantine
   only);
   ``backfill_no_reference``: the same with the outputs of before reference data (no
   ``traffic_by_section``, ``traffic_by_agent``): the cost of those default views is its
   difference with ``backfill_full``;
   ``backfill_no_panels``: every default output but ``traffic_by_panel`` (GoAccess's panels
   in the stream): their cost is its difference with ``backfill_full``;
   ``backfill_reference``: ``backfill_full`` plus ``--reference`` sections and networks tables
   (``examples/reference/``): every reference join and all three reference outputs;
   ``backfill_bots``: ``backfill_full`` plus ``--bot-model`` (a bot model trained before the
   timing, untimed, on the real elastic Combined sample: ``logstream model train bots``), so
   every final client window is also scored (the cost of ``bot_scores``);
   ``backfill_json``: ``backfill_full`` with ``--output-format json`` (JSON lines instead of
   Parquet); ``backfill_webhook``: ``backfill_full`` plus ``--sink http://127.0.0.1:PORT/hook``,
   a receiver in this process that answers every POST at once (the cost of sending the alerts
   and final windows: :mod:`logstream.sinks.webhook`);
5. ``live`` (unless ``--skip-live``): ``logstream run --trigger "2 seconds"`` (``--live-trigger``
   chooses another) while chunk files land in its input directory at ``--live-rate`` lines/s
   for ``--live-seconds``; the latency of a chunk is the time from its rename into the
   directory to the moment the serving store's newest event time reaches the chunk's newest
   event (the store is polled every 0.1 s).
   The lines keep their 1995 timestamps, so event time runs about 25,000 times faster than
   the wall clock (10,000 lines/s of a log of 35,272 lines a day): every micro-batch closes
   days of windows at once;
   ``live_wall``: the same feed with every line stamped with the second it lands (a server
   writing 10,000 lines/s now): event time runs with the wall clock, as when following a
   real log. A chunk's latency is the time from its rename to the moment the requests
   counted in the store's ``traffic_per_minute`` reach the lines landed up to it.
   ``--live-clock`` chooses (default: both). With the wall clock the input goes round, so
   ``--live-seconds 600`` is the 10-minute soak. Both report the resident memory of the
   pipeline's processes (in total, and of the JVM, the Python driver and the Python
   workers), the JVM's heap and its analytics state rows, sampled every 5 s, and the ingest
   query's micro-batches (count, duration p50/p95/max, input rows) from the store's
   ``progress`` table; a run of 20 minutes or more (``--live-seconds 1200``) also reports
   its last 10 minutes (``steady_*``: total RSS and state rows, first and last minute).

Ratios are GoAccess's wall time over logstream's (> 1: logstream is faster). Writes
``bench/results/vs-goaccess.json`` under the run ``--run`` (default: the days, ``31d``); the
file keeps the latest result of each run (``284d``, ``report-panels``, ``soak-20min`` …).

Usage::

    python bench/bench_vs_goaccess.py [--days 31] [--files-per-trigger 31] [--skip-live]
        [--live-rate 10000] [--live-seconds 120] [--live-clock replay|wall|both]
        [--rows batch,backfill_full,...]
        [--bot-model DIR] [--out bench/results/vs-goaccess.json] [--run NAME]

``--rows`` runs only the rows named (GoAccess always runs: every ratio is of one run);
``--rows "" --live-clock wall --live-seconds 1200 --run soak-20min`` is
the 20-minute soak.
"""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness
from logstream.report.panels import PANELS

#: The outputs of the pipeline before reference data.
NO_REFERENCE = "traffic_per_minute,trending_pages,unique_visitors,sessions,top_clients,alerts"
NO_PANELS = f"{NO_REFERENCE},traffic_by_section,traffic_by_agent"
EXAMPLES = harness.REPO / "examples" / "reference"
REFERENCE_ARGS = (
    "--reference",
    f"sections={EXAMPLES / 'sections-nasa.csv'}",
    "--reference",
    f"networks={EXAMPLES / 'networks-crawlers.csv'}",
)
#: The rows of the report after ``goaccess``, in the order they run.
ROWS = (
    "batch",
    "batch_no_panels",
    "backfill_full",
    "backfill_ingest",
    "backfill_no_reference",
    "backfill_no_panels",
    "backfill_reference",
    "backfill_bots",
    "backfill_json",
    "backfill_webhook",
)
ELASTIC = "elastic_apache_logs_combined_2015.log.gz"
#: Store reads of the live rows: the newest event time (epoch ms), the requests counted, the
#: analytics state's rows after the newest micro-batch.
NEWEST_EVENT_MS = "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'"
REQUESTS_SERVED = "SELECT SUM(requests) FROM traffic_per_minute"
STATE_ROWS = "SELECT value FROM pipeline_state WHERE key = 'analytics_state_rows'"


def train_bot_model(out: Path) -> Path:
    """A bots model trained (untimed) on the real elastic sample in ``$LOGSTREAM_DATA_DIR``."""
    sample = harness.data_file(ELASTIC)
    harness.timed(
        [*harness.LOGSTREAM, "model", "train", "bots", "--input", str(sample), "--out", str(out)]
    )
    return out


def backfill_webhook(files: list[Path], per_trigger: int) -> tuple[float, int, int]:
    """``backfill_full`` with a webhook sink; returns (seconds, posts, rows received)."""
    with harness.webhook_receiver() as (url, posts):
        seconds = harness.backfill_seconds(files, per_trigger, "all", "--sink", url)
    return seconds, len(posts), sum(len(rows) for _, rows in posts)


def number(db: Path, sql: str) -> int | None:
    """An integer the store holds (None before it has one)."""
    value = harness.store_value(db, sql)
    return None if value is None else int(value)


def micro_batches(db: Path) -> dict[str, Any]:
    """The ingest query's micro-batches from the store's ``progress`` table: how many, their
    duration (s: p50, p95, max) and input rows (median)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        rows = conn.execute(
            "SELECT batch_duration_ms, num_input_rows FROM progress WHERE query = 'ingest'"
        ).fetchall()
    if len(rows) < 2:
        return {"count": len(rows)}
    seconds = [r[0] / 1000 for r in rows if r[0] is not None]
    return {
        "count": len(rows),
        "duration_s_p50_p95_max": [
            round(statistics.median(seconds), 2),
            round(harness.p95(seconds), 2),
            round(max(seconds), 2),
        ],
        "input_rows_median": statistics.median(r[1] or 0 for r in rows),
    }


class Feed:
    """Chunk files landing in ``landing`` every 0.1 s, ``rate`` lines/s of ``lines`` in order
    (with ``wall_clock``: restamped with the second they land, going round the input).

    ``landed`` holds (landing time, mark): the chunk's newest event ms, or with the wall
    clock the lines landed so far.
    """

    def __init__(self, lines: list[str], landing: Path, rate: int, wall_clock: bool) -> None:
        self.lines, self.landing, self.rate, self.wall_clock = lines, landing, rate, wall_clock
        self.per_tick = max(1, rate // 10)
        self.landed: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, daemon=True)

    def _feed(self) -> None:
        lines, per_tick = self.lines, self.per_tick
        pos, n, tick = 100, 0, time.monotonic()
        while not self.stop.is_set():
            start = pos % len(lines) if self.wall_clock else pos  # restamped lines go round
            chunk = lines[start : start + per_tick]
            if len(chunk) < per_tick:  # the end of the input
                if not self.wall_clock:
                    break
                chunk = (chunk + lines)[:per_tick]
            pos += per_tick
            part = self.landing.parent / f".part-{n}"
            if self.wall_clock:
                stamp = harness.clf_stamp()
                chunk = [harness.stamped(x, stamp) for x in chunk]
            part.write_text("".join(chunk))
            part.rename(self.landing / f"feed-{n:06d}.log")
            mark = pos if self.wall_clock else max(harness.event_ms(x) for x in chunk)
            self.landed.append((time.monotonic(), mark))
            n += 1
            tick += 0.1
            self.stop.wait(max(0.0, tick - time.monotonic()))


def start_live(
    tmp: Path, lines: list[str], wall_clock: bool, trigger: str | None, progress_sql: str
) -> subprocess.Popen:
    """Seed ``tmp/landing`` with 100 lines, start ``logstream run`` on it and wait until its
    store holds data (the JVM and the first micro-batch)."""
    landing = tmp / "landing"
    landing.mkdir()
    seed = lines[:100]
    if wall_clock:
        seed = [harness.stamped(x, harness.clf_stamp()) for x in seed]
    (landing / "seed.log").write_text("".join(seed))
    errors = tmp / "stderr.log"  # a file, not a pipe nobody reads while it runs
    when = ["--trigger", trigger] if trigger else []  # None: logstream's default
    argv = harness.run_argv(tmp, "--input-dir", str(landing), "--no-dashboard", *when)
    with errors.open("w") as err:
        proc = subprocess.Popen(
            argv, env=harness.bench_env(), stdout=subprocess.DEVNULL, stderr=err
        )
    started = time.monotonic()
    while number(tmp / "out" / "logstream.db", progress_sql) is None:
        if proc.poll() is not None or time.monotonic() - started > 180:
            proc.kill()
            raise SystemExit(f"the pipeline did not start: {errors.read_text()[-3000:]}")
        time.sleep(0.1)
    return proc


def live(
    files: list[Path],
    rate: int,
    seconds: int,
    wall_clock: bool = False,
    trigger: str | None = "2 seconds",
) -> dict:
    """Feed ``rate`` lines/s of the July input for ``seconds`` and measure line-to-store
    latency per chunk, memory and state every 5 s (see the module docstring)."""
    with harness.scratch("bench-live-") as tmp:
        lines = [line for f in files for line in f.read_text().splitlines(keepends=True)]
        # a chunk is in the store when the store's newest event time (replayed clock) or its
        # request count (wall clock: many chunks share a second) reaches it
        progress_sql = REQUESTS_SERVED if wall_clock else NEWEST_EVENT_MS
        proc = start_live(tmp, lines, wall_clock, trigger, progress_sql)
        db = tmp / "out" / "logstream.db"
        feed = Feed(lines, tmp / "landing", rate, wall_clock)
        feed.thread.start()
        latencies: list[float] = []
        # (s since the feed began, RSS by process, state rows, the JVM's heap)
        samples: list[tuple[float, dict[str, float], int | None, dict[str, float] | None]] = []
        began = time.monotonic()
        deadline = began + seconds
        while time.monotonic() < deadline + 30:
            newest = number(db, progress_sql)
            now = time.monotonic()
            if now <= deadline and (not samples or now - began - samples[-1][0] >= 5):
                rss = harness.rss_mib_by_process(proc.pid)
                samples.append(
                    (now - began, rss, number(db, STATE_ROWS), harness.jvm_heap_mib(proc.pid))
                )
            landed = feed.landed
            while (
                len(latencies) < len(landed)
                and newest is not None
                and landed[len(latencies)][1] <= newest
            ):
                latencies.append(now - landed[len(latencies)][0])
            if now > deadline:
                feed.stop.set()
                if len(latencies) >= len(landed):
                    break
            time.sleep(0.1)
        feed.stop.set()
        feed.thread.join(5)
        proc.terminate()
        proc.wait(60)
        batches = micro_batches(db)
    return live_report(feed, latencies, samples, batches, seconds, trigger)


def live_report(
    feed: Feed,
    latencies: list[float],
    samples: list[tuple],
    batches: dict,
    seconds: int,
    trigger: str | None,
) -> dict[str, Any]:
    """The figures of a live row: latency percentiles, micro-batches, memory and state."""
    totals = [(t, rss["total"], rows, heap) for t, rss, rows, heap in samples]
    return {
        "event_time": "wall clock" if feed.wall_clock else "replayed (1995)",
        "rate_lines_per_s": feed.rate,
        "seconds": seconds,
        "trigger": trigger or "logstream's default",
        "lines_fed": len(feed.landed) * feed.per_tick,
        "chunks_fed": len(feed.landed),
        "chunks_seen_in_store": len(latencies),
        "latency_s_p50": round(statistics.median(latencies), 2) if latencies else None,
        "latency_s_p95": round(harness.p95(latencies), 2) if len(latencies) > 1 else None,
        "latency_s_max": round(max(latencies), 2) if latencies else None,
        "micro_batches": batches,
        # the pipeline's processes (driver, JVM, Python workers) and its analytics state
        # rows, every 5 s: the first and the last minute's medians, and every 30 s
        "rss_mb_first_last_minute": first_last_minute(totals, 1),
        "state_rows_first_last_minute": first_last_minute(totals, 2),
        "jvm_heap_committed_mb_first_last_minute": first_last_minute(
            [(t, rss, rows, heap and heap["committed"]) for t, rss, rows, heap in totals], 3
        ),
        # the JVM's heap (MiB, committed and used) and metaspace: the RSS follows the
        # committed heap, which the collector grows towards spark.driver.memory
        "every_30_s": [
            {"s": round(t), "rss_mb": rss, "state_rows": rows, "jvm_heap_mb": heap}
            for t, rss, rows, heap in samples
            if round(t) % 30 < 5
        ],
        # a run of 20 minutes or more: the last 10 minutes, after the watermark's delay has
        # filled the state (first and last minute of them)
        **(steady_state(totals, seconds) if seconds >= 1200 else {}),
    }


def steady_state(samples: list[tuple], seconds: int) -> dict[str, object]:
    """Total RSS and state rows over the last 10 minutes of a run: the medians of their first
    and last minute, and the change between them in percent."""
    start = seconds - 600
    late = [(t - start, *rest) for t, *rest in samples if t >= start]
    out: dict[str, object] = {"steady_from_s": start}
    for name, i in (("rss_mb", 1), ("state_rows", 2)):
        first, last = first_last_minute(late, i)
        out[f"steady_{name}_first_last_minute"] = [first, last]
        if first and last:
            out[f"steady_{name}_change_pct"] = round(100 * (last - first) / first, 1)
    return out


def first_last_minute(samples: list[tuple], i: int) -> list:
    """Medians of field ``i`` of the samples of the first and of the last minute."""
    end = samples[-1][0] if samples else 0.0
    first = [s[i] for s in samples if s[0] < 60 and s[i] is not None]
    last = [s[i] for s in samples if s[0] >= end - 60 and s[i] is not None]
    return [statistics.median(first) if first else None, statistics.median(last) if last else None]


def time_rows(files: list[Path], rows: list[str], per: int, bot_model: Path | None) -> dict:
    """Wall seconds of GoAccess and of each of ``rows``, one after the other."""
    figures: dict[str, Any] = {"goaccess": harness.goaccess_seconds(files)}
    options = {
        "backfill_full": ("all",),
        "backfill_ingest": ("none",),
        "backfill_no_reference": (NO_REFERENCE,),
        "backfill_no_panels": (NO_PANELS,),
        "backfill_reference": ("all", *REFERENCE_ARGS),
        "backfill_json": ("all", "--output-format", "json"),
    }
    with harness.scratch("bench-vs-goaccess-") as tmp:
        for row in rows:
            if row == "batch":
                figures[row] = harness.batch_seconds(files)
            elif row == "batch_no_panels":  # the cost of GoAccess's panels: its difference
                off = [a for p in PANELS for a in ("--no-panel", p)]
                figures[row] = harness.batch_seconds(files, *off)
            elif row == "backfill_bots":
                model = bot_model or train_bot_model(tmp / "bots")
                figures[row] = harness.backfill_seconds(
                    files, per, "all", "--bot-model", str(model)
                )
            elif row == "backfill_webhook":
                figures[row], posts, received = backfill_webhook(files, per)
                figures["webhook_received"] = {"posts": posts, "rows": received}
            else:
                figures[row] = harness.backfill_seconds(files, per, *options[row])
    return figures


def main() -> None:
    parser = harness.parser(__doc__, "vs-goaccess", days=True, runs=True)
    parser.add_argument("--files-per-trigger", type=int, default=31)
    parser.add_argument("--skip-live", action="store_true")
    parser.add_argument("--live-rate", type=int, default=10_000)
    parser.add_argument("--live-seconds", type=int, default=120)
    parser.add_argument("--live-clock", choices=("replay", "wall", "both"), default="both")
    parser.add_argument(
        "--live-trigger", default="2 seconds", help='the live rows\' --trigger (e.g. "0s")'
    )
    parser.add_argument("--rows", default=",".join(ROWS), help="rows to run, comma-separated")
    parser.add_argument("--bot-model", type=Path, help="a bots model (default: train one)")
    args = parser.parse_args()
    asked = {r.strip() for r in args.rows.split(",") if r.strip()}
    if asked - set(ROWS):
        raise SystemExit(f"unknown rows {sorted(asked - set(ROWS))}: choose from {', '.join(ROWS)}")
    files = harness.july_files(args.days)
    lines = harness.NASA_DAY_LINES * len(files)
    rows = [r for r in ROWS if r in asked]
    figures = time_rows(files, rows, args.files_per_trigger, args.bot_model)
    webhook = figures.pop("webhook_received", None)
    report = {
        "input": f"NASA day x{len(files)} (bench/build_july.py), {lines:,} lines",
        "files_per_trigger": args.files_per_trigger,
        "goaccess_version": harness.goaccess_version(),
        "wall_s": {k: round(v, 2) for k, v in figures.items()},
        "lines_per_s": {k: round(lines / v) for k, v in figures.items()},
        "vs_goaccess": {k: round(figures["goaccess"] / v, 3) for k, v in figures.items()},
        "machine": harness.machine(),
    }
    if webhook is not None:
        report["webhook_received"] = webhook
    for key, wall_clock, clock in (("live", False, "replay"), ("live_wall", True, "wall")):
        if not args.skip_live and args.live_clock in (clock, "both"):
            report[key] = live(
                files, args.live_rate, args.live_seconds, wall_clock, args.live_trigger
            )
    harness.write_result(report, args.out, run=harness.run_name(args))


if __name__ == "__main__":
    harness.run(main)
