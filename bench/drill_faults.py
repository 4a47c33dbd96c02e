"""The fault drill: each fault of the faults table (docs/operations.md) against a fault-free
run of the NASA day.

Input: the real NASA day (1995-07-09, 35,272 lines) cut into 12 files, one micro-batch each
(``logstream run --trigger available-now --max-files-per-trigger 1``). The drill runs the
pipeline once without a fault (the reference), then, for each fault, on fresh directories:

1. **before** (some faults): a start on the first files only, which ends normally;
2. **the fault**: injected before a start (a read-only or too small mount, a damaged or
   deleted checkpoint file, a hostile line in the input) or while it runs, once the ledger
   holds a given number of micro-batches (the disk remounted read-only, PostgreSQL stopped);
3. **faulted start**: its exit status, its standard error (``--quiet``: nothing else is
   printed on a run without fault but the closing ``done:`` line) and the number of lines
   there — one ``error:`` line is the goal (item 7);
4. **again**: the fault removed (the mount made writable or larger, the file restored, the
   server started), the same command once more, when the faulted start did not finish;
5. **compare**: every Parquet output and every store table as a multiset of rows against the
   reference — *exact*, or *lost N / doubled N* (rows of ``events/``, and the tables that
   differ). Columns a run does not decide are left out: micro-batch ids (a restart may cut
   micro-batches elsewhere), KLL sketches and their quantiles (merge order), clocks, paths;
6. **summaries**: the lines the starts' ``done:`` lines count, added up, against the store's
   counters (a recovery must not count a replayed micro-batch again).

Some faults have a drill of their own (:attr:`Fault.custom`): a second ``logstream run`` on
the state directory of a running one (refused naming its pid, then the holder killed with
``kill -9`` and the same command run again), and ``logstream batch`` with a filter that keeps
no line or a 50 MB line (its report checked). The Kafka faults read the same lines from a
topic of a broker the drill starts (:class:`KafkaSetup`), kill the broker (``kill -9``) mid-feed
and start it again after 46 s or 150 s, and compare with a fault-free run of the topic.

The drill ends with a Markdown table (:func:`table`, also in the JSON): each fault's exit
status and first line, what differs after recovery, and whether the summaries equal the store.

A damaged snapshot is refused at start; the start again follows the recovery the refusal names
(the snapshot and its micro-batch's ``commits/N`` deleted: that micro-batch is replayed from
the snapshot before it). Many dashboard clients are measured by
``bench/bench_dashboard_load.py``, the dashboard's child process dying by another drill. The
mounts need root (``mount -t tmpfs``); the PostgreSQL faults, Debian's ``postgresql`` package
(a throwaway cluster, ``tests/serving/conftest.py``). A read-only remount mid-run is done on
the checkpoint's ``commits/`` (or on ``--output-dir``), not on the whole ``--state-dir``: the
kernel refuses to remount a file system read-only while a file is open for writing there
(``mount point is busy``), and the run's log is, for the whole run (a disk error's forced
remount is not refused so).

Usage::

    python bench/drill_faults.py                     # writes bench/results/drill-faults.json
    python bench/drill_faults.py --faults disk_full_outputs,corrupt_offsets --lines 6000

The suite runs four faults on 4,500 lines in three files (``tests/test_fault_drill.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

#: Files (micro-batches) the day is cut into.
FILES = 12
#: Seconds a start may take.
START_TIMEOUT_S = 900

#: Store tables compared, as (name, query): no clock, no micro-batch id, no sketch.
STORE_TABLES = {
    "traffic_per_minute": "SELECT * FROM traffic_per_minute",
    "trending_pages": "SELECT * FROM trending_pages",
    "unique_visitors": "SELECT window_start, window_end, visitors FROM unique_visitors",
    "top_clients": "SELECT * FROM top_clients",
    "traffic_by_dimension": "SELECT * FROM traffic_by_dimension",
    "daily_visitors": "SELECT * FROM daily_visitors",
    "session_stats": "SELECT window_start, window_end, sessions, bounces, pages FROM session_stats",
    "sessions": "SELECT client_host, user_agent, session_start, session_end, duration_s, "
    "requests, pages, bytes, entry_page, exit_page, bounce FROM sessions",
    "alerts": "SELECT series, metric, window_start, value, mean, std FROM alerts",
    "counters": "SELECT * FROM counters",
    "late_examples": "SELECT event_time, watermark, client_host, url_path FROM late_examples",
    "quarantine_examples": "SELECT raw_line, reason FROM quarantine_examples",
    "ingest_ledger": "SELECT SUM(events), SUM(late_events), SUM(quarantined) FROM ledger "
    "WHERE query = 'ingest'",
    "max_event": "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'",
}
#: What a hostile line (quarantined on purpose) changes: left out of the comparison of a
#: fault that adds such lines, and counted instead.
QUARANTINE_PARTS = ("out/quarantine", "store/quarantine_examples", "store/counters",
                    "store/ingest_ledger")  # fmt: skip


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Run:
    """One fault's directories and command."""

    root: Path
    chunks: list[Path]
    store_url: str
    extra: tuple[str, ...] = ()
    trigger: str = "available-now"
    pg: Any = None  # the PostgreSQL server of the PostgreSQL faults
    proc: subprocess.Popen[str] | None = None  # the running start
    #: The source's options instead of the landing directory's (a Kafka topic).
    source: tuple[str, ...] = ()
    kafka: Any = None  # the broker of the Kafka faults (:class:`KafkaSetup`)

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    def land(self, files: list[Path]) -> None:
        """Copy ``files`` into the landing directory (their modification times kept)."""
        self.landing.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, self.landing / f.name)

    def command(self) -> list[str]:
        source = self.source or ("--input-dir", str(self.landing), "--max-files-per-trigger", "1")
        return harness.run_argv(
            self.root,
            *source,
            *("--store", self.store_url, "--trigger", self.trigger),
            *self.extra,
        )

    def committed(self) -> int:
        """Ingest micro-batches in the ledger (0 while the store is not there)."""
        sql = "SELECT COUNT(*) FROM ledger WHERE query = 'ingest'"
        if self.store_url.startswith("sqlite:///"):
            return harness.store_value(Path(self.store_url[10:]), sql, 1.0) or 0
        import psycopg

        try:
            with psycopg.connect(self.store_url, connect_timeout=2) as conn:
                return conn.execute(sql).fetchone()[0]
        except psycopg.Error:
            return 0


@dataclass
class Start:
    """What one start of ``logstream run`` did."""

    exit_status: int
    seconds: float
    stderr: list[str]

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr if line.startswith("error:")]


def start(
    run: Run,
    during: Callable[[Run], None] | None = None,
    at: int = 0,
    argv: list[str] | None = None,
) -> Start:
    """Run the command (``argv``, by default ``run``'s) to its end; ``during(run)`` is called
    once, from a thread, when the ledger holds ``at`` micro-batches (it may stop the run: a
    processing-time trigger)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            argv or run.command(), env=harness.bench_env(), stdout=subprocess.DEVNULL,
            stderr=err, start_new_session=True, text=True,
        )  # fmt: skip
        run.proc = proc
        watcher = None
        if during is not None:

            def watch() -> None:
                while proc.poll() is None:
                    if run.committed() >= at:
                        during(run)
                        return
                    time.sleep(0.2)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
        try:
            status = proc.wait(START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            status = proc.wait()
        if watcher is not None:
            watcher.join(START_TIMEOUT_S)  # a broker or server started again by it
        err.seek(0)
        lines = [line.rstrip("\n") for line in err if line.strip()]
    return Start(status, round(time.monotonic() - t0, 1), lines)


# -- reading what a run wrote ----------------------------------------------------------------


def parquet_rows(root: Path, name: str) -> Counter:
    """An output's rows as a multiset (pyarrow: no JVM here); ``batch_id`` and sketches left
    out, ``source_file`` as its file name."""
    import pyarrow.dataset as ds

    path = root / "out" / name
    if not path.is_dir():
        return Counter()
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    names = sorted(n for n in table.column_names if n not in ("batch_id", "sketch"))
    columns = [table.column(n).to_pylist() for n in names]
    if "source_file" in names:
        i = names.index("source_file")
        columns[i] = [None if v is None else v.rsplit("/", 1)[-1] for v in columns[i]]
    return Counter(zip(*columns, strict=True)) if columns else Counter()


def store_rows(url: str) -> dict[str, Counter]:
    """Every compared store table (:data:`STORE_TABLES`) as a multiset of rows."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url[10:])) as conn:
            return {n: Counter(map(tuple, conn.execute(q))) for n, q in STORE_TABLES.items()}
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            n: Counter(
                tuple(float(v) if type(v).__name__ == "Decimal" else v for v in row)
                for row in conn.execute(q).fetchall()
            )
            for n, q in STORE_TABLES.items()
        }


def outputs(*roots: Path) -> list[str]:
    return sorted(
        {
            p.name
            for root in roots
            if (root / "out").is_dir()
            for p in (root / "out").iterdir()
            if p.is_dir() and not p.name.startswith((".", "_"))
        }
    )


def compare(got: Run, want: Run) -> dict[str, tuple[int, int]]:
    """``{part: (doubled, lost)}`` of every output and store table that differs."""
    diffs: dict[str, tuple[int, int]] = {}
    for name in outputs(got.root, want.root):
        g, w = parquet_rows(got.root, name), parquet_rows(want.root, name)
        if g != w:
            diffs[f"out/{name}"] = (sum((g - w).values()), sum((w - g).values()))
    try:
        g_store = store_rows(got.store_url)
    except Exception as exc:  # no store at all: every table lost
        print(f"store of {got.root.name} unreadable: {exc}", file=sys.stderr)
        g_store = {n: Counter() for n in STORE_TABLES}
    w_store = store_rows(want.store_url)
    for name in STORE_TABLES:
        if g_store[name] != w_store[name]:
            diffs[f"store/{name}"] = (
                sum((g_store[name] - w_store[name]).values()),
                sum((w_store[name] - g_store[name]).values()),
            )
    return diffs


# -- the faults ------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[None]:
    """A tmpfs of ``size`` mounted on ``path`` (created) while inside (root only)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def kib(path: Path) -> int:
    """KiB of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) // 1024 + 1


@dataclass
class Fault:
    """One fault of the drill.

    Attributes
    ----------
    name : str
    row : int
        Its group in the drill's report (1–7: the first faults, 7 any runtime I/O fault;
        11–18: a deleted snapshot directory, skewed clocks, a second run, two batches rolled
        back, a Kafka broker down, a filter that keeps nothing, one huge line).
    what : str
        One line: the fault.
    expect : str
        What logstream should do.
    store : str
        ``sqlite`` or ``postgresql``.
    mount : tuple, optional
        ``(part, size_of, fraction)``: a tmpfs on the run's ``part`` (``out``, ``state`` or
        ``db``, the SQLite store's directory) of ``fraction`` of the reference's ``size_of``
        (None: 64 MiB), mounted before anything is written.
    edit_input : callable, optional
        ``edit_input(run)`` changes the landed input (a hostile line).
    before_files : int
        A start on the first files before the fault (0: none); the rest is landed after it.
    landed_files : int, optional
        Files landed for the faulted start (default: all), for a processing-time run whose
        ``inject`` lands the rest.
    inject : callable, optional
        ``inject(run)``: the fault, before the faulted start, or ``during`` it once ``at``
        micro-batches are in the ledger (from a thread).
    repair : callable, optional
        ``repair(run)`` removes the fault before the start again.
    hostile_lines : int
        Lines the fault adds that are rightly quarantined (compared as a count).
    trigger, extra
        The run's ``--trigger`` and further options.
    """

    name: str
    row: int
    what: str
    expect: str
    store: str = "sqlite"
    mount: tuple[str, str | None, float] | None = None
    edit_input: Callable[[Run], None] | None = None
    before_files: int = 0
    landed_files: int | None = None
    inject: Callable[[Run], None] | None = None
    during: bool = False
    at: int = 3
    repair: Callable[[Run], None] | None = None
    hostile_lines: int = 0
    trigger: str = "available-now"
    extra: tuple[str, ...] = ()
    #: Read from a Kafka topic holding the same lines, compared with a fault-free run of it.
    kafka: bool = False
    #: ``custom(fault, run, ref)``: a drill of its own (another command, a second run).
    custom: Callable[..., FaultResult] | None = None


def _mount(run: Run, ref: Run, mount: tuple[str, str | None, float]) -> Any:
    """The tmpfs of :attr:`Fault.mount` (a context manager)."""
    part, size_of, fraction = mount
    size = "64m" if size_of is None else f"{max(64, int(kib(ref.root / size_of) * fraction))}k"
    return tmpfs(run.root / part, size)


def _grow(part: str) -> Callable[[Run], None]:
    return lambda run: remount(run.root / part, "size=2g")


def _ro(part: str) -> Callable[[Run], None]:
    """``inject``: ``part`` remounted read-only, retried for 60 s while a file is open for
    writing there (``mount point is busy``)."""

    def inject(run: Run) -> None:
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run(["mount", "-o", "remount,ro", str(run.root / part)],
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode == 0 or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    return inject


def _rw(part: str) -> Callable[[Run], None]:
    return lambda run: remount(run.root / part, "rw")


def _newest(directory: Path) -> Path:
    return max((p for p in directory.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def _keep(run: Run, path: Path) -> None:
    """A copy of ``path`` (and its checksum) for :func:`_restore`."""
    saved = run.root / "saved"
    saved.mkdir(exist_ok=True)
    for p in (path, path.with_name(f".{path.name}.crc")):
        if p.exists():
            shutil.copy2(p, saved / p.name)
    (saved / "where").write_text(str(path.parent))


def _restore(run: Run) -> None:
    saved = run.root / "saved"
    where = Path((saved / "where").read_text())
    for p in saved.iterdir():
        if p.name != "where":
            shutil.copy2(p, where / p.name)


def _damage_log(log: str, content: bytes, keep_crc: bool) -> Callable[[Run], None]:
    """``inject``: the newest file of the checkpoint's ``log`` (offsets, commits) rewritten
    with ``content``; its checksum kept (Spark then names the file) or removed."""

    def inject(run: Run) -> None:
        newest = _newest(run.root / "state" / "ingest" / log)
        _keep(run, newest)
        newest.write_bytes(content)
        if not keep_crc:
            newest.with_name(f".{newest.name}.crc").unlink(missing_ok=True)

    return inject


def _newest_snapshot(run: Run) -> Path:
    """The newest analytics snapshot's directory (``state/analytics/batch_id=N``)."""
    return max((run.root / "state" / "analytics").glob("batch_id=*"))


def _snapshot(damage: str) -> Callable[[Run], None]:
    """``inject``: the newest analytics snapshot's Parquet garbled, truncated or deleted."""

    def inject(run: Run) -> None:
        newest = _newest_snapshot(run)
        for part in newest.rglob("*.parquet"):
            data = part.read_bytes()
            if damage == "garbled":
                mid = len(data) // 2
                flipped = bytes(b ^ 0x5A for b in data[mid : mid + 64])
                part.write_bytes(data[:mid] + flipped + data[mid + 64 :])
            elif damage == "truncated":
                part.write_bytes(data[: len(data) // 2])
            else:
                part.unlink()
            part.with_name(f".{part.name}.crc").unlink(missing_ok=True)

    return inject


def _snapshot_recovery(run: Run) -> None:
    """``repair``: what the refusal of a damaged snapshot says to do: delete the newest
    snapshot and its micro-batch's ``commits/N`` (the micro-batch is replayed)."""
    newest = _newest_snapshot(run)
    batch_id = str(int(newest.name.split("=", 1)[1]))
    shutil.rmtree(newest)
    commit = run.root / "state" / "ingest" / "commits" / batch_id
    commit.unlink(missing_ok=True)
    commit.with_name(f".{batch_id}.crc").unlink(missing_ok=True)


def _rollback(run: Run) -> None:
    """``inject``: the newest offsets and commits files deleted (one batch rolled back)."""
    for log in ("offsets", "commits"):
        newest = _newest(run.root / "state" / "ingest" / log)
        newest.unlink()
        newest.with_name(f".{newest.name}.crc").unlink(missing_ok=True)


def _rollback_two(run: Run) -> None:
    """``inject``: the offsets and commits files of the two newest batches deleted (of the one
    there is, in a short form of a single batch before the fault)."""
    for log in ("offsets", "commits"):
        directory = run.root / "state" / "ingest" / log
        for _ in range(min(2, sum(p.name.isdigit() for p in directory.iterdir()))):
            newest = _newest(directory)
            newest.unlink()
            newest.with_name(f".{newest.name}.crc").unlink(missing_ok=True)


def _snapshot_dir_deleted(run: Run) -> None:
    """``inject``: the newest analytics snapshot's whole directory deleted."""
    shutil.rmtree(_newest_snapshot(run))


#: Lines of a clock 3 days ahead mixed into a file (``skewed``), and the bytes of one line
#: (``long``).
SKEWED_LINES = 300
LONG_LINE_BYTES = 50 * 1024 * 1024


def _hostile_input(kind: str) -> Callable[[Run], None]:
    """``edit_input``: file 2 with two NUL lines added (``nul``), a copy of one of its lines
    dated 2099 (``future``), or one line of 50 MB (``long``); or file 5 with copies of its
    lines dated 3 days later mixed in (``skewed``: a tenth of the file at most)."""

    def edit(run: Run) -> None:
        index = min(4, len(run.chunks) - 1) if kind == "skewed" else 1
        target = run.landing / run.chunks[index].name
        lines = target.read_text().splitlines()
        if kind == "skewed":
            rnd = random.Random(7)
            copies = [
                rnd.choice(lines).replace("09/Jul/1995", "12/Jul/1995")
                for _ in range(min(SKEWED_LINES, len(lines) // 10))
            ]
            for line in copies:
                lines.insert(rnd.randrange(len(lines) + 1), line)
        elif kind == "long":
            line = lines[50]
            at = line.index('"GET ') + 5
            lines[51:51] = [line[:at] + "/" + "A" * LONG_LINE_BYTES + line[line.index(" ", at) :]]
        elif kind == "nul":
            line = lines[7]
            at = line.index('"GET ') + 5
            bad = line[:at] + "/shuttle/\x00missions.html" + line[line.index(" ", at) :]
            lines[8:8] = [bad, "\x00\x00 not a log line \x00"]
        else:  # a copy of a line, dated 2099: the others must end as without it
            lines[101:101] = [lines[100].replace("/1995:", "/2099:")]
        mtime = target.stat().st_mtime
        target.write_text("".join(f"{line}\n" for line in lines))
        os.utime(target, (mtime, mtime))

    return edit


def _pg(action: str, after_s: float = 0.0) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        if after_s:
            time.sleep(after_s)
        run.pg.pg_ctl(action)

    return act


def _pg_outage(down_s: float) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        run.pg.pg_ctl("stop")
        time.sleep(down_s)
        run.pg.pg_ctl("start")

    return act


def _idle_restart(run: Run) -> None:
    """``during`` a processing-time run: restart the server between micro-batches, then land
    the rest of the files, wait until they are in, and stop the run (SIGTERM)."""
    time.sleep(3)  # idle: the trigger finds nothing
    run.pg.pg_ctl("restart")
    landed = len(list(run.landing.iterdir()))
    run.land(run.chunks[landed:])
    deadline = time.monotonic() + START_TIMEOUT_S
    while run.committed() < len(run.chunks) and time.monotonic() < deadline:
        time.sleep(1)
    if run.proc is not None:
        run.proc.send_signal(signal.SIGTERM)  # the driver: it stops between micro-batches


class KafkaSetup:
    """A Kafka broker of the drill's own (KRaft, on free ports), the day's lines in a topic of 3
    partitions (``logstream replay --kafka``), and the fault-free run of that topic."""

    TOPIC = "drill"

    def __init__(self, work: Path, chunks: list[Path]) -> None:
        from tests.conftest import free_port

        from logstream.kafka.broker import LocalBroker

        self.broker = LocalBroker(work / "kafka", port=free_port(), controller_port=free_port())
        self.broker.start(timeout_s=600)
        self.per_batch = len(chunks[0].read_bytes().splitlines())
        replay = [
            *harness.LOGSTREAM, "replay", *map(str, chunks), "--kafka", self.broker.bootstrap,
            "--topic", self.TOPIC, "--partitions", "3", "--speedup", "1e9", "--quiet",
        ]  # fmt: skip
        subprocess.run(replay, env=harness.bench_env(), check=True, capture_output=True)
        self.reference = self.new_run(work / "reference-kafka", chunks)
        done = start(self.reference)
        if done.exit_status != 0:
            raise RuntimeError("the Kafka reference run failed:\n" + "\n".join(done.stderr[-20:]))

    def source(self) -> tuple[str, ...]:
        return (
            *("--kafka", self.broker.bootstrap, "--topic", self.TOPIC),
            *("--max-offsets-per-trigger", str(self.per_batch)),
        )

    def new_run(self, root: Path, chunks: list[Path], extra: tuple[str, ...] = ()) -> Run:
        root.mkdir(parents=True)
        (root / "db").mkdir()
        url = f"sqlite:///{root / 'db' / 'store.db'}"
        return Run(root, chunks, url, extra, source=self.source(), kafka=self)

    def kill(self) -> None:
        """``kill -9`` of the broker."""
        process = self.broker.process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self.broker.process = None
        self.broker.pid_file.unlink(missing_ok=True)

    def stop(self) -> None:
        self.broker.stop()


def _broker_outage(down_s: float) -> Callable[[Run], None]:
    """``during``: the broker killed (``kill -9``), started again ``down_s`` seconds later."""

    def act(run: Run) -> None:
        run.kafka.kill()
        time.sleep(down_s)
        run.kafka.broker.start(timeout_s=600)

    return act


def _second_run(fault: Fault, run: Run, ref: Run) -> FaultResult:
    """A second ``logstream run`` on the state directory of one that runs (a processing-time
    trigger over the first half of the files): refused; then the first killed (``kill -9``,
    which releases its lock), the rest of the files landed and the same command run again."""
    result = FaultResult(fault.name, fault.row, fault.what, fault.expect)
    half = max(1, len(run.chunks) // 2)
    run.land(run.chunks[:half])
    holder = Run(run.root, run.chunks, run.store_url, trigger="2 seconds")
    second: list[Start] = []

    def during(first: Run) -> None:
        second.append(start(Run(first.root, first.chunks, first.store_url)))
        assert first.proc is not None
        os.killpg(first.proc.pid, signal.SIGKILL)

    first = start(holder, during, at=1)
    result.before = _said(first)
    result.faulted = _said(second[0]) if second else {}
    run.land(run.chunks[half:])
    again = start(run)
    result.again = _said(again)
    return _compared(result, run, ref, fault, [first, again])


def _batch_report(*options: str, long_line: bool = False) -> Callable[..., FaultResult]:
    """``logstream batch`` on the day's files with ``options``; exact when the report counts
    what it should: ``--grep``/``--filter`` keeping no line, 0 requests with ``filtered_out``
    the lines read; with a 50 MB line added, every other line a valid request and that one
    a failed one (quarantined)."""

    def drill(fault: Fault, run: Run, ref: Run) -> FaultResult:
        result = FaultResult(fault.name, fault.row, fault.what, fault.expect)
        run.land(run.chunks)
        lines = sum(len(p.read_bytes().splitlines()) for p in run.chunks)
        if long_line:
            _hostile_input("long")(run)
        report_path = run.root / "report.json"
        argv = [
            *harness.LOGSTREAM, "batch", str(run.landing), "--format", "common",
            "--json", str(report_path), "--quiet", *options,
        ]  # fmt: skip
        said = start(run, argv=argv)
        result.faulted = _said(said)
        general = json.loads(report_path.read_text())["general"] if report_path.exists() else None
        if general is None:
            result.outcome = f"no report (exit {said.exit_status})"
            return result
        got = (general["total_requests"], general["failed_requests"], general["filtered_out"])
        want = (lines + 1, 1, None) if long_line else (0, 0, lines)  # total = valid + failed
        result.quarantined = general["failed_requests"]
        if got == want:
            result.outcome = "exact"
        else:
            result.outcome = f"report (requests, failed, filtered out) {got}, want {want}"
            result.differences = {"report": [list(got), list(want)]}
        return result

    return drill


FAULTS: tuple[Fault, ...] = (
    Fault("nul_line_postgresql", 1,
          "a line with NUL in its URL and a NUL-laced line, PostgreSQL store",
          "both quarantined (control_character), every other line counted", store="postgresql",
          edit_input=_hostile_input("nul"), hostile_lines=2),
    Fault("line_from_2099", 2, "one line dated 2099 added to file 2",
          "quarantined (future_event_time), every other line as without it",
          edit_input=_hostile_input("future"), hostile_lines=1),
    Fault("snapshot_garbled", 3, "the newest analytics snapshot's Parquet garbled (checksum gone)",
          "refused at start, one line naming the file", before_files=6,
          inject=_snapshot("garbled"), repair=_snapshot_recovery),
    Fault("snapshot_truncated", 3, "the newest analytics snapshot's Parquet truncated",
          "refused at start, one line naming the file", before_files=6,
          inject=_snapshot("truncated"), repair=_snapshot_recovery),
    Fault("snapshot_deleted", 3, "the newest analytics snapshot's Parquet deleted",
          "refused at start, one line naming the file", before_files=6,
          inject=_snapshot("deleted"), repair=_snapshot_recovery),
    Fault("offsets_commits_rolled_back", 4, "offsets/N and commits/N of the newest batch deleted",
          "refused, or exact: never a batch skipped as delivered", before_files=8,
          inject=_rollback),
    Fault("postgresql_restart_idle", 5, "PostgreSQL restarted while the pipeline waits for input",
          "nothing: the pool replaces the broken connections", store="postgresql",
          trigger="2 seconds", landed_files=6, during=True, at=6, inject=_idle_restart),
    Fault("postgresql_down_mid_feed", 5, "PostgreSQL stopped for 20 s in the middle of the feed",
          "the writes wait (retrying), the run ends exact", store="postgresql", during=True,
          at=3, inject=_pg_outage(20)),
    Fault("postgresql_down_past_retry", 5,
          "PostgreSQL stopped mid-feed, longer than --store-retry 15s",
          "exit 1, one line naming the store; exact once the server is back", store="postgresql",
          during=True, at=3, inject=_pg("stop"), repair=_pg("start"),
          extra=("--store-retry", "15s")),
    Fault("disk_full_outputs", 7, "the disk of --output-dir fills mid-run",
          "exit 1, one line naming the directory; exact after space is freed",
          mount=("out", "out", 0.5), repair=_grow("out")),
    Fault("disk_full_state", 7, "the disk of --state-dir fills mid-run",
          "exit 1, one line naming the directory; exact after space is freed",
          mount=("state", "state", 0.5), repair=_grow("state")),
    Fault("disk_full_store", 7, "the disk of the SQLite store fills mid-run",
          "exit 1, one line naming the store; exact after space is freed",
          mount=("db", "db", 0.5), repair=_grow("db")),
    Fault("read_only_state_at_start", 7, "--state-dir on a read-only mount",
          "refused before the JVM, exit 2", mount=("state", None, 1.0),
          inject=_ro("state"), repair=_rw("state")),
    Fault("read_only_output_at_start", 7, "--output-dir on a read-only mount",
          "refused before the JVM, exit 2", mount=("out", None, 1.0),
          inject=_ro("out"), repair=_rw("out")),
    Fault("read_only_store_at_start", 7, "the SQLite store's directory on a read-only mount",
          "refused before the JVM, exit 2", mount=("db", None, 1.0),
          inject=_ro("db"), repair=_rw("db")),
    Fault("read_only_state_mid_run", 7, "the checkpoint's commits/ remounted read-only mid-run",
          "exit 1, one line naming the directory", mount=("state/ingest/commits", None, 1.0),
          during=True, at=3, inject=_ro("state/ingest/commits"),
          repair=_rw("state/ingest/commits")),
    Fault("read_only_output_mid_run", 7, "--output-dir remounted read-only mid-run",
          "exit 1, one line naming the directory", mount=("out", None, 1.0),
          during=True, at=3, inject=_ro("out"), repair=_rw("out")),
    Fault("corrupt_offsets", 7, "the newest offsets file garbled, its checksum kept",
          "written back as it was delivered, one line naming it; exact", before_files=6,
          inject=_damage_log("offsets", b"v1\n\xff\xfe\x00garbage", keep_crc=True),
          repair=_restore),
    Fault("corrupt_offsets_no_checksum", 7, "the newest offsets file garbled, its checksum gone",
          "written back as it was delivered, one line naming it; exact", before_files=6,
          inject=_damage_log("offsets", b"v1\n\xff\xfe\x00garbage", keep_crc=False),
          repair=_restore),
    Fault("empty_commits", 7, "the newest commits file empty, its checksum gone",
          "exit 1, one line naming the file", before_files=6,
          inject=_damage_log("commits", b"", keep_crc=False), repair=_restore),
    # -- what the drill above did not cover --------------------------------------------------
    Fault("snapshot_dir_deleted", 11, "the newest analytics snapshot's whole directory deleted",
          "replayed from the snapshot before it (a warning), or refused; never silent",
          before_files=6, inject=_snapshot_dir_deleted),
    Fault("skewed_clock", 12, "300 lines of a clock 3 days ahead mixed into file 5",
          "held apart (quarantined, a warning naming the file); the real events on time",
          edit_input=_hostile_input("skewed"), hostile_lines=SKEWED_LINES),
    Fault("second_run", 13, "a second logstream run on the state directory of a running one",
          "refused within 5 s naming the holder's pid; kill -9 of the holder frees it; exact",
          custom=_second_run),
    Fault("two_newest_rolled_back", 14, "offsets and commits of the two newest batches deleted",
          "replayed exactly, or refused naming the recovery", before_files=8,
          inject=_rollback_two),
    Fault("kafka_down_46s", 15, "the Kafka broker killed (kill -9) for 46 s mid-feed",
          "a warning while it is down; exact", kafka=True, during=True, at=3,
          inject=_broker_outage(46)),
    Fault("kafka_down_150s", 15, "the Kafka broker killed (kill -9) for 150 s mid-feed",
          "past --kafka-retry 2 minutes: one error: line naming the broker; exact after",
          kafka=True, during=True, at=3, inject=_broker_outage(150)),
    Fault("batch_grep_keeps_nothing", 17, "logstream batch --grep zzzz (no line matches)",
          "a report of 0 requests, filtered_out the lines read",
          custom=_batch_report("--grep", "zzzz")),
    Fault("batch_filter_keeps_nothing", 17, "logstream batch --filter 'status = 599'",
          "a report of 0 requests, filtered_out the lines read",
          custom=_batch_report("--filter", "status = 599")),
    Fault("long_line_run", 18, "one line of 50 MB in file 2 (logstream run)",
          "quarantined as line_too_long, the rest at its usual speed",
          edit_input=_hostile_input("long"), hostile_lines=1),
    Fault("long_line_batch", 18, "one line of 50 MB (logstream batch)",
          "quarantined as line_too_long, every other line a request",
          custom=_batch_report(long_line=True)),
)  # fmt: skip
#: Row 16 of the table (the dashboard's child process dying) is another drill's.


# -- the drill -------------------------------------------------------------------------------


@dataclass
class FaultResult:
    """What one fault did and what it left."""

    name: str
    row: int
    what: str
    expect: str
    before: dict[str, Any] | None = None
    faulted: dict[str, Any] = field(default_factory=dict)
    again: dict[str, Any] | None = None
    outcome: str = ""
    events_lost: int = 0
    events_doubled: int = 0
    quarantined: int | None = None
    differences: dict[str, list[int]] = field(default_factory=dict)
    #: Whether the lines the starts' ``done:`` summaries count add up to the store's
    #: counters (None: no start printed one, as in the suite's in-process starts).
    summary_equals_store: bool | None = None


def _said(s: Start) -> dict[str, Any]:
    return {
        "exit_status": s.exit_status,
        "seconds": s.seconds,
        "message_lines": len(s.stderr),
        "error_lines": len(s.error_lines),
        "first_line": s.stderr[0] if s.stderr else "",
        "message": s.stderr[-6:],
    }


def write_input(directory: Path, max_lines: int | None, files: int) -> list[Path]:
    """The NASA day (its first ``max_lines`` lines) as ``files`` chunk files."""
    lines = harness.nasa_day_lines()[:max_lines]
    per_file = -(-len(lines) // files)
    return harness.write_chunks(lines, directory, per_file)


def new_run(root: Path, chunks: list[Path], fault: Fault | None, pg: Any) -> Run:
    root.mkdir(parents=True)
    if fault is not None and fault.store == "postgresql":
        url = pg.new_database()
    else:
        (root / "db").mkdir()
        url = f"sqlite:///{root / 'db' / 'store.db'}"
    return Run(root, chunks, url, fault.extra if fault else (),
               fault.trigger if fault else "available-now", pg)  # fmt: skip


def _in_process(run: Run, call: Callable[[Run], None]) -> Start:
    t0 = time.monotonic()
    call(run)
    return Start(0, round(time.monotonic() - t0, 1), [])


_DONE = re.compile(
    r"^done: ([\d,]+) on-time events, ([\d,]+) late, ([\d,]+) quarantined, (?:([\d,]+) filtered, )?"
)


def summary_equals_store(starts: list[Start], url: str) -> bool | None:
    """Whether the lines the ``done:`` lines of ``starts`` count (on-time, late, quarantined,
    filtered) add up to the store's counters; None when none printed one."""
    summed, found = 0, False
    for said in starts:
        for line in said.stderr:
            if match := _DONE.match(line):
                found = True
                summed += sum(int(g.replace(",", "")) for g in match.groups() if g)
    if not found:
        return None
    counters = dict(store_rows(url)["counters"].keys())
    return summed == sum(
        counters.get(k, 0) for k in ("events", "late_events", "quarantined", "filtered")
    )


def _compared(
    result: FaultResult, run: Run, ref: Run, fault: Fault, starts: list[Start]
) -> FaultResult:
    """``result`` with ``run``'s outputs and store compared with ``ref``'s, and its starts'
    summaries with its store."""
    diffs = compare(run, ref)
    if fault.hostile_lines:
        result.quarantined = sum(parquet_rows(run.root, "quarantine").values())
        diffs = {k: v for k, v in diffs.items() if k not in QUARANTINE_PARTS}
    result.differences = {k: list(v) for k, v in diffs.items()}
    result.events_doubled, result.events_lost = diffs.get("out/events", (0, 0))
    result.summary_equals_store = summary_equals_store(starts, run.store_url)
    if not diffs:
        result.outcome = "exact"
    else:
        parts = []
        if result.events_lost:
            parts.append(f"lost {result.events_lost:,}")
        if result.events_doubled:
            parts.append(f"doubled {result.events_doubled:,}")
        parts.append(f"{len(diffs)} parts differ")
        result.outcome = ", ".join(parts)
    return result


def drill_one(
    fault: Fault,
    work: Path,
    chunks: list[Path],
    ref: Run,
    pg: Any,
    run_in_process: Callable[[Run], None] | None = None,
    kafka: KafkaSetup | None = None,
) -> FaultResult:
    """Inject one fault, run, remove it, run again, compare (module docstring); with
    ``run_in_process``, the starts before the fault and again after it run that way (the
    suite: in its own Spark session), the faulted start always as a ``logstream run``."""
    result = FaultResult(fault.name, fault.row, fault.what, fault.expect)
    if fault.kafka:
        assert kafka is not None
        run, ref = kafka.new_run(work / fault.name, chunks, fault.extra), kafka.reference
    else:
        run = new_run(work / fault.name, chunks, fault, pg)
    if fault.custom is not None:
        return fault.custom(fault, run, ref)
    half = max(1, len(chunks) // 2)  # the short form's fewer files
    before = min(fault.before_files, half)
    landed = min(fault.landed_files, half) if fault.landed_files else None
    at = min(fault.at, half)
    plain = start if run_in_process is None else (lambda r: _in_process(r, run_in_process))
    starts: list[Start] = []
    with contextlib.ExitStack() as stack:
        if fault.mount is not None:
            stack.enter_context(_mount(run, ref, fault.mount))
        run.land(chunks[: before or landed or len(chunks)])
        if fault.edit_input is not None:
            fault.edit_input(run)
        if before:
            starts.append(plain(run))
            result.before = _said(starts[-1])
            run.land(chunks[before:])
        if fault.during:
            faulted = start(run, fault.inject, at)
        else:
            if fault.inject is not None:
                fault.inject(run)
            faulted = start(run)
        starts.append(faulted)
        result.faulted = _said(faulted)
        if fault.repair is not None:
            fault.repair(run)
        if faulted.exit_status != 0:
            starts.append(plain(run))
            result.again = _said(starts[-1])
        return _compared(result, run, ref, fault, starts)


def drill(
    faults: list[Fault],
    work: Path | None = None,
    max_lines: int | None = None,
    files: int = FILES,
    run_in_process: Callable[[Run], None] | None = None,
) -> dict[str, Any]:
    """Run the reference, then each fault (module docstring); the report.

    Parameters
    ----------
    faults : list of Fault
    work : Path, optional
        Working directory (a temporary one by default, removed afterwards).
    max_lines : int, optional
        The first lines of the day only (the suite's short form).
    files : int
        Files (micro-batches) the lines are cut into.
    run_in_process : callable, optional
        ``run_in_process(run)`` runs the pipeline to its end on ``run``'s directories and
        store, in the caller's Spark session (the suite: one JVM start fewer per run); used
        for the reference and for the starts before and after a fault (the faulted start is
        always a ``logstream run`` process: its exit status and message are the point).
    """
    work = work or Path(tempfile.mkdtemp(prefix="drill-faults-"))
    chunks = write_input(work / "chunks", max_lines, files)
    lines = sum(len(p.read_bytes().splitlines()) for p in chunks)
    pg_context: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if any(f.store == "postgresql" for f in faults):
        from tests.serving.conftest import postgres_cluster

        pg_context = postgres_cluster()
    report: dict[str, Any] = {"lines": lines, "files": len(chunks), "faults": []}
    kafka: KafkaSetup | None = None
    with pg_context as pg, contextlib.ExitStack() as stack:
        if any(f.kafka for f in faults):
            kafka = KafkaSetup(work, chunks)
            stack.callback(kafka.stop)
        ref = new_run(work / "reference", chunks, None, pg)
        ref.land(chunks)
        t0 = time.monotonic()
        if run_in_process is not None:
            run_in_process(ref)
        else:
            done = start(ref)
            if done.exit_status != 0:
                raise RuntimeError("the reference run failed:\n" + "\n".join(done.stderr[-20:]))
        report["reference_seconds"] = round(time.monotonic() - t0, 1)
        for fault in faults:
            print(f"fault {fault.name} …", file=sys.stderr, flush=True)
            result = drill_one(fault, work, chunks, ref, pg, run_in_process, kafka)
            said = result.faulted
            print(f"  {result.outcome}; faulted start exit {said['exit_status']}, "
                  f"{said['message_lines']} line(s)", file=sys.stderr, flush=True)  # fmt: skip
            report["faults"].append(asdict(result))
    report["table"] = table(report)
    return report


def _cell(text: str, width: int = 110) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(report: dict[str, Any]) -> str:
    """The drill as a Markdown table: each fault's faulted start (exit status, first line of
    standard error), what differs from the fault-free run after the fault was removed (rows
    lost / doubled per output or store table), and whether the ``done:`` summaries equal the
    store."""
    rows = [
        "| fault | exit | first line | lost / doubled | after recovery | done: = store |",
        "|---|---|---|---|---|---|",
    ]
    for f in report["faults"]:
        said = f["faulted"]
        diffs = f["differences"]
        lost = (
            "; ".join(
                f"{part} −{d[1]:,} +{d[0]:,}"
                if isinstance(d[0], int)
                else f"{part} {d[0]} ≠ {d[1]}"
                for part, d in diffs.items()
            )
            if diffs
            else "0 / 0"
        )
        if f.get("quarantined"):
            lost += f" ({f['quarantined']:,} quarantined)"
        again = f["again"]
        after = f["outcome"] + (f" (again: exit {again['exit_status']})" if again else "")
        summary = {True: "yes", False: "no", None: "–"}[f.get("summary_equals_store")]
        rows.append(
            f"| {f['name']} | {said.get('exit_status', '–')} | "
            f"{_cell(said.get('first_line', ''))} | {_cell(lost, 80)} | {after} | {summary} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = harness.parser(__doc__, "drill-faults")
    parser.add_argument("--faults", help="comma-separated names (default: all)")
    parser.add_argument("--lines", type=int, default=None, help="first lines of the day only")
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--work", type=Path, default=None, help="kept after the drill")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the drill mounts file systems (tmpfs): run it as root")
    chosen = list(FAULTS)
    if args.faults:
        names = args.faults.split(",")
        unknown = set(names) - {f.name for f in FAULTS}
        if unknown:
            raise SystemExit(f"unknown faults {sorted(unknown)}: {[f.name for f in FAULTS]}")
        chosen = [f for f in FAULTS if f.name in names]
    if args.work is not None:
        report = drill(chosen, args.work, args.lines, args.files)
    else:
        with harness.scratch("drill-faults-") as work:
            report = drill(chosen, work, args.lines, args.files)
    report["machine"] = harness.machine()
    harness.write_result(report, args.out, show=False)
    print(report["table"])
    return 0


if __name__ == "__main__":
    harness.run(main)
