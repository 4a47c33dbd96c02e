"""Pipeline options are validated at start, with the value and the fix in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstream.errors import ConfigError
from logstream.pipeline import EVENT_QUERIES, PipelineConfig, interval_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 minutes", 600), ("5s", 5), ("1 hour", 3600), ("250 ms", 0.25), ("2 days", 172800)],
)
def test_intervals_are_read_in_seconds(text, seconds):
    assert interval_seconds(text) == seconds


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"watermark": "ten minutes"}, "'ten minutes' is not an interval"),
        ({"trigger": "soon"}, "'soon' is not an interval"),
        ({"dedup_window": "a while"}, "'a while' is not an interval"),
        ({"store": "mysql://x"}, "use sqlite:///PATH"),
        ({"input_dir": None}, "needs --input-dir"),
        ({"source": "socket", "socket": "localhost"}, "not HOST:PORT"),
        ({"source": "socket", "socket": "localhost:9999"}, "--format auto needs files"),
        ({"trending_slide": "10 minutes"}, "longer than the window"),
        ({"top": 0}, "top"),
        ({"queries": "sessions,trending"}, "unknown query 'trending': choose 'all', 'none' or"),
        ({"queries": " , "}, "names no query"),
        ({"output_dir": Path("in/out")}, "--output-dir '[^']*/in/out' is inside --input-dir"),
        ({"state_dir": Path("in")}, "--state-dir '[^']*/in' is inside --input-dir"),
    ],
)
def test_bad_options_are_rejected(values, message):
    base = {"input_dir": Path("in")}
    base.update(values)
    with pytest.raises(ConfigError, match=message):
        PipelineConfig.build(**base)


def test_defaults_are_the_books_query():
    cfg = PipelineConfig.build(input_dir=Path("in"))
    assert (cfg.trending_window, cfg.trending_slide, cfg.traffic_window, cfg.watermark) == (
        "300 seconds",
        "60 seconds",
        "60 seconds",
        "600 seconds",
    )
    # a micro-batch a second, as GoAccess refreshes its real-time report (the live path's
    # micro-batch takes well under a second: docs/performance.md)
    assert cfg.trigger == "1 seconds" and cfg.watermark_seconds == 600
    cfg = PipelineConfig.build(input_dir=Path("in"), trigger="available_now")
    assert cfg.trigger == "available-now"


@pytest.mark.parametrize(
    ("text", "chosen"),
    [
        # no networks table, no bot model
        ("all", tuple(q for q in EVENT_QUERIES if q not in ("traffic_by_network", "bot_scores"))),
        ("none", ()),
        ("alerts, Traffic-Per-Minute", ("traffic_per_minute", "alerts")),  # start order
        (["sessions", "sessions"], ("sessions",)),
    ],
)
def test_queries_are_read_from_names(text, chosen):
    assert PipelineConfig.build(input_dir=Path("in"), queries=text).queries == chosen
