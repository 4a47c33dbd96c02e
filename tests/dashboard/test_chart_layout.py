"""The reference-data charts keep their x axis readable with many keys: the legend (one line per
key) beside the plot, never over the axis title or the date under the ticks (it was under the
axis, wrapped into two rows, and ran over both: "Jul 9," of "Jul 9, 1995")."""

from __future__ import annotations

from logstream.dashboard import start_dashboard_thread
from tests.dashboard.helpers import chromium, commit, filled_store
from tests.dashboard.test_panels import dimension_rows

SECTIONS = ["/shuttle/", "/history/", "/images/", "/icons/", "/software/", "/facilities/"]
SECTIONS += ["/elv/", "/news/", "/persons/", "/other/"]
BOXES = """el => [el.querySelector('.g-xtitle text'), ...el.querySelectorAll('.xtick text'),
    el.querySelector('.legend')].map(e => { const b = e.getBoundingClientRect();
    return [e.textContent, b.left, b.top, b.right, b.bottom]; })"""


def overlap(a: list, b: list) -> bool:
    return a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]


def test_the_sections_chart_legend_leaves_the_axis_title_and_the_date_whole(tmp_path):
    store = filled_store(tmp_path / "s.db", minutes=60)
    sections = {name: [i + 1] * 60 for i, name in enumerate(SECTIONS)}
    dims = dimension_rows("sections", sections)
    commit(store, 1, traffic=[], dimensions=dims, max_event_time_ms=None, events=1)
    with start_dashboard_thread(tmp_path / "s.db", refresh_s=1.0) as server, chromium() as browser:
        for width in (1400, 700):
            page = browser.new_page(viewport={"width": width, "height": 1200})
            page.goto(server.url)
            page.wait_for_selector("#graph-sections .legend .traces", timeout=60_000)
            chart = page.query_selector("#graph-sections")
            shown = chart.bounding_box()
            title, *ticks, legend = chart.evaluate(BOXES)
            assert title[0].startswith("event time")
            assert len(page.query_selector_all("#graph-sections .legend .traces")) >= 6  # top keys
            assert any("Jul 9, 1995" in t[0] for t in ticks), ticks
            for box in (title, *ticks, legend):  # inside the chart: nothing cut at its edge
                assert shown["y"] <= box[2] and box[4] <= shown["y"] + shown["height"], box
            for tick in ticks:  # nothing drawn over another
                assert not overlap(title, tick), (width, title, tick)
                assert not overlap(legend, tick), (width, legend, tick)
            assert not overlap(title, legend), (width, title, legend)
            page.close()
