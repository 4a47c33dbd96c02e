"""The dashboard of ``logstream run --dashboard`` in a process of its own.

Served from a thread of the pipeline's process, the dashboard shared its interpreter with the
Spark driver: every page refresh (its queries, the figures, their JSON) held Python's global
interpreter lock while the driver planned and committed the micro-batch, and 20 browsers
slowed micro-batches from 3.4 s to 13.8–23.1 s (median). :func:`start_dashboard_process` runs
``logstream dashboard`` instead, a child process over the same store (it reads only the store,
read-only; its URL passed by the environment, not the command line); ``logstream run`` starts
it before Spark and stops it when the run ends
(``bench/bench_dashboard_load.py`` measures the difference).

The child runs at a lower priority (``nice`` :data:`NICENESS`): the cores of a small machine
go to the micro-batch first, and a busy page waits. It lives and dies with the run: it is in a
session of its own, so a Ctrl-C or a ``kill -- -PGID`` meant for the pipeline reaches the
pipeline only, which stops it after the last micro-batch (SIGINT, then SIGKILL after a
grace); on Linux the kernel kills it when the pipeline's process dies (``PR_SET_PDEATHSIG``),
SIGKILL included.

It is supervised: a child that ends on its own (a crash, a kill, an out-of-memory kill) is
reported with one warning line on the run's standard error, naming how it ended, and started
again on the same port after :data:`RESTART_DELAY_S` times the restarts so far, at most
:data:`MAX_RESTARTS` times; after that the run goes on without it, and says so once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from logstream.errors import ConfigError

__all__ = ["MAX_RESTARTS", "DashboardProcess", "start_dashboard_process"]

#: Seconds the child gets to stop after SIGINT before it is killed.
STOP_GRACE_S = 5.0
#: Seconds :meth:`DashboardProcess.wait_ready` waits for the child to listen.
READY_TIMEOUT_S = 60.0
#: The environment variable the child reads its store's URL from.
STORE_ENV = "LOGSTREAM_DASHBOARD_STORE"
#: The child: ``logstream dashboard --store $LOGSTREAM_DASHBOARD_STORE`` and the options given.
_CHILD = (
    "import os, sys\n"
    "from logstream.cli import main\n"
    f"store = os.environ.pop({STORE_ENV!r})\n"
    "sys.exit(main(['dashboard', '--store', store, *sys.argv[1:]]))\n"
)
#: How much lower the child's scheduling priority is than the pipeline's (``nice``): on a
#: machine whose cores are busy, the micro-batch goes first and the page waits.
NICENESS = 10
#: Restarts of a child that ended on its own, at most, in a run.
MAX_RESTARTS = 5
#: Seconds before a restart, times the restarts so far.
RESTART_DELAY_S = 1.0
_READY = re.compile(r"^dashboard on (\S+) reading ")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _child_setup(parent: int) -> None:  # pragma: no cover - runs in the child, before exec
    """A lower priority (:data:`NICENESS`); SIGKILL when the parent dies (Linux); exit at
    once if it already has."""
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before the child is started (its own
    refusal would come seconds later)."""
    if port == 0:
        return
    if not 0 < port <= 65535:
        raise ConfigError(
            f"port {port} is not a TCP port: use 1–65535 (e.g. --port 8050), or 0 for any free port"
        )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): pick another --port "
            "(e.g. --port 8051) or --host"
        ) from exc


def _ended(code: int) -> str:
    """How a child ended, from its return code: ``SIGSEGV``, ``exit status 1``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
        return f"signal {-code}"
    return f"exit status {code}"


class DashboardProcess:
    """A supervised ``logstream dashboard`` child process; :meth:`stop` ends it.

    Parameters
    ----------
    cmd : list of str
        The child's command, without ``--port``.
    env : dict
        Its environment (the store's URL in it).
    host : str
        The address it binds.
    port : int
        The port asked for (0: any free one, known once :meth:`wait_ready` returns; a
        restart takes the port the first child had).

    Attributes
    ----------
    process : subprocess.Popen
        The child now, its standard error a pipe read by a thread of this object.
    restarts : int
        How many times it was started again.
    """

    def __init__(self, cmd: list[str], env: dict[str, str], host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.restarts = 0
        self._cmd = cmd
        self._env = env
        self._url: str | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._said: list[str] = []
        self.process = self._spawn(port)
        self._reader = threading.Thread(
            target=self._supervise, name="logstream-dashboard-stderr", daemon=True
        )
        self._reader.start()

    def _spawn(self, port: int) -> subprocess.Popen[str]:
        parent = os.getpid()
        return subprocess.Popen(
            [*self._cmd, "--port", str(port)],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # the pipeline's signals are the pipeline's
            preexec_fn=lambda: _child_setup(parent),  # prctl before exec
        )

    def _read(self, process: subprocess.Popen[str]) -> None:
        """Take a child's lines: its "listening" line marks it ready, "stopped" is dropped,
        any other line (a warning about the address) is passed on to this process's standard
        error."""
        assert process.stderr is not None
        for line in process.stderr:
            text = line.rstrip("\n")
            match = _READY.match(text)
            if match:
                self._url = match.group(1)
                self._ready.set()
            elif text.strip() and text.strip() != "dashboard stopped":
                self._said.append(text)
                if self._ready.is_set() or text.startswith("warning:"):  # not its refusal
                    print(f"dashboard: {text}", file=sys.stderr, flush=True)
        process.wait()
        process.stderr.close()

    def _supervise(self) -> None:
        """Read the child until it ends; start it again when it ended on its own after it
        had listened (:data:`MAX_RESTARTS`)."""
        while True:
            process = self.process
            self._read(process)
            if self._stopping.is_set() or self._url is None:
                self._ready.set()  # stopped, or never listened: wait_ready says why
                return
            how = _ended(process.returncode)
            if self.restarts >= MAX_RESTARTS:
                print(
                    f"warning: the dashboard process ended ({how}) after as many restarts as "
                    f"allowed ({MAX_RESTARTS}): the run goes on without it",
                    file=sys.stderr,
                    flush=True,
                )
                return
            self.restarts += 1
            print(
                f"warning: the dashboard process ended ({how}): starting it again on "
                f"{self._url} (restart {self.restarts} of at most {MAX_RESTARTS})",
                file=sys.stderr,
                flush=True,
            )
            if self._stopping.wait(RESTART_DELAY_S * self.restarts):
                return
            port = int(self._url.rstrip("/").rsplit(":", 1)[1])
            with self._lock:
                if self._stopping.is_set():
                    return
                try:
                    self.process = self._spawn(port)
                except OSError as exc:
                    print(f"warning: the dashboard could not start again ({exc})", file=sys.stderr)
                    return

    @property
    def url(self) -> str:
        """``http://host:port/`` (with port 0, once :meth:`wait_ready` returned)."""
        if self._url is not None:
            return self._url
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> str:
        """Wait until the child listens; its URL.

        Raises
        ------
        ConfigError
            When the child ended first (its own message: an address it cannot bind, a store
            URL it refuses) or did not listen within ``timeout_s``.
        """
        self._ready.wait(timeout_s)
        if self._url is None:
            self.stop()
            said = " ".join(self._said).removeprefix("error: ").strip()
            raise ConfigError(
                f"the dashboard did not start ({said or 'no message'}): check --host and "
                "--port, or run without --dashboard"
            )
        return self._url

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the child: SIGINT (it closes its port), SIGKILL after ``grace_s``; no
        restart after it (idempotent)."""
        self._stopping.set()
        with self._lock:
            process = self.process
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._reader.join(grace_s)


def start_dashboard_process(
    store: Path | str,
    host: str,
    port: int,
    *,
    top: int | None = None,
    refresh_s: float = 2.0,
    spark_ui_url: str | None = None,
    allowed: tuple[str, ...] | list[str] = (),
    no_auth: bool = False,
) -> DashboardProcess:
    """Start ``logstream dashboard`` over ``store`` in a child process and return at once.

    Parameters
    ----------
    store : Path or str
        The serving store: a SQLite file (or ``sqlite:///PATH``) or a ``postgresql://`` URL.
        A SQLite file that does not exist yet is waited for by the page.
    host, port : str, int
        Where it listens (port 0: any free one, see :meth:`DashboardProcess.wait_ready`).
    top : int, optional
        Trending pages listed (default: the pipeline's ``--top``, read from the store).
    refresh_s : float
        Seconds between the page's refreshes.
    spark_ui_url : str, optional
        Spark's UI linked from the page (default: port 4040 on the host the browser used).
    allowed : sequence of str
        Its ``--allowed-host`` names.
    no_auth : bool
        Its ``--no-auth``: an address other machines reach, without a password. (The
        password, ``LOGSTREAM_DASHBOARD_PASSWORD``, goes by the environment.)

    Returns
    -------
    DashboardProcess
        Call :meth:`~DashboardProcess.stop` when the run ends.

    Raises
    ------
    ConfigError
        When ``port`` is out of range or another process listens on it.
    """
    _check_port(host, port)
    text = str(store)
    url = text if "://" in text else f"sqlite:///{Path(text).expanduser().absolute()}"
    # the store's URL (a password in it) goes by the environment, not the command line that
    # every user of the machine can read
    cmd = [sys.executable, "-c", _CHILD, "--host", host, "--refresh", f"{refresh_s:g}"]
    if top is not None:
        cmd += ["--top", str(top)]
    if spark_ui_url:
        cmd += ["--spark-ui", spark_ui_url]
    for name in allowed:
        cmd += ["--allowed-host", name]
    if no_auth:
        cmd.append("--no-auth")
    return DashboardProcess(cmd, {**os.environ, STORE_ENV: url}, host, port)
