"""The dashboard's explore section in Chromium during a live run: the last N minutes after a
burst of known lines, a filter over the Parquet events, and the URL that keeps the view;
every number against an independent count of the lines in plain Python."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pytest

from logstream.analytics.requests import static_names
from logstream.dashboard import start_dashboard_thread
from logstream.pipeline import Pipeline
from tests.conftest import data_file
from tests.dashboard.helpers import chromium
from tests.pipeline.helpers import config, nasa_lines

BASE = "NASA_access_log_Jul95_first2000.log.gz"  # 1995-07-01 00:00:01 to 00:33:55 (-0400)
MINUTES = 5
_CLF = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(?:\S+ )?(\S+)(?: [^"]*)?" (\d{3}) (\d+|-)$')
_STATIC = set(static_names())


def burst() -> list[str]:
    """60 known lines in the base log's last minute and the two after it."""
    out = []
    for i in range(60):
        t = datetime(1995, 7, 1, 4, 33, 50, tzinfo=UTC) + timedelta(seconds=2 * i)
        when = t.astimezone(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
        host = "burst1.example" if i % 12 < 7 else "burst2.example"
        path = ("/burst/a.html", "/burst/b.html", "/burst/c.gif")[i % 3 if i % 5 else 0]
        status = 404 if i % 20 == 3 else 500 if i % 20 == 7 else 200
        out.append(f'{host} - - [{when}] "GET {path} HTTP/1.0" {status} 1000')
    return out


def oracle(lines: list[str], start: datetime, end: datetime) -> dict:
    """Requests, status classes, requested files and clients of the lines in [start, end)."""
    statuses: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    clients: Counter[str] = Counter()
    for line in lines:
        m = _CLF.match(line)
        if not m:
            continue
        t = datetime.strptime(m[2], "%d/%b/%Y:%H:%M:%S %z")
        if not start <= t < end:
            continue
        status = int(m[4])
        statuses[f"{status // 100}xx"] += 1
        clients[m[1]] += 1
        target = unquote(m[3]).strip() if "%" in m[3] else m[3]
        target = target.removesuffix("?")
        ext = target.rsplit(".", 1)[-1].lower() if "." in target else ""
        if status != 404 and ext not in _STATIC:  # GoAccess's requested files
            pages[target] += 1
    return {
        "requests": sum(statuses.values()),
        "status": statuses,
        "pages": pages,
        "clients": clients,
    }


@pytest.fixture(scope="module")
def live(spark, tmp_path_factory):
    """A pipeline fed live (a micro-batch a second) with the dashboard beside it."""
    tmp = tmp_path_factory.mktemp("explore")
    landing = tmp / "in"
    landing.mkdir()
    cfg = config(
        tmp,
        landing,
        trigger="1 second",
        max_files_per_trigger=None,
        queries="traffic_per_minute,traffic_by_panel",
        store_retention="1 day",
    )
    pipeline = Pipeline(spark, cfg)
    runner = threading.Thread(target=pipeline.run, daemon=True)
    runner.start()
    try:
        with start_dashboard_thread(cfg.store_path, refresh_s=1.0) as server:
            yield pipeline, landing, server
    finally:
        pipeline.request_stop()
        runner.join(timeout=120)
        pipeline.stop()


def _write(landing, name: str, lines: list[str]) -> None:
    tmp = landing / f".{name}.tmp"
    tmp.write_text("".join(f"{x}\n" for x in lines))
    tmp.rename(landing / name)  # atomically, as Spark's file source wants


def _cells(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"{selector} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )


def _wait(check, timeout_s: float = 120, shown=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            seen = f": {shown()!r}" if shown else ""
            raise AssertionError(f"the page did not show the expected numbers in time{seen}")
        time.sleep(0.5)


def test_the_last_minutes_panel_counts_a_burst_live(live):
    pipeline, landing, server = live
    base = nasa_lines(data_file(BASE))
    lines = base + burst()
    end = datetime(1995, 7, 1, 4, 36, tzinfo=UTC)  # the minute after the burst's last line
    want = oracle(lines, end - timedelta(minutes=MINUTES), end)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.url}?minutes={MINUTES}")
        _write(landing, "base.log", base)
        page.wait_for_selector("#live-requests", timeout=120_000)
        _write(landing, "burst.log", burst())  # while the run goes on: its own micro-batch
        _wait(lambda: page.inner_text("#live-requests") == f"{want['requests']:,}")
        status = page.inner_text("#live-status")
        for cls in ("2xx", "4xx", "5xx"):
            assert f"{cls} {want['status'][cls]:,}" in status
        pages, clients = _cells(page, "#live-pages"), _cells(page, "#live-clients")
        assert [r[0] for r in pages[:2]] == ["/burst/a.html", "/burst/b.html"]
        for name, rows, counts in (
            ("pages", pages, want["pages"]),
            ("clients", clients, want["clients"]),
        ):
            assert rows, name
            for key, hits, _share in rows:  # every row shown has its independent count
                assert int(hits.replace(",", "")) == counts[key], (name, key)
            assert int(rows[0][1].replace(",", "")) == max(counts.values())
        assert [r[0] for r in clients[:2]] == ["burst1.example", "burst2.example"]
        assert pipeline.ingest.paths["driver"] >= 2  # base and burst, each a micro-batch


def test_a_filter_reads_the_events_and_the_url_keeps_it(live):
    server = live[2]
    lines = nasa_lines(data_file(BASE)) + burst()
    end = datetime(1995, 7, 1, 4, 36, tzinfo=UTC)
    errors = oracle(
        [x for x in lines if re.search(r'" 5\d\d \S+$', x)], end - timedelta(hours=1), end
    )
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url)
        page.wait_for_selector("#explore-live h3", timeout=120_000)  # the URL's controls set
        page.fill("#explore-filter", "status >= 500")
        page.press("#explore-filter", "Enter")
        page.press("#explore-filter", "Tab")  # Enter, then the blur: both submit the value
        checks = iter(range(1_000_000))

        def submitted() -> bool:
            if "filter=status" in page.url:
                return True
            if next(checks) % 10 == 9:  # every 5 s: a loaded machine's page may have taken
                page.press("#explore-filter", "Enter")  # the first Enter before its callbacks
            return False

        _wait(submitted, shown=lambda: page.url)
        _wait(
            lambda: page.inner_text("#explore-totals").startswith(
                f"requests {errors['requests']:,} "
            )
        )
        shared = page.url
        other = browser.new_page()
        other.goto(shared)  # the shared view: the filter box and the numbers come back
        _wait(lambda: other.input_value("#explore-filter") == "status >= 500")
        _wait(
            lambda: other.inner_text("#explore-totals").startswith(
                f"requests {errors['requests']:,} "
            )
        )
        rows = _cells(other, "#compare-hosts")
        assert rows and int(rows[0][1].replace(",", "")) == max(errors["clients"].values())


def test_the_header_and_the_explore_section_name_the_micro_batch_they_show(live):
    pipeline, landing, server = live
    _write(landing, "one-more.log", nasa_lines(data_file(BASE))[:50])  # a micro-batch at least
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url)

        def newest() -> int | None:
            sql = "SELECT MAX(batch_id) AS b FROM ledger WHERE query = 'ingest'"
            return pipeline.store.query(sql)[0]["b"]

        def both() -> tuple[str, str]:
            return page.inner_text("#updated"), page.inner_text("#explore-message")

        # once the run has nothing more to read, both sections show its newest micro-batch
        _wait(
            lambda: (
                newest() is not None
                and both()[0].endswith(f" · micro-batch {newest()}")
                and both()[1] == f"As of micro-batch {newest()}."
            ),
            shown=both,
        )
