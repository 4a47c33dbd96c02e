"""A NUL byte in a log line stops neither store: the line is quarantined, its bytes kept.

Real lines of the NASA day in two files, one micro-batch each; the first file also holds a
real line with a NUL in its URL (which the parser used to take as an event, and PostgreSQL
then refused: ``PostgreSQL text fields cannot contain NUL (0x00) bytes``, at every restart)
and a line of NUL-laced garbage (a quarantine example PostgreSQL refused the same way). The
same run goes into SQLite and into PostgreSQL (the session's throwaway server).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.pipeline.helpers import config, nasa_lines, write_chunks

from logstream.pipeline import Pipeline
from logstream.serving import open_store
from logstream.serving.safe_text import NUL_SHOWN_AS

LINES, PER_FILE = 1500, 750


def _nul_lines(real: list[str]) -> list[str]:
    """A real line with a NUL in its URL, and garbage with NULs."""
    line = real[7]
    start = line.index('"GET ') + len('"GET ')
    return [line[:start] + "/shuttle/\x00missions.html" + line[line.index(" ", start) :],
            "\x00\x00 not a log line \x00"]  # fmt: skip


@pytest.fixture(scope="module")
def nul_input(nasa_day, tmp_path_factory) -> tuple[Path, list[str]]:
    real = nasa_lines(nasa_day)[:LINES]
    bad = _nul_lines(real)
    directory = tmp_path_factory.mktemp("nul-input")
    lines = [*real[:PER_FILE], *bad, *real[PER_FILE:]]
    write_chunks(lines, directory, per_file=PER_FILE + len(bad))  # two files: two batches
    return directory, bad


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_nul_in_a_line_is_quarantined_and_the_run_goes_on(
    spark, nul_input, kind, request, tmp_path
):
    directory, bad = nul_input
    url = (
        request.getfixturevalue("postgres_url")
        if kind == "postgresql"
        else f"sqlite:///{tmp_path / 'store.db'}"
    )
    pipeline = Pipeline(spark, config(tmp_path, directory, store=url))
    try:
        pipeline.run()
    finally:
        pipeline.stop()
        pipeline.store.close()
    store = open_store(url, read_only=True)
    try:
        counters = store.counters()
        ledger = store.query("SELECT batch_id FROM ledger WHERE query = 'ingest'")
        examples = store.query("SELECT raw_line, reason FROM quarantine_examples")
        urls = store.query("SELECT url_path FROM trending_pages")
    finally:
        store.close()
    # every real line counted, in both micro-batches (the one after the NULs too)
    assert (counters["events"], counters["quarantined"]) == (LINES, 2)
    assert sorted(r["batch_id"] for r in ledger) == [0, 1]
    # the store holds the lines with NUL shown as U+2400; no URL with a NUL became an event
    assert sorted((r["raw_line"], r["reason"]) for r in examples) == sorted(
        (line.replace("\x00", NUL_SHOWN_AS), "control_character") for line in bad
    )
    assert not any("\x00" in r["url_path"] or NUL_SHOWN_AS in r["url_path"] for r in urls)
    # quarantine/ keeps the lines' own bytes
    out = tmp_path / "out"
    quarantined = spark.read.parquet(str(out / "quarantine")).collect()
    assert sorted((r.raw_line, r.reason) for r in quarantined) == sorted(
        (line, "control_character") for line in bad
    )
    events = spark.read.parquet(str(out / "events"))
    assert events.count() == LINES
    assert events.where(events.url_path.contains("\x00")).count() == 0
