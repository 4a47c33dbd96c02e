"""``logstream replay`` from the command line."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from logstream.cli import main
from logstream.replay import RotatingFileSink, iter_lines
from tests.conftest import NASA_JUL_2000, data_file


@pytest.fixture(scope="module")
def jul_2000():
    return str(data_file(NASA_JUL_2000))


def test_replay_to_a_directory_with_late_lines_and_a_summary(jul_2000, tmp_path, capsys):
    out, summary_path = tmp_path / "chunks", tmp_path / "summary.json"
    status = main(
        [
            "replay",
            jul_2000,
            "--dir",
            str(out),
            "--speedup",
            "1000000",
            "--chunk-lines",
            "300",
            "--late-fraction",
            "0.02",
            "--late-by",
            "5m",
            "--seed",
            "3",
            "--summary",
            str(summary_path),
            "--quiet",
        ]
    )
    assert status == 0
    assert "sent 2,000 lines" in capsys.readouterr().err
    names = sorted(n for n in os.listdir(out) if not n.startswith("."))
    assert len(names) == 7  # 2000 lines / 300
    sent = [line for n in names for line in (out / n).read_text().splitlines()]
    original = list(iter_lines(jul_2000))
    assert sorted(sent) == sorted(original) and sent != original

    summary = json.loads(summary_path.read_text())
    assert summary["lines_sent"] == 2000 and summary["completed"]
    assert summary["late_lines"] == len(summary["late"]) > 10
    for late in summary["late"]:
        assert sent[late["sent_index"] - 1] == original[late["line_number"] - 1]
        assert late["sent_index"] > late["line_number"]  # held back, so later in the stream


def test_replay_to_a_growing_log_rotated_by_event_time_like_logrotate(nasa_day, tmp_path, capsys):
    """``--file`` writes the real day as a server writes its access log; ``--rotate-every 6h``
    rotates it by the lines' own times (NASA's -0400 times: the UTC day's 6-hour periods):
    ``access.log.1`` kept plain (delaycompress), older rotations gzipped."""
    log = tmp_path / "logs" / "access.log"
    args = ["replay", str(nasa_day), "--file", str(log), "--rotate-every", "6h"]
    assert main([*args, "--speedup", "1e9", "--quiet"]) == 0
    assert "sent 35,272 lines" in capsys.readouterr().err
    names = sorted(os.listdir(log.parent))
    assert names == ["access.log", *(f"access.log.{n}" for n in ("1", "2.gz", "3.gz", "4.gz"))]

    def lines(name: str) -> list[str]:
        opener = gzip.open if name.endswith(".gz") else open
        with opener(log.parent / name, "rt", encoding="utf-8", errors="surrogateescape") as fh:
            return fh.read().splitlines()

    # the day runs 04:00-04:00 UTC: periods 00-06 UTC (its first 2 h), 06-12, 12-18, 18-24, 00-04
    firsts = {n: lines(n)[0] for n in names}
    assert "[09/Jul/1995:00:00:00 -0400]" in firsts["access.log.4.gz"]
    assert "[09/Jul/1995:02:" in firsts["access.log.3.gz"]
    assert "[09/Jul/1995:08:" in firsts["access.log.2.gz"]
    assert "[09/Jul/1995:14:" in firsts["access.log.1"]
    assert "[09/Jul/1995:20:" in firsts["access.log"]
    written = [line for n in reversed(names) for line in lines(n)]
    assert written == list(iter_lines(str(nasa_day)))


def test_rotation_keeps_the_newest_rotations_only(tmp_path):
    sink = RotatingFileSink(tmp_path / "a.log", rotate_every_s=60, keep=2)
    for minute in range(5):
        sink.write_at(f"line {minute}", minute * 60.0 + 1)
    sink.close()
    assert sorted(os.listdir(tmp_path)) == ["a.log", "a.log.1", "a.log.2.gz"]
    assert (tmp_path / "a.log").read_text() == "line 4\n"
    assert (tmp_path / "a.log.1").read_text() == "line 3\n"
    assert gzip.decompress((tmp_path / "a.log.2.gz").read_bytes()) == b"line 2\n"
    assert sink.info() == {"path": str(tmp_path / "a.log"), "lines": 5, "rotations": 4}


def test_rotation_asks_before_compressing_the_previous_file(tmp_path):
    """The demo's hook: called with ``NAME.1`` before it is compressed and deleted, while it
    still holds its lines; never at the first rotation (no ``NAME.1`` yet)."""
    seen = []
    sink = RotatingFileSink(
        tmp_path / "a.log",
        rotate_every_s=60,
        before_compress=lambda path: seen.append((path.name, path.read_text())),
    )
    for minute in range(3):
        sink.write_at(f"line {minute}", minute * 60.0 + 1)
    sink.close()
    assert seen == [("a.log.1", "line 0\n")]
    assert gzip.decompress((tmp_path / "a.log.2.gz").read_bytes()) == b"line 0\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{f}"], "give exactly one output"),
        (["{f}", "--tcp", "127.0.0.1:0", "--dir", "{tmp}"], "give exactly one output"),
        (["{f}", "--file", "{tmp}/a.log", "--dir", "{tmp}"], "give exactly one output"),
        (["{f}", "--file", "{tmp}/a.log", "--rotate-every", "0s"], "must be positive"),
        (["{f}", "--dir", "{tmp}", "--speedup", "10", "--rate", "5"], "not both"),
        (["{f}", "--dir", "{tmp}", "--late-fraction", "0.1"], "needs --late-by"),
        (["{f}", "--dir", "{tmp}", "--late-fraction", "0.1", "--late-by", "soon"], "--late-by"),
        (["{f}", "--tcp", "localhost:http"], "port from 0 to 65535"),
        (["/nonexistent/access.log", "--dir", "{tmp}"], "does not exist"),
        (["{f}", "--dir", "{tmp}", "--summary", "/nonexistent/s.json"], "does not exist"),
    ],
)
def test_bad_options_exit_2_with_a_message(args, message, jul_2000, tmp_path, capsys):
    args = [a.replace("{f}", jul_2000).replace("{tmp}", str(tmp_path / "d")) for a in args]
    assert main(["replay", *args]) == 2
    assert message in capsys.readouterr().err
