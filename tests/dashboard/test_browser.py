"""The dashboard in a real browser over a store filled by a real pipeline run on the NASA day.

Debian's Chromium (``/usr/bin/chromium``, ``apt-get install chromium``) is driven by
Playwright's sync API; Playwright's own browser download is never used. The expected numbers
are computed here with the plain-Python oracle (:mod:`tests.oracle`) over the log lines, not
read from the store (except what the oracle cannot compute cheaply: the streaming queries'
state rows and the anomaly alerts, compared with the store's rows).

The README's picture is made by ``scripts/dashboard_picture.py`` (the demo's store).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logstream.dashboard import start_dashboard_thread
from logstream.dashboard.figures import ALERT_TRACE
from logstream.dashboard.layout import WATCHDOG_MS
from logstream.pipeline import Pipeline
from logstream.serving import ServingStore
from tests.dashboard.helpers import alert_row, chromium, commit, filled_store, traffic_row
from tests.oracle import is_content, parse_line
from tests.pipeline.helpers import config, nasa_lines, write_chunks

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")  # never fetch a browser

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0  # the machine is shared with Spark tests: be patient
JUNK = ["this is not a log line", "neither is this one", "GET / HTTP/1.0"]
LATE = 5  # the first lines of the day, from another host, sent at the end: late by then
RETRIED = slice(17_000, 17_003)  # lines of the first file delivered again (a shipper retry)


def nasa_time(text: str) -> str:
    """An ISO UTC time of the store as the page shows it by default: in the NASA log's own
    offset, -04:00 (docs/dashboard.md, "Times")."""
    at = datetime.fromisoformat(text.replace("Z", "+00:00")) - timedelta(hours=4)
    return at.strftime("%Y-%m-%d %H:%M:%S")


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nasa_store(spark, nasa_day, tmp_path_factory) -> Path:
    """A serving store written by the real pipeline with deduplication on (``--dedup``): the
    NASA day in two micro-batches, then the day's first lines from another host (late), three
    lines of the first micro-batch again (duplicates) and three unparseable lines."""
    tmp = tmp_path_factory.mktemp("dashboard")
    write_chunks(delivered(nasa_lines(nasa_day)), tmp / "in", per_file=17_700)
    pipeline = Pipeline(spark, config(tmp, tmp / "in", max_files_per_trigger=1, dedup=True))
    try:
        pipeline.run()
    finally:
        pipeline.stop()
    return tmp / "store.db"


def late_copies(lines: list[str]) -> list[str]:
    """The day's first lines from another host: not duplicates of the originals."""
    return ["late." + line for line in lines[:LATE]]


def delivered(lines: list[str]) -> list[str]:
    """Every line the pipeline reads, in order."""
    return lines + late_copies(lines) + lines[RETRIED] + JUNK


@pytest.fixture(scope="module")
def expected(nasa_day) -> dict[str, Any]:
    """What the page must show, from the log lines alone (oracle parser, plain Python).

    The pipeline drops repeated lines (:mod:`logstream.sources.dedup`): the day holds 10
    lines written twice, and three lines are delivered again.
    """
    all_lines = nasa_lines(nasa_day)
    lines = list(dict.fromkeys(all_lines))  # each text once, in order
    refs = [parse_line(line) for line in lines]
    assert all(refs)
    newest = max(r.epoch for r in refs)
    watermark = newest - 600  # the pipeline's default 10-minute delay
    pages = [(r.epoch, r.url_path) for r in refs if is_content(r.url_path)]

    def window(end: int) -> Counter[str]:
        return Counter(p for t, p in pages if end - 300 <= t < end)

    end = watermark // 60 * 60  # windows slide by a minute; complete when end <= watermark
    while not window(end):
        end -= 60
    counts = window(end)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    top_page = ranked[0][0]
    sections = Counter()
    for path, n in ranked:
        if path.split("/")[1] != top_page.split("/")[1]:
            sections["/" + path.split("/")[1] + "/"] += n
    prefix = sections.most_common(1)[0][0]
    hour = [r for r in refs if r.epoch // 60 * 60 >= newest - 3600]
    # top clients: the latest complete 5-minute window (end <= watermark)
    clients_end = watermark // 300 * 300
    while not any(clients_end - 300 <= r.epoch < clients_end for r in refs):
        clients_end -= 300
    per_client: Counter[str] = Counter(
        r.client_host for r in refs if clients_end - 300 <= r.epoch < clients_end
    )
    sent = delivered(all_lines)
    return {
        "refs": refs,
        "late_lines": late_copies(all_lines),
        "duplicates": len(sent) - len(set(sent)),
        "clients_window": (clients_end - 300, clients_end),
        "top_clients": sorted(per_client.items(), key=lambda kv: (-kv[1], kv[0]))[:10],
        "window": (end - 300, end),
        "top": ranked[:10],
        "trend": [window(end - 60 * k)[top_page] for k in range(29, -1, -1)],
        "prefix": prefix,
        "prefix_top": [(p, n) for p, n in ranked if p.startswith(prefix)][:10],
        "prefix_pages": sum(1 for p in counts if p.startswith(prefix)),
        "total": len(refs),
        "bytes": sum(r.bytes_sent for r in refs),
        "errors": sum(1 for r in refs if r.status >= 400),
        "4xx": sum(1 for r in refs if 400 <= r.status < 500),
        "last_hour": len(hour),
        "minutes": len({r.epoch // 60 for r in refs}),
        # every minute from the first event's to the last's: one without events is zero
        "span_minutes": max(r.epoch for r in refs) // 60 - min(r.epoch for r in refs) // 60 + 1,
    }


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def server(nasa_store):
    # the page's default refresh (2 s); a page does not tick while its refresh runs (Dash
    # shows no result of a callback that a newer tick triggered again before it answered,
    # plotly/dash-core-components#661)
    with start_dashboard_thread(nasa_store, refresh_s=2.0) as srv:
        yield srv


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.requested = []
    pg.on("request", lambda r: pg.requested.append(r.url))
    pg.goto(server.url)
    pg.wait_for_selector("#kpi-requests", timeout=WAIT_S * 1000)
    yield pg
    context.close()


# -- helpers -------------------------------------------------------------------------------------


def eventually(read: Callable[[], Any], want: Any, timeout: float = WAIT_S) -> Any:
    """Poll ``read()`` until it returns ``want`` (the page refreshes asynchronously); return
    the last value so the assertion shows it."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value == want or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def kpi(page, name: str) -> str:
    return page.inner_text(f"#kpi-{name} .value")


def plotted_sum(page, graph: str) -> float:
    """Sum of every y value the browser plotted in a chart (plotly's own data), alert
    markers left out."""
    return page.evaluate(
        """([id, skip]) => {
            const g = document.querySelector('#' + id + ' .js-plotly-plot');
            if (!g || !g.data) return -1;
            return g.data.filter(t => t.name !== skip).reduce(
                (s, t) => s + (t.y || []).reduce((a, v) => a + (v || 0), 0), 0);
        }""",
        [graph, ALERT_TRACE],
    )


def plotted_trace(page, graph: str, name: str) -> dict[str, list[Any]]:
    """x and y of the trace ``name`` of a chart ({} when absent)."""
    return page.evaluate(
        """([id, name]) => {
            const g = document.querySelector('#' + id + ' .js-plotly-plot');
            const t = g && g.data ? g.data.find(t => t.name === name) : null;
            return t ? {x: Array.from(t.x), y: Array.from(t.y)} : {};
        }""",
        [graph, name],
    )


def plotted_y(page, graph: str) -> list[float]:
    return page.evaluate(
        "(id) => { const g = document.querySelector('#' + id + ' .js-plotly-plot');"
        " return g && g.data && g.data.length ? Array.from(g.data[0].y) : []; }",
        graph,
    )


def table(page, selector: str) -> list[list[str]]:
    return page.evaluate(
        """(sel) => Array.from(document.querySelectorAll(sel + ' tbody tr')).map(
            tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()))""",
        selector,
    )


def trending(page) -> list[tuple[str, int]]:
    return [(r[1], int(r[2].replace(",", ""))) for r in table(page, "#trending-table")]


def iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


# -- tests ---------------------------------------------------------------------------------------


def test_the_page_shows_the_numbers_of_the_nasa_day(page, expected, nasa_store, server):
    page.check("#range input[value='all']")
    assert (
        eventually(lambda: plotted_sum(page, "graph-requests"), expected["total"])
        == (expected["total"])
    )
    assert kpi(page, "requests") == f"{expected['total']:,}"
    assert (
        eventually(lambda: plotted_sum(page, "graph-bytes"), expected["bytes"])
        == (expected["bytes"])
    )
    assert kpi(page, "error-rate") == f"{100 * expected['errors'] / expected['total']:.2f} %"
    assert kpi(page, "events") == f"{expected['total']:,}"
    assert (kpi(page, "late"), kpi(page, "quarantined")) == (str(LATE), str(len(JUNK)))

    # trending: the latest complete window, its top pages and the top page's recent trend
    start, end = expected["window"]
    label = page.locator("#trending-window")
    assert (label.get_attribute("data-start"), label.get_attribute("data-end")) == (
        iso(start),
        iso(end),
    )
    assert trending(page) == expected["top"]
    spark = page.locator("#trending-table img.spark").first.get_attribute("title")
    assert spark.endswith(": " + ", ".join(map(str, expected["trend"])))

    # unique visitors: one point per minute, from the first to the last (issue 54 item 10:
    # a minute without events is 0, not skipped over by the line)
    assert (
        eventually(lambda: len(plotted_y(page, "graph-visitors")), expected["span_minutes"])
        == expected["span_minutes"]
    )
    assert sum(1 for y in plotted_y(page, "graph-visitors") if y) == expected["minutes"]

    # late events and quarantined lines, with their latest examples
    late = table(page, "#late-table")
    want = sorted(  # in the offset the log is written in (the page's default)
        parse_line(line).event_time.strftime("%Y-%m-%d %H:%M:%S") for line in expected["late_lines"]
    )
    assert sorted(r[0] for r in late) == want
    assert sorted(r[0] for r in table(page, "#quarantine-table")) == sorted(JUNK)

    # pipeline health: one streaming query; state rows: the deduplication operator's (from the
    # progress table) and the analytics snapshot's open panes, sessions and series
    queries = sorted(r[0] for r in table(page, "#health-table"))
    assert queries == ["ingest"]

    def state_rows() -> str:  # Spark may deliver a last progress event after the run
        with closing(sqlite3.connect(f"file:{nasa_store}?mode=ro", uri=True)) as conn:
            dedup = conn.execute(
                "SELECT state_rows FROM progress WHERE query = 'ingest' ORDER BY seq DESC LIMIT 1"
            ).fetchone()[0]
            snapshot = conn.execute(
                "SELECT value FROM pipeline_state WHERE key = 'analytics_state_rows'"
            ).fetchone()[0]
        assert int(snapshot) > 0
        return f"{(dedup or 0) + int(snapshot):,}"

    assert eventually(lambda: kpi(page, "state-rows") == state_rows(), True)

    # every tile of a micro-batch is the newest ledgered one's, with its own progress row
    with closing(sqlite3.connect(f"file:{nasa_store}?mode=ro", uri=True)) as conn:
        (newest,) = conn.execute(
            "SELECT batch_id FROM ledger WHERE query = 'ingest' ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        duration, rows = conn.execute(
            "SELECT batch_duration_ms, num_input_rows FROM progress WHERE query = 'ingest' "
            "AND batch_id = ? ORDER BY seq DESC LIMIT 1",
            (newest,),
        ).fetchone()
    assert kpi(page, "last-batch") == f"#{newest}"
    assert kpi(page, "batch-duration") == f"{duration:,} ms"
    detail = page.inner_text("#kpi-batch-duration .detail")
    assert detail == f"{rows:,} row{'s' * (rows != 1)} in batch #{newest}"
    # in the offset the NASA log is written in (the default), as the batch report's hours
    assert kpi(page, "watermark") == "1995-07-09 23:49:59 -04:00"

    # duplicate lines: reported by the ingest query's progress (possibly after the run)
    assert eventually(lambda: kpi(page, "duplicates"), str(expected["duplicates"])) == str(
        expected["duplicates"]
    )

    # top clients of the latest complete 5-minute window
    label = page.locator("#clients-window")
    start, end = expected["clients_window"]
    assert (label.get_attribute("data-start"), label.get_attribute("data-end")) == (
        iso(start),
        iso(end),
    )
    shown = [(r[1], int(r[2])) for r in table(page, "#clients-requests-table")]
    assert shown == expected["top_clients"]

    # anomaly alerts: as the store holds them, newest first; site-wide request alerts marked
    with closing(sqlite3.connect(f"file:{nasa_store}?mode=ro", uri=True)) as conn:
        alerts = conn.execute(
            "SELECT window_start, series, metric, value FROM alerts "
            "ORDER BY window_start DESC, seq DESC"
        ).fetchall()
    if alerts:
        rows = table(page, "#alerts-table")
        assert [(r[0], r[1], r[2].replace(" ", "_")) for r in rows] == [
            (nasa_time(a[0]), a[1], a[2]) for a in alerts[:20]
        ]
        site = sorted((a[0], a[3]) for a in alerts if a[1:3] == ("site", "requests"))
        marks = plotted_trace(page, "graph-requests", ALERT_TRACE)
        assert list(zip(marks.get("x", []), marks.get("y", []), strict=True)) == [
            (nasa_time(t), v) for t, v in site
        ]
    else:
        assert "No anomaly alert so far." in page.inner_text("#alerts")
    assert page.get_attribute("#spark-ui-link", "href") == "http://127.0.0.1:4040"

    # everything came from the dashboard itself: no CDN, no internet
    base = server.url.rstrip("/")
    assert [u for u in page.requested if not u.startswith((base, "data:"))] == []
    assert "Traceback" not in page.content()


def test_filters_by_time_range_status_class_and_url_prefix(page, expected):
    page.check("#range input[value='1h']")
    assert eventually(lambda: kpi(page, "requests"), f"{expected['last_hour']:,}") == (
        f"{expected['last_hour']:,}"
    )
    # the KPI and the chart are drawn by separate callbacks: wait for each
    assert (
        eventually(lambda: plotted_sum(page, "graph-requests"), expected["last_hour"])
        == expected["last_hour"]
    )

    page.check("#range input[value='all']")
    for cls in ("1xx", "2xx", "3xx", "5xx"):
        page.uncheck(f"#status-filter input[value='{cls}']")
    assert eventually(lambda: kpi(page, "requests"), f"{expected['4xx']:,}") == (
        f"{expected['4xx']:,}"
    )
    assert (
        eventually(lambda: plotted_sum(page, "graph-requests"), expected["4xx"])
        == (expected["4xx"])
    )
    # bytes: every status
    assert (
        eventually(lambda: plotted_sum(page, "graph-bytes"), expected["bytes"])
        == (expected["bytes"])
    )

    page.fill("#url-prefix", expected["prefix"])
    page.press("#url-prefix", "Enter")
    assert eventually(lambda: trending(page), expected["prefix_top"]) == expected["prefix_top"]
    assert f"{expected['prefix_pages']:,} pages start with" in page.inner_text("#trending")

    page.fill("#url-prefix", "/no/such/section/")
    page.press("#url-prefix", "Enter")
    page.wait_for_selector("#trending-empty", timeout=WAIT_S * 1000)
    assert "No page starting with '/no/such/section/'" in page.inner_text("#trending-empty")


def test_screenshot(page, expected, tmp_path):
    page.check("#range input[value='24h']")
    eventually(lambda: plotted_sum(page, "graph-requests"), expected["total"])
    page.wait_for_timeout(1500)  # let plotly finish drawing
    shot = tmp_path / "dashboard.png"  # the README's picture: scripts/dashboard_picture.py
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000


def test_before_the_store_exists_the_page_waits_for_it(browser, tmp_path):
    path = tmp_path / "later.db"
    with start_dashboard_thread(path, refresh_s=0.5) as srv:
        context = browser.new_context()
        pg = context.new_page()
        pg.goto(srv.url)
        banner = pg.locator("#banner")
        pg.wait_for_selector("#banner.missing", timeout=WAIT_S * 1000)
        text = banner.inner_text()
        assert "Waiting for data" in text and "does not exist yet" in text
        ServingStore(path)  # the pipeline creates the store; no batch yet
        pg.wait_for_selector("#banner.waiting", timeout=WAIT_S * 1000)
        # "waiting" too while the pipeline creates the tables: then the store without a batch
        committed = "has not committed a micro-batch yet"
        assert eventually(lambda: committed in banner.inner_text(), True), banner.inner_text()
        assert "Traceback" not in pg.content() and pg.locator("#kpis .kpi").count() == 0
        context.close()


def test_an_alert_written_to_the_store_is_listed_and_marked(browser, tmp_path):
    """A store written directly (no Spark): the alert list, the alert marker on the requests
    chart and the duplicates card show the rows written."""
    path = tmp_path / "s.db"
    store = filled_store(path)
    store.commit_alerts(0, [alert_row(30, value=160.0, mean=40.0, std=12.0)])
    store.record_duplicates(1000, 4)
    with start_dashboard_thread(path, refresh_s=0.5) as srv:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        pg.goto(srv.url)
        pg.wait_for_selector("#alerts-table", timeout=WAIT_S * 1000)
        assert table(pg, "#alerts-table") == [
            [
                "1995-07-09 04:30:00",
                "site",
                "requests",
                "▲ spike",
                "160/min",
                "40.0 ± 12.0",
                "+10.0",
            ]
        ]
        assert kpi(pg, "duplicates") == "4"
        pg.check("#range input[value='all']")
        marks = eventually(
            lambda: plotted_trace(pg, "graph-requests", ALERT_TRACE),
            {"x": ["1995-07-09 04:30:00"], "y": [160]},
        )
        assert marks == {"x": ["1995-07-09 04:30:00"], "y": [160]}
        context.close()


def test_the_page_resumes_when_its_server_comes_back(browser, tmp_path):
    """A refresh whose request gets no answer (the dashboard's process stopped) leaves the
    page's refresh timer off, as Dash undoes a callback's ``running`` only on a response; the
    watchdog turns it back on, so the page shows the next micro-batch once a server is back."""
    path = tmp_path / "s.db"
    store = filled_store(path)  # 60 minutes: 1,836 requests
    context = browser.new_context()
    pg = context.new_page()
    with start_dashboard_thread(path, refresh_s=0.5) as srv:
        port = srv.port
        pg.goto(srv.url)
        pg.wait_for_selector("#kpi-requests", timeout=WAIT_S * 1000)
        pg.check("#range input[value='all']")
        assert eventually(lambda: kpi(pg, "requests"), "1,836") == "1,836"
        with pg.expect_event("requestfailed", timeout=WAIT_S * 1000):
            srv.stop()  # the next refresh's request fails: no response
    commit(store, 1, traffic=[traffic_row(60, 7)])
    with start_dashboard_thread(path, port=port, refresh_s=0.5):
        shown = eventually(lambda: kpi(pg, "requests"), "1,843", WATCHDOG_MS / 1000 + WAIT_S)
        assert shown == "1,843"
    context.close()
