"""``logstream run`` stops like a service (issue 36, item 4): SIGINT or SIGTERM, sent to the
process or to its whole process group (Ctrl-C, ``timeout``, ``kill -- -PGID``, systemd), at any
moment from start-up to the micro-batches, ends the run with status 0 and no traceback, leaves
no process behind, and no micro-batch half delivered: the rows in ``events/`` are the store's
counted events, batch for batch.

Before, a group SIGTERM reached the JVM too, which died under the running micro-batch
(``events/batch_id=0`` written, the store's counters empty, Py4J tracebacks, exit 1 or 124);
a signal during start-up was acknowledged and then ignored, or ended the run with a traceback.
"""

from __future__ import annotations

import gzip
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from tests.conftest import NASA_JUL_2000, data_file

FILES = 4  # one micro-batch each (--max-files-per-trigger 1)


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    """The real log's 2,000 lines in four files, oldest first."""
    lines = gzip.open(data_file(NASA_JUL_2000), "rt", encoding="latin-1").read().splitlines(True)
    directory = tmp_path_factory.mktemp("signals-input")
    per_file = len(lines) // FILES
    for i in range(FILES):
        path = directory / f"part-{i}.log"
        path.write_text("".join(lines[i * per_file : (i + 1) * per_file]), encoding="latin-1")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    return directory


def committed(db: Path) -> int:
    """Micro-batches in the store's ledger (0 before the store exists)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]
    except sqlite3.Error:
        return 0


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM: the console script installs one before
    it imports the command's modules (``logstream.entry``), ``logstream run`` its own once
    they are loaded."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt"))
    caught = int(mask, 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def tree(pid: int) -> set[int]:
    try:
        return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    except psutil.Error:
        return set()


def alive(pids: set[int]) -> list[str]:
    left = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {process.name()}")
        except psutil.Error:
            pass
    return left


def events_rows(out: Path) -> int:
    return sum(
        pq.read_metadata(f).num_rows
        for f in (out / "events").glob("batch_id=*/*.parquet")  # not the hidden .crc files
    )


def reached(moment: str, pid: int, out: Path, seen: set[int]) -> bool:
    if moment == "caught":  # as early as the command can act on a signal
        return catches_sigterm(pid)
    if moment == "jvm":  # Spark is starting: its JVM is there, no query yet
        return any(n.endswith("java") for n in alive(seen)) and committed(out / "store.db") == 0
    if moment == "publishing":  # micro-batch 0 wrote events/, its store commit still to come
        return any((out / "events").glob("batch_id=0*"))
    assert moment == "committed"  # micro-batch 0 is in the store; the next one runs
    return committed(out / "store.db") >= 1


# each signal to the process and to the group, each moment once (a run is 10-70 s here)
CASES = [
    ("caught", signal.SIGINT, "process"),
    ("caught", signal.SIGTERM, "group"),
    ("jvm", signal.SIGTERM, "group"),
    ("jvm", signal.SIGINT, "process"),
    ("publishing", signal.SIGTERM, "group"),
    ("committed", signal.SIGINT, "group"),
]


@pytest.mark.parametrize(
    ("moment", "signum", "target"),
    CASES,
    ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v),
)
def test_a_signal_stops_the_run_cleanly(landing, tmp_path, moment, signum, target):
    out = tmp_path / "out"
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "logstream", "run", "--input-dir", str(landing)),
            *("--output-dir", str(out), "--state-dir", str(tmp_path / "state")),
            *("--store", f"sqlite:///{out / 'store.db'}", "--format", "common"),
            *("--trigger", "1 second", "--max-files-per-trigger", "1", "--queries", "none"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as under a terminal or systemd
    )
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while not reached(moment, proc.pid, out, seen):
            seen |= tree(proc.pid)
            assert proc.poll() is None, f"ended before {moment}: {proc.communicate()}"
            assert time.monotonic() < deadline, f"never reached {moment}"
            time.sleep(0.02)
        seen |= tree(proc.pid)
        if target == "group":
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        seen |= tree(proc.pid)
        if proc.poll() is None:
            for pid in seen:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr + stdout, stderr[-5000:]
    # issue 54 item 22: nothing of the JVM's start a user cannot act on
    for noise in ("incubator modules", "log4j profile", "NativeCodeLoader", "restricted mode"):
        assert noise not in stderr + stdout, stderr[-3000:]
    assert f"received {signal.Signals(signum).name}: stopping" in stderr, stderr[-3000:]
    # nothing of the run is left: the driver's JVM ends with it (its children with the JVM)
    deadline = time.monotonic() + 30
    while left := alive(seen):
        assert time.monotonic() < deadline, f"still running after the driver exited: {left}"
        time.sleep(0.1)
    # nothing half delivered: what events/ holds is what the store counted, batch for batch
    batches = committed(out / "store.db")
    rows = events_rows(out) if (out / "events").exists() else 0
    if batches:
        with sqlite3.connect(out / "store.db") as conn:
            counters = dict(conn.execute("SELECT name, value FROM counters").fetchall())
            ledger = conn.execute("SELECT SUM(events) FROM ledger").fetchone()[0]
        assert rows == counters["events"] == ledger
        published = {p.name for p in (out / "events").glob("batch_id=0*")}
        assert len(published) == batches
    else:
        assert rows == 0
    if moment in ("publishing", "committed"):
        assert batches >= 1  # the micro-batch running at the signal was delivered whole


class _Query:
    """A stand-in streaming query that never ends by itself."""

    isActive = True

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def awaitTermination(self, timeout: float) -> bool:
        assert timeout > 0, "Spark raises VALUE_NOT_POSITIVE for a timeout of 0"
        self.timeouts.append(timeout)
        time.sleep(timeout)
        return False


def test_devices_run_waits_in_steps_until_its_deadline_or_a_stop():
    """``logstream devices run --duration 40s`` ended with PySpark's VALUE_NOT_POSITIVE: its
    last wait was ``awaitTermination(0.0)``. The wait is in positive steps, and a stop (the
    signal handler's event) ends it at once."""
    import threading

    from logstream.devices.pipeline import _await_device_queries

    def _wait(queries, stop, deadline):
        _await_device_queries(None, None, queries, stop, deadline, print)

    query = _Query()
    start = time.monotonic()
    _wait([query], threading.Event(), start + 1.2)
    assert 1.2 <= time.monotonic() - start < 10 and len(query.timeouts) >= 2
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    start = time.monotonic()
    _wait([query], stop, None)
    assert time.monotonic() - start < 5  # not the 40 s of a --duration: a step or two


def test_a_stop_while_the_demo_starts_starts_and_announces_nothing_more(
    spark, nasa_day, tmp_path, monkeypatch, capsys
):
    """Issue 54 item 3: Ctrl-C during start-up printed "received SIGINT: stopping the
    queries", then "dashboard: http://…" and "replaying … Ctrl-C stops", then "done … in 0
    micro-batches". After a stop is asked for, nothing new starts or is announced."""
    from tests.conftest import free_port

    import logstream.demo
    from logstream.cli import main

    built = logstream.demo.Pipeline

    def interrupted(*args, **kwargs):
        pipeline = built(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the demo starts
        return pipeline

    monkeypatch.setattr(logstream.demo, "Pipeline", interrupted)
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(nasa_day.parent))
    out = tmp_path / "demo"
    assert main(["run", "--demo-out", str(out), "--port", str(free_port())]) == 0
    err = capsys.readouterr().err
    assert "received SIGINT: stopping the queries" in err, err
    after = err.split("received SIGINT: stopping the queries", 1)[1]
    for announced in ("dashboard:", "replaying", "done:"):
        assert announced not in after, err
    assert "stopped before the queries started: nothing was read" in after
    assert not (out / "landing" / "access.log").exists()  # the replay never started
