"""The fuzz drill's short form: a corpus of hostile input never fails a job, and every line
read is counted once — as an event (on time or late) or as a quarantined line — per file
(issue 1/6, item 6).

The corpus (seeded) holds real NASA lines cut at random places, random bytes, NULs, invalid
UTF-8, CR-only and mixed line endings, 1 MB fields, lines of other formats, an empty file, a
binary file and a truncated gzip (:func:`bench.drill_fuzz.build_corpus`). Here it is a fifth of
the long form's (every kind of file, the 1 MB fields whole: 21,335 lines in 12 files);
``python bench/drill_fuzz.py`` runs the whole corpus (106,891 lines). It goes through
``logstream batch`` and through ``logstream run --trigger available-now`` (three files per
micro-batch), the two processes at once (the batch is started first and checked last); the
expected line count of each file is computed independently, the way Hadoop's line reader
splits (``\\n``, ``\\r\\n`` and ``\\r`` end a line; a final line needs no terminator).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.oracle import read_lines as nasa_lines
from tests.pipeline.helpers import load_bench

#: Fraction of the long form's corpus.
SCALE = 0.2


@pytest.fixture(scope="module")
def drill():
    return load_bench("drill_fuzz")


@pytest.fixture(scope="module")
def corpus(drill, nasa_day, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    directory = tmp_path_factory.mktemp("fuzz") / "in"
    expected = drill.build_corpus(nasa_lines(nasa_day), directory, scale=SCALE)
    assert len(expected) == 12 and sum(expected.values()) > 20_000
    # every kind of hostile file holds lines; the 1 MB fields are whole
    assert all(count > 0 for name, count in expected.items() if name != "empty.log")
    assert (directory / "huge-fields.log").stat().st_size > 5_000_000
    return directory, expected


def assert_clean(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    for marker in ("Traceback", "Exception in thread", "\tat "):
        assert marker not in done.stderr, done.stderr[-4000:]


@pytest.fixture(scope="module")
def batch(drill, corpus, tmp_path_factory) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``logstream batch`` over the corpus, started at once and left running beside the
    module's first test (its process group killed if no test waited for its end)."""
    work = tmp_path_factory.mktemp("fuzz-batch")
    proc = drill.start_batch(corpus[0], work)
    try:
        yield proc, work
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


# the batch over the same corpus runs beside this test (two JVMs: their starts overlap)
@pytest.mark.usefixtures("batch")
def test_logstream_run_counts_every_line_of_every_file_once(drill, spark, corpus, tmp_path):
    directory, expected = corpus
    done, got, corrupt = drill.run_stream(spark, directory, tmp_path)
    assert_clean(done)
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
    assert corrupt == ["truncated.log.gz"]


def test_logstream_batch_counts_every_line_of_the_corpus_once(drill, corpus, batch):
    _, expected = corpus
    done, report, per_file = drill.finish_batch(*batch)
    assert_clean(done)
    g = report["general"]
    assert g["valid_requests"] + g["failed_requests"] == g["total_requests"]
    assert g["total_requests"] == sum(expected.values())
    assert g["corrupt_files"] == 1
    # every quarantined line names its file: the real lines all parse, the foreign ones none
    assert per_file["real.log"] == 0
    for name in ("other-formats.log", "random-bytes.log", "binary.bin"):
        assert per_file[name] == expected[name] > 0, name
