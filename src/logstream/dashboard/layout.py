"""The page: a static skeleton (controls, empty panels), the banner and the counter cards; the
panels below the charts are :mod:`logstream.dashboard.panels`'s (re-exported here).

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
``range``, ``url-prefix``, ``status-filter``  the controls; ``tick`` the refresh timer (off
                      while a refresh runs), ``tick-watchdog`` the timer that turns it back
                      on after a request the server never answered
"""

from __future__ import annotations

import re
from typing import Any

from dash import dcc, html

from logstream.dashboard.data import (
    DEFAULT_RANGE,
    STATUS_CLASSES,
    TIME_RANGES,
    Snapshot,
)
from logstream.dashboard.panels import (
    alerts_panel,
    bots_panel,
    examples_tables,
    fmt_duration,
    fmt_number,
    goaccess_panel,
    health_table,
    reference_panel,
    sessions_panel,
    top_clients_panel,
    trending_panel,
)
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
    "goaccess_panel",
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
th.n { text-align: right; }
td.url { overflow-wrap: anywhere; }
td.raw { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .78rem;
  word-break: break-all; }
.up { color: #2f855a; } .down { color: #c53030; }
td.spike { color: #c53030; white-space: nowrap; } td.drop { color: #2b6cb0; white-space: nowrap; }
td.time { white-space: nowrap; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: .8rem; }
.scroll { max-height: 26rem; overflow-y: auto; }
.panels { display: grid; grid-template-columns: repeat(auto-fit, minmax(26rem, 1fr));
  gap: .8rem; }
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


def _short_time(text: str | None, snap: Snapshot | None = None) -> str:
    """An ISO UTC time to the second with its zone: in the zone the page shows event times
    in (``snap``: :meth:`Snapshot.shown`), else in UTC (a wall-clock time)."""
    if not text:
        return "–"
    if snap is None:
        return text.replace("T", " ").removesuffix("Z")[:19] + " UTC"
    return f"{(snap.shown(text) or '')[:19]} {snap.zone_name}"


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
                    _controls(),
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
                    html.Div(html.Div(id="goaccess", className="panel"), className="grid1"),
                    _row("late", "quarantine"),
                    html.Div(html.Div(id="health", className="panel"), className="grid1"),
                    dcc.Interval(id="tick", interval=refresh_ms, n_intervals=0),
                    dcc.Interval(id="tick-watchdog", interval=WATCHDOG_MS, n_intervals=0),
                    dcc.Store(id="seen", data=None),
                ]
            ),
        ]
    )


#: Period of ``tick-watchdog`` (ms): the refresh timer is off while a refresh runs, and a
#: request the server never answers (it stopped, the network failed) does not turn it back
#: on (Dash's ``running`` is undone only on a response); the watchdog does, so the page
#: resumes once the server is back. Longer than any refresh the page should wait for.
WATCHDOG_MS = 15_000


def _controls() -> html.Div:
    """The controls above the page: time range, times, URL prefix, status classes, sections,
    agent classes."""
    return html.Div(
        [
            _control(
                "Time range",
                dcc.RadioItems(
                    id="range",
                    options=[
                        {"label": label, "value": key} for key, (label, _) in TIME_RANGES.items()
                    ],
                    value=DEFAULT_RANGE,
                    inline=True,
                    labelClassName="opt",
                ),
                "back from the newest event time",
            ),
            _control(
                "Times",
                dcc.RadioItems(
                    id="zone",
                    options=[
                        {"label": "the log's offset", "value": "log"},
                        {"label": "UTC", "value": "utc"},
                    ],
                    value="log",
                    inline=True,
                    labelClassName="opt",
                ),
                "event times in the offset the log is written in, or in UTC",
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
                dcc.Dropdown(id="section-filter", multi=True, options=[], placeholder="all"),
                "filters the sections chart",
            ),
            _control(
                "Agent classes",
                dcc.Dropdown(id="agent-filter", multi=True, options=[], placeholder="all"),
                "filters the agent-class chart",
            ),
        ],
        className="controls",
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
    is_time = bool(re.search(r"\d\d:\d\d:\d\d (UTC|[+-]\d\d:\d\d)$", value))
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
        return _kpi(key, label, fmt_number(count), detail, warn=warn and bool(count))

    cards = [
        _kpi(
            "requests",
            "Requests in range",
            fmt_number(t.total_requests if t else None),
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
        _kpi("newest", "Newest event", _short_time(snap.newest_event, snap), "event time"),
    ]
    lag = "" if snap.watermark_delay_s is None else fmt_duration(snap.watermark_delay_s)
    cards.append(
        _kpi(
            "watermark",
            "Watermark",
            _short_time(snap.watermark, snap),
            f"{lag} behind the newest event" if lag else "",
        )
    )
    if snap.counters.get("filtered"):  # logstream run --filter/--grep/--since/--until
        cards.append(counter("filtered", "Filtered lines", "filtered", "left out by the filter"))
    if snap.follow_losses:  # the follow source records its losses: show them, even when 0
        lost = snap.follow_losses
        cards.append(
            _kpi(
                "lost",
                "Lost to rotation",
                human_bytes(lost["follow_lost_bytes"]),
                f"~{plural(lost['follow_lost_lines'], 'line')}; truncations seen: "
                f"{fmt_number(lost['follow_truncations'])}",
                warn=lost["follow_lost_bytes"] > 0,
            )
        )
    if snap.kafka:  # the Kafka source: its lag, as the directory source shows none
        k = snap.kafka
        cards.append(
            _kpi(
                "kafka-lag",
                "Kafka lag",
                fmt_number(k.get("lag")),
                f"messages not read yet, {plural(len(k.get('partitions') or []), 'partition')}"
                + (f"; {fmt_number(k['lost'])} deleted before read" if k.get("lost") else ""),
                warn=bool(k.get("lost")),
            )
        )
    if h is not None:
        cards += _health_cards(h)
    return cards


def _health_cards(h: Any) -> list[html.Div]:
    """The cards of the pipeline's last micro-batch ``h`` (its health): rates, duration, state."""
    # every tile of a micro-batch is that of the "Last micro-batch" tile (one read)
    batch = "last batch" if h.last_batch_id is None else f"batch #{h.last_batch_id}"
    rows = (
        f"{batch}: progress reported when it ends"
        if h.progress_pending
        else f"{plural(h.num_input_rows, 'row')} in {batch}"
    )
    return [
        _kpi(
            "input-rate",
            "Input rate",
            fmt_number(h.input_rows_per_s),
            f"events/s, {batch}"
            + (
                # Spark times a micro-batch's input against the trigger before it
                ": the first of the run, no earlier trigger to time it"
                if h.input_rows_per_s is None and h.num_input_rows
                else ""
            ),
        ),
        _kpi(
            "processing-rate",
            "Processing rate",
            fmt_number(h.processed_rows_per_s),
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
            fmt_number(h.state_rows),
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
