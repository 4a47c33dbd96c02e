"""Count-min heavy hitters (:mod:`logstream.analytics.heavy`) against exact counts of the
real NASA day, computed here in plain Python (:mod:`tests.oracle`)."""

from __future__ import annotations

from collections import Counter

import pytest

from logstream.analytics.heavy import heavy_hitters
from logstream.parsing import events, parse, resolve_format
from logstream.sources import read_lines
from tests.oracle import parse_line
from tests.pipeline.helpers import nasa_lines

HOUR_MS = 3_600_000
WEEK_MS = 7 * 86_400_000  # the NASA day (UTC−4) spans two UTC days, one week pane


@pytest.fixture(scope="module")
def day(spark, nasa_day):
    parsed = parse(read_lines(spark, [str(nasa_day)]), resolve_format("common"))
    cached = events(parsed).select("event_time", "url_path", "client_host").cache()
    refs = [parse_line(line) for line in nasa_lines(nasa_day)]
    yield cached, [r for r in refs if r is not None]
    cached.unpersist()


def top(counts: Counter, k: int) -> list[str]:
    return [key for key, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def test_the_heavy_hitters_of_the_nasa_day_are_its_exact_top_10_within_the_bound(day):
    """Hour panes: 24 sketches and at most 40 candidates each. Each estimate is at least the
    exact count and at most the stated bound above it, and the ranking is the exact one."""
    frame, refs = day
    exact = Counter(r.url_path for r in refs if r.url_path is not None)
    found = heavy_hitters(frame, "url_path", 10, pane_ms=HOUR_MS)
    assert found.total == sum(exact.values()) == 35_272
    assert found.error_bound == 36  # ⌈0.001 × 35,272⌉
    assert found.panes == 24 and found.candidates <= 24 * 40
    for item in found.items:
        assert exact[item.key] <= item.estimate <= exact[item.key] + found.error_bound
        assert item.lower_bound == item.estimate - found.error_bound
    assert [i.key for i in found.items] == top(exact, 10)


def test_a_coarse_sketch_overcounts_but_within_its_bound(day):
    """``eps`` 0.05: 40 counters a row for 3,000 hosts, so estimates exceed the exact counts,
    each by less than the bound (the seed is fixed: the same sketch every run)."""
    frame, refs = day
    exact = Counter(r.client_host for r in refs)
    found = heavy_hitters(frame, "client_host", 5, eps=0.05, pane_ms=WEEK_MS)
    assert found.panes == 1 and found.error_bound == 1764  # ⌈0.05 × 35,272⌉
    over = [item.estimate - exact[item.key] for item in found.items]
    assert all(0 <= o <= found.error_bound for o in over)
    assert max(over) > 0


def test_bad_parameters_are_rejected(day):
    with pytest.raises(ValueError, match="eps=2"):
        heavy_hitters(day[0], "url_path", 10, eps=2)
