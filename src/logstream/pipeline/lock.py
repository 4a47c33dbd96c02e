"""One run per state directory: an advisory lock on ``STATE_DIR/run.lock``.

Two ``logstream run`` on one ``--state-dir`` (two terminals, a cron job beside a service)
would share one checkpoint: Spark fails the second only when both write the same offset-log
entry (``CONCURRENT_STREAM_LOG_UPDATE``, a minute or two in), and whether the first's
checkpoint, snapshots and outputs survive the race is a matter of timing. So a run takes an
exclusive ``flock(2)`` on ``STATE_DIR/run.lock`` before its JVM starts, and a second is
refused at once, naming the process that holds it.

The kernel releases a ``flock`` when the holder's last descriptor of the file closes, whatever
ends the process (``kill -9`` and a crash included): a stale lock file is never a reason to
refuse a start, and nothing has to be deleted by hand. The file itself stays (deleting it would
let a third run lock a new file while the second still holds the old one); it holds the
holder's process id, host and start time (the message names them) and its command line.
Python opens it without inheritance (PEP 446), so the JVM and the dashboard child do not hold
it past the run.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from logstream.errors import StateInUseError

__all__ = ["LOCK_NAME", "StateLock"]

#: The lock file's name in the state directory.
LOCK_NAME = "run.lock"


class StateLock:
    """An exclusive lock on a state directory for the lifetime of a run (a context manager).

    Parameters
    ----------
    state_dir : Path
        The run's state directory (created when missing).
    option : str
        The option that named it, for the message (``--state-dir``, ``--demo-out``).

    Raises
    ------
    StateInUseError
        On entry, when another process holds the lock: the message names its process id, host
        and start time, and what to do.
    """

    def __init__(self, state_dir: Path, option: str = "--state-dir") -> None:
        self.state_dir = state_dir
        self.option = option
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock without waiting, and write this process into the file.

        Raises
        ------
        StateInUseError
            When another process holds it.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise StateInUseError(
                f"{self.option} '{self.state_dir}' is in use by another logstream run "
                f"({holder}): two runs on one checkpoint would overwrite each other's "
                f"micro-batches; stop that run first (SIGTERM stops it between micro-batches), "
                f"or pass another {self.option}"
            ) from None
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        text = f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n{_command()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode("utf-8", "replace"), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (closing the file; the kernel does the same at any exit)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read(fd: int) -> str:
    """What the holder wrote in the lock file (it writes right after taking the lock)."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text.splitlines()[0][:300] if text else "a process that has not written its id yet"


def _command() -> str:
    """The command line of this process, shortened."""
    name = os.path.basename(sys.argv[0]) if sys.argv else "python"
    if name == "__main__.py":  # python -m logstream
        name = "logstream"
    return " ".join([name, *sys.argv[1:]])[:200]
