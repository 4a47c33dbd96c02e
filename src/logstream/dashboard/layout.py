"""The page: a static skeleton (controls, empty panels) and the parts each refresh renders.

Element ids (stable, used by the browser test):

``banner``            state of the store: waiting / unreadable / stale / notes
``kpis``              counter cards (``kpi-<name>`` each, value in ``.value``)
``trending``          trending-pages table (``trending-table``) and its window (``trending-window``)
``alerts``            latest anomaly alerts (``alerts-table``; ``alerts-empty`` when none)
``bots``              the bot model's verdicts (``bots-summary``, ``bots-table``;
                      ``bots-empty``)
``top-clients``       heavy hitters of the latest clients window (``clients-window``,
                      ``clients-requests-table``, ``clients-bytes-table``; ``clients-empty``)
``sessions``          session summary (``sessions-summary``) and the longest kept sessions
                      (``sessions-table``; ``sessions-empty``)
``graph-requests``, ``graph-bytes``, ``graph-errors``, ``graph-visitors``, ``graph-sessions``,
``graph-health``
``health``            latest progress row per query (``health-table``)
``late``, ``quarantine``  latest examples (``late-table``, ``quarantine-table``)
``range``, ``url-prefix``, ``status-filter``  the controls; ``tick`` the refresh timer
"""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from logstream.dashboard.data import (
    DEFAULT_RANGE,
    STATUS_CLASSES,
    TIME_RANGES,
    Alert,
    DimensionTraffic,
    Snapshot,
    TopClient,
    TopClients,
    Trending,
)
from logstream.dashboard.figures import QUERY_OFF, plot_time, sparkline_uri
from logstream.units import human_bytes, plural

__all__ = [
    "CSS",
    "GRAPHS",
    "INDEX_HTML",
    "alerts_panel",
    "banner",
    "bots_panel",
    "build_layout",
    "examples_tables",
    "health_table",
    "kpi_cards",
    "reference_panel",
    "sessions_panel",
    "top_clients_panel",
    "trending_panel",
]

#: Ids of the charts, in page order.
GRAPHS = (
    "graph-requests",
    "graph-bytes",
    "graph-errors",
    "graph-visitors",
    "graph-sessions",
    "graph-sections",
    "graph-agents",
    "graph-health",
)

#: The page's style sheet, inlined in the HTML (no external stylesheet, no assets folder).
CSS = """
* { box-sizing: border-box; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans",
  sans-serif; background: #f3f5f7; color: #1f2933; font-size: 14px; }
header { background: #1f2933; color: #f5f7fa; padding: .7rem 1.2rem; display: flex;
  align-items: baseline; gap: 1rem; flex-wrap: wrap; }
header h1 { font-size: 1.15rem; margin: 0; font-weight: 600; }
header .sub { color: #aab4bf; font-size: .85rem; }
header a { color: #9cc3ff; }
main { padding: .8rem 1.2rem 2rem; }
.controls { display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; background: #fff;
  border-radius: 6px; padding: .55rem .9rem; margin-bottom: .8rem;
  box-shadow: 0 1px 2px rgba(0,0,0,.06); }
.controls label.ctl { font-weight: 600; margin-right: .4rem; color: #52606d; }
.controls .opt { margin-right: .45rem; white-space: nowrap; }
.controls .opt input { margin-right: .25rem; }
.controls .dash-input-container, .controls input[type=text] { width: 12rem; }
.controls input[type=text] { padding: .25rem .45rem; font-size: .9rem; }
.hint { color: #7b8794; font-size: .8rem; }
.banner { border-radius: 6px; padding: .6rem .9rem; margin-bottom: .8rem; }
.banner p { margin: .15rem 0; }
.banner.ok { display: none; }
.banner.waiting, .banner.missing { background: #e6f0ff; border: 1px solid #9cc3ff;
  font-size: 1.05rem; }
.banner.unreadable { background: #ffe8e8; border: 1px solid #f29b9b; }
.banner.stale, .banner.notes { background: #fff6dd; border: 1px solid #f0d289; }
.banner.losses { background: #ffe8e8; border: 1px solid #f29b9b; }
.banner .hint { margin-left: .4rem; }
.kpis { display: grid; grid-template-columns: repeat(auto-fill, minmax(10.5rem, 1fr));
  gap: .55rem; margin-bottom: .8rem; }
.kpi { background: #fff; border-radius: 6px; padding: .5rem .7rem;
  box-shadow: 0 1px 2px rgba(0,0,0,.06); }
.kpi .label { color: #616e7c; font-size: .78rem; }
.kpi .value { font-size: 1.25rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.kpi .value.time { font-size: .95rem; padding: .15rem 0; }
.kpi .detail { color: #7b8794; font-size: .75rem; }
.kpi.warn .value { color: #c05621; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(30rem, 1fr));
  gap: .8rem; margin-bottom: .8rem; }
.grid1 { margin-bottom: .8rem; }
.panel { background: #fff; border-radius: 6px; padding: .6rem .8rem;
  box-shadow: 0 1px 2px rgba(0,0,0,.06); min-width: 0; }
.panel h2 { font-size: .98rem; margin: .1rem 0 .45rem; }
table { border-collapse: collapse; width: 100%; font-size: .85rem; }
th { text-align: left; color: #52606d; font-weight: 600; border-bottom: 1px solid #cbd2d9;
  padding: .25rem .4rem; }
td { border-bottom: 1px solid #eef0f2; padding: .22rem .4rem; vertical-align: middle; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.url { word-break: break-all; }
td.raw { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .78rem;
  word-break: break-all; }
.up { color: #2f855a; } .down { color: #c53030; }
td.spike { color: #c53030; white-space: nowrap; } td.drop { color: #2b6cb0; white-space: nowrap; }
td.time { white-space: nowrap; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: .8rem; }
.scroll { max-height: 26rem; overflow-y: auto; }
.panel h3 { font-size: .88rem; margin: .6rem 0 .25rem; color: #52606d; }
.empty { color: #7b8794; font-style: italic; padding: .4rem 0; }
"""

#: The HTML page around the app: Dash's placeholders and the inlined style sheet.
INDEX_HTML = (
    """<!DOCTYPE html>
<html lang="en">
    <head>
        {%metas%}
        <title>{%title%}</title>
        {%favicon%}
        {%css%}
        <style>"""
    + CSS
    + """</style>
    </head>
    <body>
        {%app_entry%}
        <footer>
            {%config%}
            {%scripts%}
            {%renderer%}
        </footer>
    </body>
</html>"""
)


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _short_time(text: str | None) -> str:
    if not text:
        return "–"
    return text.replace("T", " ").removesuffix("Z")[:19] + " UTC"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


# -- skeleton ----------------------------------------------------------------------------------


def build_layout(refresh_ms: int, spark_ui_url: str, store_label: str) -> html.Div:
    """The page skeleton; every panel is filled by the refresh callback.

    Parameters
    ----------
    refresh_ms : int
        Refresh period of the page, milliseconds.
    spark_ui_url : str
        Link to Spark's own UI.
    store_label : str
        The store file, shown in the header.
    """

    return html.Div(
        [
            html.Header(
                [
                    html.H1("logstream — live"),
                    html.Span(f"store {store_label}", className="sub"),
                    html.Span(
                        [
                            "updated ",
                            html.Span("–", id="updated"),
                            f" · refresh every {refresh_ms / 1000:g} s",
                        ],
                        className="sub",
                    ),
                    html.A(
                        "Spark UI ↗",
                        id="spark-ui-link",
                        href=spark_ui_url,
                        target="_blank",
                        rel="noopener",
                        title="Spark's own UI: jobs, stages, streaming query statistics",
                    ),
                ]
            ),
            html.Main(
                [
                    html.Div(
                        [
                            _control(
                                "Time range",
                                dcc.RadioItems(
                                    id="range",
                                    options=[
                                        {"label": label, "value": key}
                                        for key, (label, _) in TIME_RANGES.items()
                                    ],
                                    value=DEFAULT_RANGE,
                                    inline=True,
                                    labelClassName="opt",
                                ),
                                "back from the newest event time",
                            ),
                            _control(
                                "URL prefix",
                                dcc.Input(
                                    id="url-prefix",
                                    type="text",
                                    placeholder="/shuttle/ + Enter",
                                    debounce=True,
                                    value="",
                                ),
                                "filters the trending pages",
                            ),
                            _control(
                                "Status",
                                dcc.Checklist(
                                    id="status-filter",
                                    options=[{"label": c, "value": c} for c in STATUS_CLASSES],
                                    value=list(STATUS_CLASSES),
                                    inline=True,
                                    labelClassName="opt",
                                ),
                                "filters the requests chart and request totals",
                            ),
                            _control(
                                "Sections",
                                dcc.Dropdown(
                                    id="section-filter", multi=True, options=[], placeholder="all"
                                ),
                                "filters the sections chart",
                            ),
                            _control(
                                "Agent classes",
                                dcc.Dropdown(
                                    id="agent-filter", multi=True, options=[], placeholder="all"
                                ),
                                "filters the agent-class chart",
                            ),
                        ],
                        className="controls",
                    ),
                    html.Div(
                        html.P("Loading…"),
                        id="banner",
                        className="banner waiting",
                        role="status",
                    ),
                    html.Div(id="kpis", className="kpis"),
                    _row("trending", "graph-requests"),
                    _row("alerts", "top-clients"),
                    _row("graph-bytes", "graph-errors"),
                    _row("graph-visitors", "graph-health"),
                    _row("graph-sessions", "sessions"),
                    _row("graph-sections", "graph-agents"),
                    html.Div(html.Div(id="bots", className="panel"), className="grid1"),
                    html.Div(html.Div(id="reference", className="panel"), className="grid1"),
                    _row("late", "quarantine"),
                    html.Div(html.Div(id="health", className="panel"), className="grid1"),
                    dcc.Interval(id="tick", interval=refresh_ms, n_intervals=0),
                    dcc.Store(id="seen", data=None),
                ]
            ),
        ]
    )


def _control(label: str, widget: Any, hint: str) -> html.Div:
    """One control of the bar: its label, the input ``widget``, a hint below."""
    return html.Div([html.Label(label, className="ctl"), widget, html.Div(hint, className="hint")])


def _row(*ids: str) -> html.Div:
    """Panels side by side (``grid2``): a chart for an id of :data:`GRAPHS`, else an empty
    panel with that id that the refresh fills."""
    return html.Div(
        [
            html.Div(_graph(i), className="panel")
            if i in GRAPHS
            else html.Div(id=i, className="panel")
            for i in ids
        ],
        className="grid2",
    )


def _graph(gid: str) -> dcc.Graph:
    """An empty chart ``gid`` (the refresh sends its figure)."""
    return dcc.Graph(
        id=gid,
        config={"displaylogo": False},
        figure={"data": [], "layout": {"height": 250}},
    )


# -- rendered on every refresh -------------------------------------------------------------------


def banner(snap: Snapshot) -> tuple[list[Any], str]:
    """Children and class of the state banner (hidden when all is well)."""
    if snap.state != "ok":
        return [html.P(snap.message)], f"banner {snap.state}"
    lines = []
    kind = "ok"
    if snap.synthetic:
        lines.append(html.P(f"SYNTHETIC data, not real logs: {snap.source_label}", id="synthetic"))
        kind = "notes"
    if snap.stale:
        lines.append(html.P(snap.stale))
        kind = "stale"
    if snap.message:
        lines.append(html.P(snap.message))
        kind = "stale"
    if snap.notes:
        lines += [html.P(n) for n in snap.notes]
        kind = "stale" if kind == "stale" else "notes"
    if snap.lost_bytes > 0:  # first: data that will never be counted
        lines.insert(0, follow_losses_line(snap))
        kind = "losses"
    return lines, f"banner {kind}"


#: Where the page sends a reader who sees lines lost to rotation.
FOLLOW_DOC = "docs/follow.md"


def follow_losses_text(losses: dict[str, int]) -> str:
    """The loss warning's text: bytes, estimated lines, files and truncations.

    Examples
    --------
    >>> follow_losses_text({"follow_lost_bytes": 4096, "follow_lost_lines": 40,
    ...                     "follow_lost_files": 1, "follow_truncations": 2})
    '4,096 bytes (~40 lines) lost to rotation (1 file gone unread, 2 truncations).'
    """

    def n(key: str, one: str, many: str) -> str:
        count = losses.get(key, 0)
        return f"{count:,} {one if count == 1 else many}"

    return (
        f"{n('follow_lost_bytes', 'byte', 'bytes')} (~{n('follow_lost_lines', 'line', 'lines')})"
        f" lost to rotation ({n('follow_lost_files', 'file', 'files')} gone unread, "
        f"{n('follow_truncations', 'truncation', 'truncations')})."
    )


def follow_losses_line(snap: Snapshot) -> html.P:
    """The banner's loss warning, with where to read how to lose nothing."""
    return html.P(
        [
            html.Strong(follow_losses_text(snap.follow_losses)),
            html.Span(
                f"Why, and the logrotate settings and --follow glob that lose nothing: "
                f"{FOLLOW_DOC} (Rotation, Limits).",
                className="hint",
            ),
        ],
        id="follow-losses",
    )


def _kpi(key: str, label: str, value: str, detail: str = "", warn: bool = False) -> html.Div:
    is_time = value.endswith(" UTC")
    return html.Div(
        [
            html.Div(label, className="label"),
            html.Div(value, className="value time" if is_time else "value"),
            html.Div(detail, className="detail"),
        ],
        id=f"kpi-{key}",
        className="kpi warn" if warn else "kpi",
    )


def kpi_cards(snap: Snapshot) -> list[html.Div]:
    """Counter cards: traffic in the range, late / quarantined, watermark, pipeline rates."""
    if snap.state != "ok":
        return []
    c = snap.counters
    t = snap.traffic
    h = snap.health
    classes = snap.filters.status_classes
    which = "all classes" if len(classes) == len(STATUS_CLASSES) else ", ".join(classes) or "none"

    def counter(key: str, label: str, name: str, detail: str, warn: bool = False) -> html.Div:
        """Card of the store's counter ``name``; ``warn``: highlighted when it is not 0."""
        count = c.get(name, 0)
        return _kpi(key, label, _num(count), detail, warn=warn and bool(count))

    cards = [
        _kpi(
            "requests",
            "Requests in range",
            _num(t.total_requests if t else None),
            f"status: {which}",
        ),
        _kpi("bytes", "Bytes in range", human_bytes(t.total_bytes if t else None), "all statuses"),
        _kpi(
            "error-rate",
            "Error rate in range",
            "–" if not t or not t.total_all else f"{100 * t.total_errors / t.total_all:.2f} %",
            f"{plural(t.total_errors if t else None, 'request')} ≥ 400",
        ),
        counter("events", "On-time events", "events", "since the store was created"),
        counter("late", "Late events", "late_events", "event time ≤ watermark", warn=True),
        counter(
            "quarantined", "Quarantined lines", "quarantined", "could not be parsed", warn=True
        ),
        counter(
            "duplicates",
            "Duplicate lines",
            "duplicates",
            "deduplication is off" if snap.dedup is False else "dropped as shipper retries",
        ),
        _kpi("newest", "Newest event", _short_time(snap.newest_event), "event time"),
    ]
    lag = "" if snap.watermark_delay_s is None else _duration(snap.watermark_delay_s)
    cards.append(
        _kpi(
            "watermark",
            "Watermark",
            _short_time(snap.watermark),
            f"{lag} behind the newest event" if lag else "",
        )
    )
    if snap.follow_losses:  # the follow source records its losses: show them, even when 0
        lost = snap.follow_losses
        cards.append(
            _kpi(
                "lost",
                "Lost to rotation",
                human_bytes(lost["follow_lost_bytes"]),
                f"~{plural(lost['follow_lost_lines'], 'line')}; truncations seen: "
                f"{_num(lost['follow_truncations'])}",
                warn=lost["follow_lost_bytes"] > 0,
            )
        )
    if h is not None:
        # every tile of a micro-batch is that of the "Last micro-batch" tile (one read)
        batch = "last batch" if h.last_batch_id is None else f"batch #{h.last_batch_id}"
        rows = (
            f"{batch}: progress reported when it ends"
            if h.progress_pending
            else f"{plural(h.num_input_rows, 'row')} in {batch}"
        )
        cards += [
            _kpi("input-rate", "Input rate", _num(h.input_rows_per_s), f"events/s, {batch}"),
            _kpi(
                "processing-rate",
                "Processing rate",
                _num(h.processed_rows_per_s),
                f"events/s, {batch}",
            ),
            _kpi(
                "batch-duration",
                "Batch duration",
                "–" if h.batch_duration_ms is None else f"{h.batch_duration_ms:,} ms",
                rows,
            ),
            _kpi(
                "state-rows",
                "State rows",
                _num(h.state_rows),
                "open panes, sessions and detector series"
                + (
                    f"; {human_bytes(h.state_memory_bytes)} in Spark's state store"
                    if h.state_memory_bytes
                    else ""
                ),
            ),
            _kpi(
                "last-batch",
                "Last micro-batch",
                "–" if h.last_batch_id is None else f"#{h.last_batch_id}",
                _short_time(h.last_batch_at),
            ),
        ]
    return cards


def trending_panel(snap: Snapshot) -> list[Any]:
    """Heading, window and table of the trending pages with their sparklines."""
    heading = html.H2(f"Trending pages (top {snap.top})")
    tr = snap.trending
    if snap.state != "ok" or tr is None:
        return [heading, html.Div("No trending window yet.", className="empty")]
    window = _window_head(
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
                    html.Td(p.url_path, className="url"),
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
    table = _table("trending-table", headings, rows)
    return [heading, window, table]


def _window_head(window: Trending | TopClients, wid: str, more: str = "") -> html.Div:
    """The window a panel shows: its bounds (element ``wid``, with ``data-start`` and
    ``data-end``), its width and whether it is complete, then ``more``."""
    state = "complete" if window.complete else "still open (no window is complete yet)"
    return html.Div(
        [
            html.Span(
                f"{plot_time(window.window_start)} – {plot_time(window.window_end)} UTC",
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
                        plot_time(a.window_start),
                        title=f"{a.window_start} – {a.window_end}",
                        className="time",
                        **{"data-start": a.window_start},
                    ),
                    html.Td(a.series, className="url"),
                    html.Td(a.metric.replace("_", " ")),
                    html.Td(arrow, className=a.direction),
                    html.Td(value, className="n value"),
                    html.Td(mean, className="n"),
                    html.Td(_signed(a.z), className="n z"),
                ]
            )
        )
    headings = ["minute (UTC)", "series", "metric", "", "value", "mean ± std", "z"]
    table = _table("alerts-table", headings, rows)
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
                    plot_time(r.window_start),
                    title=f"{r.window_start} – {r.window_end}",
                    className="time",
                ),
                html.Td(r.client_host, className="url"),
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
        "window (UTC)",
        "client",
        "requests",
        "P(bot)",
        "pages",
        "errors",
        "static",
        "robots.txt",
    ]
    table = _table("bots-table", headings, rows)
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
                    html.Td(c.client_host, className="url"),
                    html.Td(value, className=f"n {by}"),
                    html.Td(_share(part, total), className="n"),
                ],
                title=f"{c.client_host}: {plural(c.requests, 'request')}, "
                f"{plural(c.bytes, 'byte')}",
            )
        )
    return _table(tid, ["#", "client", by, "share"], rows)


def top_clients_panel(snap: Snapshot) -> list[Any]:
    """Heavy hitters of the latest complete clients window: top N by requests and by bytes."""
    heading = html.H2(f"Top clients (top {snap.top})")
    tc = snap.top_clients
    if snap.state != "ok" or tc is None:
        return [heading, html.Div("No clients window yet.", className="empty", id="clients-empty")]
    window = _window_head(
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
    return _table(tid, [label, "requests", "share", "errors ≥400", "error rate"], rows)


def reference_panel(snap: Snapshot) -> list[Any]:
    """Traffic by agent class, section and network in the range (the reference-data views),
    with the crawler share."""
    heading = html.H2("Agent classes, sections and networks")
    if snap.state != "ok" or (snap.agents is None and snap.sections is None):
        what = "No reference-data traffic yet (traffic_by_agent, traffic_by_section)."
        return [heading, html.Div(what, className="empty", id="reference-empty")]
    share = snap.crawler_share
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
    return [heading, summary, html.Div(tables, className="pair")]


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
            f"({plot_time(last.window_start)} UTC): median "
            f"{'–' if last.median_duration_s is None else _duration(last.median_duration_s)}, "
            f"p95 {'–' if last.p95_duration_s is None else _duration(last.p95_duration_s)}",
        ]
    else:
        summary = ["No session started in this time range."]
    rows = [
        html.Tr(
            [
                html.Td(s.client_host, className="url"),
                html.Td(plot_time(s.session_start), className="time"),
                html.Td(_duration(s.duration_s), className="n duration"),
                html.Td(f"{s.requests:,}", className="n"),
                html.Td(f"{s.pages:,}", className="n"),
                html.Td(human_bytes(s.bytes), className="n"),
            ],
            title=f"entry {s.entry_page or '–'} → exit {s.exit_page or '–'}; "
            f"ended {plot_time(s.session_end)} UTC; {s.user_agent or 'no user agent'}",
        )
        for s in se.longest
    ]
    table: Any = html.Div("None kept yet.", className="empty", id="sessions-table-empty")
    if rows:
        headings = ["client", "start (UTC)", "duration", "requests", "pages", "bytes"]
        table = _table("sessions-table", headings, rows)
    return [
        heading,
        html.Div(summary, className="hint", id="sessions-summary"),
        html.H3(f"Longest of the {se.kept:,} latest closed sessions (hover for pages)"),
        table,
    ]


def _table(tid: str, headings: list[str], rows: list[Any]) -> html.Table:
    """Table ``tid``: a head row of ``headings``, then the body ``rows`` (``html.Tr``)."""
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in headings])), html.Tbody(rows)], id=tid
    )


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
                html.Td("" if r.get(key) is None else str(r.get(key)), className=cls)
                for key, _, cls in columns
            ]
        )
        for r in records
    ]
    return _table(tid, [heading for _, heading, _ in columns], rows)


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
                ("event_time", "event time", ""),
                ("watermark", "watermark then", ""),
                ("client_host", "client", "url"),
                ("url_path", "page", "url"),
                ("batch_id", "batch", "n"),
            ],
            [
                {
                    **r,
                    "event_time": plot_time(r.get("event_time")),
                    "watermark": plot_time(r.get("watermark")),
                }
                for r in snap.late_examples
            ],
        ),
    ]
    bad = [
        html.H2(f"Quarantined lines: {c.get('quarantined', 0):,}"),
        html.Div(
            "Lines that did not parse, kept in quarantine/. Latest examples:", className="hint"
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


def _watermark_cell(row: dict[str, Any]) -> str:
    """A progress row's watermark to the second; for the DStream edition, which has none,
    its scheduling delay."""
    if row.get("scheduling_delay_ms") is not None:
        return f"none (DStream); scheduling delay {row['scheduling_delay_ms']:,} ms"
    return (plot_time(row.get("watermark")) or "")[:19]


def health_table(snap: Snapshot) -> list[Any]:
    """Latest progress row of each streaming query."""
    heading = html.H2("Streaming queries (latest progress)")
    h = snap.health
    if h is None or not h.queries:
        return [heading, html.Div("No progress reported yet.", className="empty")]
    rows = [
        {
            **q,
            "input_rows_per_s": _num(q.get("input_rows_per_s")),
            "processed_rows_per_s": _num(q.get("processed_rows_per_s")),
            "batch_duration_ms": _num(q.get("batch_duration_ms")),
            "num_input_rows": _num(q.get("num_input_rows")),
            "state_rows": _num(q.get("state_rows")),
            "dropped_by_watermark": _num(q.get("dropped_by_watermark")),
            "timestamp": (plot_time(q.get("timestamp")) or "")[:19],
            "watermark": _watermark_cell(q),
        }
        for q in h.queries
    ]
    return [
        heading,
        _records_table(
            "health-table",
            [
                ("query", "query", ""),
                ("batch_id", "batch", "n"),
                ("timestamp", "at (wall clock)", ""),
                ("num_input_rows", "rows", "n"),
                ("input_rows_per_s", "input/s", "n"),
                ("processed_rows_per_s", "processed/s", "n"),
                ("batch_duration_ms", "duration ms", "n"),
                ("watermark", "watermark", ""),
                ("state_rows", "state rows", "n"),
                ("dropped_by_watermark", "dropped", "n"),
            ],
            rows,
        ),
    ]
