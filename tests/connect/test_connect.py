"""logstream through Spark Connect: a real server from PySpark's jars (``logstream
connect-server``, started by this module and stopped by its pid), ``batch`` and ``run`` against
it with the same outputs as the local session's, and what ``--remote`` refuses at start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from logstream.cli import main
from tests.conftest import NASA_JUL_2000, REPO, data_file, free_port
from tests.pipeline.helpers import load_bench, nasa_lines, run_in_process, write_chunks

START_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    """``logstream connect-server`` in a subprocess (the server dies with it), on a free port;
    SIGTERM to that process's pid at the end stops the server by its own pid."""
    port = free_port()
    directory = tmp_path_factory.mktemp("connect-server")
    cmd = [sys.executable, "-m", "logstream", "connect-server", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [*cmd, "--dir", str(directory)], stdout=subprocess.PIPE, text=True, env=env
    )
    ready = threading.Event()
    said: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            said.append(line)
            if "Spark Connect server answers on" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(START_TIMEOUT_S), "".join(said) or "the server never answered"
        assert f"sc://127.0.0.1:{port}" in said[0]
        yield f"sc://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        reader.join(5)
        assert said[-1].strip() == "stopped"
        assert not (directory / "server.pid").exists()


def remote_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``logstream ARGS`` in a new process: a Connect client turns its process into one
    (PySpark's ``SPARK_CONNECT_MODE_ENABLED``), so never in the test run's own."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    cmd = [sys.executable, "-m", "logstream", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def test_the_batch_report_through_connect_equals_the_local_one(connect_url, spark, tmp_path):
    """``$SPARK_REMOTE`` is honoured as PySpark honours it."""
    log = str(data_file(NASA_JUL_2000))
    assert main(["batch", log, "--quiet", "--json", str(tmp_path / "local.json")]) == 0
    done = remote_cli(
        ["batch", log, "--quiet", "--json", str(tmp_path / "remote.json")],
        {"SPARK_REMOTE": connect_url},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    local = json.loads((tmp_path / "local.json").read_text())
    remote = json.loads((tmp_path / "remote.json").read_text())
    assert remote["general"]["total_requests"] == 2000
    assert remote == local  # the sessions' quantiles too: exact, not sketched


def test_a_stream_through_connect_has_the_local_outputs(connect_url, spark, tmp_path):
    """``logstream run --remote`` with ``--trigger available-now``: every Parquet output and
    store table equal to a local run's, as multisets (bench/drill_kill.py's comparison)."""
    chunks = tmp_path / "in"
    write_chunks(nasa_lines(data_file(NASA_JUL_2000)), chunks, per_file=1000)
    run_in_process(spark, tmp_path / "local", chunks)
    root = tmp_path / "remote"
    args = ["run", "--remote", connect_url, "--input-dir", str(chunks), "--format", "common"]
    args += ["--output-dir", str(root / "out"), "--state-dir", str(root / "state")]
    args += ["--store", f"sqlite:///{root / 'store.db'}", "--trigger", "available-now"]
    done = remote_cli([*args, "--max-files-per-trigger", "1"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.startswith("note: through Spark Connect, the server's Python process")
    assert "done: 2,000 on-time events" in done.stderr and "in 2 micro-batches" in done.stderr
    drill_kill = load_bench("drill_kill")
    assert drill_kill.compare(spark, root, tmp_path / "local") == {}


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["batch", "LOG", "--remote", "http://h:1"], {}, "not a Spark Connect URL"),
        (["batch", "LOG", "--master", "local[2]"], {"SPARK_REMOTE": "sc://h:1"}, "give one of"),
        (["run", "--follow", "x.log", "--remote", "sc://h:1"], {}, "--follow is read by"),
        (["run", "--remote", "sc://h:1"], {}, "the demo is read by"),
    ],
)
def test_connect_options_are_refused_before_spark_starts(args, env, message, capsys, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    log = str(data_file(NASA_JUL_2000))
    assert main([log if a == "LOG" else a for a in args]) == 2
    assert message in capsys.readouterr().err.replace("\n", "")


def test_connect_to_no_server_is_one_line(capsys, tmp_path):
    log = str(data_file(NASA_JUL_2000))
    assert main(["batch", log, "--remote", f"sc://127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no Spark Connect server answers at sc://127.0.0.1:")
    assert "logstream connect-server" in err and len(err.splitlines()) == 1
