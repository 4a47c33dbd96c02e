"""The panels of one refresh, built from the serving store's reader.

Each function takes the refresh's :class:`~logstream.serving.reader.StoreReader` (one read
transaction) and turns what it returns into what a panel shows (:mod:`logstream.dashboard.
model`): traffic bucketed to at most :data:`~logstream.dashboard.model.MAX_POINTS` points and
turned into rates per minute, the trending and client windows ranked, the tiles' micro-batch
picked from the progress rows. None of them writes SQL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from logstream.config import PANELS
from logstream.dashboard.model import (
    ALERTS_SHOWN,
    BOTS_SHOWN,
    DIMENSION_SERIES,
    EXAMPLES_SHOWN,
    HEALTH_BATCHES,
    INGEST_QUERY,
    LONGEST_SESSIONS,
    MAX_POINTS,
    SITE_SERIES,
    STATUS_CLASSES,
    TREND_WINDOWS,
    Alerts,
    Bots,
    DimensionTraffic,
    Filters,
    Health,
    PanelItems,
    Sessions,
    TopClient,
    TopClients,
    Traffic,
    Trending,
    TrendingPage,
    Visitors,
    epoch_s,
    interval_s,
    iso,
)
from logstream.serving.read_errors import READ_ERRORS
from logstream.serving.reader import StoreReader
from logstream.serving.rows import LedgerRow, TrafficBucket
from logstream.serving.schema import missing_schema

__all__ = [
    "alerts",
    "bots",
    "dimension",
    "examples",
    "health",
    "own_watermark",
    "section",
    "sessions",
    "top_clients",
    "traffic",
    "trending",
    "visitors",
]

T = TypeVar("T")

#: Bucket widths tried, in minutes (the first one with at most MAX_POINTS buckets wins).
_BUCKET_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
#: How the DStream edition's progress rows carry the scheduling delay (in ``watermark``).
_SCHEDULING_DELAY = "scheduling_delay_ms="


def section(notes: list[str], table: str, read: Callable[[], T], default: T) -> T:
    """Run one part of the refresh; a table an older store lacks becomes a note."""
    try:
        return read()
    except READ_ERRORS as exc:
        if not missing_schema(exc):  # "no such table" / "no such column": older schema
            raise
        notes.append(
            f"This store has no usable {table} table ({exc}): it was written by an older "
            "logstream; that part of the page is left empty."
        )
        return default


def _window_seconds(read: StoreReader, state: dict[str, str], key: str, table: str) -> float | None:
    """Width of the windows of ``table``, seconds: as the pipeline recorded it in
    ``pipeline_state`` under ``key``, else that of the newest window; None without either."""
    recorded = interval_s(state.get(key))
    if recorded is not None:
        return recorded
    row = read.newest_window(table)
    return epoch_s(row[1]) - epoch_s(row[0]) if row else None


def _grid(starts: list[int], bucket: int) -> list[int]:
    """Every bucket start from the first of ``starts`` to the last (epoch seconds): a bucket
    without a row is a bucket without traffic, drawn as zero, not skipped over by the line."""
    if not starts:
        return []
    return list(range(starts[0], starts[-1] + bucket, bucket))


def _bucket_seconds(window_s: float, span_s: float) -> int:
    for minutes in _BUCKET_MINUTES:
        width = max(minutes * 60, math.ceil(window_s))
        if span_s / width <= MAX_POINTS:
            return width
    return _BUCKET_MINUTES[-1] * 60


def traffic(
    read: StoreReader,
    state: dict[str, str],
    filters: Filters,
    newest_s: float,
    range_start: float | None,
) -> Traffic:
    """Traffic of the range (``range_start``, epoch seconds; None: everything) up to the
    newest event, bucketed, per selected status class."""
    window_s = _window_seconds(read, state, "traffic_window", "traffic_per_minute")
    if window_s is None:  # no window yet
        window_s = 60.0
    if range_start is None:
        first = read.traffic_first_start()
        span = newest_s - (epoch_s(first) if first else newest_s)
        since = None
    else:
        span = newest_s - range_start
        since = iso(range_start)
    bucket = _bucket_seconds(window_s, span)
    rows = read.traffic_buckets(bucket, since)
    per_minute = 60.0 / bucket
    out = Traffic(window_s=window_s, bucket_s=bucket)
    out.per_class = {c: [] for c in filters.status_classes}
    index = {c: 3 + i for i, c in enumerate(STATUS_CLASSES)}  # status_1xx … in a bucket
    by_start = {r.t: r for r in rows}
    for t in _grid([r.t for r in rows], bucket):
        r = by_start.get(t) or TrafficBucket(t, *(0,) * 8)  # no traffic in that bucket
        out.times.append(iso(r.t))
        selected = 0
        for c in filters.status_classes:
            selected += r[index[c]]
            out.per_class[c].append(r[index[c]] * per_minute)
        out.requests_per_min.append(selected * per_minute)
        out.bytes_per_min.append(r.bytes * per_minute)
        out.error_rate.append(100.0 * r.errors / r.requests if r.requests else None)
        out.total_requests += selected
        out.total_all += r.requests
        out.total_bytes += r.bytes
        out.total_errors += r.errors
    return out


def visitors(read: StoreReader, range_start: str | None, bucket: int) -> Visitors:
    """Mean and peak unique visitors per bucket of the range."""
    rows = {r.t: r for r in read.visitor_buckets(bucket, range_start)}
    times = _grid(list(rows), bucket)  # a bucket without traffic has no visitor
    return Visitors(
        bucket_s=bucket,
        times=[iso(t) for t in times],
        mean=[rows[t].mean if t in rows else 0.0 for t in times],
        peak=[rows[t].peak if t in rows else 0 for t in times],
    )


def trending(
    read: StoreReader,
    state: dict[str, str],
    filters: Filters,
    watermark_s: float,
    top: int,
) -> Trending | None:
    """The top pages of the latest complete trending window (else the newest open one),
    with their requests one slide earlier and over the last :data:`TREND_WINDOWS` windows."""
    latest = read.latest_window("trending_pages", iso(watermark_s))
    if latest is None:
        return None
    start, end, complete = latest
    window_s = interval_s(state.get("trending_window")) or (epoch_s(end) - epoch_s(start))
    slide_s = interval_s(state.get("trending_slide")) or window_s
    pages, matching = read.trending_pages(start, end, filters.url_prefix, top)
    end_s = epoch_s(end)
    ends = [iso(end_s - k * slide_s) for k in range(TREND_WINDOWS - 1, -1, -1)]
    counts = read.page_counts(iso(end_s - TREND_WINDOWS * slide_s), end, [p[0] for p in pages])
    previous_end = iso(end_s - slide_s)
    return Trending(
        window_start=start,
        window_end=end,
        complete=complete,
        pages=[
            TrendingPage(
                rank=i + 1,
                url_path=path,
                requests=requests,
                previous=counts.get((previous_end, path), 0),
                trend=[counts.get((e, path), 0) for e in ends],
            )
            for i, (path, requests) in enumerate(pages)
        ],
        trend_ends=ends,
        window_s=window_s,
        slide_s=slide_s,
        matching_pages=matching,
    )


def top_clients(
    read: StoreReader, state: dict[str, str], watermark_s: float, top: int
) -> TopClients | None:
    """Top clients of the latest complete clients window, else of the newest open one."""
    latest = read.latest_window("top_clients", iso(watermark_s))
    if latest is None:
        return None
    start, end, complete = latest
    by_requests = read.top_clients(start, end, "requests", top)
    by_bytes = read.top_clients(start, end, "bytes", top)
    totals = read.client_totals(start, end)
    return TopClients(
        window_start=start,
        window_end=end,
        complete=complete,
        window_s=interval_s(state.get("clients_window")) or (epoch_s(end) - epoch_s(start)),
        by_requests=[TopClient(i + 1, *r) for i, r in enumerate(by_requests)],
        by_bytes=[TopClient(i + 1, *r) for i, r in enumerate(by_bytes)],
        clients=totals.clients,
        requests=totals.requests,
        bytes=totals.bytes,
    )


def sessions(read: StoreReader, state: dict[str, str], range_start: float | None) -> Sessions:
    """Session statistics of the windows overlapping the range (``window_end > range
    start``, read by ``window_start``) and the longest of the kept sessions."""
    window_s = _window_seconds(read, state, "session_stats_window", "session_stats")
    after = None
    if range_start is not None and window_s is not None:
        after = (iso(range_start - window_s), iso(range_start))
    windows = read.session_windows(after, MAX_POINTS)
    longest = read.longest_sessions(LONGEST_SESSIONS)
    return Sessions(window_s=window_s, windows=windows, longest=longest, kept=read.session_count())


def alerts(read: StoreReader, range_start: str | None) -> Alerts:
    """The newest alerts and the site-wide request alerts of the range (``alerts`` holds at
    most 500 rows: no index needed)."""
    latest = read.latest_alerts(ALERTS_SHOWN)
    kept = read.alert_count()
    return Alerts(
        latest=latest,
        kept=kept,
        site_requests=read.series_alerts(SITE_SERIES, "requests", range_start),
    )


def bots(read: StoreReader, range_start: str | None) -> Bots:
    """The newest flagged client windows and the totals of the range (``bot_scores`` holds
    at most 500 rows, ``bot_windows`` a row per client window)."""
    latest = read.latest_bots(BOTS_SHOWN)
    return Bots(latest, *read.bot_totals(range_start))


def dimension(
    read: StoreReader,
    name: str,
    keys: tuple[str, ...],
    range_start: str | None,
    bucket: int,
) -> DimensionTraffic | None:
    """Traffic per key of the reference-data view ``name`` in the range: every key's totals,
    and requests/min per bucket of the selected keys (else the top :data:`DIMENSION_SERIES`);
    None when the view has no row in the range."""
    out = DimensionTraffic(dimension=name, bucket_s=bucket)
    for key, requests, errors in read.dimension_totals(name, range_start):
        out.requests[key] = requests
        out.errors[key] = errors
    if not out.requests:
        return None
    shown = [k for k in keys if k in out.requests] or list(out.requests)[:DIMENSION_SERIES]
    rows = read.dimension_buckets(name, shown, range_start, bucket)
    times = _grid(sorted({r.t for r in rows}), bucket)  # zero where no key had traffic
    out.covered_from = read.dimensions_first_start((name,), range_start)
    index = {t: i for i, t in enumerate(times)}
    out.times = [iso(t) for t in times]
    out.series = {k: [0.0] * len(times) for k in shown}
    per_minute = 60.0 / bucket
    for t, key, requests in rows:
        out.series[key][index[t]] = requests * per_minute
    return out


#: The panel views of the store (``traffic_by_dimension``'s ``dimension``), in GoAccess's
#: order: every panel but ``visitors`` (its own table).
PANEL_VIEWS = tuple(p for p in PANELS if p != "visitors")


def panels(read: StoreReader, range_start: str | None, top: int) -> PanelItems | None:
    """GoAccess's panels in the range: each panel's ``top`` items by hits, and the visitors
    of the days overlapping the range; None when the store has neither."""
    out = PanelItems(days=read.daily_visitors(range_start))
    for panel, item, hits, size, panel_hits, panel_items in read.panel_items(
        PANEL_VIEWS, range_start, top
    ):
        out.items.setdefault(panel, []).append((item, hits, size))
        out.totals[panel] = (panel_hits, panel_items)
    out.items = {p: out.items[p] for p in PANEL_VIEWS if p in out.items}  # GoAccess's order
    out.covered_from = read.dimensions_first_start(tuple(out.items), range_start)
    return out if out.items or out.days else None


def examples(
    read: StoreReader, notes: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The latest late events and quarantined lines (an older store's missing table: a note)."""

    def latest(table: str) -> list[dict[str, Any]]:
        return section(notes, table, lambda: read.latest_examples(table, EXAMPLES_SHOWN), [])

    return latest("late_examples"), latest("quarantine_examples")


def own_watermark(
    health: Health | None, last: LedgerRow | None, watermark: str | None, state: dict[str, str]
) -> None:
    """Give the ingest query's row of the progress table what its tiles show: logstream's
    event-time watermark (Spark reports none for the ingest query, or with deduplication
    the arrival-time watermark of that operator) and the state rows of the analytics
    snapshot added to Spark's. Only for the row of the tiles' micro-batch (``last``)."""
    if health is None or last is None or last[1] != INGEST_QUERY or health.progress_pending:
        return
    for row in health.queries:
        if row.get("query") == INGEST_QUERY and row.get("batch_id") == last[2]:
            row["watermark"] = watermark
            analytics = state.get("analytics_state_rows")
            if analytics is not None:
                row["state_rows"] = (row.get("state_rows") or 0) + int(analytics)


def _scheduling_delays(rows: list[dict[str, Any]]) -> None:
    """Move the DStream edition's scheduling delay, carried in ``watermark``, to its own key."""
    for r in rows:
        mark = r.get("watermark")
        if isinstance(mark, str) and mark.startswith(_SCHEDULING_DELAY):
            delay = mark.removeprefix(_SCHEDULING_DELAY)
            r["watermark"] = None  # a DStream has none
            r["scheduling_delay_ms"] = int(delay) if delay.lstrip("-").isdigit() else None


def health(read: StoreReader, last: LedgerRow | None, state: dict[str, str]) -> Health:
    """The tiles' micro-batch and the streaming queries' latest progress.

    The tiles describe one micro-batch, the newest in the ledger (``last``): its own
    progress row, not the newest row, which may be a later micro-batch's (one with no data,
    or one being committed) or an earlier one's (the progress of the newest is reported once
    it ends). Until that row is stored, the tiles of its progress are empty
    (:attr:`Health.progress_pending`).
    """
    out = Health()
    analytics_rows = state.get("analytics_state_rows")
    if last is not None:
        out.last_batch_at = last[3]
        out.last_batch_id = last[2]
    rows = read.progress_rows(600)
    if not rows:
        out.progress_pending = last is not None and last[1] == INGEST_QUERY
        return out
    _scheduling_delays(rows)
    latest: dict[str, dict[str, Any]] = {}
    for r in rows:
        latest.setdefault(r.get("query") or "?", r)
    main = INGEST_QUERY if INGEST_QUERY in latest else rows[0].get("query") or "?"
    series = [r for r in rows if (r.get("query") or "?") == main][:HEALTH_BATCHES][::-1]
    newest: dict[str, Any] | None = latest[main]
    if last is not None and last[1] == main:
        newest = next(
            (r for r in rows if r.get("query") == main and r.get("batch_id") == last[2]), None
        )
        if newest is None:
            out.progress_pending = True
        else:
            latest[main] = newest  # the table's row of the query: the tiles' micro-batch
    out.queries = sorted(latest.values(), key=lambda r: r.get("query") or "")
    out.times = [str(r.get("timestamp") or "") for r in series]
    out.input_rate = [r.get("input_rows_per_s") for r in series]
    out.processing_rate = [r.get("processed_rows_per_s") for r in series]
    out.duration_ms = [r.get("batch_duration_ms") for r in series]
    if newest is None:
        return out
    out.input_rows_per_s = newest.get("input_rows_per_s")
    out.processed_rows_per_s = newest.get("processed_rows_per_s")
    out.batch_duration_ms = newest.get("batch_duration_ms")
    out.num_input_rows = newest.get("num_input_rows")
    states = [r.get("state_rows") for r in latest.values() if r.get("state_rows") is not None]
    memory = [
        r.get("state_memory_bytes")
        for r in latest.values()
        if r.get("state_memory_bytes") is not None
    ]
    if analytics_rows is not None:  # open panes, sessions and series of the last snapshot
        states.append(int(analytics_rows))
    out.state_rows = sum(states) if states else None
    out.state_memory_bytes = sum(memory) if memory else None
    return out
