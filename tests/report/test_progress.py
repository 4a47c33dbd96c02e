"""``logstream batch``'s progress bar: Spark's status tracker polled from a background thread
reports tasks done of the total, increasing, for a real batch job; the bar is drawn only when
standard output is a terminal and never with ``--quiet``."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console
from tests.conftest import NASA_JUL_2000, data_file

from logstream.cli import main
from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.report.progress import SparkProgress, TaskCounts, progress_enabled
from logstream.sources import read_lines

BAR = "Spark stage"  # the bar's description


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_tracker_reports_increasing_completed_tasks_of_a_real_batch_job(spark):
    samples: list[TaskCounts] = []
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    lines = read_lines(spark, [data_file(NASA_JUL_2000)])
    with SparkProgress(spark.sparkContext, console, interval_s=0.01, on_poll=samples.append):
        report = build_report(parse(lines, compile_format("common")), top=3, time_zone="UTC")
    assert report["general"]["total_requests"] == 2000
    done = [s.completed for s in samples]
    assert done == sorted(done), "the count only moves forward"
    assert len(set(done)) >= 3, done  # seen while the work ran, not only at its end
    last = samples[-1]  # the last poll, at the end: every task of every stage seen done
    assert last.completed == last.total > 0 and last.active_stages == ()
    assert all(s.completed <= s.total for s in samples)
    assert BAR in screen.getvalue() and "tasks" in screen.getvalue()


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
