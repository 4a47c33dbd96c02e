"""A real one-node Apache Kafka broker on the loopback interface (KRaft mode, no ZooKeeper).

:class:`LocalBroker` runs Apache Kafka :data:`~logstream.kafka.maven.BROKER_VERSION` from the
jars :mod:`logstream.kafka.maven` fetched (``make setup``), the way Kafka's own quick start does
(``kafka-storage.sh format``, then ``kafka-server-start.sh``):

1. write ``DIR/server.properties``: one node that is both broker and controller
   (``process.roles=broker,controller``), both listeners on ``127.0.0.1`` only, its log and
   metadata in ``DIR/data``, the internal topics with one replica;
2. format the storage once with a new cluster id (``kafka.tools.StorageTool format``; a
   directory formatted before is started as it is, with its topics);
3. start ``kafka.Kafka DIR/server.properties`` in a new session, its process id in
   ``DIR/broker.pid``, its log in ``DIR/server.log``;
4. wait until the broker answers a metadata request (:func:`logstream.kafka.client.
   wait_reachable`); a broker that exits first is reported with the end of its log;
5. :meth:`LocalBroker.stop` sends SIGTERM to that process id (Kafka shuts down cleanly) and,
   after :data:`STOP_TIMEOUT_S`, SIGKILL.

Commands (``make kafka`` runs the first)::

    python -m logstream.kafka.broker run   [--dir out/kafka] [--port 9092]  # until Ctrl-C
    python -m logstream.kafka.broker start [--dir out/kafka] [--port 9092]  # in the background
    python -m logstream.kafka.broker stop  [--dir out/kafka]
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from logstream.errors import ConfigError

__all__ = ["DEFAULT_PORT", "LocalBroker", "main"]

#: The port of ``make kafka``'s broker (Kafka's default).
DEFAULT_PORT = 9092
#: Seconds a broker may take to answer after its start (2 busy cores: about 5–15 s).
START_TIMEOUT_S = 120.0
#: Seconds a stopping broker is given before SIGKILL.
STOP_TIMEOUT_S = 30.0
#: The broker's JVM: a small heap, the serial collector (one busy core is enough for it).
JAVA_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

_PROPERTIES = """\
# written by logstream.kafka.broker: one KRaft node, broker and controller, loopback only
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.check.interval.ms=5000
"""

_LOG4J = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def _cluster_id() -> str:
    """A new cluster id, as ``kafka-storage.sh random-uuid`` makes it (22 base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class LocalBroker:
    """One Kafka broker in ``directory``, listening on ``127.0.0.1:port``.

    Parameters
    ----------
    directory : Path
        Its configuration, data, log and pid file (created).
    port : int
        The client port; the controller listens on ``controller_port``.
    controller_port : int, optional
        Default ``port + 1``.
    die_with_parent : bool
        The broker is killed when the thread that started it ends (Linux; tests): no broker
        outlives a test run that was killed.

    Attributes
    ----------
    bootstrap : str
        ``127.0.0.1:PORT``, what clients are given.
    """

    directory: Path
    port: int = DEFAULT_PORT
    controller_port: int | None = None
    die_with_parent: bool = False
    process: subprocess.Popen | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory).absolute()
        if self.controller_port is None:
            self.controller_port = self.port + 1

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        """``DIR/broker.pid``: the running broker's process id."""
        return self.directory / "broker.pid"

    @property
    def log_file(self) -> Path:
        """``DIR/server.log``: the broker's log (Log4j 2, INFO)."""
        return self.directory / "server.log"

    def _java(self, main_class: str, *args: str) -> list[str]:
        from logstream.jvm import java_binary
        from logstream.kafka.maven import broker, jars

        java = java_binary()
        if java is None:
            raise ConfigError("Kafka needs Java 17: install it (make setup, or apt-get)")
        classpath = os.pathsep.join(str(p) for p in jars(broker()))
        return [
            str(java),
            *JAVA_OPTIONS,
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
            "-cp",
            classpath,
            main_class,
            *args,
        ]

    def _configure(self) -> Path:
        """Write the configuration; format the storage when it is new. The properties file."""
        data = self.directory / "data"
        self.directory.mkdir(parents=True, exist_ok=True)
        properties = self.directory / "server.properties"
        properties.write_text(
            _PROPERTIES.format(port=self.port, controller_port=self.controller_port, data=data)
        )
        (self.directory / "log4j2.properties").write_text(_LOG4J.format(log=self.log_file))
        if not (data / "meta.properties").is_file():
            done = subprocess.run(
                self._java(
                    "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(properties)
                ),
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                raise ConfigError(
                    f"Kafka could not format its storage in {data}: "
                    + (done.stderr.strip() or done.stdout.strip())[-800:]
                )
        return properties

    def running_pid(self) -> int | None:
        """The process id in the pid file when that process is alive, else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalBroker:
        """Configure, format when new, start the broker and wait until it answers.

        Returns
        -------
        LocalBroker
            ``self``, running.

        Raises
        ------
        ConfigError
            When a broker of this directory already runs, Java or the jars are missing, or
            the broker exits or does not answer within ``timeout_s`` seconds (the message
            has the end of its log).
        """
        from logstream.kafka.client import wait_reachable

        if (pid := self.running_pid()) is not None:
            raise ConfigError(
                f"a Kafka broker of {self.directory} already runs (process {pid}): stop it "
                f"with `python -m logstream.kafka.broker stop --dir {self.directory}`"
            )
        properties = self._configure()
        command = self._java("kafka.Kafka", str(properties))
        parent = os.getpid()

        def preexec() -> None:
            if self.die_with_parent:
                from logstream.jvm import _die_with_parent

                _die_with_parent(parent)

        with open(self.directory / "stdout.log", "ab") as out:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C of a terminal reaches the stop, not the JVM
                preexec_fn=preexec,
            )
        self.pid_file.write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ConfigError(
                    f"the Kafka broker exited with status {self.process.returncode} at start: "
                    f"{self._log_tail()}"
                )
            try:
                wait_reachable(self.bootstrap, timeout_s=1.0)
                return self
            except ConfigError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ConfigError(
                        f"the Kafka broker did not answer on {self.bootstrap} within "
                        f"{timeout_s:g} s: {self._log_tail()}"
                    ) from None

    def _log_tail(self, lines: int = 8) -> str:
        texts = []
        for path in (self.directory / "stdout.log", self.log_file):
            if path.is_file():
                texts += path.read_text(errors="replace").splitlines()[-lines:]
        return " / ".join(t for t in texts if t.strip())[-1500:] or "(no log)"

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop the broker by its process id: SIGTERM, then SIGKILL after ``timeout_s``.

        Returns
        -------
        bool
            Whether a broker was running.
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


def _alive(pid: int, process: subprocess.Popen | None) -> bool:
    """Whether ``pid`` runs (a child of ours is reaped first, so it does not linger)."""
    if process is not None:
        return process.poll() is None
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m logstream.kafka.broker run|start|stop [--dir DIR] [--port PORT]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m logstream.kafka.broker",
        description="A one-node Apache Kafka broker (KRaft) on 127.0.0.1.",
    )
    parser.add_argument(
        "command",
        choices=("run", "start", "stop"),
        help="run: until Ctrl-C; start: in the background; stop: the one started in --dir",
    )
    parser.add_argument("--dir", type=Path, default=Path("out/kafka"), help="its files")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the client port")
    args = parser.parse_args(argv)
    broker = LocalBroker(args.dir, args.port)
    try:
        if args.command == "stop":
            stopped = broker.stop()
            print("stopped" if stopped else f"no broker runs in {broker.directory}")
            return 0
        start = time.monotonic()
        broker.start()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pid = broker.process.pid if broker.process is not None else "?"
    print(
        f"Kafka {_version()} answers on {broker.bootstrap} (process {pid}, started in "
        f"{time.monotonic() - start:.1f} s; files in {broker.directory})",
        flush=True,
    )
    if args.command == "start":
        print(f"stop it with: python -m logstream.kafka.broker stop --dir {args.dir}")
        return 0
    print("Ctrl-C stops it", flush=True)

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        while broker.process is not None and broker.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    print("stopped")
    return 0


def _version() -> str:
    from logstream.kafka.maven import BROKER_VERSION

    return BROKER_VERSION


if __name__ == "__main__":
    sys.exit(main())
