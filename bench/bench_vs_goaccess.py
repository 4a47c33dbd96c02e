"""logstream against GoAccess on the same input, as whole processes, in one run.

Input: the 31-day NASA input (``bench/build_july.py``: the real 1995-07-09 day replicated
across July, 1,093,432 lines, plain text). Every figure is the wall time of a whole process
(JVM start included for logstream), measured one after the other on the same machine:

1. ``goaccess``: ``goaccess - --log-format=COMMON --no-ip-validation -o r.json`` fed the 31
   files on stdin (GoAccess 1.x, single-threaded; installed with apt-get when missing);
2. ``batch``: ``logstream batch DIR --format common --json r.json --quiet``;
3. ``backfill_full``: ``logstream run --trigger available-now`` over the 31 files, every
   output on, ``--max-files-per-trigger`` files per micro-batch (default 31: one micro-batch);
4. ``backfill_ingest``: the same with ``--queries none`` (events, late events and quarantine
   only);
   ``backfill_no_reference``: the same with the outputs of before reference data (no
   ``traffic_by_section``, ``traffic_by_agent``): the cost of those default views is its
   difference with ``backfill_full``;
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
``bench/results/vs-goaccess.json``.

Usage::

    python bench/bench_vs_goaccess.py [--days 31] [--files-per-trigger 31] [--skip-live]
        [--live-rate 10000] [--live-seconds 120] [--live-clock replay|wall|both]
        [--rows batch,backfill_full,...]
        [--bot-model DIR]

``--rows`` runs only the rows named (GoAccess always runs: every ratio is of one run).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.build_july import build_july, input_dir

RESULTS = Path(__file__).resolve().parent / "results"
LOGSTREAM = [sys.executable, "-m", "logstream"]


def ensure_goaccess() -> str:
    """The goaccess binary, installed with apt-get when missing."""
    found = shutil.which("goaccess")
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "goaccess"], check=True, env=env)
    found = shutil.which("goaccess")
    if not found:
        raise SystemExit("goaccess could not be installed")
    return found


def timed(cmd: list[str], stdin_files: list[Path] | None = None) -> float:
    """Wall seconds of one process; fails loudly when it fails."""
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    t0 = time.perf_counter()
    if stdin_files is None:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    else:
        feeder = subprocess.Popen(["cat", *map(str, stdin_files)], stdout=subprocess.PIPE)
        done = subprocess.run(cmd, env=env, stdin=feeder.stdout, capture_output=True, text=True)
        feeder.wait()
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return seconds


def goaccess_seconds(goaccess: str, files: list[Path], report: Path) -> float:
    """Wall seconds of GoAccess fed ``files`` on stdin, writing its JSON ``report``."""
    cmd = [goaccess, "-", "--log-format=COMMON", "--no-ip-validation", "-o", str(report)]
    return timed(cmd, stdin_files=files)


def batch_seconds(files: list[Path], report: Path) -> float:
    """Wall seconds of ``logstream batch`` on the folder of ``files``, writing ``report``."""
    cmd = [*LOGSTREAM, "batch", str(files[0].parent), "--format", "common", "--quiet"]
    return timed([*cmd, "--json", str(report)])


def landing_dir(files: list[Path], tmp: Path) -> Path:
    """A directory holding exactly ``files`` (symlinks, modification times in day order)."""
    landing = tmp / "landing"
    landing.mkdir()
    for i, f in enumerate(files):
        link = landing / f.name
        link.symlink_to(f)
        os.utime(link, (1_000_000 + i, 1_000_000 + i), follow_symlinks=False)
    return landing


def run_args(tmp: Path, landing: Path, *extra: str) -> list[str]:
    return [
        *LOGSTREAM,
        "run",
        "--input-dir",
        str(landing),
        "--format",
        "common",
        "--output-dir",
        str(tmp / "out"),
        "--state-dir",
        str(tmp / "state"),
        "--no-dashboard",
        "--quiet",
        *extra,
    ]


#: The outputs of the pipeline before reference data.
NO_REFERENCE = "traffic_per_minute,trending_pages,unique_visitors,sessions,top_clients,alerts"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "reference"
REFERENCE_ARGS = (
    "--reference",
    f"sections={EXAMPLES / 'sections-nasa.csv'}",
    "--reference",
    f"networks={EXAMPLES / 'networks-crawlers.csv'}",
)


#: The rows of the report after ``goaccess``, in the order they run.
ROWS = (
    "batch",
    "backfill_full",
    "backfill_ingest",
    "backfill_no_reference",
    "backfill_reference",
    "backfill_bots",
    "backfill_json",
    "backfill_webhook",
)
ELASTIC = "elastic_apache_logs_combined_2015.log.gz"


def train_bot_model(out: Path) -> Path:
    """A bots model trained (untimed) on the real elastic sample in ``$LOGSTREAM_DATA_DIR``."""
    data = Path(os.environ.get("LOGSTREAM_DATA_DIR", Path(__file__).parents[2] / "shared/data"))
    if not (data / ELASTIC).is_file():
        raise SystemExit(f"{data / ELASTIC} is missing: set LOGSTREAM_DATA_DIR")
    timed([*LOGSTREAM, "model", "train", "bots", "--input", str(data / ELASTIC), "--out", str(out)])
    return out


class _Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook that takes every POST at once and counts the rows (JSON arrays) it got."""

    rows = 0
    posts = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).rows += len(json.loads(body))
        type(self).posts += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def backfill_webhook(files: list[Path], per_trigger: int) -> tuple[float, int, int]:
    """``backfill_full`` with a webhook sink; returns (seconds, posts, rows received)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        seconds = backfill(files, per_trigger, "all", "--sink", url)
    finally:
        server.shutdown()
    return seconds, _Receiver.posts, _Receiver.rows


def backfill(files: list[Path], per_trigger: int, queries: str, *extra: str) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="bench-vs-goaccess-"))
    try:
        landing = landing_dir(files, tmp)
        return timed(
            run_args(
                tmp,
                landing,
                "--trigger",
                "available-now",
                "--max-files-per-trigger",
                str(per_trigger),
                "--queries",
                queries,
                *extra,
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def store_number(db: Path, sql: str) -> int | None:
    """The number ``sql`` reads from the serving store, read-only (None before it has one)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5) as conn:
            row = conn.execute(sql).fetchone()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


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
            round(statistics.quantiles(seconds, n=20, method="inclusive")[18], 2),
            round(max(seconds), 2),
        ],
        "input_rows_median": statistics.median(r[1] or 0 for r in rows),
    }


def newest_event_ms(db: Path) -> int | None:
    """The store's newest event time (epoch ms)."""
    return store_number(db, "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'")


def requests_served(db: Path) -> int | None:
    """Requests counted in the store's ``traffic_per_minute`` (every window is kept)."""
    return store_number(db, "SELECT SUM(requests) FROM traffic_per_minute")


def stamped(line: str, stamp: str) -> str:
    """``line`` with its Common Log Format timestamp replaced by ``stamp``."""
    return line[: line.index("[") + 1] + stamp + line[line.index("]") :]


def clf_stamp(epoch_s: float | None = None) -> str:
    """``epoch_s`` (default: now) as a Common Log Format timestamp, to the second (UTC)."""
    return time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(epoch_s))


def event_ms(line: str) -> int:
    """Epoch ms of a Common Log Format line's timestamp (oracle-free: strptime)."""
    from datetime import datetime

    text = line[line.index("[") + 1 : line.index("]")]
    return int(datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp() * 1000)


def live(
    files: list[Path], rate: int, seconds: int, wall_clock: bool = False, trigger: str = "2 seconds"
) -> dict:
    """Feed ``rate`` lines/s of the July input, in order, for ``seconds`` and measure
    line-to-store latency per chunk; with ``wall_clock`` every line is stamped with the second
    it lands (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-live-"))
    landing = tmp / "landing"
    landing.mkdir()
    lines = [line for f in files for line in f.read_text().splitlines(keepends=True)]
    seed = lines[:100]
    if wall_clock:
        seed = [stamped(x, clf_stamp()) for x in seed]
    (landing / "seed.log").write_text("".join(seed))
    errors = (tmp / "stderr.log").open("w")  # a file, not a pipe nobody reads while it runs
    proc = subprocess.Popen(
        run_args(tmp, landing, "--trigger", trigger),
        env={**os.environ, "LOGSTREAM_SPARK_UI": "false"},
        stdout=subprocess.DEVNULL,
        stderr=errors,
        text=True,
    )
    db = tmp / "out" / "logstream.db"
    started = time.monotonic()
    # a chunk is in the store when the store's newest event time (replayed clock) or its
    # request count (wall clock: many chunks share a second) reaches it
    progress = requests_served if wall_clock else newest_event_ms
    while progress(db) is None:  # the JVM and the first micro-batch
        if proc.poll() is not None or time.monotonic() - started > 180:
            proc.kill()
            errors.close()
            text = (tmp / "stderr.log").read_text()[-3000:]
            raise SystemExit(f"the pipeline did not start: {text}")
        time.sleep(0.1)
    # (landing time, the chunk's newest event ms, or with the wall clock the lines so far)
    landed: list[tuple[float, int]] = []
    stop = threading.Event()
    per_tick = max(1, rate // 10)  # a chunk every 0.1 s

    def feed() -> None:
        pos, n, tick = 100, 0, time.monotonic()
        while not stop.is_set():
            start = pos % len(lines) if wall_clock else pos  # restamped lines can go round
            chunk = lines[start : start + per_tick]
            if len(chunk) < per_tick:  # the end of the input
                if not wall_clock:
                    break
                chunk = (chunk + lines)[:per_tick]
            pos += per_tick
            part = tmp / f".part-{n}"
            if wall_clock:
                stamp = clf_stamp()
                chunk = [stamped(x, stamp) for x in chunk]
            part.write_text("".join(chunk))
            part.rename(landing / f"feed-{n:06d}.log")
            mark = pos if wall_clock else max(event_ms(x) for x in chunk)
            landed.append((time.monotonic(), mark))
            n += 1
            tick += 0.1
            stop.wait(max(0.0, tick - time.monotonic()))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    latencies: list[float] = []
    # (s since the feed began, RSS by process, state rows, the JVM's heap)
    samples: list[tuple[float, dict[str, float], int | None, dict[str, float] | None]] = []
    pending = 0
    began = time.monotonic()
    deadline = began + seconds
    while time.monotonic() < deadline + 30:
        newest = progress(db)
        now = time.monotonic()
        if now <= deadline and (not samples or now - began - samples[-1][0] >= 5):
            samples.append(
                (now - began, rss_mb_by_process(proc.pid), state_rows(db), jvm_heap_mb(proc.pid))
            )
        while pending < len(landed) and newest is not None and landed[pending][1] <= newest:
            latencies.append(now - landed[pending][0])
            pending += 1
        if now > deadline:
            stop.set()
            if pending >= len(landed):
                break
        time.sleep(0.1)
    stop.set()
    feeder.join(5)
    proc.terminate()
    proc.wait(60)
    errors.close()
    batches = micro_batches(db)
    shutil.rmtree(tmp, ignore_errors=True)
    fed = len(landed) * per_tick
    qs = (
        statistics.quantiles(latencies, n=20, method="inclusive")
        if len(latencies) > 1
        else [None] * 19
    )
    # the same samples with the total RSS only
    totals = [(t, rss["total"], rows, heap) for t, rss, rows, heap in samples]
    return {
        "event_time": "wall clock" if wall_clock else "replayed (1995)",
        "rate_lines_per_s": rate,
        "seconds": seconds,
        "trigger": trigger,
        "lines_fed": fed,
        "chunks_fed": len(landed),
        "chunks_seen_in_store": len(latencies),
        "latency_s_p50": round(statistics.median(latencies), 2) if latencies else None,
        "latency_s_p95": round(qs[18], 2) if qs[18] is not None else None,
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


def rss_mb_by_process(pid: int) -> dict[str, float]:
    """Resident memory (MiB) of ``pid`` and every process under it (Linux ``/proc``): in
    total, of the JVM, of ``pid`` itself (the Python driver) and of the Python workers."""
    kb = {"total": 0, "jvm": 0, "python_driver": 0, "python_workers": 0}
    for p in _tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            exe = _executable(p)
        except OSError:
            continue
        rss = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS")), 0)
        kind = "python_driver" if p == pid else "jvm" if _is_jvm(exe) else "python_workers"
        kb["total"] += rss
        kb[kind] += rss
    return {k: round(v / 1024, 1) for k, v in kb.items()}


def _executable(pid: int) -> bytes:
    """The program ``pid`` runs (the first word of its command line); OSError once gone."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]


def _is_jvm(executable: bytes) -> bool:
    return b"java" in executable


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def jvm_heap_mb(pid: int) -> dict[str, float] | None:
    """The heap of the JVM under ``pid`` (``jcmd GC.heap_info``, which forces no collection):
    committed and used MiB of the whole heap and of the old generation, and the committed
    metaspace. None without ``jcmd`` (a JRE) or a JVM."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return None
    for p in _tree(pid):
        try:
            if not _is_jvm(_executable(p)):
                continue
        except OSError:
            continue
        info = subprocess.run([jcmd, str(p), "GC.heap_info"], capture_output=True, text=True)
        heap = {"committed": 0.0, "used": 0.0, "old_used": 0.0, "metaspace": 0.0}
        for line in info.stdout.splitlines():
            words = line.replace(",", " ").split()
            if "total" in words and "used" in words:  # a generation: "total NK, used MK"
                total = float(words[words.index("total") + 1].rstrip("K")) / 1024
                used = float(words[words.index("used") + 1].rstrip("K")) / 1024
                heap["committed"] += total
                heap["used"] += used
                if "Old" in words[0]:
                    heap["old_used"] = used
            elif words[:1] == ["Metaspace"] and "committed" in words:
                heap["metaspace"] = float(words[words.index("committed") + 1].rstrip("K")) / 1024
        return {k: round(v, 1) for k, v in heap.items()} if heap["committed"] else None
    return None


def state_rows(db: Path) -> int | None:
    """The analytics state's rows after the newest micro-batch (``pipeline_state``)."""
    return store_number(db, "SELECT value FROM pipeline_state WHERE key = 'analytics_state_rows'")


def first_last_minute(samples: list[tuple], i: int) -> list:
    """Medians of field ``i`` of the samples of the first and of the last minute."""
    end = samples[-1][0] if samples else 0.0
    first = [s[i] for s in samples if s[0] < 60 and s[i] is not None]
    last = [s[i] for s in samples if s[0] >= end - 60 and s[i] is not None]
    return [statistics.median(first) if first else None, statistics.median(last) if last else None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--files-per-trigger", type=int, default=31)
    parser.add_argument("--skip-live", action="store_true")
    parser.add_argument("--live-rate", type=int, default=10_000)
    parser.add_argument("--live-seconds", type=int, default=120)
    parser.add_argument("--live-clock", choices=("replay", "wall", "both"), default="both")
    parser.add_argument(
        "--live-trigger", default="2 seconds", help='the live rows\' --trigger (e.g. "0s")'
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "vs-goaccess.json")
    parser.add_argument("--rows", default=",".join(ROWS), help="rows to run, comma-separated")
    parser.add_argument("--bot-model", type=Path, help="a bots model (default: train one)")
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = set(rows) - set(ROWS)
    if unknown:
        raise SystemExit(f"unknown rows {sorted(unknown)}: choose from {', '.join(ROWS)}")
    files = build_july(input_dir(args.days), args.days)
    lines = 35272 * len(files)
    goaccess = ensure_goaccess()
    version = subprocess.run([goaccess, "--version"], capture_output=True, text=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-vs-goaccess-"))
    figures: dict[str, float] = {}
    figures["goaccess"] = goaccess_seconds(goaccess, files, tmp / "g.json")
    per = args.files_per_trigger
    if "batch" in rows:
        figures["batch"] = batch_seconds(files, tmp / "r.json")
    if "backfill_full" in rows:
        figures["backfill_full"] = backfill(files, per, "all")
    if "backfill_ingest" in rows:
        figures["backfill_ingest"] = backfill(files, per, "none")
    if "backfill_no_reference" in rows:
        figures["backfill_no_reference"] = backfill(files, per, NO_REFERENCE)
    if "backfill_reference" in rows:
        figures["backfill_reference"] = backfill(files, per, "all", *REFERENCE_ARGS)
    if "backfill_bots" in rows:
        model = args.bot_model or train_bot_model(tmp / "bots")
        figures["backfill_bots"] = backfill(files, per, "all", "--bot-model", str(model))
    if "backfill_json" in rows:
        figures["backfill_json"] = backfill(files, per, "all", "--output-format", "json")
    webhook = None
    if "backfill_webhook" in rows:
        figures["backfill_webhook"], posts, received = backfill_webhook(files, per)
        webhook = {"posts": posts, "rows": received}
    shutil.rmtree(tmp, ignore_errors=True)
    report = {
        "input": f"NASA day x{len(files)} (bench/build_july.py), {lines:,} lines",
        "files_per_trigger": args.files_per_trigger,
        "goaccess_version": (version.stdout or version.stderr).splitlines()[0],
        "wall_s": {k: round(v, 2) for k, v in figures.items()},
        "lines_per_s": {k: round(lines / v) for k, v in figures.items()},
        "vs_goaccess": {k: round(figures["goaccess"] / v, 3) for k, v in figures.items()},
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
    }
    if webhook is not None:
        report["webhook_received"] = webhook
    if not args.skip_live and args.live_clock in ("replay", "both"):
        report["live"] = live(files, args.live_rate, args.live_seconds, False, args.live_trigger)
    if not args.skip_live and args.live_clock in ("wall", "both"):
        report["live_wall"] = live(
            files, args.live_rate, args.live_seconds, True, args.live_trigger
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
