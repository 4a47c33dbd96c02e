"""A Spark Connect server on the loopback interface, from PySpark's own jars.

PySpark's wheel holds the server (``pyspark/jars/spark-connect_2.13-4.2.0.jar``) but not
Spark's ``sbin/start-connect-server.sh``; that script is ``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` (no application jar: ``spark-submit``
knows the class), which :class:`LocalConnectServer` runs as the script does with ``--wait``
(in the foreground), as :class:`logstream.kafka.broker.LocalBroker` runs Kafka:

1. ``spark-submit --master local[*]`` with logstream's whole configuration
   (:func:`logstream.session.session_conf`: the static settings a client cannot set, such as
   the driver's memory and the codegen cache, among them), Spark's Kafka connector when
   :mod:`logstream.kafka.maven` has it cached, and the server's own settings
   (:func:`server_conf`): ``spark.connect.grpc.binding.address=127.0.0.1`` and
   ``spark.connect.grpc.binding.port``; the driver's addresses on the loopback interface too;
2. its Python processes (a ``foreachBatch`` function of ``logstream run --remote``) run this
   interpreter with this logstream importable (``PYSPARK_PYTHON``, ``PYTHONPATH``);
3. it runs in a new session (a terminal's Ctrl-C reaches :meth:`LocalConnectServer.stop`, not
   the JVM), its process id in ``DIR/server.pid`` and its log in ``DIR/server.log``;
4. it is ready when its port accepts a connection; one that exits first is reported with the
   end of its log;
5. :meth:`LocalConnectServer.stop` sends SIGTERM to that process id (Spark's shutdown hooks
   run) and SIGKILL after :data:`STOP_TIMEOUT_S`.

``logstream connect-server`` (and ``make connect``) runs one until Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from logstream.connect import DEFAULT_PORT
from logstream.errors import ConfigError

__all__ = ["SERVER_CLASS", "LocalConnectServer", "server_conf", "spark_home"]

#: The Spark Connect server's main class (Spark's ``sbin/start-connect-server.sh``).
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: Seconds a server may take to listen after its start (2 busy cores: 10–30 s).
START_TIMEOUT_S = 180.0
#: Seconds a stopping server is given before SIGKILL.
STOP_TIMEOUT_S = 30.0
LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """PySpark's installation: its ``bin/spark-submit`` and ``jars/`` (the server's jar)."""
    import pyspark

    return Path(pyspark.__file__).parent


def server_conf(port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark configuration of a local Connect server on ``127.0.0.1:port``.

    Parameters
    ----------
    port : int
        ``spark.connect.grpc.binding.port``.
    extra : dict of str to str, optional
        ``--conf`` values, applied last.

    Returns
    -------
    dict of str to str
        logstream's session settings (:func:`logstream.session.session_conf`), the loopback
        addresses, local checkpoint manager and JVM options a local session of logstream
        gets, Spark's Kafka connector's jars when they are cached, and the server's address.
    """
    from logstream.config import SparkSettings
    from logstream.jvm import archive_options
    from logstream.session import LOCAL_CHECKPOINT_MANAGER, LOCAL_JAVA_OPTIONS, session_conf

    conf = session_conf(SparkSettings(app_name="logstream Spark Connect server", remote=None))
    conf.update(
        {
            "spark.driver.bindAddress": LOOPBACK,
            "spark.driver.host": LOOPBACK,
            "spark.driver.extraJavaOptions": " ".join([LOCAL_JAVA_OPTIONS, *archive_options()]),
            "spark.sql.streaming.checkpointFileManagerClass": LOCAL_CHECKPOINT_MANAGER,
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(port),
            "spark.log.level": "WARN",  # its log: warnings and errors, not every job
        }
    )
    from logstream.kafka.maven import cached, connector

    if found := cached(connector()):  # the Kafka source and sink through the server
        conf["spark.jars"] = ",".join(str(p) for p in found)
    conf.update(extra or {})
    return conf


@dataclass
class LocalConnectServer:
    """A Spark Connect server in ``directory`` (its log and pid file), on ``127.0.0.1:port``.

    Parameters
    ----------
    directory : Path
        Its log (``server.log``) and pid file (``server.pid``); created.
    port : int
        The gRPC port clients connect to (``sc://127.0.0.1:PORT``).
    master : str
        The server's Spark master (``local[*]``, or a cluster's ``spark://HOST:PORT``).
    conf : dict of str to str
        More Spark settings (``--conf``), applied after :func:`server_conf`'s.
    die_with_parent : bool
        The server is killed when the thread that started it ends (Linux; tests).
    """

    directory: Path
    port: int = DEFAULT_PORT
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    die_with_parent: bool = False
    process: subprocess.Popen | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory).absolute()

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:PORT``: what ``--remote`` and ``$SPARK_REMOTE`` are given."""
        return f"sc://{LOOPBACK}:{self.port}"

    @property
    def pid_file(self) -> Path:
        """``DIR/server.pid``: the running server's process id."""
        return self.directory / "server.pid"

    @property
    def log_file(self) -> Path:
        """``DIR/server.log``: the server's output (Spark's log)."""
        return self.directory / "server.log"

    def command(self) -> list[str]:
        """``spark-submit --class SparkConnectServer --master … --conf …`` of this server."""
        args = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS]
        args += ["--name", "logstream Spark Connect server", "--master", self.master]
        for key, value in server_conf(self.port, self.conf).items():
            args += ["--conf", f"{key}={value}"]
        return args

    def environment(self) -> dict[str, str]:
        """The server's environment: PySpark's home, this interpreter and this logstream for its
        Python processes, the loopback interface for its UI."""
        import logstream

        source = str(Path(logstream.__file__).resolve().parents[1])
        paths = [source, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
            "SPARK_LOCAL_IP": LOOPBACK,
        }

    def running_pid(self) -> int | None:
        """The process id in the pid file when that process is alive, else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalConnectServer:
        """Start the server and wait until its port accepts a connection.

        Returns
        -------
        LocalConnectServer
            ``self``, running.

        Raises
        ------
        ConfigError
            When a server of this directory already runs, the port is taken, Java is
            missing, or the server exits or does not listen within ``timeout_s`` seconds
            (the message has the end of its log).
        """
        from logstream.jvm import java_binary

        if (pid := self.running_pid()) is not None:
            raise ConfigError(
                f"a Spark Connect server of {self.directory} already runs (process {pid}): "
                "stop it first (Ctrl-C where it runs, or kill that process)"
            )
        if _listening(self.port):
            raise ConfigError(
                f"port {self.port} of {LOOPBACK} is taken: choose another with --port"
            )
        if java_binary() is None:
            raise ConfigError("Spark Connect needs Java 17: install it (make setup, or apt-get)")
        self.directory.mkdir(parents=True, exist_ok=True)
        parent = os.getpid()

        def preexec() -> None:
            if self.die_with_parent:
                from logstream.jvm import _die_with_parent

                _die_with_parent(parent)

        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=self.directory,
                start_new_session=True,
                preexec_fn=preexec,
            )
        self.pid_file.write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + timeout_s
        while not _listening(self.port):
            if self.process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ConfigError(
                    f"the Spark Connect server exited with status {self.process.returncode} at "
                    f"start: {self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise ConfigError(
                    f"the Spark Connect server did not listen on {self.url} within "
                    f"{timeout_s:g} s: {self._log_tail()}"
                )
            time.sleep(0.2)  # the JVM starts: Spark, then the gRPC service
        return self

    def _log_tail(self, lines: int = 8) -> str:
        if not self.log_file.is_file():
            return "(no log)"
        texts = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        return " / ".join(t for t in texts if t.strip())[-1500:] or "(no log)"

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop the server by its process id: SIGTERM, then SIGKILL after ``timeout_s``.

        Returns
        -------
        bool
            Whether a server was running.
        """
        pid = self.process.pid if self.process is not None else self.running_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(pid, self.process):
            time.sleep(0.1)
        if _alive(pid, self.process):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid, self.process):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        self.process = None
        return True


def _listening(port: int) -> bool:
    """Whether something accepts connections on ``127.0.0.1:port``."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((LOOPBACK, port)) == 0


def _alive(pid: int, process: subprocess.Popen | None) -> bool:
    """Whether ``pid`` runs (a child of ours is reaped first, so it does not linger)."""
    if process is not None:
        return process.poll() is None
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
