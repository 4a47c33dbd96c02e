"""New and returning visitors from Bloom filters (:mod:`logstream.analytics.returning`)
against the exact count, in plain Python, on the real elastic Combined log (4 days)."""

from __future__ import annotations

import pytest

from logstream.analytics.returning import returning_visitors
from logstream.parsing import events, parse, resolve_format
from logstream.sources import read_lines


@pytest.fixture(scope="module")
def elastic(spark, combined_log):
    parsed = parse(read_lines(spark, [str(combined_log)]), resolve_format("combined"))
    frame = events(parsed).select("event_time", "client_host", "user_agent").cache()
    rows = frame.collect()
    yield frame, rows
    frame.unpersist()


def exact(rows) -> dict[str, tuple[int, int]]:
    """Per UTC day: (distinct visitors, those seen on an earlier day)."""
    by_day: dict[str, set] = {}
    for r in rows:
        day = r["event_time"].strftime("%Y-%m-%d")
        by_day.setdefault(day, set()).add((r["client_host"], r["user_agent"] or "-"))
    seen: set = set()
    out = {}
    for day in sorted(by_day):
        out[day] = (len(by_day[day]), len(by_day[day] & seen))
        seen |= by_day[day]
    return out


def test_a_well_sized_filter_counts_the_returning_visitors_of_each_day(elastic):
    """Sized for 10,000 visitors at 1 %: every returning visitor is found (no false
    negative), and the new ones taken for returning stay within a few times fpp × new."""
    frame, rows = elastic
    want = exact(rows)
    got = returning_visitors(frame, expected=10_000, fpp=0.01)
    assert [d.day for d in got] == sorted(want) and len(got) == 4
    for d in got:
        visitors, returning = want[d.day]
        assert d.visitors == visitors and d.new == visitors - d.returning
        assert returning <= d.returning <= returning + 3 * 0.01 * (visitors - returning) + 2
    assert got[0].returning == 0 and sum(w[1] for w in want.values()) > 200


def test_an_overfull_filter_takes_more_new_visitors_for_returning(elastic):
    """Sized for 500 visitors (the log has about 1,700): still no false negative, but many
    new visitors look returning, the cost of a filter too small."""
    frame, rows = elastic
    want = exact(rows)
    got = returning_visitors(frame, expected=500, fpp=0.05)
    excess = [d.returning - want[d.day][1] for d in got]
    assert all(e >= 0 for e in excess)
    assert sum(excess) > 100


def test_bad_parameters_are_rejected(elastic):
    with pytest.raises(ValueError, match=r"fpp=1\.5"):
        returning_visitors(elastic[0], fpp=1.5)
