"""A class-data archive for the JVM of a local master: Spark starts in about half the time.

A ``local[*]`` session starts one JVM that loads some twenty thousand classes (Spark, Hadoop,
Parquet, Jackson, Netty) before its first job; parsing and verifying them is most of the
JVM's start. Java's application class-data sharing (JEP 350, "Dynamic CDS Archiving", in
every JDK since 13) writes the classes one run loaded into an archive, and later JVMs map it
instead of loading them again. Measured here (2 cores, Java 17, Spark 4): a session in 3.6 s
instead of 6.1 s, and its first job in 1.4 s instead of 2.6 s — every ``logstream`` command
and every test that starts a JVM.

:func:`logstream.pipeline.archive.build_archive` writes the archive once per machine
(``make setup`` runs it: about a minute, a file of about 190 MB); :func:`archive_options` gives
the JVM options that use it, and :func:`logstream.session.get_spark` adds them for a local
master. The archive is keyed by the Java binary and the Spark jars, so a new JDK or Spark
version gets a new one; a JVM that cannot use an archive (another class path, say) starts as
it would without, silently.

Settings
--------
``LOGSTREAM_JVM_ARCHIVE``
    The archive's directory (default ``$XDG_CACHE_HOME/logstream/jvm``, else
    ``~/.cache/logstream/jvm``), or ``off`` for none.

Its process
-----------
:func:`launch_gateway` starts the JVM of a session that logstream starts itself (not under
``spark-submit``, whose JVM is already there) as PySpark does, with three differences, so that a
stop is the driver's to make (docs/operations.md, "Stopping"):

* the JVM runs in a session of its own: SIGINT and SIGTERM sent to the driver's process group
  (Ctrl-C, ``timeout``, ``kill -- -PGID``) reach the driver only, which stops the queries
  between micro-batches; before, the JVM died under a running micro-batch;
* it ignores SIGINT (as PySpark's own launch makes it) and SIGTERM, so a signal sent to every
  process (systemd's default ``KillMode=control-group``) does not end it either;
* it dies with its driver: PySpark's gateway exits at the end of its standard input, which the
  driver holds; on Linux the kernel also sends it SIGKILL when the thread that started it
  ends (``PR_SET_PDEATHSIG``), so a SIGKILL of the driver takes the JVM at once, as it did
  when both were in one group. At a normal exit the driver closes that input and waits for the
  JVM, which then runs Spark's shutdown hooks (its temporary directories) before it exits;
* its output reaches the driver's through :class:`JvmOutputFilter`: what a user cannot act on
  (:data:`JVM_NOISE`: the start-up notes of Java, log4j and Hadoop, the Python worker's notes)
  is left out, and Spark's UI taking another port is one line saying how to choose it.

Inside :func:`stderr_to`, the JVM's standard error (Spark's log: its warnings at start, the
stack traces of a failing job) goes to a file instead of the driver's terminal: ``logstream
run`` keeps it in its run log, so that a fault ends with one line naming that log
(:mod:`logstream.cli.faults`).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from logstream import __version__

__all__ = [
    "ARCHIVE_ENV",
    "JVM_NOISE",
    "QUIET_OPTIONS",
    "JvmOutputFilter",
    "archive_options",
    "archive_path",
    "java_binary",
    "launch_gateway",
    "stderr_to",
]

#: Environment variable: the archive's directory, or ``off``.
ARCHIVE_ENV = "LOGSTREAM_JVM_ARCHIVE"
#: The JVM logs nothing about the archive (a JVM that cannot use it would warn on stdout).
QUIET_OPTIONS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
#: The version of what :func:`~logstream.pipeline.archive.build_archive`'s run loads, part
#: of the archive's name with logstream's version: a new value (2: the followed-log source of
#: ``make run`` too; 3: the batch report and its panels) makes every machine write a new one.
_RUN_VERSION = 3


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on PATH
    (resolved, so a new JDK behind the same link is another binary); None without one."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        return None
    return Path(found).resolve()


def archive_path() -> Path | None:
    """Where this machine's archive is (or would be): None when turned off or without Java.

    The name is a digest of the Java binary (path, size, modification time) and of Spark's
    jars (names and sizes), the two things a dynamic archive depends on, and of the versions
    of logstream and of the run that writes it. An archive written by older code still maps,
    but misses the classes that code did not load: on a checkout that changed since, ``python
    -m logstream.pipeline.archive --force`` writes it again (a ``logstream run`` of three
    small micro-batches: 40 s with a day-old archive, 31–33 s with a new one; 44 s without).
    """
    setting = os.environ.get(ARCHIVE_ENV, "")
    if setting.lower() == "off":
        return None
    java = java_binary()
    if java is None:
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{pyspark.__version__}".encode())
    digest.update(f"\0run {_RUN_VERSION}\0logstream {__version__}".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            digest.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    if setting:
        root = Path(setting).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(cache) / "logstream" / "jvm"
    return root / f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jsa"


def archive_options() -> list[str]:
    """JVM options that map this machine's archive; empty when there is none (yet)."""
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET_OPTIONS]


#: Seconds a driver waits at its exit for its JVM to run Spark's shutdown hooks and exit.
EXIT_WAIT_S = 30.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """In the child, before ``exec``: SIGKILL when the parent thread ends (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the stdin pipe still ends it
        return
    if os.getppid() != parent:  # the driver died before the setting took
        os._exit(1)


#: Lines of the JVM's output a user cannot act on, dropped (a JVM logstream starts itself):
#: the ``--add-modules`` of Spark's launcher, log4j's default profile and Spark's note on log
#: levels (logstream sets its own), Hadoop's native library (the pure-Java one serves),
#: DataSketches' note on Java's restricted mode, and the notes the Python worker of a
#: ``transformWithStateInPandas`` query prints on its first micro-batch.
JVM_NOISE = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Using Spark's default log4j profile: "
    r"|Setting default log level to "
    r"|To adjust logging level use sc\.setLogLevel"
    r"|Warning: Java versions > Java \d+ can only operate in restricted mode"
    r"|(Starting )?Streaming TransformWithStateInPandas Python worker"
    r"|\S+ \S+ WARN NativeCodeLoader: Unable to load native-hadoop library)"
)
#: Spark's UI retrying the next port: one note instead, with what to do.
_UI_PORT_RETRY = re.compile(r"WARN Utils: Service 'SparkUI' could not bind on port (\d+)\.")


class JvmOutputFilter:
    """Pass a JVM's output lines to ``write``, but those a user cannot act on
    (:data:`JVM_NOISE`, the blank line after one of them); Spark's UI retrying another port
    becomes one line saying what to do.

    Parameters
    ----------
    write : callable
        Called with each line kept, without its line ending.
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self._dropped = False
        self._told_port = False

    def line(self, text: str) -> None:
        """Handle one line (without its line ending)."""
        dropped, self._dropped = self._dropped, False
        if JVM_NOISE.match(text):
            self._dropped = True
        elif not text.strip() and dropped:
            pass  # the Python worker's notes end with a blank line
        elif retry := _UI_PORT_RETRY.search(text):
            if not self._told_port:
                self._told_port = True
                self.write(
                    f"note: port {retry[1]} of Spark's UI is in use, so Spark tries the next "
                    "ones (--conf spark.ui.port=PORT chooses one)"
                )
        else:
            self.write(text)


def _relay(pipe: Any, fd: int) -> None:
    """Copy a JVM's output from ``pipe`` to file descriptor ``fd``, line by line, through a
    :class:`JvmOutputFilter`, until the JVM closes it. Never raises: a JVM whose output is
    not read would block."""

    def write(text: str) -> None:
        try:
            os.write(fd, (text + "\n").encode("utf-8", "replace"))
        except OSError:
            pass

    quiet = JvmOutputFilter(write)
    try:
        for raw in iter(pipe.readline, b""):
            try:
                quiet.line(raw.decode("utf-8", "replace").rstrip("\r\n"))
            except Exception:  # a line the filter cannot read goes through as it is
                write(raw.decode("utf-8", "replace").rstrip("\r\n"))
    except (OSError, ValueError):
        return
    finally:
        if fd > 2:  # a run log's descriptor (stderr_to), the relay's own
            os.close(fd)


#: Where a JVM started inside :func:`stderr_to` writes its standard error.
_STDERR_FILE: list[Path] = []


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """While inside, a JVM that :func:`launch_gateway` starts appends its standard error to
    ``path`` (created with its directory), for the JVM's whole life; outside, it writes to the
    driver's. A JVM that is already running (``spark-submit``'s, a session's) is not
    affected.

    Parameters
    ----------
    path : Path
        The log file.
    """
    _STDERR_FILE.append(path)
    try:
        yield
    finally:
        _STDERR_FILE.remove(path)


@contextmanager
def _detached_popen(die_with_parent: bool) -> Iterator[list[subprocess.Popen]]:
    """While inside, PySpark's gateway launch starts the JVM detached (see the module
    docstring). ``pyspark.java_gateway.launch_gateway`` sets its own ``preexec_fn`` (SIGINT
    ignored), so its ``Popen`` is wrapped for the one call; the list yielded holds the process
    it started."""
    import pyspark.java_gateway as java_gateway

    original = java_gateway.Popen
    parent = os.getpid()
    started: list[subprocess.Popen] = []

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        theirs = kwargs.pop("preexec_fn", None)

        def preexec() -> None:
            if theirs is not None:
                theirs()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # kept across exec: the JVM ignores it
            if die_with_parent:
                _die_with_parent(parent)

        kwargs["start_new_session"] = True
        # the JVM's output goes through a filter (JvmOutputFilter) to the driver's own, its
        # standard error inside stderr_to to the run's log
        err_fd = 2
        if _STDERR_FILE:
            log = _STDERR_FILE[-1]
            log.parent.mkdir(parents=True, exist_ok=True)
            err_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the run's log
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
        started.append(original(*args, preexec_fn=preexec, **kwargs))
        for pipe, fd in ((started[-1].stdout, 1), (started[-1].stderr, err_fd)):
            relay = threading.Thread(target=_relay, args=(pipe, fd), name="logstream-jvm-output")
            relay.daemon = True
            relay.start()
        return started[-1]

    java_gateway.Popen = popen
    try:
        yield started
    finally:
        java_gateway.Popen = original


def _quiet_py4j(record: logging.LogRecord) -> bool:
    """A logging filter: no Py4J records (the connection errors of a JVM exiting)."""
    return "py4j" not in record.pathname


def _wait_for_jvm(process: subprocess.Popen, timeout_s: float) -> None:
    """At the driver's exit: stop a SparkContext still running (its accumulator server would
    print an ``EOFError`` traceback when the JVM goes), end the JVM's standard input (PySpark's
    gateway then exits, running Spark's shutdown hooks) and wait for it a while."""
    if process.poll() is not None:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        try:
            context.stop()
        except Exception:  # a context that cannot stop: the JVM still ends below
            pass
    # a listener callback still running calls into a JVM that is going away on purpose: Py4J
    # logs that as an error with a traceback (through the root logger); the exit says nothing
    logging.getLogger().addFilter(_quiet_py4j)
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        pass  # the kernel ends it with the driver (PR_SET_PDEATHSIG)


def launch_gateway(conf: Any, env: Mapping[str, str] | None = None) -> Any:
    """Start the JVM of a new session, detached from the driver's signals and tied to its life,
    and return PySpark's gateway to it (the caller hands it to ``SparkContext``).

    Parameters
    ----------
    conf : pyspark.SparkConf
        The configuration the JVM starts with (``spark-submit --conf`` arguments).
    env : mapping of str to str, optional
        Environment variables of the JVM only (the driver's own are left as they are).

    Returns
    -------
    py4j.java_gateway.JavaGateway
        As ``pyspark.java_gateway.launch_gateway`` returns it; ``gateway.proc`` is the JVM.
    """
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    # the kernel's parent-death signal is tied to the thread that forks: only the main thread
    # lives as long as the process
    main = threading.current_thread() is threading.main_thread()
    saved = {key: os.environ.get(key) for key in env or {}}
    try:
        os.environ.update(env or {})  # PySpark copies os.environ into the JVM's environment
        with _detached_popen(die_with_parent=main) as started:
            try:
                gateway = pyspark_launch(conf)
            except BaseException:
                # interrupted or failed while the JVM starts: PySpark then deletes the file
                # the JVM writes its port to, the JVM's main thread fails, and its Py4J server
                # thread alone kept it running (an orphan of 285 MB for 27 minutes, issue 36)
                for process in started:
                    process.kill()
                    process.wait()
                raise
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    process = getattr(gateway, "proc", None)
    if process is not None:
        atexit.register(_wait_for_jvm, process, EXIT_WAIT_S)
    return gateway
