"""``logstream batch --compare`` on the 31-day input: a week against the week before, each
table's items side by side; every delta equals the difference of two counts made apart, in
plain Python over the same lines."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest
from tests.pipeline.helpers import load_bench

from logstream.filters import EventFilter
from logstream.parsing import compile_format
from logstream.report.filtering import Filtering, filtered_report
from logstream.sources import read_lines

SINCE, UNTIL = "1995-07-05T16:00:00Z", "1995-07-12T16:00:00Z"
_CLF = re.compile(
    r'^(\S+) \S+ \S+ \[(\d\d)/Jul/1995:(\d\d):(\d\d):(\d\d) -0400\] "(?:\S+ )?([^\s"]*)'
)
_TAIL = re.compile(r'" (\d{3}) (\d+|-)$')
_T0 = int(datetime(1995, 7, 1, tzinfo=UTC).timestamp())


@pytest.fixture(scope="module")
def july():
    """The NASA day repeated over 31 days (bench/harness.py; 1,093,432 lines)."""
    return load_bench("harness").july_files(31)


def independent(files) -> dict[str, dict]:
    """Per week (``current``, ``previous``): requests and bytes in all, per URL path, per host,
    per 404 path, in plain Python."""
    start = int(datetime.fromisoformat(SINCE).timestamp())
    end = int(datetime.fromisoformat(UNTIL).timestamp())
    week = end - start
    out = {k: defaultdict(Counter) for k in ("current", "previous")}
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m, tail = _CLF.match(line), _TAIL.search(line.rstrip("\n"))
                if not m or not tail:
                    continue
                day, h, mi, s = (int(m[i]) for i in range(2, 6))
                t = _T0 + (day - 1) * 86_400 + h * 3600 + mi * 60 + s + 4 * 3600
                period = "current" if start <= t < end else "previous"
                if not start - week <= t < end:
                    continue
                size = 0 if tail[2] == "-" else int(tail[2])
                url = m[6].split("?", 1)[0]
                c = out[period]
                for table, key in (("all", ""), ("top_urls", url), ("top_hosts", m[1])):
                    c[table, "hits"][key] += 1
                    c[table, "bytes"][key] += size
                if tail[1] == "404":
                    c["top_not_found", "hits"][url] += 1
    return out


def test_a_week_against_the_week_before_has_the_deltas_of_two_counts(spark, july):
    current = EventFilter.build(SINCE, UNTIL)
    previous = current.previous("week")
    report = filtered_report(
        read_lines(spark, [str(p) for p in july]),
        compile_format("common"),
        Filtering(current, previous, None, 0.5),
        5,
        {"panels": ()},
    )
    want = independent(july)
    comparison = report["comparison"]
    general = comparison["general"]["total_requests"]
    assert general["current"] == want["current"]["all", "hits"][""] > 200_000
    assert (
        general["change"]
        == want["current"]["all", "hits"][""] - want["previous"]["all", "hits"][""]
    )
    bytes_ = comparison["general"]["bandwidth_bytes"]
    assert (
        bytes_["change"]
        == want["current"]["all", "bytes"][""] - want["previous"]["all", "bytes"][""]
    )
    flags: Counter[str | None] = Counter()
    for table in ("top_urls", "top_hosts", "top_not_found"):
        items = comparison["tables"][table]
        assert len(items) >= 5, table
        for item in items:
            key = item["data"]
            for metric in ("hits", "bytes") if table != "top_not_found" else ("hits",):
                now = want["current"][table, metric][key]
                then = want["previous"][table, metric][key]
                assert item["current"][metric] == now, (table, key, metric)
                assert item["change"][metric] == now - then, (table, key, metric)
            now, then = want["current"][table, "hits"][key], want["previous"][table, "hits"][key]
            # 7 days against 4.5 (the input begins on 07-01): up beyond +50 % of the hits
            assert item["flag"] == ("up" if now - then > 0.5 * then else None), (table, key)
            flags[item["flag"]] += 1
    assert flags["up"] > 5 and flags[None] > 0
    assert [u["url_path"] for u in report["top_urls"]] == [
        i["data"] for i in comparison["tables"]["top_urls"]
    ]
    assert comparison["ranges"]["previous"]["since_utc"] == "1995-06-28T16:00:00+00:00"


def test_the_comparison_reads_whole_on_a_narrow_terminal_and_once_in_html(capsys):
    """Issue 62 item 16: piped to a file (80 columns) the flag column was cut to "…" and the
    URLs mid-word; the totals table showed raw keys (``total_requests``); the HTML page said
    "Compared with the previous period" twice."""
    from logstream.comparison import compare_reports, comparison_html, print_comparison

    url = "/shuttle/missions/sts-71/images/KSC-95EC-0868-long-name-of-an-image.gif"

    def r(hits):
        g = {
            "total_requests": sum(hits.values()),
            "valid_requests": 0,
            "unique_visitors": 0,
            "bandwidth_bytes": 3 * 2**20,
            "unique_urls": len(hits),
        }
        return {"general": g, "top_urls": [
            {"url_path": k, "requests": v, "bytes": 0} for k, v in hits.items()]}  # fmt: skip

    comparison = compare_reports(r({url: 10, "/b": 3}), r({url: 4, "/c": 2}), top=5)
    print_comparison(comparison)
    out = capsys.readouterr().out
    assert "…" not in out.split("\n", 1)[1]  # the tables (the first line: open ranges)
    assert "Total requests" in out and "Bandwidth" in out and "total_requests" not in out
    assert " up" in out and " new" in out and " gone" in out  # every flag, whole
    first_cells = [line.split("│")[1].strip() for line in out.splitlines() if "│" in line]
    assert url in "".join(first_cells)  # folded onto lines, never cut
    page = comparison_html(comparison)
    assert page.count("Compared with the previous period") == 1


def test_a_table_without_bytes_has_no_bytes_column_instead_of_question_marks():
    """Issue 62 item 16: ``top_not_found`` counts requests per path, not their bytes, and its
    Δ bytes showed "?" on every row. A table that knows no bytes has no bytes column; one
    that knows them keeps it."""
    from logstream.comparison import compare_reports, comparison_lines

    def r(found, urls):
        g = {
            "total_requests": 9,
            "valid_requests": 9,
            "unique_visitors": 0,
            "bandwidth_bytes": 0,
            "unique_urls": len(urls),
            "unique_not_found": len(found),
        }
        return {
            "general": g,
            "top_urls": [{"url_path": k, "requests": v, "bytes": 10 * v} for k, v in urls.items()],
            "top_not_found": [{"url_path": k, "requests": v} for k, v in found.items()],
        }

    comparison = compare_reports(r({"/x": 3}, {"/a": 4}), r({"/x": 1, "/y": 2}, {"/a": 1}), top=5)
    tables = dict(comparison_lines(comparison))
    assert tables["top_not_found"][0] == ["item", "hits", "Δ hits", ""]
    assert all("?" not in cell for row in tables["top_not_found"] for cell in row)
    assert [row[0] for row in tables["top_not_found"][1:]] == ["/x", "/y"]
    assert tables["top_urls"][0] == ["item", "hits", "Δ hits", "Δ bytes", ""]
    assert tables["top_urls"][1][3] == "+30 B"
