"""``logstream run --dashboard`` serves the page from a process of its own, which ends with the run.

The page used to be served by a thread of the pipeline's process, the Spark driver's: 20
clients slowed its micro-batches four- to sevenfold (issue 56; ``bench/bench_dashboard_load.py``
measures it). Now a ``logstream dashboard`` child serves it, at a lower priority, stopped when
the run stops and killed by the kernel when the run is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import logstream.dashboard.process as dashboard_process
from logstream.dashboard.process import NICENESS, start_dashboard_process
from logstream.errors import ConfigError
from tests.conftest import free_port
from tests.dashboard.helpers import filled_store
from tests.pipeline.helpers import nasa_lines, write_chunks


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _dashboards(pid: int) -> list[int]:
    """The ``logstream dashboard`` children of ``pid``."""
    return [c for c in _children(pid) if "dashboard" in (cmd := _cmdline(c)) and "logstream" in cmd]


def _gone(pid: int, timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = ""
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # ended, not yet reaped by its parent
            return True
        time.sleep(0.1)
    return False


def test_the_dashboard_process_serves_the_store_at_a_lower_priority(tmp_path):
    filled_store(tmp_path / "s.db")
    server = start_dashboard_process(tmp_path / "s.db", "127.0.0.1", 0)
    try:
        url = server.wait_ready()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
        page = urllib.request.urlopen(url, timeout=30).read()
        assert b"logstream" in page
        child = server.process.pid
        assert child != os.getpid() and child in _dashboards(os.getpid())
        assert "s.db" not in _cmdline(child)  # the store's URL (a password) is not on it
        assert (
            os.getpriority(os.PRIO_PROCESS, child) == os.getpriority(os.PRIO_PROCESS, 0) + NICENESS
        )
    finally:
        server.stop()
    assert server.process.returncode is not None
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_a_child_that_dies_is_reported_in_one_line_and_started_again(tmp_path, capsys, monkeypatch):
    """A dashboard that segfaulted under ``run --dashboard`` stayed dead, its port closed, and
    the run said nothing. Now one warning line, and a new child on the same port, a bounded
    number of times."""
    monkeypatch.setattr(dashboard_process, "RESTART_DELAY_S", 0.1)
    filled_store(tmp_path / "s.db")
    server = start_dashboard_process(tmp_path / "s.db", "127.0.0.1", 0)
    try:
        url = server.wait_ready()
        first = server.process.pid
        os.kill(first, signal.SIGSEGV)  # as Arrow's stack overflow ended it
        deadline = time.monotonic() + 120
        while True:  # the new child answers on the same URL
            assert time.monotonic() < deadline, capsys.readouterr().err
            try:
                if server.process.pid != first:
                    urllib.request.urlopen(url, timeout=10).read()
                    break
            except OSError:
                pass
            time.sleep(0.2)
        said = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert said == [
            "warning: the dashboard process ended (SIGSEGV): starting it again on "
            f"{url} (restart 1 of at most {dashboard_process.MAX_RESTARTS})"
        ]
        monkeypatch.setattr(dashboard_process, "MAX_RESTARTS", 1)
        second = server.process
        second.kill()
        second.wait(30)
        server._reader.join(30)  # the supervisor gave up: nothing more to read
        assert server.process is second and not server._reader.is_alive()
        assert capsys.readouterr().err.strip() == (
            "warning: the dashboard process ended (SIGKILL) after as many restarts as allowed "
            "(1): the run goes on without it"
        )
    finally:
        server.stop()


def test_a_port_in_use_is_refused_before_the_child_starts(tmp_path):
    busy = start_dashboard_process(tmp_path / "s.db", "127.0.0.1", 0)
    try:
        port = int(busy.wait_ready().rsplit(":", 1)[1].strip("/"))
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            start_dashboard_process(tmp_path / "s.db", "127.0.0.1", port)
    finally:
        busy.stop()


def test_the_dashboard_dies_with_a_killed_parent(tmp_path):
    """SIGKILL of the process that started it (no clean-up) ends it too (PR_SET_PDEATHSIG)."""
    code = (
        "import sys, time\n"
        "from logstream.dashboard.process import start_dashboard_process\n"
        f"p = start_dashboard_process({str(tmp_path / 's.db')!r}, '127.0.0.1', 0)\n"
        "print(p.wait_ready(), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().startswith("http://127.0.0.1:")
        (child,) = _dashboards(parent.pid)
        parent.kill()
        parent.wait(30)
        assert _gone(child), "the dashboard outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_run_dashboard_serves_from_its_own_process_and_stops_with_the_run(nasa_day, tmp_path):
    landing = tmp_path / "landing"
    write_chunks(nasa_lines(nasa_day)[:1500], landing, per_file=1500)
    port = free_port()
    argv = [
        sys.executable, "-m", "logstream", "run", "--input-dir", str(landing),
        "--format", "common", "--output-dir", str(tmp_path / "out"),
        "--state-dir", str(tmp_path / "state"), "--trigger", "1 second",
        "--dashboard", "--port", str(port), "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    run = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:  # the page answers, the first micro-batch is in the store
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no dashboard"
            try:
                metrics = urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/metrics/prometheus/", timeout=10
                ).read()
                if b"logstream_events_total 1500" in metrics:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        (child,) = _dashboards(run.pid)  # the page is not the driver's
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 0, err[-3000:]
    assert f"dashboard: http://127.0.0.1:{port}/" in err
    assert _gone(child, 5), "the dashboard outlived the run"
