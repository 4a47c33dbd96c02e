"""What the dashboard's per-minute charts draw for minutes without traffic, how much of the
time range each panel covers, how names break in its tables and which zone its times are in
(issue 54 items 10, 11, 19 and 14), without a browser."""

from __future__ import annotations

import itertools
from pathlib import Path

from logstream.dashboard.app import refresh_outputs
from logstream.dashboard.data import Filters, read_snapshot
from logstream.dashboard.figures import dimension_figure, requests_figure
from tests.dashboard.helpers import commit, minute, new_store, traffic_row

REPO = Path(__file__).resolve().parents[2]


def test_a_minute_without_traffic_is_zero_on_every_per_minute_chart(tmp_path):
    """Issue 54 item 10: only the buckets with rows were plotted and the line joined them,
    so a log whose lines fall in one minute an hour drew a solid area at 110–120 requests a
    minute. The minutes between are zero (the error rate, a share of no request, a gap)."""
    store = new_store(tmp_path / "s.db")
    hours = (0, 60, 120)  # one minute an hour, 115 requests in it
    traffic = [traffic_row(k, 110, s4=5) for k in hours]
    visitors = [(*minute(k), 30, None) for k in hours]
    sections = [("sections", "/images", *traffic_row(k, 110, s4=5)) for k in hours]
    commit(store, 0, traffic=traffic, visitors=visitors, dimensions=sections)
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    t = snap.traffic
    assert len(t.times) == 121 and t.bucket_s == 60  # every minute from the first to the last
    assert [t.requests_per_min[k] for k in hours] == [115.0] * 3
    assert sum(1 for r in t.requests_per_min if r == 0) == 118
    assert t.error_rate[1] is None and t.bytes_per_min[1] == 0
    assert len(snap.visitors.times) == 121 and snap.visitors.mean[1] == 0
    d = snap.sections
    assert len(d.times) == 121 and d.series["/images"][1] == 0
    stacked = requests_figure(snap)["data"][1]  # 2xx
    assert stacked["y"][1] == 0 and len(stacked["x"]) == 121
    assert dimension_figure(snap, "sections")["data"][0]["y"][30] == 0


def test_a_panel_that_covers_less_than_the_range_says_what_it_covers(tmp_path):
    """Issue 54 item 11: with "6 h" chosen on the demo's store, the site-section chart spanned
    2 hours (the store keeps the reference and panel views for --store-retention) while the
    traffic spanned 6, without a word. A panel covering less than the range says so."""
    store = new_store(tmp_path / "s.db", store_retention="2 hours")
    traffic = [traffic_row(k, 10) for k in range(360)]  # six hours
    sections = [("sections", "/images", *traffic_row(k, 10)) for k in range(240, 360)]
    countries = [("geolocation", "US United States", *traffic_row(k, 10)) for k in range(240, 360)]
    commit(store, 0, traffic=traffic, dimensions=sections + countries)
    out = refresh_outputs(tmp_path / "s.db", "6h", "", None)
    snap = read_snapshot(tmp_path / "s.db", Filters.build("6h"))
    assert snap.traffic.total_all == 3600
    figure = dimension_figure(snap, "sections")
    title = figure["layout"]["title"]["text"]
    assert "covers the last 2 h of the range" in title, title
    assert "--store-retention" in title
    page = str(out)
    assert "the last 2 h of the 6 h chosen" in page  # the GoAccess panels say it too


def test_a_long_name_in_a_table_breaks_at_a_slash_a_dot_or_a_dash():
    """Issue 54 item 19: table cells broke names anywhere (``kris.reslife.okstate.⏎edu``):
    ``word-break: break-all``. A cell of a host, path or file offers a break after each
    ``/``, ``.`` and ``-`` (``<wbr>``), and breaks elsewhere only a word with none of them."""
    from dash import html

    from logstream.dashboard.layout import CSS
    from logstream.dashboard.panels import url_cell

    cell = url_cell("kris.reslife.okstate.edu")
    parts = cell.children
    assert [p for p in parts if isinstance(p, str)] == ["kris.", "reslife.", "okstate.", "edu"]
    assert sum(isinstance(p, html.Wbr) for p in parts) == 3
    assert "".join(
        p for p in url_cell("/images/NASA-logosmall.gif").children if isinstance(p, str)
    ) == ("/images/NASA-logosmall.gif")
    rules = CSS[CSS.index("td.url") :].split("}", 1)[0]
    assert "break-all" not in rules and "overflow-wrap: anywhere" in rules


def test_times_are_shown_in_the_log_s_offset_by_default_or_in_utc(tmp_path):
    """Issue 54 item 14, a decision (docs/dashboard.md, "Times"): the dashboard showed UTC
    only while the batch report shows the log's own offset, so the NASA day's hours differed
    between the two. It shows the offset the log is written in by default (the pipeline
    records it: ``log_offset``), and UTC on request."""
    from tests.dashboard.test_panels import output
    from tests.dashboard.test_tiles import kpi

    store = new_store(tmp_path / "s.db", log_offset="-04:00")  # NASA's
    commit(store, 0, traffic=[traffic_row(k, 10) for k in range(30)])
    local = refresh_outputs(tmp_path / "s.db", "all", "", None)
    utc = refresh_outputs(tmp_path / "s.db", "all", "", None, zone="utc")
    # the newest event: 04:29:59 UTC is 00:29:59 in the log's -04:00, as the report says it
    assert kpi(local, "newest")[0] == "1995-07-09 00:29:59 -04:00"
    assert kpi(utc, "newest")[0] == "1995-07-09 04:29:59 UTC"
    figure = output(local, "graph-requests", "figure")["data"][0]
    assert figure["x"][0] == "1995-07-09 00:00:00"
    assert output(utc, "graph-requests", "figure")["data"][0]["x"][0] == "1995-07-09 04:00:00"
    title = output(local, "graph-requests", "figure")["layout"]["xaxis"]["title"]["text"]
    assert title == "event time (-04:00)"
    assert (
        "event time (UTC)"
        in output(utc, "graph-requests", "figure")["layout"]["xaxis"]["title"]["text"]
    )
    docs = (REPO / "docs" / "dashboard.md").read_text()
    assert "the offset the log is written in" in docs.split("### Times", 1)[1]


def test_the_offset_a_log_is_written_in_is_read_from_its_lines(nasa_day, combined_log, crlf_log):
    """The offset the pipeline records for the dashboard: the most common in the lines."""
    from logstream.parsing.detect import written_offset
    from tests import oracle

    assert written_offset(oracle.read_lines(nasa_day)[:100]) == "-04:00"
    assert written_offset(oracle.read_lines(combined_log)[:100]) == "+00:00"
    assert written_offset(oracle.read_lines(crlf_log)[:100]) == "-08:00"


def test_the_span_covered_counts_the_windows_written_ahead_of_the_ledger(tmp_path):
    """In the demo the first micro-batch is slow and the next one's windows are written (and
    drawn) before its ledger row: the span a panel covers runs to the last window drawn, not
    to the ledgered newest event (it said "the last -8 h 21 min")."""
    from logstream.serving import IngestBatchWrite

    store = new_store(tmp_path / "s.db", store_retention="7200 seconds")
    commit(store, 0, traffic=[traffic_row(k, 10) for k in range(60)])
    ahead = IngestBatchWrite(
        batch_id=1, events=4200, traffic=[traffic_row(k, 10) for k in range(60, 480)]
    )
    ahead.dimensions = [("sections", "/images", *traffic_row(k, 10)) for k in range(360, 480)]
    ahead.max_event_time_ms = None
    assert store.commit_ingest_views("ingest", ahead)
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    title = dimension_figure(snap, "sections")["layout"]["title"]["text"]
    assert (
        "covers the last 2 h of the range (the store keeps it for --store-retention 2 h)" in title
    )


def test_a_chart_not_computed_says_why_the_log_format_or_queries(tmp_path):
    """Issue 62 item 10: on a plain ``make run`` (the NASA day, Common format) the agents
    chart said "Not computed: the pipeline runs without traffic_by_agent." though the user
    turned nothing off: a format without user agents has no such view, and the chart says so;
    an output left out by ``--queries`` still says that."""
    traffic = [traffic_row(k, 10) for k in range(5)]
    for log_format, why in [
        ("common", "Not computed: the log format common has no user agent."),
        ("combined", "Not computed: the pipeline runs without traffic_by_agent (--queries)."),
    ]:
        path = tmp_path / f"{log_format}.db"
        store = new_store(path, log_format=log_format, queries="traffic_per_minute,trending_pages")
        commit(store, 0, traffic=traffic)
        snap = read_snapshot(path, Filters.build("all"))
        figure = dimension_figure(snap, "agents")
        texts = [a["text"] for a in figure["layout"].get("annotations", [])]
        assert why in texts or why in str(figure["layout"]), (log_format, figure["layout"])


def test_the_last_minutes_slider_s_marks_never_touch():
    """Issue 62 item 6: the marks 1, 5, 15, 30 and 60 on a slider of 1–60 put "1" and "5"
    side by side, read as "15 15 30 60". Marks are at least a sixth of the slider apart, and
    the value chosen is shown under the handle."""
    from logstream.dashboard.explore import explore_section

    def sliders(node):
        if getattr(node, "id", None) == "explore-minutes":
            yield node
        children = getattr(node, "children", None)
        for child in children if isinstance(children, list) else [children]:
            if child is not None and hasattr(child, "to_plotly_json"):
                yield from sliders(child)

    (slider,) = list(sliders(explore_section()))
    marks = sorted(slider.marks)
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    assert min(gaps) >= (slider.max - slider.min) / 6, marks
    assert slider.tooltip["always_visible"] is True


def test_an_empty_goaccess_panel_says_why_instead_of_headings_only():
    """Issue 62 item 5: under a filter "Static files" and "Not found" were tables of headings
    with no row and no word, and "Referring sites" of a log without referrers the same."""
    from types import SimpleNamespace

    from logstream.dashboard.panels import _no_items

    def snap(log_format, **filters):
        return SimpleNamespace(log_format=log_format, filters=Filters.build("all", **filters))

    assert _no_items(snap("common"), "referring_sites") == (
        "None: the log format common has no referrer."
    )
    assert _no_items(snap("combined"), "static_requests") == "None in this range."
    assert _no_items(snap("combined", status_classes=["4xx"]), "static_requests") == (
        "None under the filters chosen."
    )
    assert _no_items(snap("combined", url_prefix="/api"), "not_found") == (
        "None under the filters chosen."
    )


def test_the_site_a_url_chooses_is_an_option_of_the_site_selector():
    """Issue 62 item 2: ``/?site=b.example&minutes=15&since=1h`` set the minutes and the
    range but left the site selector on "all sites": the dropdown drops a value that none of
    its options has, and the options came from the store's rows."""
    from logstream.dashboard.explore import render_explore
    from logstream.dashboard.explore_data import Explore, ExploreView

    controls = Explore.from_query("?site=b.example&minutes=15&since=1h")
    assert (controls.site, controls.minutes, controls.since) == ("b.example", 15, "1h")
    options = render_explore(ExploreView(controls))[-1]
    assert {"label": "b.example", "value": "b.example"} in options


def test_the_last_minutes_say_that_the_filter_and_site_do_not_narrow_them():
    """Issue 62 item 1: with site b.example and ``status = 404`` chosen, "the last N minutes"
    showed 300 requests, all of c.example's, without a word: it reads the store's minute
    windows, which hold every event. It says so when a filter or a site is chosen."""
    from logstream.dashboard.explore import render_explore
    from logstream.dashboard.explore_data import Explore, ExploreView, LastMinutes

    last = LastMinutes(5, "1995-07-09T12:53:00Z", "1995-07-09T12:58:00Z", 300, {"2xx": 300})

    def hint(query):
        view = ExploreView(Explore.from_query(query), last=last)
        found = [p for p in render_explore(view)[1] if getattr(p, "id", None) == "live-unfiltered"]
        return found[0].children if found else None

    assert hint("") is None
    assert hint("?site=b.example").startswith("Every site and every request: the site chosen")
    both = hint("?site=b.example&filter=status%20%3D%20404")
    assert "the filter and the site chosen above" in both


def test_explore_shows_its_times_in_the_page_s_zone():
    """Issue 62 item 3: with "Times: the log's offset" the tiles said −04:00 while Explore
    said "12:53–12:58 UTC". Explore's times follow the page's choice."""
    from logstream.dashboard.explore import render_explore
    from logstream.dashboard.explore_data import Explore, ExploreView, LastMinutes

    last = LastMinutes(5, "1995-07-09T16:53:00Z", "1995-07-09T16:58:00Z", 10, {"2xx": 10})
    view = ExploreView(Explore(), last=last, log_offset="-04:00")

    def heading(zone):
        return render_explore(view, zone)[1][0].children

    assert heading("log") == "The last 5 minutes (12:53–12:58 -04:00)"
    assert heading("utc") == "The last 5 minutes (16:53–16:58 UTC)"
    view.log_offset = None  # a store that does not record it: UTC, said so
    assert heading("log") == "The last 5 minutes (16:53–16:58 UTC)"


def test_the_sites_heading_and_the_queries_watermark_follow_the_page_s_zone(tmp_path):
    """Issue 62 item 3: the Sites heading named no zone and the streaming-queries table
    showed the watermark in UTC beside a tile in the log's offset."""
    from logstream.dashboard.explore import render_explore
    from logstream.dashboard.explore_data import Explore, ExploreView, SiteRow
    from tests.dashboard.test_panels import output
    from tests.dashboard.test_tiles import kpi, progress, rows

    view = ExploreView(
        Explore(),
        start="1995-07-09T16:00:00Z",
        end="1995-07-09T17:00:00Z",
        sites=[SiteRow("a.example", 10, 100)],
        log_offset="-04:00",
    )
    sites = render_explore(view, "log")[2][0].children
    assert sites == "Sites (1995-07-09 12:00 – 1995-07-09 13:00 -04:00)"
    assert render_explore(view, "utc")[2][0].children.endswith("17:00 UTC)")

    store = new_store(tmp_path / "s.db", log_offset="-04:00")
    commit(store, 0, traffic=[traffic_row(k, 10) for k in range(30)])
    store.record_progress([progress(0, watermark="1995-07-09T04:19:59.000Z")])
    for zone, shown in (("log", "1995-07-09 00:19:59"), ("utc", "1995-07-09 04:19:59")):
        out = refresh_outputs(tmp_path / "s.db", "all", "", None, zone=zone)
        ingest = {r[0]: r for r in rows(output(out, "health"), "health-table")}["ingest"]
        assert ingest[7] == shown
        assert kpi(out, "watermark")[0].startswith(shown)
