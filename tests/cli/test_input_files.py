"""``logstream batch DIR`` and ``logstream run --input-dir DIR`` read the same files of a
directory, and say which files Spark skips (issue 37, items 22 and 23).

One directory of real NASA lines: 60 at the top, 40 in a subdirectory, 15 in a partition-like
one (``day=2``), and 35 in files whose names Spark's file source skips without a word
(``_``/``.`` names, a ``_`` directory). The
batch report and an ``available-now`` run are made once over it, in the session's Spark.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import threading
from itertools import islice
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.conftest import NO_PANELS

from logstream.cli import main

VISIBLE = {"a.log": 60, "sub/b.log": 40, "day=2/f.log": 15}
HIDDEN = {"_c.log": 20, ".d.log": 10, "_tmp/e.log": 5}


@pytest.fixture(scope="module")
def landing(nasa_day, tmp_path_factory) -> Path:
    with gzip.open(nasa_day, "rt", encoding="utf-8") as fh:
        lines = list(islice(fh, sum(VISIBLE.values()) + sum(HIDDEN.values())))
    root = tmp_path_factory.mktemp("landing")
    start = 0
    for name, n in {**VISIBLE, **HIDDEN}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("".join(lines[start : start + n]), encoding="utf-8")
        start += n
    return root


def _main(args: list[str]) -> str:
    """Run the CLI in-process; its standard error."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args) == 0, err.getvalue()[-3000:]
    return err.getvalue()


@pytest.fixture(scope="module")
def batch_run(spark, landing, tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("batch") / "report.json"
    args = ["batch", str(landing), "--format", "common", "--quiet", "--json", str(out)]
    err = _main([*args, *NO_PANELS])  # the files and totals, not the panels
    return json.loads(out.read_text()), err


@pytest.fixture(scope="module")
def stream_run(spark, landing, tmp_path_factory) -> tuple[int, str]:
    tmp = tmp_path_factory.mktemp("stream")
    args = ["run", "--input-dir", str(landing), "--format", "common"]
    args += ["--output-dir", str(tmp / "out"), "--state-dir", str(tmp / "state")]
    args += ["--trigger", "available-now", "--queries", "none", "--no-dashboard", "--quiet"]
    err = _main(args)
    done = re.search(r"done: ([\d,]+) on-time events, ([\d,]+) late, ([\d,]+) ", err)
    assert done, err[-3000:]
    return sum(int(g.replace(",", "")) for g in done.groups()), err


def _hidden_paths(landing: Path) -> list[str]:
    return sorted(str(landing / name) for name in HIDDEN)


def test_batch_names_and_counts_the_files_spark_skips(batch_run, landing):
    """Item 23: 35 real lines in _/. files were skipped with no count and no warning."""
    report, err = batch_run
    assert report["general"]["total_requests"] == sum(VISIBLE.values())
    assert sorted(report["general"]["skipped_files"]) == _hidden_paths(landing)
    assert "warning: skipped 3 files that Spark does not read" in err
    assert all(path in err for path in _hidden_paths(landing)), err


def test_run_warns_at_start_naming_the_files_spark_skips(stream_run, landing):
    """Item 23: the directory stream skipped them silently too."""
    _, err = stream_run
    assert "warning: skipped 3 files that Spark does not read" in err
    assert all(path in err for path in _hidden_paths(landing)), err
    assert err.index("warning: skipped") < err.index("done:")  # at start, not at the end


def test_run_reads_the_subdirectories_that_batch_reads(batch_run, stream_run):
    """Item 22: batch read 1,325 lines of a directory, the stream 1,225: it skipped the
    subdirectories (and failed on a partition-like one beside them)."""
    report, _ = batch_run
    lines, _ = stream_run
    assert report["general"]["total_requests"] == sum(VISIBLE.values())
    assert lines == sum(VISIBLE.values())


def test_a_run_called_from_another_thread_leaves_the_running_session_alive(
    spark, landing, tmp_path
):
    # the JVM's active session is per thread: a new thread has none, while the process's
    # session runs; `logstream run` must not take it for its own and stop it
    args = ["run", "--input-dir", str(landing), "--format", "common"]
    args += ["--output-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")]
    args += ["--trigger", "available-now", "--queries", "none", "--no-dashboard", "--quiet"]
    seen, results = [], []

    def call() -> None:
        seen.append(SparkSession.getActiveSession())
        results.append(main(args))

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(300)
    assert seen == [None] and results == [0]
    assert not spark.sparkContext._jsc.sc().isStopped()
    assert spark.range(3).count() == 3
