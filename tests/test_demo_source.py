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
