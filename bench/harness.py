"""What every benchmark in ``bench/`` shares: inputs, processes, GoAccess, memory, results.

A benchmark is a short script on top of this module:

* **inputs** — the real NASA day (``$LOGSTREAM_DATA_DIR``, default ``../shared/data``) as
  lines (:func:`nasa_day_lines`), replicated over 31 days or more (:func:`july_files`: the
  input of the GoAccess comparison), written as chunk files (:func:`write_chunks`) or linked
  into a landing directory (:func:`landing_dir`), in modification-time order, which Spark's
  file source follows;
* **processes** — the ``logstream`` command line (:data:`LOGSTREAM`, :func:`run_argv`) and
  the wall seconds of a whole process, JVM start included (:func:`timed`); GoAccess, installed
  with ``apt-get`` when missing (:func:`goaccess_seconds`);
* **memory** — the resident bytes of a process tree by kind (:func:`rss_mib_by_process`) and
  the JVM's heap (:func:`jvm_heap_mib`);
* **the serving store** read read-only while a pipeline writes it (:func:`store_value`), the
  Spark UI's REST API (:func:`spark_totals`), a local webhook (:func:`webhook_receiver`);
* **results** — the machine (:func:`machine`) and one JSON file per benchmark in
  ``bench/results/`` (:func:`add_out_argument`, :func:`write_result`), and a ``main`` that
  stops the active Spark session before Python exits (:func:`run`).

Importing this module puts the repository root and ``src/`` on ``sys.path`` (so ``bench.*``
and ``logstream`` import from a checkout) and imports neither PySpark nor logstream.
Units are in the names: ``_s`` seconds, ``_ms`` milliseconds, ``_mib`` MiB (2**20 bytes),
``lines_per_s`` lines per second.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.server
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
for _path in (REPO / "src", REPO):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

#: The real NASA day (1995-07-09) and its line count.
NASA_DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"
NASA_DAY_LINES = 35_272
#: Where :func:`july_files` writes the 31-day input (other day counts: ``nasa-<N>d``).
JULY_DIR = REPO / "bench" / "data" / "nasa-july"
#: ``logstream`` as a subprocess of this interpreter.
LOGSTREAM = [sys.executable, "-m", "logstream"]
#: A ``logstream run`` progress line of the ``ingest`` query: its micro-batch id, rows and
#: duration in milliseconds (``ingest batch N: R rows, … , D ms;``).
BATCH_LINE = re.compile(r"ingest batch (\d+): ([\d,]+) rows.*?([\d,]+) ms;")
#: Common Log Format month names (English, whatever the locale).
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# --------------------------------------------------------------------------- inputs


def data_dir() -> Path:
    """The real data folder: ``$LOGSTREAM_DATA_DIR``, default ``../shared/data``."""
    return Path(os.environ.get("LOGSTREAM_DATA_DIR", REPO.parent / "shared" / "data"))


def data_file(name: str) -> Path:
    """``name`` in :func:`data_dir`.

    Raises
    ------
    SystemExit
        When the file is missing (the message names the variable to set).
    """
    path = data_dir() / name
    if not path.is_file():
        raise SystemExit(f"missing {path}: set LOGSTREAM_DATA_DIR to the shared data folder")
    return path


def nasa_day_bytes() -> bytes:
    """The NASA day, uncompressed (3.9 MB, :data:`NASA_DAY_LINES` lines)."""
    return gzip.decompress(data_file(NASA_DAY_FILE).read_bytes())


def nasa_day_lines(keepends: bool = False) -> list[str]:
    """The NASA day's lines (UTF-8, undecodable bytes replaced), with or without ``\\n``."""
    return nasa_day_bytes().decode("utf-8", "replace").splitlines(keepends=keepends)


def july_dir(days: int = 31) -> Path:
    """The folder of the ``days``-day input: :data:`JULY_DIR` for 31, else ``nasa-<days>d``."""
    return JULY_DIR if days == 31 else JULY_DIR.parent / f"nasa-{days}d"


def july_files(days: int = 31, out: Path | None = None) -> list[Path]:
    """The NASA day replicated over ``days`` days from 1995-07-01, a plain file a day.

    Each file is the whole real day with its date text ``09/Jul/1995`` rewritten to its own
    day, so times of day, offsets, hosts and URLs stay real: 31 days are 1,093,432 lines
    (about 100 MB), 284 days (to 1996-04-09) 10,017,248. Files already complete are reused.

    Parameters
    ----------
    days : int
        Days, hence files; ``days * NASA_DAY_LINES`` lines.
    out : Path, optional
        The folder (default :func:`july_dir`), which then holds exactly these days.

    Returns
    -------
    list of Path
        The files, in day order.
    """
    out = out or july_dir(days)
    out.mkdir(parents=True, exist_ok=True)
    day = nasa_day_bytes()
    assert day.count(b"[09/Jul/1995:") == NASA_DAY_LINES
    paths = []
    for d in range(days):
        when = date(1995, 7, 1) + timedelta(days=d)
        path = out / f"access_{when.isoformat()}.log"
        clf = f"[{when.day:02d}/{_MONTHS[when.month - 1]}/{when.year}:"
        body = day.replace(b"[09/Jul/1995:", clf.encode())
        if not (path.is_file() and path.stat().st_size == len(body)):
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(body)
            tmp.replace(path)
        paths.append(path)
    return paths


def write_chunks(
    lines: list[str], directory: Path, per_file: int, start_mtime_s: int = 1_000_000
) -> list[Path]:
    """``lines`` (without ``\\n``) as ``chunk-NNNN.log`` files of ``per_file`` lines whose
    modification times rise in order: Spark's file source takes them in that order, so with
    ``--max-files-per-trigger 1`` each file is one micro-batch."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, i in enumerate(range(0, len(lines), per_file)):
        path = directory / f"chunk-{n:04d}.log"
        path.write_text("".join(line + "\n" for line in lines[i : i + per_file]))
        os.utime(path, (start_mtime_s + n, start_mtime_s + n))
        paths.append(path)
    return paths


def landing_dir(files: list[Path], directory: Path) -> Path:
    """A new ``directory`` holding exactly ``files`` (symbolic links, modification times in
    the order given): the input folder of a backfill over them."""
    directory.mkdir(parents=True)
    for i, f in enumerate(files):
        link = directory / f.name
        link.symlink_to(f)
        os.utime(link, (1_000_000 + i, 1_000_000 + i), follow_symlinks=False)
    return directory


def clf_stamp(epoch_s: float | None = None) -> str:
    """``epoch_s`` (default: now) as a Common Log Format timestamp, to the second (UTC)."""
    return time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(epoch_s))


def stamped(line: str, stamp: str) -> str:
    """``line`` with its Common Log Format timestamp replaced by ``stamp``."""
    return line[: line.index("[") + 1] + stamp + line[line.index("]") :]


def event_ms(line: str) -> int:
    """Epoch milliseconds of a Common Log Format line's timestamp (``strptime``, not the
    parser under test)."""
    text = line[line.index("[") + 1 : line.index("]")]
    return int(datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp() * 1000)


# --------------------------------------------------------------------------- processes


def bench_env() -> dict[str, str]:
    """This environment with the Spark UI off (a benchmark's subprocesses serve no UI)."""
    return {**os.environ, "LOGSTREAM_SPARK_UI": "false"}


def run_argv(root: Path, *options: str) -> list[str]:
    """``logstream run`` on Common Log Format lines, quiet, with its outputs in ``root/out``
    and its state in ``root/state``, then ``options`` (the source, trigger …)."""
    out = ["--output-dir", str(root / "out"), "--state-dir", str(root / "state")]
    return [*LOGSTREAM, "run", *options, "--format", "common", *out, "--quiet"]


def timed(cmd: list[str], stdin_files: list[Path] | None = None) -> float:
    """Wall seconds of the whole process ``cmd`` (:func:`bench_env`), optionally fed the
    concatenation of ``stdin_files``.

    Raises
    ------
    SystemExit
        When the process fails (with the end of its standard error).
    """
    t0 = time.perf_counter()
    if stdin_files is None:
        done = subprocess.run(cmd, env=bench_env(), capture_output=True, text=True)
    else:
        feeder = subprocess.Popen(["cat", *map(str, stdin_files)], stdout=subprocess.PIPE)
        done = subprocess.run(
            cmd, env=bench_env(), stdin=feeder.stdout, capture_output=True, text=True
        )
        feeder.wait()
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return seconds


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory, removed on exit (also after an error)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def ensure_goaccess() -> str:
    """The ``goaccess`` binary, installed with ``apt-get`` when missing."""
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


def goaccess_version() -> str:
    """The first line of ``goaccess --version``."""
    done = subprocess.run([ensure_goaccess(), "--version"], capture_output=True, text=True)
    return (done.stdout or done.stderr).splitlines()[0]


def goaccess_seconds(files: list[Path]) -> float:
    """Wall seconds of GoAccess (single-threaded) fed ``files`` on standard input, writing
    its JSON report: ``goaccess - --log-format=COMMON --no-ip-validation -o r.json``."""
    with scratch("bench-goaccess-") as tmp:
        cmd = [ensure_goaccess(), "-", "--log-format=COMMON", "--no-ip-validation"]
        return timed([*cmd, "-o", str(tmp / "r.json")], stdin_files=files)


def batch_seconds(files: list[Path], *extra: str) -> float:
    """Wall seconds of ``logstream batch FOLDER --format common --quiet --json r.json`` (then
    ``extra`` options) on the folder of ``files``."""
    with scratch("bench-batch-") as tmp:
        cmd = [*LOGSTREAM, "batch", str(files[0].parent), "--format", "common", "--quiet"]
        return timed([*cmd, "--json", str(tmp / "r.json"), *extra])


def backfill_seconds(files: list[Path], per_trigger: int, queries: str, *extra: str) -> float:
    """Wall seconds of ``logstream run --trigger available-now`` over ``files``
    (``per_trigger`` files a micro-batch, the outputs ``queries``, then ``extra`` options)."""
    with scratch("bench-backfill-") as tmp:
        landing = landing_dir(files, tmp / "landing")
        options = ["--input-dir", str(landing), "--no-dashboard", "--trigger", "available-now"]
        options += ["--max-files-per-trigger", str(per_trigger), "--queries", queries]
        return timed(run_argv(tmp, *options, *extra))


# --------------------------------------------------------------------------- memory


def process_tree(pid: int) -> list[int]:
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


def _is_jvm(pid: int) -> bool:
    """Whether ``pid`` runs ``java`` (the first word of its command line); OSError once gone."""
    return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]


def rss_mib_by_process(pid: int) -> dict[str, float]:
    """Resident memory (MiB) of ``pid`` and every process under it: ``total``, ``jvm``,
    ``python_driver`` (``pid`` itself) and ``python_workers`` (the rest)."""
    kib = {"total": 0, "jvm": 0, "python_driver": 0, "python_workers": 0}
    for p in process_tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            jvm = _is_jvm(p)
        except OSError:
            continue
        rss = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS")), 0)
        kind = "python_driver" if p == pid else "jvm" if jvm else "python_workers"
        kib["total"] += rss
        kib[kind] += rss
    return {k: round(v / 1024, 1) for k, v in kib.items()}


def jvm_heap_mib(pid: int) -> dict[str, float] | None:
    """The heap of the JVM under ``pid`` (``jcmd GC.heap_info``, which forces no collection):
    ``committed`` and ``used`` MiB of the whole heap, ``old_used`` of the old generation and
    the committed ``metaspace``. None without ``jcmd`` (a JRE) or a JVM."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return None
    for p in process_tree(pid):
        try:
            if not _is_jvm(p):
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


# --------------------------------------------------------------------------- store, UI, webhook


def store_value(db: Path, sql: str, timeout_s: float = 0.5) -> Any:
    """The first column of the first row ``sql`` reads from the SQLite store ``db``,
    read-only (None before the store or the row exists, or while it is being created)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout_s) as conn:
            row = conn.execute(sql).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def p95(values: list[float]) -> float:
    """The 95th percentile (inclusive quantiles: of 1 value, that value)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def ui_get(url: str) -> Any:
    """A JSON document of the Spark UI's REST API."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def ui_time(text: str | None) -> float | None:
    """Epoch seconds of a Spark UI time (``2025-01-01T00:00:00.000GMT``)."""
    if not text:
        return None
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def ui_base(spark: Any) -> str:
    """The REST API root of ``spark``'s application (``.../api/v1/applications/<id>``)."""
    sc = spark.sparkContext
    return f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"


def spark_totals(
    spark: Any, keys: dict[str, Callable[[dict], str]]
) -> tuple[dict[str, dict[str, dict]], list[dict]]:
    """The Spark jobs and stages of the session so far, summed per value of each key.

    Parameters
    ----------
    spark : SparkSession
        With its UI on (Spark docs, "Monitoring and Instrumentation": ``/jobs``, ``/stages``).
    keys : dict
        ``{name: function of a job → label}``, e.g. its description.

    Returns
    -------
    tuple
        Per key name and label: ``jobs``, ``stages``, ``job_wall_s`` (the jobs' wall time)
        and ``executor_run_s`` (their stages' executor run time); and every stage that ran,
        with its job's labels, tasks, executor seconds and records.
    """
    base = ui_base(spark)
    stages = {s["stageId"]: s for s in ui_get(f"{base}/stages")}
    totals: dict[str, dict[str, dict]] = {
        name: defaultdict(
            lambda: {"jobs": 0, "stages": 0, "job_wall_s": 0.0, "executor_run_s": 0.0}
        )
        for name in keys
    }
    runs = []
    for job in ui_get(f"{base}/jobs"):
        labels = {name: key(job) for name, key in keys.items()}
        rows = [totals[name][label] for name, label in labels.items()]
        start, end = ui_time(job.get("submissionTime")), ui_time(job.get("completionTime"))
        for row in rows:
            row["jobs"] += 1
            row["job_wall_s"] += end - start if start and end else 0.0
        for sid in job.get("stageIds", []):
            stage = stages.get(sid)
            if stage is None or stage.get("status") == "SKIPPED":
                continue
            run_s = stage.get("executorRunTime", 0) / 1000
            for row in rows:
                row["stages"] += 1
                row["executor_run_s"] += run_s
            runs.append(
                {
                    **labels,
                    "job": job["jobId"],
                    "stage": sid,
                    "name": stage.get("name", "")[:120],
                    "tasks": stage.get("numTasks"),
                    "executor_run_s": round(run_s, 2),
                    "executor_cpu_s": round(stage.get("executorCpuTime", 0) / 1e9, 3),
                    "gc_s": round(stage.get("jvmGcTime", 0) / 1000, 2),
                    "spilled_mib": round(stage.get("diskBytesSpilled", 0) / 2**20, 1),
                    "input_records": stage.get("inputRecords"),
                    "shuffle_write_records": stage.get("shuffleWriteRecords"),
                }
            )
    return totals, runs


def rounded(table: dict[str, dict]) -> dict[str, dict]:
    """``table``'s float values rounded to 2 decimals (for a result file)."""
    return {
        k: {m: round(v, 2) if isinstance(v, float) else v for m, v in row.items()}
        for k, row in table.items()
    }


@contextlib.contextmanager
def webhook_receiver() -> Iterator[tuple[str, list[tuple[float, list]]]]:
    """A local HTTP server that answers every POST at once.

    Yields
    ------
    tuple
        Its URL (``http://127.0.0.1:PORT/hook``) and the list it appends each POST to as
        (arrival epoch seconds, the JSON array posted).
    """
    posts: list[tuple[float, list]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            now = time.time()
            posts.append((now, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", posts
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- Spark, results


def spark_session(**settings: Any) -> Any:
    """A SparkSession from :func:`logstream.session.get_spark`, UI off unless
    ``ui_enabled=True``; ``settings`` are :class:`logstream.config.SparkSettings` fields."""
    from logstream.config import SparkSettings
    from logstream.session import get_spark

    return get_spark(SparkSettings(**{"ui_enabled": False, **settings}))


def machine() -> dict[str, Any]:
    """This machine: cores, architecture, Python, and the 1-minute load average now."""
    return {
        "cores": os.cpu_count(),
        "cpu": platform.machine(),
        "python": platform.python_version(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def parser(
    doc: str | None, result: str | None = None, days: bool = False, runs: bool = False
) -> argparse.ArgumentParser:
    """A benchmark's command line: ``doc`` as its description (kept as written), with
    ``--days`` (of the NASA input, default 31: 1,093,432 lines) and ``--out`` (default
    ``bench/results/RESULT.json``) when asked; with ``runs``, ``--run NAME``: the result
    file keeps the latest result of each run (:func:`run_name`, :func:`write_result`)."""
    made = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if days:
        made.add_argument("--days", type=int, default=31, help="days of the NASA input")
    if result:
        add_out_argument(made, result)
    if runs:
        made.add_argument(
            "--run",
            help="the run's name in the result file, which keeps the latest result of each "
            "run (default: the days, e.g. 31d)",
        )
    return made


def run_name(args: argparse.Namespace) -> str:
    """The run a benchmark's result is kept under: ``--run``, else its days (``31d``)."""
    return args.run or f"{args.days}d"


def add_out_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """``--out FILE`` (also spelt ``--json``), default ``bench/results/NAME.json``."""
    parser.add_argument(
        "--out", "--json", dest="out", type=Path, default=RESULTS / f"{name}.json",
        help=f"the result file (default: bench/results/{name}.json)",
    )  # fmt: skip


def measured_on() -> dict[str, Any]:
    """The code a figure is measured on: ``commit`` (the checkout's ``HEAD``), ``dirty``
    (whether ``src/`` or ``bench/`` differ from it: the figure is then of no commit) and
    ``at`` (the UTC time, ISO 8601). ``tests/test_figures.py`` holds every figure of the
    README to a commit not older than the code it exercises."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--", "src", "bench/*.py")),
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_result(
    result: dict[str, Any], out: Path, show: bool = True, run: str | None = None
) -> None:
    """Write ``result`` as indented JSON to ``out`` and (``show``) print it, with the code it
    was measured on (:func:`measured_on`, under ``measured``).

    With ``run``, ``out`` holds ``{"runs": {RUN: result, …}}``: the latest result of each run
    of the benchmark (``31d``, ``284d``, ``report-panels`` …), one file per benchmark; the
    other runs it holds are kept.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {**result, "measured": measured_on()}
    document = result
    if run is not None:
        kept = json.loads(out.read_text()).get("runs", {}) if out.exists() else {}
        document = {"runs": dict(sorted({**kept, run: result}.items()))}
    out.write_text(json.dumps(document, indent=2) + "\n")
    if show:
        print(json.dumps(result, indent=2))
    print(f"written {out}" + (f" (run {run})" if run else ""), file=sys.stderr)


def run(main: Callable[[], int | None]) -> None:
    """Run a benchmark's ``main``, stop the active Spark session (Spark's listener bus
    drains before Python exits), and exit with ``main``'s status (None: 0)."""
    status = main()
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        if (active := SparkSession.getActiveSession()) is not None:
            active.stop()
    sys.exit(status or 0)
