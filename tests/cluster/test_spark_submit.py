"""logstream through ``spark-submit`` on a real Spark standalone cluster (a master and two
workers started with ``spark-class`` on this machine), the code shipped as a zip with
``--py-files`` as a user would; one worker's executor killed in the middle of a micro-batch
changes no output (the short form of ``bench/drill_cluster.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from tests.conftest import NASA_JUL_2000, data_file
from tests.pipeline.helpers import load_bench, nasa_lines, run_in_process, write_chunks

SPARK_HOME = Path(pyspark.__file__).parent
BIN = SPARK_HOME / "bin"
REPO = Path(__file__).resolve().parents[2]
DRILL = load_bench("drill_cluster")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A master and two workers (one core, 1 GiB each) on 127.0.0.1, started with
    ``spark-class`` and stopped by their process groups (bench/drill_cluster.py)."""
    with DRILL.cluster(tmp_path_factory.mktemp("cluster-logs")) as running:
        yield running


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    return Path(shutil.make_archive(str(out / "logstream"), "zip", REPO / "src", "logstream"))


def submit(cluster, package, args, tmp):
    url, env = cluster.url, cluster.env
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
    # the master came from spark-submit, not a default: no executor inside the driver
    assert "local[" not in done.stderr and "Starting executor ID driver" not in done.stderr


def test_a_cluster_losing_an_executor_mid_micro_batch_changes_no_output(
    cluster, package, spark, tmp_path
):
    """``kill -9`` of the first worker's executor JVM while a micro-batch is in flight (its
    offsets written, its commit not yet): Spark runs its tasks again elsewhere, and every
    Parquet output and store table equals a local run's, as multisets."""
    chunks = tmp_path / "in"
    write_chunks(nasa_lines(data_file(NASA_JUL_2000)), chunks, per_file=500)
    run_in_process(spark, tmp_path / "local", chunks)
    outcome = DRILL.run_with_kill(cluster, package, tmp_path / "cluster", chunks, "executor")
    assert outcome.killed_in_batch >= 1 and outcome.micro_batches == 4
    # Spark saw it: the executor exited by SIGKILL (128 + 9)
    assert "Command exited with code 137" in outcome.executors_lost
    assert DRILL.drill_kill.compare(spark, tmp_path / "cluster", tmp_path / "local") == {}
