"""logstream through ``spark-submit`` on a real Spark standalone cluster (a master and one
worker started with ``spark-class`` on this machine), the code shipped as a zip with
``--py-files`` as a user would."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import functions as F
from tests.conftest import free_port
from tests.pipeline.helpers import nasa_lines, write_chunks

SPARK_HOME = Path(pyspark.__file__).parent
BIN = SPARK_HOME / "bin"
REPO = Path(__file__).resolve().parents[2]


def wait_for_port(port: int, proc: subprocess.Popen, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the daemon exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)  # waiting for a daemon to listen
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    logs = tmp_path_factory.mktemp("cluster-logs")
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(logs / "work"),
    }
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master = subprocess.Popen(
        [
            str(BIN / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=env,
        stdout=(logs / "master.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = None
    try:
        wait_for_port(port, master)
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen(
            [
                str(BIN / "spark-class"),
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(worker_ui),
            ],
            env=env,
            stdout=(logs / "worker.log").open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for_port(worker_ui, worker)
        yield url, env
    finally:
        for proc in (worker, master):
            if proc is not None:
                os.killpg(proc.pid, 15)
                proc.wait(30)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    return Path(shutil.make_archive(str(out / "logstream"), "zip", REPO / "src", "logstream"))


def submit(cluster, package, args, tmp):
    url, env = cluster
    cmd = [
        str(BIN / "spark-submit"),
        "--master",
        url,
        "--py-files",
        str(package),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.executor.memory=1g",
        str(REPO / "src" / "logstream" / "__main__.py"),
        *args,
    ]
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    clean["PYSPARK_PYTHON"] = sys.executable
    done = subprocess.run(cmd, env=clean, cwd=tmp, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def test_batch_report_on_the_cluster_matches_local(cluster, package, nasa_day, tmp_path):
    done = submit(
        cluster,
        package,
        [
            "batch",
            str(nasa_day),
            "--format",
            "common",
            "--quiet",
            "--json",
            str(tmp_path / "r.json"),
        ],
        tmp_path,
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["general"]["total_requests"] == 35272
    assert report["status_classes"] == {"2xx": 32101, "3xx": 2823, "4xx": 348}
    assert "local[" not in done.stderr  # the master came from spark-submit, not a default


def test_streaming_pipeline_on_the_cluster_writes_the_outputs(
    cluster, package, nasa_day, spark, tmp_path
):
    write_chunks(nasa_lines(nasa_day), tmp_path / "in", per_file=12000)
    submit(
        cluster,
        package,
        [
            "run",
            "--input-dir",
            str(tmp_path / "in"),
            "--output-dir",
            str(tmp_path / "out"),
            "--state-dir",
            str(tmp_path / "state"),
            "--store",
            f"sqlite:///{tmp_path / 'store.db'}",
            "--trigger",
            "available-now",
            "--format",
            "common",
            "--quiet",
        ],
        tmp_path,
    )
    events = spark.read.parquet(str(tmp_path / "out" / "events"))
    assert events.count() == 35272  # every line counts
    traffic = spark.read.parquet(str(tmp_path / "out" / "traffic_per_minute"))
    assert traffic.count() == 1422
    assert (
        traffic.agg(F.sum("requests")).first()[0]
        == events.where(F.col("event_time") < "1995-07-10 03:49:00").count()
    )
