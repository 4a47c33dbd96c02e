"""The kill drill's short form (issue 12): a SIGKILL of the whole pipeline at a seeded random
moment, a restart, and every Parquet output and store table equal to an uninterrupted run.
``python bench/drill_kill.py --kills 20`` is the long form (the whole day, 24 micro-batches).
Here one kill on the day's first 4,500 lines (three micro-batches: the kill lands about half a
micro-batch after the restarted run's first commit, with two left to run) keeps the suite within
its time budget, and the uninterrupted reference run is made in the test's Spark session (no
JVM start of its own; the killed and the restarted runs are ``logstream run`` processes, as in
the long form); ``test_recovery.py`` kills at every write of a micro-batch."""

from __future__ import annotations

from tests.conftest import DATA_DIR
from tests.pipeline.helpers import load_bench, run_in_process

#: The day's first lines: three 1,500-line chunk files, three micro-batches.
LINES = 4500


def load_drill():
    return load_bench("drill_kill")


def test_a_kill_at_a_random_moment_changes_no_output(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(DATA_DIR))
    drill = load_drill()
    result = drill.drill(
        spark,
        kills=1,
        seed=3,
        work=tmp_path,
        max_lines=LINES,
        run_reference=lambda root, chunks: run_in_process(spark, root, chunks),
    )
    assert result.lines == LINES
    # a kill lands while the pipeline runs (a restart with little left may end before its
    # moment: -1)
    assert any(n >= 0 for n in result.committed_at_kill), result
    assert result.differences == {}
