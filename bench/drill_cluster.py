"""The cluster drill: ``logstream run`` through ``spark-submit`` on a standalone cluster of a
master and two workers, one worker's executor JVM killed in the middle of a micro-batch, and
separately the driver killed (then the same command again); every output compared with a
local run as multisets.

The cluster is Spark's own standalone mode started from PySpark's installation, on
127.0.0.1 (``spark-class org.apache.spark.deploy.master.Master`` and two
``…deploy.worker.Worker``, one core and 1 GiB each), the code shipped as a zip with
``--py-files`` as a user would. The input is the real NASA day (1995-07-09, 35,272 lines) cut
into :data:`CHUNK_LINES`-line files, streamed with ``--trigger available-now
--max-files-per-trigger 1``: each file one micro-batch. Scenarios:

``reference``
    ``logstream run`` in a local process (``local[*]``), the outputs every other run must
    equal.
``cluster``
    The same command through ``spark-submit --master spark://…``, uninterrupted.
``executor killed``
    Once a micro-batch is in flight (its offsets written, its commit not yet: the checkpoint
    says so) after the first committed one, ``kill -9`` of the executor JVM
    (``CoarseGrainedExecutorBackend``) of the first worker. Spark marks the executor lost,
    runs its tasks again on the other (and on the executor the worker starts anew), and
    recomputes the blocks that were on it; the run goes on to its end by itself.
``driver killed``
    The same moment, ``kill -9`` of the driver (``spark-submit``'s process group: its JVM and
    the Python driver); the application's executors end with it. Then the same command again,
    to its end: the checkpoint and the serving store's ledger make the cut micro-batch count
    once (docs/operations.md).

Each run's Parquet outputs and serving-store tables are compared with the reference as
multisets of rows (:func:`bench.drill_kill.compare`: sketches and batch ids left out).

Usage (the ``worker-loss`` run of ``bench/results/cluster.json``, :mod:`bench.bench_cluster`)::

    python bench/drill_cluster.py                 # = bench_cluster.py --run worker-loss

The suite runs the executor kill on three 1,000-line files against an in-process reference
(``tests/cluster/test_spark_submit.py``, on the module's cluster).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import drill_kill, harness

CHUNK_LINES = 6000
#: Seconds a daemon may take to listen, and a run to end.
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 1200
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, limit_s: float = START_TIMEOUT_S) -> None:
    """Wait until something listens on ``127.0.0.1:port``; fail when ``proc`` exits first."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[1]} exited with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)  # a daemon starts
    raise RuntimeError(f"nothing listens on {port} after {limit_s} s")


@dataclass
class Cluster:
    """A running standalone cluster: its master URL, environment and daemons."""

    url: str
    env: dict[str, str]
    master: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def executors(self, worker: int) -> list[int]:
        """Process ids of the executor JVMs worker ``worker`` runs now."""
        import psutil

        found = []
        for child in psutil.Process(self.workers[worker].pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if EXECUTOR_CLASS in " ".join(child.cmdline()):
                    found.append(child.pid)
        return found


@contextlib.contextmanager
def cluster(logs: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """A master and ``workers`` workers on 127.0.0.1 (``spark-class``), each in a session of
    its own, stopped by their process groups at the end."""
    bin_dir = spark_home() / "bin"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(logs / "work"),
    }
    port, ui = free_port(), free_port()
    cmd = [str(bin_dir / "spark-class"), "org.apache.spark.deploy.master.Master"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
    master = _daemon(cmd, env, logs / "master.log")
    running = Cluster(f"spark://127.0.0.1:{port}", env, master)
    try:
        wait_for_port(port, master)
        uis = []
        for n in range(workers):
            uis.append(free_port())
            cmd = [str(bin_dir / "spark-class"), "org.apache.spark.deploy.worker.Worker"]
            cmd += [running.url, "--host", "127.0.0.1", "--cores", str(cores)]
            cmd += ["--memory", memory, "--webui-port", str(uis[-1])]
            running.workers.append(_daemon(cmd, env, logs / f"worker-{n}.log"))
        for worker, worker_ui in zip(running.workers, uis, strict=True):
            wait_for_port(worker_ui, worker)
        yield running
    finally:
        for proc in [*running.workers, master]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in [*running.workers, master]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _daemon(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def package(out: Path) -> Path:
    """logstream as a zip for ``--py-files``."""
    src = harness.REPO / "src"
    return Path(shutil.make_archive(str(out / "logstream"), "zip", src, "logstream"))


def submit_command(running: Cluster, zipped: Path, root: Path, chunks: Path) -> list[str]:
    """``spark-submit`` of the drill's ``logstream run`` (:func:`bench.drill_kill.command`'s
    options) on ``running``."""
    run = drill_kill.command(root, chunks)[3:]  # after "python -m logstream"
    return [
        str(spark_home() / "bin" / "spark-submit"),
        *("--master", running.url, "--py-files", str(zipped)),
        *("--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=1g"),
        str(harness.REPO / "src" / "logstream" / "__main__.py"),
        *run,
    ]


def submit_env(running: Cluster) -> dict[str, str]:
    env = {k: v for k, v in running.env.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def in_flight(state: Path) -> int | None:
    """The micro-batch of the ingest query in flight (its offsets written, its commit not yet)
    after at least one committed, else None."""
    offsets, commits = state / "ingest" / "offsets", state / "ingest" / "commits"
    done = {int(p.name) for p in commits.glob("[0-9]*")} if commits.is_dir() else set()
    planned = {int(p.name) for p in offsets.glob("[0-9]*")} if offsets.is_dir() else set()
    pending = sorted(planned - done)
    return pending[-1] if done and pending else None


@dataclass
class Outcome:
    """One scenario: its seconds, where the kill landed, the executors the driver's log says
    were lost (:func:`executors_lost`), and the micro-batches in the ledger."""

    seconds: float = 0.0
    killed_in_batch: int | None = None
    killed_pid: int | None = None
    executors_lost: list[str] = field(default_factory=list)
    runs: int = 1
    micro_batches: int = 0
    differences: dict[str, str] = field(default_factory=dict)


def run_with_kill(
    running: Cluster, zipped: Path, root: Path, chunks: Path, target: str | None
) -> Outcome:
    """Submit the run on ``root``; with ``target`` (``executor`` or ``driver``) kill it as the
    module docstring says, then (driver) submit it again; the last submission runs to its
    end."""
    outcome = Outcome()
    t0 = time.monotonic()
    cmd, env = submit_command(running, zipped, root, chunks), submit_env(running)
    log = root.parent / f"{root.name}-driver.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=root.parent, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        if target is not None:
            outcome.killed_in_batch, outcome.killed_pid = _kill_in_flight(
                running, proc, root / "state", target
            )
        status = proc.wait(RUN_TIMEOUT_S)
    if target == "driver":
        outcome.runs = 2
        with log.open("a") as out:
            status = subprocess.run(
                cmd, env=env, cwd=root.parent, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S, check=False,
            ).returncode  # fmt: skip
    outcome.seconds = round(time.monotonic() - t0, 1)
    text = log.read_text(errors="replace")
    if status != 0:
        raise RuntimeError(f"the run on {root} failed ({status}): {text[-3000:]}")
    outcome.executors_lost = executors_lost(text)
    outcome.micro_batches = drill_kill.committed_batches(root)
    return outcome


def executors_lost(log: str) -> list[str]:
    """Why the driver's log says each executor was lost (``TaskSchedulerImpl: Lost executor
    N on HOST: REASON``): ``Command exited with code 137`` for a ``kill -9``; ``worker lost:
    Not receiving heartbeat for 60 seconds`` when a starved machine delays its heartbeats."""
    return [line.split(": ", 2)[-1].strip() for line in log.splitlines() if "Lost executor" in line]


def _kill_in_flight(
    running: Cluster, proc: subprocess.Popen, state: Path, target: str
) -> tuple[int, int]:
    """Wait for a micro-batch in flight (:func:`in_flight`), then ``kill -9`` ``target``;
    (the micro-batch, the process id killed)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        batch = in_flight(state)
        executors = running.executors(0)
        if batch is not None and (target == "driver" or executors):
            if target == "driver":
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return batch, proc.pid
            os.kill(executors[0], signal.SIGKILL)
            return batch, executors[0]
        time.sleep(0.05)  # polling the checkpoint for a micro-batch in flight
    raise RuntimeError("the run ended before a micro-batch was in flight")


def drill(spark: Any, work: Path, max_lines: int | None = None) -> dict[str, Any]:
    """Every scenario of the module docstring on ``work``; the table's rows."""
    chunks = work / "chunks"
    lines = harness.nasa_day_lines()[:max_lines]
    harness.write_chunks(lines, chunks, CHUNK_LINES)
    reference = work / "reference"
    reference_s = drill_kill.run_to_end(reference, chunks)
    rows: dict[str, Any] = {
        "reference": {"seconds": round(reference_s, 1), "runs": 1, "identical": True}
    }
    zipped = package(work)
    with cluster(work / "cluster") as running:
        for name, target in (
            ("cluster", None),
            ("executor killed", "executor"),
            ("driver killed", "driver"),
        ):
            root = work / name.replace(" ", "-")
            outcome = run_with_kill(running, zipped, root, chunks, target)
            outcome.differences = drill_kill.compare(spark, root, reference)
            rows[name] = {**outcome.__dict__, "identical": not outcome.differences}
            print(name, rows[name], file=sys.stderr, flush=True)
    return {"lines": len(lines), "files": len(list(chunks.iterdir())), "scenarios": rows}


def print_table(result: dict[str, Any]) -> None:
    rows = result["scenarios"]
    print("| scenario | runs | killed in micro-batch | executors lost (log) | seconds | outputs |")
    print("|---|---:|---:|---|---:|---|")
    for name, r in rows.items():
        killed = "" if r.get("killed_in_batch") is None else str(r["killed_in_batch"])
        lost = "; ".join(r.get("executors_lost", [])) or "none"
        same = "equal to the local run" if r["identical"] else f"differ: {r['differences']}"
        print(f"| {name} | {r['runs']} | {killed} | {lost} | {r['seconds']} | {same} |")


def add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--lines", type=int, default=None, help="worker-loss: the day's first lines only"
    )


def measure(args: Any) -> dict[str, Any]:
    """The drill of the module docstring; its result."""
    spark = harness.spark_session(master="local[2]", app_name="drill-cluster")
    with harness.scratch("drill-cluster-") as work:
        result = drill(spark, work, args.lines)
    result["machine"] = harness.machine()
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return result


def passed(result: dict[str, Any]) -> bool:
    return all(r["identical"] for r in result["scenarios"].values())


if __name__ == "__main__":
    from bench import bench_cluster

    harness.run(lambda: bench_cluster.main(["--run", "worker-loss", *sys.argv[1:]]))
