"""The fault drill's short form: four faults, each one clear line, each exact once removed.

``bench/drill_faults.py`` on the NASA day's first 4,500 lines in three files (one micro-batch
each), against a fault-free run in the test's Spark session: a read-only ``--state-dir``
(refused before the JVM, exit 2), the disk of ``--output-dir`` filling mid-run, the newest
commits file emptied without its checksum (Spark's ``Incomplete log file``, which names no
file), and PostgreSQL stopped longer than ``--store-retry`` (each exit 1). A garbled newest
offsets file is no fault any more (written back as delivered): ``tests/pipeline/
test_checkpoint.py``. Every faulted start ends with one ``error:``
line naming the path or store and a log holding the trace; the same command run again after
the fault is removed leaves every output and store table equal to the fault-free run's. The
mounts are tmpfs (root, as the suite runs in CI).
"""

from __future__ import annotations

import os

import pytest

from logstream.pipeline import Pipeline
from tests.pipeline.helpers import config, load_bench

LINES, FILES = 4500, 3
NAMES = (
    "read_only_state_at_start",
    "disk_full_outputs",
    "empty_commits",
    "postgresql_down_past_retry",
)


@pytest.fixture(scope="module")
def report(spark, nasa_day, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fault drill mounts tmpfs file systems: run the suite as root (CI does)")
    drill = load_bench("drill_faults")

    def in_process(run) -> None:
        pipeline = Pipeline(spark, config(run.root, run.landing, store=run.store_url))
        try:
            pipeline.run()
        finally:
            pipeline.stop()
            pipeline.store.close()

    faults = [f for f in drill.FAULTS if f.name in NAMES]
    found = drill.drill(faults, tmp_path_factory.mktemp("drill"), LINES, FILES, in_process)
    return {f["name"]: f for f in found["faults"]}


@pytest.mark.parametrize("name", NAMES)
def test_a_fault_ends_with_one_line_and_nothing_is_lost_once_it_is_removed(report, name):
    fault = report[name]
    said = fault["faulted"]
    refused_at_start = name.endswith("_at_start")
    assert said["exit_status"] == (2 if refused_at_start else 1), said
    assert said["error_lines"] == 1, said
    # nothing else but the store's retry warnings (PostgreSQL)
    others = [line for line in said["message"] if not line.startswith("error:")]
    assert all(line.startswith(("warning: store", "store ")) for line in others), said
    line = next(line for line in said["message"] if line.startswith("error:"))
    if refused_at_start:
        assert said["seconds"] < 30 and "--state-dir" in line and "read-only" in line
    else:
        assert "trace in /" in line, line
    assert fault["outcome"] == "exact", fault
    assert fault["again"] is not None  # the run was finished by the start after the repair


def test_each_line_names_the_path_or_store_and_the_fix(report):
    said = {name: report[name]["faulted"]["message"][-1] for name in NAMES}
    assert "no space left on the disk of --output-dir" in said["disk_full_outputs"]
    assert "free space on it" in said["disk_full_outputs"]
    commits = said["empty_commits"]
    assert "/state/ingest/commits/" in commits and "is corrupt" in commits and "restore" in commits
    store = said["postgresql_down_past_retry"]
    assert "could not be reached for 15 s" in store and "postgresql://" in store
    assert "start the database server" in store
