"""``logstream replay`` from the command line."""

from __future__ import annotations

import json
import os

import pytest

from logstream.cli import main
from logstream.replay import iter_lines
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{f}"], "give exactly one output"),
        (["{f}", "--tcp", "127.0.0.1:0", "--dir", "{tmp}"], "give exactly one output"),
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
