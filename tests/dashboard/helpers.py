"""Small synthetic stores for the data-layer tests (written through ServingStore)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from logstream.serving import IngestBatchWrite, ServingStore

T0 = datetime(1995, 7, 9, 4, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def minute(k: int) -> tuple[str, str]:
    """Start and end of the k-th one-minute window after T0."""
    return iso(T0 + timedelta(minutes=k)), iso(T0 + timedelta(minutes=k + 1))


def traffic_row(k: int, s2: int, s3: int = 0, s4: int = 0, s5: int = 0, size: int = 100):
    start, end = minute(k)
    total = s2 + s3 + s4 + s5
    return (start, end, total, total * size, 0, s2, s3, s4, s5, s4 + s5)


def page_rows(k: int, counts: dict[str, int]) -> list[tuple[str, str, str, int]]:
    """Trending rows of the 5-minute window ending at the end of minute k."""
    end = T0 + timedelta(minutes=k + 1)
    return [(iso(end - timedelta(minutes=5)), iso(end), p, n) for p, n in counts.items()]


def new_store(path: Path, **state: str) -> ServingStore:
    store = ServingStore(path)
    values = {
        "watermark_delay_ms": "600000",
        "traffic_window": "60 seconds",
        "trending_window": "300 seconds",
        "trending_slide": "60 seconds",
        "top": "10",
    }
    values.update(state)
    store.set_state(values)
    return store


def commit(store: ServingStore, batch_id: int, **fields) -> None:
    write = IngestBatchWrite(batch_id=batch_id, **fields)
    if write.max_event_time_ms is None and write.traffic:
        last_end = max(r[1] for r in write.traffic)
        ms = int(datetime.fromisoformat(last_end.replace("Z", "+00:00")).timestamp() * 1000)
        write.max_event_time_ms = ms - 1000
    if not write.events:
        write.events = sum(r[2] for r in write.traffic)
    assert store.commit_ingest_batch("ingest", write)


def filled_store(path: Path, minutes: int = 60) -> ServingStore:
    """``minutes`` windows of traffic (k+1 2xx, 1 4xx every 10th minute), visitors, and
    trending pages /a.html (k+1), /b/ (3), /b/c.html (2) for every window."""
    store = new_store(path)
    traffic = [traffic_row(k, k + 1, s4=1 if k % 10 == 0 else 0) for k in range(minutes)]
    pages = []
    for k in range(4, minutes):
        pages += page_rows(k, {"/a.html": k + 1, "/b/": 3, "/b/c.html": 2})
    visitors = [(*minute(k), k + 2, b"sketch") for k in range(minutes)]
    commit(store, 0, traffic=traffic, pages=pages, visitors=visitors)
    return store


def alert_row(
    k: int,
    series: str = "site",
    metric: str = "requests",
    value: float = 500.0,
    mean: float = 100.0,
    std: float = 20.0,
    direction: str = "spike",
) -> tuple:
    """An ``alerts`` row (``series`` … ``direction``) for minute k after T0."""
    return (series, metric, *minute(k), value, mean, std, (value - mean) / std, direction)


def session_row(
    host: str, start_minute: int, duration_s: int, requests: int, pages: int, size: int = 1000
) -> tuple:
    """A ``sessions`` row (``client_host`` … ``bounce``) starting at minute ``start_minute``."""
    start = T0 + timedelta(minutes=start_minute)
    return (
        host,
        "Mozilla/5.0",
        iso(start),
        iso(start + timedelta(seconds=duration_s)),
        duration_s,
        requests,
        pages,
        size,
        "/entry.html",
        "/exit.html",
        int(pages <= 1),
    )


def stats_row(hour: int, sessions: int, bounces: int, pages: int, median: int, p95: int):
    """A ``session_stats`` row of the hour-long window starting ``hour`` hours after T0."""
    start = T0 + timedelta(hours=hour)
    return (
        iso(start),
        iso(start + timedelta(hours=1)),
        sessions,
        bounces,
        pages,
        median,
        p95,
        b"kll",
    )


def client_rows(end_minute: int, counts: dict[str, tuple[int, int]]) -> list[tuple]:
    """``top_clients`` rows of the 5-minute window ending at minute ``end_minute`` after T0:
    ``{client_host: (requests, bytes)}``."""
    end = T0 + timedelta(minutes=end_minute)
    return [
        (iso(end - timedelta(minutes=5)), iso(end), host, n, size)
        for host, (n, size) in counts.items()
    ]


# -- a real browser ------------------------------------------------------------------------------

#: Debian's Chromium, driven by Playwright (whose own browser download is never used).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Debian Chromium (Playwright ``Browser``); a missing binary fails the test."""
    import os

    import pytest

    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's Chromium (apt-get install chromium; "
            "scripts/ensure-chromium.sh)",
            pytrace=False,
        )
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")  # never fetch a browser
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()
