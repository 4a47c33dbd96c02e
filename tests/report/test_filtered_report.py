"""A filtered batch report (``logstream batch --since/--until/--filter/--grep``) equals an
independent count in plain Python over the same lines, one test per form of the filter, on
the real elastic Combined log (10,000 lines, 2015-05-17 to 2015-05-20)."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from datetime import UTC, datetime

import pytest
from tests.conftest import COMBINED, data_file

from logstream.filters import EventFilter
from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.report.filtering import filtered_rows
from logstream.sources import read_lines

_LINE = re.compile(
    r'^(?P<host>\S+) \S+ (?P<user>\S+) \[(?P<time>[^\]]+)\] "(?P<method>\S+) (?P<target>\S+)'
    r' (?P<protocol>[^"]+)" (?P<status>\d{3}) (?P<bytes>\d+|-) "(?P<referrer>[^"]*)" '
    r'"(?P<agent>[^"]*)"?$'
)


@pytest.fixture(scope="module")
def lines() -> list[str]:
    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\n") for line in fh]


def oracle(lines: list[str], keep) -> dict:
    """Totals and top URLs of the lines ``keep(line, fields)`` keeps, counted in Python."""
    urls: Counter[str] = Counter()
    total = size = 0
    for line in lines:
        m = _LINE.match(line)
        assert m, line  # every line of the sample parses (one lacks its closing quote)
        f = m.groupdict()
        f["t"] = datetime.strptime(f["time"], "%d/%b/%Y:%H:%M:%S %z").astimezone(UTC)
        f["status"] = int(f["status"])
        if not keep(line, f):
            continue
        total += 1
        size += 0 if f["bytes"] == "-" else int(f["bytes"])
        urls[f["target"].split("?", 1)[0]] += 1
    top = sorted(urls.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {"total": total, "bytes": size, "top": top, "urls": len(urls)}


def report_of(spark, flt: EventFilter) -> dict:
    parsed = parse(read_lines(spark, [str(data_file(COMBINED))]), compile_format("combined"))
    rows = filtered_rows(parsed, flt)
    report = build_report(rows.rows, top=5, panels=())
    report["general"]["filtered_out"] = rows.left_out()
    return report


def check(report: dict, want: dict) -> None:
    g = report["general"]
    assert (g["total_requests"], g["valid_requests"], g["failed_requests"]) == (
        want["total"],
        want["total"],
        0,
    )
    assert g["bandwidth_bytes"] == want["bytes"]
    assert g["unique_urls"] == want["urls"]
    assert [(u["url_path"], u["requests"]) for u in report["top_urls"]] == want["top"]
    assert g["filtered_out"] == 10_000 - want["total"]
    assert 0 < want["total"] < 10_000  # the filter kept some lines and left some out


def test_a_time_range_keeps_the_events_from_since_to_until(spark, lines):
    since, until = datetime(2015, 5, 18, 6, tzinfo=UTC), datetime(2015, 5, 18, 18, tzinfo=UTC)
    flt = EventFilter.build("2015-05-18T06:00:00Z", "2015-05-18 18:00")
    check(report_of(spark, flt), oracle(lines, lambda line, f: since <= f["t"] < until))


def test_a_relative_since_counts_back_from_now(spark, lines):
    now = datetime(2015, 5, 20, 12, tzinfo=UTC)
    flt = EventFilter.build("36h", now=now)
    since = datetime(2015, 5, 19, 0, tzinfo=UTC)
    check(report_of(spark, flt), oracle(lines, lambda line, f: f["t"] >= since))


def test_repeated_expressions_combine_with_and(spark, lines):
    flt = EventFilter.build(
        filters=[
            "status >= 300 OR url_path LIKE '/blog/%'",
            "NOT user_agent RLIKE '(?i)bot|spider' AND method = 'GET'",
        ]
    )
    bots = re.compile("(?i)bot|spider")

    def keep(line, f):
        first = f["status"] >= 300 or f["target"].split("?")[0].startswith("/blog/")
        # SQL's three values: a missing user agent ("-", null) makes NOT … RLIKE null, not true
        human = f["agent"] != "-" and not bots.search(f["agent"])
        return first and human and f["method"] == "GET"

    check(report_of(spark, flt), oracle(lines, keep))


def test_grep_keeps_the_lines_whose_raw_text_matches(spark, lines):
    flt = EventFilter.build(greps=[r"Firefox/\d+", "HTTP/1\\.1"])
    pattern = [re.compile(r"Firefox/\d+"), re.compile(r"HTTP/1\.1")]
    check(
        report_of(spark, flt), oracle(lines, lambda line, f: all(p.search(line) for p in pattern))
    )


@pytest.mark.parametrize(
    "flt",
    [EventFilter.build(greps=["zzzz"]), EventFilter.build(filters=["status = 502"])],
    ids=["grep", "filter"],
)
def test_a_filter_that_keeps_no_line_gives_an_empty_report(spark, flt):
    # an empty stage: Spark's adaptive optimizer drops the observed counts (SPARK-54620)
    report = report_of(spark, flt)
    g = report["general"]
    assert (g["total_requests"], g["filtered_out"]) == (0, 10_000)
    assert report["top_urls"] == []
