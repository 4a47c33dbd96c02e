"""``logstream batch``'s progress bar reads as a user reads it (issue 54 item 23): the
input's parts read of their number, then the report's steps by name, on a bar whose total
never changes and that only moves forward; it is drawn only when standard output is a
terminal and never with ``--quiet``."""

from __future__ import annotations

import gzip
import io
import re
import sys

import pytest
from rich.console import Console
from tests.conftest import NASA_JUL_2000, data_file

from logstream.cli import main
from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.report.progress import REPORT_STEPS, StepCounts, StepProgress, progress_enabled
from logstream.sources import read_lines
from logstream.units import human_bytes

BAR = "reading"  # the bar's first words


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_reads_the_input_then_names_each_step_and_only_moves_forward(spark, tmp_path):
    """Before, the bar counted Spark's tasks and its total grew as stages appeared (0/1,
    1/2, 2/6 … 85/85): it filled again and again. Now its total is the report's steps."""
    log = data_file(NASA_JUL_2000)
    parts = tmp_path / "parts"  # two files: two parts to read
    parts.mkdir()
    lines = gzip.open(log, "rt", encoding="latin-1").read().splitlines(True)
    (parts / "a.log").write_text("".join(lines[:1000]), encoding="latin-1")
    (parts / "b.log").write_text("".join(lines[1000:]), encoding="latin-1")
    size = sum(p.stat().st_size for p in parts.iterdir())
    samples: list[StepCounts] = []
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    progress = StepProgress(
        spark.sparkContext, console, input_bytes=size, interval_s=0.01, on_poll=samples.append
    )
    with progress:
        report = build_report(
            parse(read_lines(spark, [parts]), compile_format("common")),
            top=3,
            time_zone="UTC",
            on_step=progress.step,
        )
    assert report["general"]["total_requests"] == 2000
    assert {s.total for s in samples} == {len(REPORT_STEPS)}  # the total never changes
    done = [s.completed for s in samples]
    assert done == sorted(done), "the bar only moves forward"
    assert samples[-1].completed == len(REPORT_STEPS)  # and fills once, at the end
    steps = [s.step for s in samples if s.step != "done"]
    order = list(REPORT_STEPS)
    assert [order.index(s) for s in steps] == sorted(order.index(s) for s in steps)
    assert len(set(steps)) >= 3, steps  # seen while the work ran, not only at its end
    reading = [s for s in samples if s.step == "read, parse, aggregate" and s.parts]
    assert reading and {s.parts for s in reading} == {2}  # the two files
    # what the bar says (its text at each poll; the screen is redrawn 10 times a second,
    # and the steps after the aggregation may all fall between two redraws)
    texts = [s.text for s in samples]
    assert any(t.startswith(f"reading {human_bytes(size)}") for t in texts), texts
    assert any(re.search(r", step [2-6] of 6$", t) for t in texts), texts
    drawn = screen.getvalue()
    assert "reading" in drawn  # and it was drawn
    assert "tasks" not in drawn and "Spark stage" not in drawn


def test_the_bar_is_shown_only_on_a_terminal_and_not_with_quiet():
    assert progress_enabled(quiet=False, stream=_Tty())
    assert not progress_enabled(quiet=True, stream=_Tty())
    assert not progress_enabled(quiet=False, stream=io.StringIO())


@pytest.mark.parametrize(("quiet", "bar"), [(False, True), (True, False)], ids=["tables", "quiet"])
def test_logstream_batch_on_a_terminal_draws_the_bar_unless_quiet(spark, monkeypatch, quiet, bar):
    # not on a terminal (a pipe, a file, pytest's capture): no bar, in
    # test_batch_report.py::test_cli_batch_writes_json_html_and_quarantine
    out = _Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.delenv("TERM", raising=False)
    args = ["batch", str(data_file(NASA_JUL_2000)), "--format", "common", "--top", "1"]
    assert main([*args, *(["--quiet"] if quiet else [])]) == 0
    printed = out.getvalue()
    assert (BAR in printed) == bar, printed[:300]
    if quiet:
        assert printed == ""
    else:
        assert "logstream batch report" in printed
