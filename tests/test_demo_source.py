"""Where the demo's data comes from: real logs first, else labelled synthetic traffic."""

from __future__ import annotations

import io
from itertools import islice

from rich.console import Console

from logstream import demo
from logstream.data import DataFetchError
from logstream.parsing import compile_format


def test_real_nasa_day_is_found_in_the_data_dir(monkeypatch, nasa_day, tmp_path):
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(nasa_day.parent))
    source = demo.choose_source(demo.DemoSettings(fetch=False), Console(file=io.StringIO()))
    assert not source.synthetic and source.log_format == "common"
    assert source.label == "real logs (data-dir): NASA_access_log_Jul95_day09.log.gz"
    first = next(iter(source.records()))
    assert first.text.startswith("ppp44.crim.ca - - [09/Jul/1995:00:00:00 -0400]")


def test_without_logs_or_network_the_generator_stands_in_labelled(monkeypatch, tmp_path):
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("LOGSTREAM_CACHE_DIR", str(tmp_path / "cache"))

    def offline(*args, **kwargs):
        raise DataFetchError("cannot reach https://ita.ee.lbl.gov (no network?)")

    monkeypatch.setattr(demo, "fetch", offline)
    out = io.StringIO()
    source = demo.choose_source(demo.DemoSettings(), Console(file=out, width=200))
    said = out.getvalue()
    assert "no network" in said and "SYNTHETIC" in said
    assert source.synthetic and source.label.startswith("SYNTHETIC")
    rx = compile_format(source.log_format).python_regex
    assert all(rx.match(r.text) for r in islice(source.records(), 500))


def test_the_summary_says_what_the_replay_wrote_and_was_not_read(tmp_path):
    """Issue 54 item 13: ``make run DURATION=150s`` said "done: 27,180 on-time events" while
    its landing directory held 36,948 lines, which the next ``make run`` empties."""
    landing = tmp_path / "demo" / "landing"
    assert demo.unread_note(36_948, 27_180, landing) == (
        f"the replay wrote 36,948 lines; 9,768 of them not read yet, left in {landing} "
        "(the next run empties it)"
    )
    assert demo.unread_note(500, 500, landing) == "the replay wrote 500 lines, every one read"
    assert demo.unread_note(None, 500, landing) == ""  # an older store: nothing known
