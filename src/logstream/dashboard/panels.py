"""The page's panels below the charts: each renders one part of a refresh's snapshot.

Element ids (stable, used by the browser test; :mod:`logstream.dashboard.layout` places them):

``trending``          trending-pages table (``trending-table``) and its window (``trending-window``)
``alerts``            latest anomaly alerts (``alerts-table``; ``alerts-empty`` when none)
``bots``              the bot model's verdicts (``bots-summary``, ``bots-table``;
                      ``bots-empty``)
``top-clients``       heavy hitters of the latest clients window (``clients-window``,
                      ``clients-requests-table``, ``clients-bytes-table``; ``clients-empty``)
``sessions``          session summary (``sessions-summary``) and the longest kept sessions
                      (``sessions-table``; ``sessions-empty``)
``health``            latest progress row per query (``health-table``)
``late``, ``quarantine``  latest examples (``late-table``, ``quarantine-table``)
"""

from __future__ import annotations

import re
from typing import Any

from dash import html

from logstream.config import PANEL_TITLES
from logstream.dashboard.figures import QUERY_OFF, plot_time, sparkline_uri
from logstream.dashboard.model import (
    STATUS_CLASSES,
    TIME_RANGES,
    Alert,
    DimensionTraffic,
    Snapshot,
    TopClient,
    TopClients,
    Trending,
    format_lacks,
)
from logstream.dashboard.tables import data_table
from logstream.units import human_bytes, plural

__all__ = [
    "alerts_panel",
    "bots_panel",
    "examples_tables",
    "fmt_duration",
    "fmt_number",
    "goaccess_panel",
    "health_table",
    "reference_panel",
    "sessions_panel",
    "top_clients_panel",
    "trending_panel",
    "url_cell",
]


def fmt_number(value: float | None, digits: int = 0) -> str:
    """A number with thousands separators, or a dash for None.

    Examples
    --------
    >>> fmt_number(1234.5, 1), fmt_number(None)
    ('1,234.5', '–')
    """
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def fmt_duration(seconds: float) -> str:
    """A duration in seconds, minutes or hours.

    Examples
    --------
    >>> fmt_duration(90), fmt_duration(600), fmt_duration(9000)
    ('90 s', '10.0 min', '2.5 h')
    """
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


def trending_panel(snap: Snapshot) -> list[Any]:
    """Heading, window and table of the trending pages with their sparklines."""
    heading = html.H2(f"Trending pages (top {snap.top})")
    tr = snap.trending
    if snap.state != "ok" or tr is None:
        return [heading, html.Div("No trending window yet.", className="empty")]
    window = _window_head(
        snap,
        tr,
        "trending-window",
        f" · {plural(tr.matching_pages, 'page')} "
        f"{'starts' if tr.matching_pages == 1 else 'start'} with {snap.filters.url_prefix!r}"
        if snap.filters.url_prefix
        else "",
    )
    if not tr.pages:
        what = (
            f"No page starting with {snap.filters.url_prefix!r} in this window."
            if snap.filters.url_prefix
            else "No page in this window."
        )
        return [heading, window, html.Div(what, className="empty", id="trending-empty")]
    rows = []
    for p in tr.pages:
        change = p.requests - p.previous
        arrow = "▲" if change > 0 else "▼" if change < 0 else "="
        rows.append(
            html.Tr(
                [
                    html.Td(str(p.rank), className="n"),
                    url_cell(p.url_path),
                    html.Td(f"{p.requests:,}", className="n requests"),
                    html.Td(
                        f"{arrow} {abs(change):,}" if change else "=",
                        className="n " + ("up" if change > 0 else "down" if change < 0 else ""),
                        title=f"{p.previous:,} in the window one slide earlier",
                    ),
                    html.Td(
                        html.Img(
                            src=sparkline_uri(p.trend),
                            alt=f"trend of {p.url_path}",
                            title=f"requests in the last {plural(len(p.trend), 'window')}: "
                            + ", ".join(str(v) for v in p.trend),
                            className="spark",
                        )
                    ),
                ]
            )
        )
    headings = ["#", "page", "requests", "vs prev.", f"last {plural(len(tr.trend_ends), 'window')}"]
    table = data_table("trending-table", headings, rows)
    return [heading, window, table]


def _window_head(
    snap: Snapshot, window: Trending | TopClients, wid: str, more: str = ""
) -> html.Div:
    """The window a panel shows: its bounds (element ``wid``, with ``data-start`` and
    ``data-end``), its width and whether it is complete, then ``more``."""
    state = "complete" if window.complete else "still open (no window is complete yet)"
    return html.Div(
        [
            html.Span(
                f"{snap.shown(window.window_start)} – {snap.shown(window.window_end)} "
                f"{snap.zone_name}",
                id=wid,
                **{"data-start": window.window_start, "data-end": window.window_end},
            ),
            html.Span(
                f" · {window.window_s / 60:g}-minute window, {state}{more}", className="hint"
            ),
        ]
    )


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def _alert_values(a: Alert) -> tuple[str, str]:
    """Value and ``mean ± std`` of an alert, in the metric's unit."""
    if a.metric == "error_rate":  # a fraction of the minute's requests
        return f"{100 * a.value:.1f} %", f"{100 * a.mean:.1f} ± {100 * a.std:.1f} %"
    return f"{a.value:,.0f}/min", f"{a.mean:,.1f} ± {a.std:,.1f}"


def alerts_panel(snap: Snapshot) -> list[Any]:
    """The newest anomaly alerts: minute, series, metric, value against mean ± std, z."""
    al = snap.alerts
    shown = len(al.latest) if al else 0
    heading = html.H2(
        f"Anomaly alerts ({shown} newest of {al.kept:,} kept)"
        if al and al.kept > shown
        else "Anomaly alerts"
    )
    hint = html.Div(
        "A minute more than k standard deviations from its series' running mean (EWMA); "
        "the series is the whole site or one page. Site-wide request alerts are marked on "
        "the requests chart.",
        className="hint",
    )
    if snap.state != "ok" or al is None or not al.latest:
        what = "No anomaly alert so far." if snap.state == "ok" else "No data yet."
        if snap.state == "ok" and snap.query_off("alerts"):
            what = QUERY_OFF.format(query="alerts")
        return [heading, hint, html.Div(what, className="empty", id="alerts-empty")]
    rows = []
    for a in al.latest:
        value, mean = _alert_values(a)
        arrow = "▲ spike" if a.direction == "spike" else "▼ drop"
        rows.append(
            html.Tr(
                [
                    html.Td(
                        snap.shown(a.window_start),
                        title=f"{a.window_start} – {a.window_end}",
                        className="time",
                        **{"data-start": a.window_start},
                    ),
                    url_cell(a.series),
                    html.Td(a.metric.replace("_", " ")),
                    html.Td(arrow, className=a.direction),
                    html.Td(value, className="n value"),
                    html.Td(mean, className="n"),
                    html.Td(_signed(a.z), className="n z"),
                ]
            )
        )
    headings = [f"minute ({snap.zone_name})", "series", "metric", "", "value", "mean ± std", "z"]
    table = data_table("alerts-table", headings, rows)
    return [heading, hint, html.Div(table, className="scroll")]


def bots_panel(snap: Snapshot) -> list[Any]:
    """The bot model's verdicts: the share of client windows and requests flagged in the
    range, and the newest flagged client windows with their features."""
    b = snap.bots
    version = b.latest[0].model_version if b and b.latest else None
    heading = html.H2(f"Bots (model {version})" if version else "Bots")
    hint = html.Div(
        "Each final client window scored by the bot model (logstream run --bot-model): "
        "request rate, distinct pages, error ratio, bytes, static share, inter-arrival time "
        "and robots.txt, never the user agent.",
        className="hint",
    )
    if snap.state != "ok" or b is None or not b.clients:
        what = "No client window scored yet." if snap.state == "ok" else "No data yet."
        if snap.state == "ok" and snap.query_off("bot_scores"):
            what = QUERY_OFF.format(query="bot_scores") + " (it needs --bot-model DIR)"
        return [heading, hint, html.Div(what, className="empty", id="bots-empty")]
    summary = html.P(
        f"{b.bots:,} of {plural(b.clients, 'client window')} flagged "
        f"({_share(b.bots, b.clients)}), "
        f"{_share(b.bot_requests, b.requests)} of their requests, in "
        f"{plural(b.windows, 'window')}.",
        id="bots-summary",
    )
    rows = [
        html.Tr(
            [
                html.Td(
                    snap.shown(r.window_start),
                    title=f"{r.window_start} – {r.window_end}",
                    className="time",
                ),
                url_cell(r.client_host),
                html.Td(f"{r.requests:,}", className="n"),
                html.Td(f"{r.bot_probability:.2f}", className="n"),
                html.Td(f"{r.distinct_pages:,.0f}", className="n"),
                html.Td(f"{100 * r.error_ratio:.0f} %", className="n"),
                html.Td(f"{100 * r.static_share:.0f} %", className="n"),
                html.Td("yes" if r.robots else "", className="n"),
            ]
        )
        for r in b.latest
    ]
    headings = [
        f"window ({snap.zone_name})",
        "client",
        "requests",
        "P(bot)",
        "pages",
        "errors",
        "static",
        "robots.txt",
    ]
    table = data_table("bots-table", headings, rows)
    return [heading, hint, summary, html.Div(table, className="scroll")]


def _share(part: int, total: int) -> str:
    return f"{100 * part / total:.1f} %" if total else "–"


def _clients_table(tid: str, clients: list[TopClient], total: int, by: str) -> html.Table:
    """Ranked clients: the measure ``by`` (``requests`` or ``bytes``) and its share of the
    window; both measures in the row's tooltip."""
    rows = []
    for c in clients:
        part = c.requests if by == "requests" else c.bytes
        value = f"{c.requests:,}" if by == "requests" else human_bytes(c.bytes)
        rows.append(
            html.Tr(
                [
                    html.Td(str(c.rank), className="n"),
                    url_cell(c.client_host),
                    html.Td(value, className=f"n {by}"),
                    html.Td(_share(part, total), className="n"),
                ],
                title=f"{c.client_host}: {plural(c.requests, 'request')}, "
                f"{plural(c.bytes, 'byte')}",
            )
        )
    return data_table(tid, ["#", "client", by, "share"], rows)


def top_clients_panel(snap: Snapshot) -> list[Any]:
    """Heavy hitters of the latest complete clients window: top N by requests and by bytes."""
    heading = html.H2(f"Top clients (top {snap.top})")
    tc = snap.top_clients
    if snap.state != "ok" or tc is None:
        return [heading, html.Div("No clients window yet.", className="empty", id="clients-empty")]
    window = _window_head(
        snap,
        tc,
        "clients-window",
        f" · {plural(tc.clients, 'client')}, {plural(tc.requests, 'request')}, "
        f"{human_bytes(tc.bytes)}",
    )
    return [
        heading,
        window,
        html.Div(
            [
                html.Div(
                    [
                        html.H3("By requests"),
                        _clients_table(
                            "clients-requests-table", tc.by_requests, tc.requests, "requests"
                        ),
                    ]
                ),
                html.Div(
                    [
                        html.H3("By bytes"),
                        _clients_table("clients-bytes-table", tc.by_bytes, tc.bytes, "bytes"),
                    ]
                ),
            ],
            className="pair",
        ),
    ]


def _dimension_table(tid: str, label: str, d: DimensionTraffic, limit: int) -> html.Table:
    rows = [
        html.Tr(
            [
                html.Td(key),
                html.Td(f"{requests:,}", className="num"),
                html.Td(_share(requests, d.total), className="num"),
                html.Td(f"{d.errors[key]:,}", className="num"),
                html.Td(_share(d.errors[key], requests), className="num"),
            ]
        )
        for key, requests in list(d.requests.items())[:limit]
    ]
    return data_table(tid, [label, "requests", "share", "errors ≥400", "error rate"], rows)


def reference_panel(snap: Snapshot) -> list[Any]:
    """Traffic by agent class, section and network in the range (the reference-data views),
    with the crawler share."""
    heading = html.H2("Agent classes, sections and networks")
    if snap.state != "ok" or (snap.agents is None and snap.sections is None):
        what = "No reference-data traffic yet (traffic_by_agent, traffic_by_section)."
        return [heading, html.Div(what, className="empty", id="reference-empty")]
    share = snap.crawler_share
    notes = [
        html.Div(f"{label}: {note}.", className="hint", id=f"{dimension}-covers")
        for dimension, label in (("agents", "Agent classes"), ("sections", "Sections"))
        if (d := getattr(snap, dimension)) is not None
        and (note := snap.coverage_note(d.covered_from))
    ]
    summary = html.Div(
        "Crawler share: " + ("–" if share is None else f"{share:.1%}") + " of the requests "
        "in the range (agent class 'crawler': the crawler-user-agents patterns, or your "
        "--reference agents table)",
        className="hint",
        id="crawler-share",
    )
    tables = []
    for dimension, label, limit in (
        ("agents", "agent class", 20),
        ("sections", "section", snap.top),
        ("networks", "organisation", snap.top),
    ):
        d = getattr(snap, dimension)
        if d is not None:
            tables.append(
                html.Div([html.H3(label), _dimension_table(f"{dimension}-table", label, d, limit)])
            )
    return [heading, summary, *notes[:1], html.Div(tables, className="pair")]


def goaccess_panel(snap: Snapshot) -> list[Any]:
    """GoAccess's panels in the range (``traffic_by_panel``'s live view): unique visitors per
    day, then each panel's top items by hits with their share and bytes."""
    heading = html.H2("GoAccess panels")
    p = snap.panels
    if snap.state != "ok" or p is None:
        what = "No panel rows yet (traffic_by_panel: daily visitors, static files, OS, …)."
        return [heading, html.Div(what, className="empty", id="goaccess-empty")]
    chosen = TIME_RANGES[snap.filters.time_range][0]
    note = snap.coverage_note(p.covered_from, f"the {chosen} chosen")
    tables = []
    if p.days:
        rows = [
            html.Tr(
                [
                    html.Td(day, className="time"),
                    html.Td(f"{hits:,}", className="n"),
                    html.Td(f"{visitors:,}", className="n"),
                    html.Td(human_bytes(size), className="n"),
                ]
            )
            for day, hits, visitors, size in p.days
        ]
        tables.append(
            html.Div(
                [
                    html.H3(PANEL_TITLES["visitors"] + " (UTC)"),
                    data_table("panel-visitors-table", ["day", "hits", "visitors", "bytes"], rows),
                ]
            )
        )
    for panel, items in p.items.items():
        hits_total, count = p.totals[panel]
        rows = [
            html.Tr(
                [
                    url_cell(item),
                    html.Td(f"{hits:,}", className="n"),
                    html.Td(_share(hits, hits_total), className="n"),
                    html.Td(human_bytes(size), className="n"),
                ]
            )
            for item, hits, size in items
        ]
        title = PANEL_TITLES[panel] + (" (countries)" if panel == "geolocation" else "")
        label = f"{title}: {plural(count, 'item')}"
        tid = f"panel-{panel.replace('_', '-')}-table"
        shown = (
            data_table(tid, ["item", "hits", "share", "bytes"], rows)
            if rows
            else html.Div(_no_items(snap, panel), className="empty", id=f"{tid}-empty")
        )
        tables.append(html.Div([html.H3(label), shown]))
    covered = [html.Div(f"Each panel {note}.", className="hint", id="goaccess-covers")]
    return [heading, *(covered if note else []), html.Div(tables, className="panels")]


def _no_items(snap: Snapshot, panel: str) -> str:
    """What an empty GoAccess panel says instead of a table of headings only: the log has
    no such field, the filters leave none, or the range holds none."""
    field = {"referrers": "referrer", "referring_sites": "referrer", "remote_user": "user"}
    if panel in field and format_lacks(snap.log_format, field[panel]):
        return f"None: the log format {snap.log_format} has no {field[panel]}."
    f = snap.filters
    narrowed = f.url_prefix or f.status_classes != STATUS_CLASSES or f.sections or f.agent_classes
    return "None under the filters chosen." if narrowed else "None in this range."


def sessions_panel(snap: Snapshot) -> list[Any]:
    """Sessions of the range (count, bounce rate, pages per session, latest window's
    durations) and the longest of the closed sessions the store keeps."""
    heading = html.H2("Sessions")
    se = snap.sessions
    if snap.state != "ok" or se is None or (not se.windows and not se.longest):
        what = (
            "No closed session yet: a session closes when its visitor has been idle for the "
            "session gap and the watermark has passed."
            if snap.state == "ok"
            else "No data yet."
        )
        if snap.state == "ok" and snap.query_off("sessions"):
            what = QUERY_OFF.format(query="sessions")
        return [heading, html.Div(what, className="empty", id="sessions-empty")]
    summary: list[Any] = []
    if se.windows:
        last = se.windows[-1]
        rate = se.bounce_rate
        summary = [
            html.Span(f"{se.sessions:,}", className="sessions-count"),
            f" {'session' if se.sessions == 1 else 'sessions'} started in the "
            f"{plural(len(se.windows), 'window')} shown · bounce rate ",
            html.Span("–" if rate is None else f"{rate:.1f} %", className="bounce-rate"),
            f" · {se.pages_per_session or 0:.1f} pages per session · latest window "
            f"({snap.shown(last.window_start)} {snap.zone_name}): median "
            f"{'–' if last.median_duration_s is None else fmt_duration(last.median_duration_s)}, "
            f"p95 {'–' if last.p95_duration_s is None else fmt_duration(last.p95_duration_s)}",
        ]
    else:
        summary = ["No session started in this time range."]
    rows = [
        html.Tr(
            [
                url_cell(s.client_host),
                html.Td(snap.shown(s.session_start), className="time"),
                html.Td(fmt_duration(s.duration_s), className="n duration"),
                html.Td(f"{s.requests:,}", className="n"),
                html.Td(f"{s.pages:,}", className="n"),
                html.Td(human_bytes(s.bytes), className="n"),
            ],
            title=f"entry {s.entry_page or '–'} → exit {s.exit_page or '–'}; "
            f"ended {snap.shown(s.session_end)} {snap.zone_name}; "
            f"{s.user_agent or 'no user agent'}",
        )
        for s in se.longest
    ]
    table: Any = html.Div("None kept yet.", className="empty", id="sessions-table-empty")
    if rows:
        headings = [
            "client",
            f"start ({snap.zone_name})",
            "duration",
            "requests",
            "pages",
            "bytes",
        ]
        table = data_table("sessions-table", headings, rows)
    return [
        heading,
        html.Div(summary, className="hint", id="sessions-summary"),
        html.H3(f"Longest of the {se.kept:,} latest closed sessions (hover for pages)"),
        table,
    ]


#: Where a name may break in a table cell: after a slash, a dot or a dash.
_BREAK_AFTER = re.compile(r"(?<=[/.\-])")


def url_cell(text: str | None) -> html.Td:
    """A table cell of a host, a path or a file: a break offered after each ``/``, ``.`` and
    ``-`` (``<wbr>``), so ``kris.reslife.okstate.edu`` breaks as ``kris.reslife.okstate.``
    ``edu``, not in the middle of a word; the CSS breaks elsewhere only a word with none of
    them (``overflow-wrap: anywhere``)."""
    children: list[Any] = []
    for part in _BREAK_AFTER.split(text or ""):
        if part:
            children += [part, html.Wbr()]
    return html.Td(children[:-1], className="url")


def _records_table(
    tid: str, columns: list[tuple[str, str, str]], records: list[dict[str, Any]]
) -> Any:
    """Table ``tid`` of ``records``: a column per ``(key, heading, cell class)``; "None so
    far." when there is none."""
    if not records:
        return html.Div("None so far.", className="empty", id=f"{tid}-empty")
    rows = [
        html.Tr(
            [
                url_cell(r.get(key))
                if cls == "url"
                else html.Td("" if r.get(key) is None else str(r.get(key)), className=cls)
                for key, _, cls in columns
            ]
        )
        for r in records
    ]
    return data_table(tid, [heading for _, heading, _ in columns], rows)


def examples_tables(snap: Snapshot) -> tuple[list[Any], list[Any]]:
    """The late-events and quarantine panels: counter and latest examples."""
    c = snap.counters
    late = [
        html.H2(f"Late events: {c.get('late_events', 0):,}"),
        html.Div(
            "Event time at or before the watermark when they arrived; kept in late_events/, "
            "not counted in the windows. Latest examples:",
            className="hint",
        ),
        _records_table(
            "late-table",
            [
                ("event_time", f"event time ({snap.zone_name})", ""),
                ("watermark", "watermark then", ""),
                ("client_host", "client", "url"),
                ("url_path", "page", "url"),
                ("batch_id", "batch", "n"),
            ],
            [
                {
                    **r,
                    "event_time": snap.shown(r.get("event_time")),
                    "watermark": snap.shown(r.get("watermark")),
                }
                for r in snap.late_examples
            ],
        ),
    ]
    bad = [
        html.H2(f"Quarantined lines: {c.get('quarantined', 0):,}"),
        html.Div(
            "Lines that did not parse or were stamped in the future (future_event_time), kept "
            "in quarantine/. Latest examples:",
            className="hint",
        ),
        _records_table(
            "quarantine-table",
            [
                ("raw_line", "line", "raw"),
                ("reason", "reason", ""),
                ("source_file", "file", "url"),
                ("batch_id", "batch", "n"),
            ],
            [
                {**r, "raw_line": str(r.get("raw_line") or "")[:300]}
                for r in snap.quarantine_examples
            ],
        ),
    ]
    return late, bad


def _watermark_cell(row: dict[str, Any], snap: Snapshot) -> str:
    """A progress row's watermark to the second, in the page's time zone (as the watermark
    tile); for the DStream edition, which has none, its scheduling delay."""
    if row.get("scheduling_delay_ms") is not None:
        return f"none (DStream); scheduling delay {row['scheduling_delay_ms']:,} ms"
    return (snap.shown(row.get("watermark")) or "")[:19]


def _kafka_table(snap: Snapshot) -> list[Any]:
    """The Kafka source's partitions, as the ingest query last read them: the offset read
    to, the newest offset and the lag (messages not read yet); rows/s and lost messages in
    the heading. Nothing without a Kafka source."""
    k = snap.kafka
    if not k:
        return []
    lost = f"; {plural(k['lost'], 'message')} deleted before they were read" if k["lost"] else ""
    # Spark measures the input rate between two triggers: none for the first (a dash, as the tile)
    rate_in = None if k.get("batch_id") == 0 else k.get("input_rows_per_s")
    title = (
        f"Kafka topic {k.get('topic')} (batch {k.get('batch_id')}): "
        f"{fmt_number(rate_in)} rows/s in, "
        f"{fmt_number(k.get('processed_rows_per_s'))} processed, lag {fmt_number(k.get('lag'))}"
        + lost
    )
    rows = [
        {
            "partition": p["partition"],
            "offset": fmt_number(p.get("offset")),
            "latest": fmt_number(p.get("latest")),
            "lag": fmt_number(p.get("lag")),
        }
        for p in k.get("partitions") or []
    ]
    return [
        html.H3(title, id="kafka-heading"),
        _records_table(
            "kafka-table",
            [
                ("partition", "partition", "n"),
                ("offset", "offset read to", "n"),
                ("latest", "latest offset", "n"),
                ("lag", "lag (messages)", "n"),
            ],
            rows,
        ),
    ]


def health_table(snap: Snapshot) -> list[Any]:
    """Latest progress row of each streaming query."""
    heading = html.H2("Streaming queries (latest progress)")
    h = snap.health
    if h is None or not h.queries:
        return [heading, html.Div("No progress reported yet.", className="empty")]
    rows = [
        {
            **q,
            "input_rows_per_s": fmt_number(q.get("input_rows_per_s")),
            "processed_rows_per_s": fmt_number(q.get("processed_rows_per_s")),
            "batch_duration_ms": fmt_number(q.get("batch_duration_ms")),
            "num_input_rows": fmt_number(q.get("num_input_rows")),
            "state_rows": fmt_number(q.get("state_rows")),
            "dropped_by_watermark": fmt_number(q.get("dropped_by_watermark")),
            "timestamp": (plot_time(q.get("timestamp")) or "")[:19],
            "watermark": _watermark_cell(q, snap),
        }
        for q in h.queries
    ]
    return [
        heading,
        *_kafka_table(snap),
        _records_table(
            "health-table",
            [
                ("query", "query", ""),
                ("batch_id", "batch", "n"),
                ("timestamp", "at (wall clock, UTC)", ""),
                ("num_input_rows", "rows", "n"),
                ("input_rows_per_s", "input/s", "n"),
                ("processed_rows_per_s", "processed/s", "n"),
                ("batch_duration_ms", "duration ms", "n"),
                ("watermark", f"watermark ({snap.zone_name})", ""),
                ("state_rows", "state rows", "n"),
                ("dropped_by_watermark", "dropped", "n"),
            ],
            rows,
        ),
    ]
