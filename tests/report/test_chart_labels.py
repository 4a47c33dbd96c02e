"""Chart labels from log content are plain text: a URL path holding ``<a href=…>`` was a
clickable external link in the HTML report's Top URLs chart (Plotly reads a subset of HTML in
its labels), and a site section in the dashboard's chart would be too."""

from __future__ import annotations

from tests.dashboard.helpers import chromium, commit, new_store, traffic_row

from logstream.dashboard.data import Filters, read_snapshot
from logstream.dashboard.figures import dimension_figure
from logstream.report.html import render_html

EVIL = '<a href="https://evil.example/">clickme</a>'


def _report() -> dict:
    """The least report :func:`render_html` draws: eight top URLs, one of them ``EVIL``."""
    general = {
        "total_requests": 3, "valid_requests": 3, "failed_requests": 0, "unique_visitors": 1,
        "hosts_per_day": 1, "unique_urls": 2, "unique_not_found": 0, "bandwidth_bytes": 10,
        "first_event": None, "last_event": None, "log_format": "json", "time_zone": "UTC",
    }  # fmt: skip
    return {
        "general": general,
        "hourly": [{"hour": "1995-07-01T00", "requests": 3}],
        "status_classes": {"2xx": 3},
        "status_codes": {"200": 3},
        "top_urls": [
            {"url_path": path, "requests": 9 - i, "bytes": 5}
            for i, path in enumerate([EVIL, "/a&b", *(f"/p{k}" for k in range(6))])
        ],
        "top_content_pages_by_day": [],
        "top_hosts": [],
        "top_not_found": [],
        "quarantine": {"reasons": {}},
    }


def _top_urls_chart(browser, page) -> tuple[list[str], int]:
    """The Top URLs chart of the HTML report ``page`` as Chromium draws it: its bars'
    labels, and the links in it."""
    tab = browser.new_page()
    tab.goto(page.as_uri())
    tab.wait_for_selector("#chart-top-urls .ytick text")
    ticks = tab.eval_on_selector_all(
        "#chart-top-urls .ytick text", "els => els.map(e => e.textContent)"
    )
    links = tab.eval_on_selector_all("#chart-top-urls svg a", "els => els.length")
    tab.close()
    return ticks, links


def test_a_url_path_with_a_link_is_plain_text_in_the_report_chart(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(_report()), encoding="utf-8")
    with chromium() as browser:
        ticks, links = _top_urls_chart(browser, page)
    assert EVIL in ticks and "/a&b" in ticks  # shown as written
    assert links == 0


def test_a_section_with_a_link_is_plain_text_in_the_dashboard_chart(tmp_path):
    store = new_store(tmp_path / "s.db")
    rows = [("sections", f"/{EVIL}/", *traffic_row(k, 10)) for k in range(3)]
    commit(store, 0, traffic=[traffic_row(k, 10) for k in range(3)], dimensions=rows)
    figure = dimension_figure(read_snapshot(tmp_path / "s.db", Filters.build("all")), "sections")
    assert [t["name"] for t in figure["data"]] == [
        '/&lt;a href="https://evil.example/"&gt;clickme&lt;/a&gt;/'
    ]


def test_every_bar_of_the_report_top_urls_has_its_label(tmp_path):
    """Five bars had three labels: Plotly skips tick labels that do not fit their bars."""
    with chromium() as browser:
        for n in (1, 5, 10):
            report = _report()
            report["top_urls"] = [
                {"url_path": f"/shuttle/missions/sts-{70 + k}/mission-sts-{70 + k}.html",
                 "requests": 100 - k, "bytes": 5}
                for k in range(n)
            ]  # fmt: skip
            page = tmp_path / f"report-{n}.html"
            page.write_text(render_html(report), encoding="utf-8")
            ticks, _ = _top_urls_chart(browser, page)
            assert sorted(ticks) == sorted(u["url_path"] for u in report["top_urls"]), n
