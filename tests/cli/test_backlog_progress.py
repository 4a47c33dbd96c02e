"""``logstream run`` starting with a backlog shows the progress bar of ``logstream batch``
(issue 54 item 24, carried from issue 37 item 26: no progress for a run's backfill): the
backlog's parts read of their number, then its first micro-batch's outputs, until that
micro-batch has ended; nothing for a restart, with ``--quiet`` or off a terminal."""

from __future__ import annotations

import io

from rich.console import Console
from tests.pipeline.helpers import config, nasa_lines, write_chunks

import logstream.cli.run_progress as run_progress
from logstream.cli.run_progress import backlog_bytes, backlog_progress
from logstream.pipeline import Pipeline


def test_a_first_start_over_a_backlog_draws_the_bar_until_its_first_micro_batch_ends(
    spark, nasa_day, tmp_path, monkeypatch
):
    landing = tmp_path / "landing"
    write_chunks(nasa_lines(nasa_day), landing, per_file=12_000)  # three files
    cfg = config(tmp_path, landing, max_files_per_trigger=None)  # one micro-batch: a backfill
    size = sum(p.stat().st_size for p in landing.iterdir())
    assert backlog_bytes(cfg) == size > 3_000_000
    monkeypatch.setattr(run_progress, "BACKLOG_BYTES", 1_000_000)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    pipeline = Pipeline(spark, cfg)
    try:
        bar = backlog_progress(spark, cfg, console, False, lambda: pipeline.totals.batches > 0)
        with bar:
            pipeline.run()
    finally:
        pipeline.stop()
    drawn = screen.getvalue()
    assert "reading the backlog" in drawn and "of 3 parts" in drawn, drawn[-2000:]
    assert "tasks" not in drawn and "Spark stage" not in drawn
    assert pipeline.totals.batches == 1
    # a restart continues its checkpoint: no backlog; nor a bar with --quiet or off a terminal
    assert backlog_bytes(cfg) == 0
    plain = Console(file=io.StringIO())
    for quiet, where in ((True, console), (False, plain)):
        fresh = config(tmp_path / f"fresh-{quiet}", landing)
        context = backlog_progress(spark, fresh, where, quiet, lambda: True)
        assert type(context).__name__ == "nullcontext"
