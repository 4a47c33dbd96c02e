"""The batch report on the real NASA day equals an independent computation."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC

import pytest
from tests import oracle
from tests.conftest import NO_PANELS

from logstream.cli import main
from logstream.parsing import compile_format, parse
from logstream.report import REPORT_KEYS, build_report, render_html
from logstream.sources import read_lines

GENERAL_KEYS = {
    "total_requests",
    "valid_requests",
    "failed_requests",
    "unique_visitors",
    "hosts_per_day",
    "unique_urls",
    "unique_not_found",
    "bandwidth_bytes",
    "first_event",
    "last_event",
}


@pytest.fixture(scope="module")
def nasa_report(spark, nasa_day):
    parsed = parse(read_lines(spark, [nasa_day]), compile_format("common"))
    # the UTC calendar on purpose (the default is the log's own offset: test_nasa_day_report)
    return build_report(
        parsed,
        top=10,
        time_zone="UTC",
        log_format="common",
        inputs=[str(nasa_day)],
        protocol_required=True,  # as logstream batch passes it for a format with %r
    )


@pytest.fixture(scope="module")
def nasa_refs(nasa_day):
    refs, bad = oracle.parse_file(nasa_day)
    assert not bad
    return refs


def test_general_statistics_equal_the_oracle(nasa_report, nasa_refs):
    g = nasa_report["general"]
    assert GENERAL_KEYS <= set(g)
    assert g["total_requests"] == 35272 == len(nasa_refs)
    assert g["valid_requests"] == 35272 and g["failed_requests"] == 0
    assert g["bandwidth_bytes"] == oracle.bandwidth(nasa_refs)
    assert g["unique_not_found"] == oracle.unique_not_found(nasa_refs)
    assert g["unique_visitors"] == oracle.unique_visitors_utc(nasa_refs)
    assert g["hosts_per_day"] == oracle.hosts_per_day_utc(nasa_refs)
    assert g["unique_urls"] == len({r.url_path for r in nasa_refs})
    assert g["first_event"] == "1995-07-09T04:00:00+00:00"
    assert g["last_event"] == "1995-07-10T03:59:59+00:00"
    assert g["duplicates_dropped"] is None  # every line counts unless asked


def test_status_codes_and_classes_equal_the_oracle(nasa_report, nasa_refs):
    assert nasa_report["status_classes"] == oracle.status_classes(nasa_refs)
    assert nasa_report["status_codes"] == {
        str(k): v for k, v in sorted(Counter(r.status for r in nasa_refs).items())
    }


def test_top_tables_equal_the_oracle(nasa_report, nasa_refs):
    urls = Counter(r.url_path for r in nasa_refs)
    expected = sorted(urls.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert [(u["url_path"], u["requests"]) for u in nasa_report["top_urls"]] == expected
    hosts = Counter(r.client_host for r in nasa_refs)
    assert [(h["client_host"], h["requests"]) for h in nasa_report["top_hosts"]] == sorted(
        hosts.items(), key=lambda kv: (-kv[1], kv[0])
    )[:10]
    missing = Counter(r.url_path for r in nasa_refs if r.status == 404)
    assert [(u["url_path"], u["requests"]) for u in nasa_report["top_not_found"]] == sorted(
        missing.items(), key=lambda kv: (-kv[1], kv[0])
    )[:10]


def test_top_content_pages_per_utc_day_equal_the_oracle(nasa_report, nasa_refs):
    per_day: dict[str, Counter] = {}
    for r in nasa_refs:
        if oracle.is_content(r.url_path):
            day = r.event_time.astimezone(UTC).date().isoformat()
            per_day.setdefault(day, Counter())[r.url_path] += 1
    got = {
        d["day"]: [(p["url_path"], p["requests"]) for p in d["pages"]]
        for d in nasa_report["top_content_pages_by_day"]
    }
    assert got == {
        day: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:10] for day, c in per_day.items()
    }
    assert got["1995-07-09"][0] == ("/ksc.html", 557)


def test_hourly_traffic_equals_the_oracle(nasa_report, nasa_refs):
    hours = Counter(r.epoch // 3600 for r in nasa_refs)
    assert len(nasa_report["hourly"]) == 24
    assert [h["requests"] for h in nasa_report["hourly"]] == [hours[k] for k in sorted(hours)]


def test_report_keys_are_stable_and_json_serialisable(nasa_report):
    assert tuple(nasa_report) == REPORT_KEYS
    assert json.loads(json.dumps(nasa_report, default=str))["general"]["total_requests"] == 35272


def test_html_report_is_self_contained_with_charts(nasa_report):
    page = render_html(nasa_report)
    assert "35,272" in page and "/ksc.html" in page
    assert page.count('class="plotly-graph-div"') == 3
    assert not re.search(r"""<script[^>]+src=["']https?:""", page), "no CDN script"
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # plotly.js embedded


def test_cli_batch_writes_json_html_and_quarantine(spark, nasa_day, tmp_path, capsys):
    bad = tmp_path / "with-garbage.log"
    bad.write_text('h - - [09/Jul/1995:00:00:00 -0400] "GET /a.html HTTP/1.0" 200 10\ngarbage\n')
    code = main(
        [
            "batch",
            str(bad),
            "--format",
            "common",
            "--json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "r.html"),
            "--quarantine",
            str(tmp_path / "q"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["general"]["failed_requests"] == 1
    assert report["quarantine"]["reasons"] == {"format_mismatch": 1}
    rows = [
        json.loads(line)
        for f in (tmp_path / "q").glob("part-*.json")
        for line in f.read_text().splitlines()
    ]
    assert rows == [
        {
            "raw_line": "garbage",
            "source_file": bad.as_uri().replace("file:///", "file:/"),
            "reason": "format_mismatch",
        }
    ]
    assert (tmp_path / "r.html").stat().st_size > 1_000_000
    printed = capsys.readouterr().out
    assert "logstream batch report" in printed
    assert "Spark stage" not in printed  # standard output is not a terminal: no progress bar


def test_drop_duplicates_counts_each_distinct_line_once_as_the_stream_does(
    spark, nasa_day, tmp_path, capsys
):
    lines = oracle.read_lines(nasa_day)
    twins = len(lines) - len(set(lines))
    assert twins == 10
    out = tmp_path / "r.json"
    args = ["batch", str(nasa_day), "--drop-duplicates", "--json", str(out)]
    assert main([*args, *NO_PANELS]) == 0  # the totals, not the panels
    assert "on: 10 identical lines dropped" in capsys.readouterr().out
    g = json.loads(out.read_text())["general"]
    # 35,262: what logstream run --dedup reports for the same day
    assert g["duplicates_dropped"] == twins
    assert g["total_requests"] == g["valid_requests"] == len(set(lines)) == 35262
    # the repeated lines are whole requests: the bandwidth drops by theirs
    refs = dict(zip(lines, oracle.parse_file(nasa_day)[0], strict=True))
    assert g["bandwidth_bytes"] == oracle.bandwidth(list(refs.values()))


def test_time_zone_option_moves_the_calendar(spark, nasa_day, tmp_path):
    code = main(
        [
            "batch",
            str(nasa_day),
            "--quiet",
            "--time-zone",
            "America/New_York",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [d["day"] for d in report["top_content_pages_by_day"]] == ["1995-07-09"]
    assert report["hourly"][0]["hour"] == "1995-07-09T00:00:00-04:00"
    assert report["general"]["hosts_per_day"] == len(
        {r.client_host for r in oracle.parse_file(nasa_day)[0]}
    )


def test_session_summary_equals_a_plain_python_sessionization(nasa_report, nasa_refs):
    from tests.analytics.test_sessions import python_sessions

    expected = python_sessions(nasa_refs)
    v = nasa_report["sessions"]
    assert v["sessions"] == len(expected) > 3000
    assert v["bounce_rate"] == pytest.approx(sum(s[8] for s in expected) / len(expected), 1e-5)
    assert v["pages_per_session"] == pytest.approx(
        sum(s[4] for s in expected) / len(expected), abs=1e-3
    )
    durations = sorted(s[2] - s[1] for s in expected)
    for quantile, key in ((0.5, "median_duration_s"), (0.95, "p95_duration_s")):
        rank = sum(d <= v[key] for d in durations) / len(durations)
        assert abs(rank - quantile) <= 0.02, (key, rank)  # KLL k=200: about 1.3 % rank error


def test_quarantine_keeps_every_copy_of_a_bad_line_in_input_order(spark, tmp_path):
    good = 'h - - [09/Jul/1995:00:00:00 -0400] "GET /a.html HTTP/1.0" 200 10'
    lines = [
        "garbage",
        good,
        "second",
        "garbage",
        'h - - [99/Jul/1995:00:00:00 -0400] "GET / HTTP/1.0" 200 1',
        "garbage",
        good,
        "tail",
    ]
    log = tmp_path / "bad.log"
    log.write_text("\n".join(lines) + "\n")
    report = build_report(
        parse(read_lines(spark, [log]), compile_format("common")),
        quarantine_path=str(tmp_path / "q"),
    )
    bad = [(line, "bad_timestamp" if line.startswith("h ") else "format_mismatch")
           for line in lines if line != good]  # fmt: skip
    assert report["quarantine"]["reasons"] == {"bad_timestamp": 1, "format_mismatch": 5}
    assert report["general"]["failed_requests"] == 6 and report["general"]["valid_requests"] == 2
    examples = report["quarantine"]["examples"]
    assert [(e["raw_line"], e["reason"]) for e in examples] == bad[:5]
    written = [
        json.loads(line)
        for f in sorted((tmp_path / "q").glob("part-*.json"))
        for line in f.read_text().splitlines()
    ]
    assert [(r["raw_line"], r["reason"]) for r in written] == bad


def test_no_word_is_split_when_the_report_is_not_on_a_terminal(nasa_report, capsys):
    """Issue 54 item 19: written to a file or a pipe, the tables were folded at 80 columns
    in the middle of words (``/images/NASA-logosmall.gi⏎f``). Off a terminal the tables take
    their own width: each cell is whole on its line."""
    from logstream.report import render_terminal

    render_terminal(nasa_report)  # standard output is pytest's capture, not a terminal
    out = capsys.readouterr().out
    cells = [
        *(u["url_path"] for u in nasa_report["top_urls"]),
        *(i["data"] for i in nasa_report["static_requests"]["data"]),
        *(h["client_host"] for h in nasa_report["top_hosts"]),
    ]
    assert "/images/NASA-logosmall.gif" in cells
    for cell in cells:
        assert re.search(rf"(^|[ │]){re.escape(cell)}([ │]|$)", out, flags=re.M), cell
