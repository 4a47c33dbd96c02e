"""The HTML report and the report's calendar on the real NASA day, as a user runs them:
``logstream batch NASA_access_log_Jul95_day09.log.gz --html … --json …`` with no other option.

* The calendar defaults to the log's own offset (-0400), as GoAccess: the day is one day.
* Every tile and title of the HTML page fits its box at a 1400 px viewport in Debian's
  Chromium (``/usr/bin/chromium``, driven by Playwright; its own browser download is never
  used): no element's content is wider than the element (``scrollWidth <= clientWidth``).
* The visitor sessions of the terminal and the JSON are on the HTML page too; the README's
  list of JSON keys names every key of the report.
"""

from __future__ import annotations

import copy
import gzip
import ipaddress
import json
import os
import re
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests import oracle
from tests.dashboard.helpers import chromium
from tests.report.test_goaccess_parity import goaccess_binary

from logstream.cli import main
from logstream.parsing import compile_format, parse
from logstream.report import REPORT_KEYS, build_report, render_html
from logstream.report.panels import PANELS, STATIC_EXTENSIONS
from logstream.sources import read_lines

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")  # never fetch a browser

REPO = Path(__file__).resolve().parents[2]
#: Everything that must fit its box: the tiles, their labels and values, the titles.
TILES_AND_TITLES = ".card, .card *, h1, h2, h3"


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def nasa_cli(spark, nasa_day, tmp_path_factory) -> tuple[dict, str]:
    """The JSON report and the HTML page of ``logstream batch`` on the NASA day, defaults."""
    out = tmp_path_factory.mktemp("nasa-report")
    args = ["batch", str(nasa_day), "--quiet", "--json", str(out / "r.json")]
    assert main([*args, "--html", str(out / "r.html")]) == 0
    return json.loads((out / "r.json").read_text()), (out / "r.html").read_text()


@pytest.fixture(scope="module")
def goaccess_nasa(nasa_day, tmp_path_factory) -> dict:
    """Debian's ``goaccess`` 1.7 on the NASA day (its ``COMMON`` format; host names are not
    addresses, hence ``--no-ip-validation``), as JSON."""
    out = tmp_path_factory.mktemp("goaccess-nasa") / "report.json"
    subprocess.run(
        [
            *(goaccess_binary(), "-", "--log-format=COMMON", "--no-ip-validation"),
            *("--no-progress", "--max-items=5000", "-o", str(out)),
        ],
        input=gzip.decompress(nasa_day.read_bytes()),
        check=True,
        capture_output=True,
    )
    return json.loads(out.read_bytes().decode("utf-8", "replace"))


def _goaccess_total(panel: dict, metric: str) -> int:
    """A metric's total over a GoAccess panel's items (GoAccess 1.7's ``metadata``)."""
    return panel["metadata"][metric]["total"]["value"]


def test_the_general_figures_are_goaccess_s_on_the_nasa_day(nasa_cli, goaccess_nasa):
    """Issue 54 items 4 and 5, as ``make report`` runs it: the HTML card said 2,554 unique
    visitors and the per-day table 2,535; ``unique_not_found`` counted distinct 404 paths.
    Both are GoAccess's now, under GoAccess's names; hosts per day is a figure of its own,
    with its own label in the terminal, the JSON and the HTML."""
    report, page = nasa_cli
    g, theirs = report["general"], goaccess_nasa["general"]
    assert g["unique_visitors"] == theirs["unique_visitors"] == 2_535
    assert g["unique_visitors"] == report["visitors"]["metadata"]["visitors"]
    assert sum(d["visitors"] for d in report["visitors"]["data"]) == 2_535
    assert g["unique_not_found"] == theirs["unique_not_found"] == 149
    assert g["unique_not_found"] == report["not_found"]["metadata"]["items"]
    assert g["hosts_per_day"] == 2_554  # every host of the one day, 4xx answers included
    assert "Unique visitors<b>2,535</b>" in page and "Hosts per day<b>2,554</b>" in page
    assert "2,554" not in page.split("Hosts per day", 1)[0]


def test_a_request_line_without_a_valid_protocol_is_the_request_dash(nasa_cli, goaccess_nasa):
    """Issue 54 item 6: ``"GET /images/x.gif"`` and ``HTTP/V1.0`` (48 lines of the NASA day)
    are GoAccess's request ``-`` (no method, no protocol), not static files keyed by path."""
    report, _ = nasa_cli
    for panel in ("static_requests", "not_found"):
        ours, theirs = report[panel]["metadata"], goaccess_nasa[panel]
        assert (ours["hits"], ours["items"], ours["bytes"]) == (
            _goaccess_total(theirs, "hits"),
            _goaccess_total(theirs, "data"),
            _goaccess_total(theirs, "bytes"),
        ), panel
    dash = [i for i in report["not_found"]["data"] if i["data"] == "-"]
    assert [(i["hits"], i.get("method"), i.get("protocol")) for i in dash] == [(6, None, None)]
    assert not [i for i in report["static_requests"]["data"] if i["data"] == "-"]


def test_a_log_without_user_agents_has_empty_os_and_browser_panels(nasa_cli, goaccess_nasa):
    """Issue 54 item 7: a Common log gave OS and browser panels of one ``Unknown`` item
    holding every hit; GoAccess (and the stream) leave them empty."""
    report, page = nasa_cli
    for name in ("os", "browsers"):
        assert goaccess_nasa[name]["data"] == []
        assert report[name] == {
            "metadata": {"hits": 0, "visitors": 0, "bytes": 0, "items": 0},
            "data": [],
        }
    assert ">Unknown<" not in page.split('id="panel-os"', 1)[1].split('id="panel-geolocation"')[0]


# -- item 10: the calendar in the log's own offset ------------------------------------------------


def test_the_calendar_defaults_to_the_logs_own_offset_one_nasa_day(nasa_cli, nasa_day):
    report, page = nasa_cli
    refs, bad = oracle.parse_file(nasa_day)
    g = report["general"]
    assert g["failed_requests"] == len(bad) == 0
    assert g["valid_requests"] == 35_272 == len(refs)
    # one calendar day, as written in the log (the UTC calendar makes it two)
    assert [d["day"] for d in report["top_content_pages_by_day"]] == ["1995-07-09"]
    hours = report["hourly"]
    assert len(hours) == 24 and {h["hour"][:10] for h in hours} == {"1995-07-09"}
    assert hours[0]["hour"] == "1995-07-09T00:00:00-04:00"
    assert sum(h["requests"] for h in hours) == 35_272 - g["failed_requests"]
    assert (g["time_zone"], g["time_zone_source"]) == ("-04:00", "log")
    assert g["log_offsets"] == {"-04:00": 35_272}
    assert g["first_event"] == "1995-07-09T00:00:00-04:00"
    assert g["last_event"] == "1995-07-09T23:59:59-04:00"
    # hosts per day: one day, so every host once
    assert g["hosts_per_day"] == len({r.client_host for r in refs})
    assert "calendar in -04:00 (the log's own offset)" in page


def test_each_line_keeps_the_date_written_in_it_across_a_change_of_offset(spark, tmp_path):
    """A log across a change of daylight saving time: each line's day is its own date (as
    GoAccess reads it), the hours are in the most common offset, and --time-zone overrides."""
    log = tmp_path / "dst.log"
    log.write_text(
        'a - - [09/Jul/1995:23:30:00 -0400] "GET /a.html HTTP/1.0" 200 1\n'
        'b - - [09/Jul/1995:23:40:00 -0400] "GET /a.html HTTP/1.0" 200 1\n'
        'c - - [10/Jul/1995:00:30:00 -0500] "GET /b.html HTTP/1.0" 200 1\n'  # 05:30Z
        "garbage\n"
    )

    def report(time_zone: str | None) -> dict:
        parsed = parse(read_lines(spark, [log]), compile_format("common"))
        return build_report(parsed, time_zone=time_zone)

    own = report(None)
    assert [d["day"] for d in own["top_content_pages_by_day"]] == ["1995-07-09", "1995-07-10"]
    assert own["general"]["log_offsets"] == {"-04:00": 2, "-05:00": 1}
    assert own["general"]["time_zone"] == "-04:00"
    assert own["general"]["last_event"] == "1995-07-10T01:30:00-04:00"
    utc = report("UTC")
    assert [d["day"] for d in utc["top_content_pages_by_day"]] == ["1995-07-10"]
    assert (utc["general"]["time_zone"], utc["general"]["time_zone_source"]) == ("UTC", "option")
    assert "log_offsets" not in utc["general"]


# -- item 9: visitor sessions on the HTML page; the README's JSON keys ----------------------------


def test_the_html_page_shows_the_visitor_sessions_of_the_json(nasa_cli):
    report, page = nasa_cli
    v = report["sessions"]
    assert v["sessions"] > 3000
    section = page.split('<div class="grid" id="sessions">', 1)[1].split("</div></div>", 1)[0]
    for label, value in [
        ("Sessions (30-minute gap)", f"{v['sessions']:,}"),
        ("Median duration", f"{v['median_duration_s']:,} s"),
        ("95th percentile duration", f"{v['p95_duration_s']:,} s"),
        ("Bounce rate", f"{v['bounce_rate']:.1%}"),
        ("Pages per session", f"{v['pages_per_session']:.2f}"),
    ]:
        assert f"{label}<b>{value}</b>" in section


def test_the_readme_names_every_top_level_key_of_the_json_report():
    readme = (REPO / "README.md").read_text()
    listed = readme.split("`--json` writes it with stable keys", 1)[1].split(");", 1)[0]
    named = {k.split(".")[0] for k in re.findall(r"`([a-z_.]+)`", listed)}
    assert named == set(REPORT_KEYS), set(REPORT_KEYS) ^ named


# -- item 8: no clipped tile or title at 1400 px --------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.parametrize("zone", ["log", "UTC"])
def test_no_tile_or_title_of_the_html_report_is_clipped_at_1400_px(
    nasa_cli, browser, tmp_path, zone
):
    report, page_html = nasa_cli
    if zone == "UTC":  # the tiles of --time-zone UTC: 1995-07-09T04:00:00+00:00 …
        report = copy.deepcopy(report)
        g = report["general"]
        for key in ("first_event", "last_event"):
            g[key] = datetime.fromisoformat(g[key]).astimezone(UTC).isoformat()
        page_html = render_html(report)
        assert "1995-07-09T04:00:00+00:00" in json.dumps(g)
    path = tmp_path / "report.html"
    path.write_text(page_html)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(path.as_uri())
        boxes = page.evaluate(
            """sel => [...document.querySelectorAll(sel)].map(e => ({
                text: e.textContent.trim().slice(0, 60), tag: e.tagName,
                scroll: e.scrollWidth, client: e.clientWidth,
                right: e.getBoundingClientRect().right,
                parent: e.parentElement.getBoundingClientRect().right}))""",
            TILES_AND_TITLES,
        )
    finally:
        context.close()
    texts = [b["text"] for b in boxes]
    assert any(t.startswith("First event") for t in texts)
    assert any(t.startswith("Sessions (30-minute gap)") for t in texts)
    clipped = [b for b in boxes if b["scroll"] > b["client"]]
    assert not clipped, clipped
    # nothing spills out of its tile either
    spilled = [b for b in boxes if b["tag"] == "B" and b["right"] > b["parent"] + 0.5]
    assert not spilled, spilled


# -- GoAccess's panels on a log without user agents or referrers --------------------------------

STATIC = re.compile(r"(?i).\.(?:" + "|".join(e.lstrip(".") for e in STATIC_EXTENSIONS) + r")$")


def test_goaccess_panels_of_the_nasa_day_equal_an_independent_count(nasa_cli, nasa_day):
    report, page = nasa_cli
    refs, _ = oracle.parse_file(nasa_day)
    counted = [r for r in refs if not 400 <= r.status < 500]  # 4xx makes no visitor
    day = report["visitors"]["data"]
    assert day == [
        {
            "data": "1995-07-09",
            "hits": 35_272,
            "visitors": len({r.client_host for r in counted}),
            "bytes": oracle.bandwidth(refs),
        }
    ]
    hosts: dict[str, list] = {}
    for r in refs:
        h = hosts.setdefault(r.client_host, [0, 0, 0])
        h[0] += 1
        h[1] += r.bytes_sent
        h[2] = h[2] or int(not 400 <= r.status < 500)
    want = sorted(hosts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:10]
    got = [(i["data"], [i["hits"], i["bytes"], i["visitors"]]) for i in report["hosts"]["data"]]
    assert got == want
    assert report["hosts"]["metadata"]["items"] == len(hosts)
    static = Counter(
        oracle.request_key(r)
        for r in refs
        if r.status != 404 and STATIC.search(oracle.request_key(r)[0])
    )
    meta = report["static_requests"]["metadata"]
    assert (meta["hits"], meta["items"]) == (static.total(), len(static))
    for item in report["static_requests"]["data"]:
        assert item["hits"] == static[(item["data"], item["method"], item["protocol"])]
    assert report["not_found"]["metadata"]["hits"] == sum(r.status == 404 for r in refs)
    assert report["not_found"]["metadata"]["visitors"] == 0
    for name in ("os", "browsers"):  # no user agent: nothing to classify (as GoAccess)
        assert report[name]["data"] == []
    # geolocation: a host name is never looked up; an address is located (pinned: 199.72.81.55)
    named = [r for r in refs if not _is_address(r.client_host)]
    unresolved = {
        "data": "Unresolved",
        "hits": len(named),
        "visitors": len({r.client_host for r in named if not 400 <= r.status < 500}),
        "bytes": oracle.bandwidth(named),
    }
    got = next(i for i in report["geolocation"]["data"] if i["data"] == "Unresolved")
    assert got == {**unresolved, "items": [unresolved]}
    assert report["geolocation"]["metadata"]["hits"] == 35_272
    america = next(i for i in report["geolocation"]["data"] if i["data"] == "NA North America")
    assert "US United States" in {c["data"] for c in america["items"]}
    for name in ("referrers", "referring_sites", "remote_user"):
        assert report[name] == {
            "metadata": {"hits": 0, "visitors": 0, "bytes": 0, "items": 0},
            "data": [],
        }
    for name in PANELS:
        assert f'id="panel-{name}"' in page


@pytest.mark.parametrize("path", ["driver", "spark"])
def test_the_stream_keys_a_request_without_a_valid_protocol_as_the_report_does(
    spark, nasa_cli, nasa_day, tmp_path, path
):
    """Issue 54 item 6, in the stream: its not-found and static-file panels (the store's live
    view of ``traffic_by_panel``), summed over the NASA day, are the report's items, the
    request ``-`` among them, on the live path and through the Spark steps."""
    import sqlite3

    from tests.pipeline.helpers import config, nasa_lines, pipeline_for, run_to_end, write_chunks

    write_chunks(nasa_lines(nasa_day), tmp_path / "in", per_file=18_000)
    cfg = config(tmp_path, tmp_path / "in", queries="traffic_by_panel", store_retention="30 days")
    pipeline = run_to_end(pipeline_for(spark, cfg, spark_steps=path == "spark"))
    assert pipeline.ingest.paths[path] == 2
    with sqlite3.connect(cfg.store_path) as store:
        rows = store.execute(
            "SELECT dimension, key, SUM(requests) FROM traffic_by_dimension "
            "WHERE dimension IN ('static_requests', 'not_found') GROUP BY dimension, key"
        ).fetchall()
    got = {(panel, key): hits for panel, key, hits in rows}
    report, _ = nasa_cli
    # the report keys a request by its method too (a HEAD apart from a GET) and lists its top
    # items: the totals, and the request "-" the 48 lines without a valid protocol make
    for panel in ("static_requests", "not_found"):
        hits = sum(v for (p, _), v in got.items() if p == panel)
        assert hits == report[panel]["metadata"]["hits"], panel
    dash = [i["hits"] for i in report["not_found"]["data"] if i["data"] == "-"]
    assert got[("not_found", "-")] == sum(dash) == 6
    assert ("static_requests", "-") not in got
