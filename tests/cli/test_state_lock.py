"""One run per state directory (logstream.pipeline.lock): a second ``logstream run`` on a
state directory another process holds is refused before its JVM starts, naming the holder's
process id; a ``kill -9`` of the holder releases the lock (the kernel's ``flock``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logstream.cli import main
from logstream.errors import StateInUseError
from logstream.pipeline.lock import LOCK_NAME, StateLock

REPO = Path(__file__).resolve().parents[2]

HOLDER = """
import sys, time
from pathlib import Path
from logstream.pipeline.lock import StateLock
StateLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
    """A process holding ``tmp_path/state``'s lock, as a running ``logstream run`` does."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "state")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_second_run_is_refused_at_once_naming_the_holder(tmp_path, holder, capfd):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.log").write_text(
        '1.2.3.4 - - [09/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1\n'
    )
    t0 = time.monotonic()
    status = main(
        [
            "run",
            *("--input-dir", str(tmp_path / "in"), "--state-dir", str(tmp_path / "state")),
            *("--output-dir", str(tmp_path / "out"), "--store", f"sqlite:///{tmp_path / 's.db'}"),
            *("--trigger", "available-now", "--format", "common"),
        ]
    )
    seconds = time.monotonic() - t0
    said = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and seconds < 5, (status, seconds)
    assert len(said) == 1 and said[0].startswith("error: --state-dir"), said
    assert f"in use by another logstream run (pid {holder.pid} on " in said[0]
    assert "stop that run first" in said[0]
    assert not (tmp_path / "state" / "ingest").exists()  # nothing of the checkpoint written


def test_a_kill_9_of_the_holder_releases_the_lock(tmp_path, holder):
    with pytest.raises(StateInUseError, match=f"pid {holder.pid} "):
        StateLock(tmp_path / "state").acquire()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / "state" / LOCK_NAME).exists()  # the file stays; its lock is gone
    with StateLock(tmp_path / "state") as lock:
        assert f"pid {os.getpid()} " in lock.path.read_text()
