"""The dashboard's explore section: the last N minutes live, a filter, a site, a range against
the one before, and every site (:mod:`logstream.dashboard.explore_data`).

Its controls live in the page's URL (``?filter=…&since=…&until=…&site=…&minutes=…``), so a
view can be shared: opening the URL sets the controls, changing a control rewrites the URL.
One callback keeps the controls and the URL equal; another refreshes the section from the
URL every :data:`EXPLORE_REFRESH_MS`, in its own read transaction; the rest of the page is
not touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import dash
from dash import Dash, Input, Output, dcc, html

from logstream.dashboard.explore_data import (
    ALL_SITES,
    TOP,
    Explore,
    ExploreView,
    read_explore,
)
from logstream.dashboard.model import offset_seconds
from logstream.dashboard.tables import data_table

__all__ = ["explore_section", "register_explore", "render_explore"]

#: Milliseconds between two refreshes of the section.
EXPLORE_REFRESH_MS = 3000
_FLAG_TEXT = {"new": "new", "gone": "gone", "up": "▲", "down": "▼", None: ""}
_TITLES = {
    "requests": "Requested files",
    "hosts": "Clients",
    "not_found": "Not found",
    "static_requests": "Static files",
    "referring_sites": "Referring sites",
}


def explore_section() -> html.Div:
    """The section's skeleton: its controls and the panels the callback fills."""

    def control(label: str, widget: Any, hint: str) -> html.Div:
        return html.Div(
            [html.Label(label, className="ctl"), widget, html.Div(hint, className="hint")]
        )

    def text(cid: str, placeholder: str) -> dcc.Input:
        return dcc.Input(id=cid, type="text", placeholder=placeholder, debounce=True, value="")

    controls = html.Div(
        [
            control(
                "Filter",
                text("explore-filter", "status >= 500 AND url_path LIKE '/api/%' + Enter"),
                "a Spark SQL condition on the events (docs/dashboard.md)",
            ),
            control("Since", text("explore-since", "2015-05-18T06:00Z or 6h"), "range start"),
            control("Until", text("explore-until", "default: the newest minute"), "range end"),
            control(
                "Site",
                dcc.Dropdown(id="explore-site", options=[], placeholder=ALL_SITES),
                "a virtual host, or every site",
            ),
            control(
                "Last minutes",
                dcc.Slider(
                    id="explore-minutes",
                    min=1,
                    max=60,
                    step=1,
                    value=5,
                    # marks far enough apart that their labels never touch ("1 5" read
                    # as "15"); the value chosen is shown under the handle
                    marks={m: str(m) for m in (1, 15, 30, 45, 60)},
                    tooltip={"placement": "bottom", "always_visible": True},
                ),
                "N of the live panel",
            ),
        ],
        className="controls",
        id="explore-controls",
    )
    return html.Div(
        [
            dcc.Location(id="explore-url", refresh=False),
            # its own, slower tick: a scan of the events may take longer than the page's
            # refresh, and a callback triggered again before it answers is never shown
            dcc.Interval(id="explore-tick", interval=EXPLORE_REFRESH_MS, n_intervals=0),
            html.H2("Explore: the last minutes, a filter, a site, a range against the one before"),
            controls,
            html.Div(id="explore-message", className="hint"),
            html.Div(
                [
                    html.Div(id="explore-live", className="panel"),
                    html.Div(id="explore-sites", className="panel"),
                ],
                className="grid2",
            ),
            html.Div(html.Div(id="explore-compare", className="panel"), className="grid1"),
        ],
        id="explore",
    )


def _rows(pairs: list[tuple[str, int]], total: int) -> list[html.Tr]:
    return [
        html.Tr([html.Td(k), html.Td(f"{v:,}", className="num"), html.Td(_share(v, total))])
        for k, v in pairs
    ]


def _share(value: int, total: int) -> str:
    return f"{value / total:.1%}" if total else ""


@dataclass(frozen=True)
class _Clock:
    """The times of the section as the page shows them: in the log's offset or in UTC (the
    page's "Times" choice, :attr:`logstream.dashboard.model.Filters.zone`)."""

    offset_s: int = 0
    name: str = "UTC"

    @classmethod
    def of(cls, view: ExploreView, zone: str | None) -> _Clock:
        if zone == "utc" or not view.log_offset:
            return cls()
        return cls(offset_seconds(view.log_offset), view.log_offset)

    def at(self, iso: str, day: bool = False) -> str:
        """``1995-07-09T16:53:00Z`` → ``12:53`` at ``-04:00`` (with ``day``, the date too)."""
        if not iso:
            return ""
        t = datetime.fromisoformat(iso.replace("Z", "+00:00")) + timedelta(seconds=self.offset_s)
        return t.strftime("%Y-%m-%d %H:%M" if day else "%H:%M")


def _live(view: ExploreView, clock: _Clock) -> list[Any]:
    last = view.last
    if last is None:
        return [html.H3("The last minutes"), html.P(view.message or "No event yet.")]
    status = " · ".join(f"{c} {n:,}" for c, n in last.status.items())
    c = view.controls
    site = c.site not in ("", ALL_SITES)
    narrowed = [w for w, on in (("the filter", bool(c.filter)), ("the site", site)) if on]
    unfiltered = (  # the live panel reads the store's minute windows, which hold every event
        [
            html.P(
                f"Every site and every request: {' and '.join(narrowed)} chosen above "
                "narrow the sites and the comparison, not these minutes.",
                className="hint",
                id="live-unfiltered",
            )
        ]
        if narrowed
        else []
    )
    return [
        html.H3(
            f"The last {last.minutes} minutes ({clock.at(last.start)}–{clock.at(last.end)} "
            f"{clock.name})"
        ),
        *unfiltered,
        html.P(
            [html.B(f"{last.requests:,}", id="live-requests"), f" requests · {status}"],
            id="live-status",
        ),
        html.H4("Top pages (requested files)"),
        data_table("live-pages", ["page", "hits", "share"], _rows(last.pages, last.requests)),
        html.H4("Top clients"),
        data_table("live-clients", ["client", "hits", "share"], _rows(last.clients, last.requests)),
    ]


def _sites(view: ExploreView, clock: _Clock) -> list[Any]:
    if not view.sites:
        return [html.H3("Sites"), html.P("No virtual host in the range.", className="empty")]
    rows = [
        html.Tr(
            [
                html.Td(r.site),
                html.Td(f"{r.requests:,}", className="num"),
                html.Td(f"{r.bytes:,}", className="num"),
                html.Td(f"{r.share:.1%}"),
            ],
            className="total" if r.site == ALL_SITES else "",
        )
        for r in view.sites
    ]
    return [
        # in the page's time zone, as the live panel's and the tiles' times
        html.H3(
            f"Sites ({clock.at(view.start, day=True)} – {clock.at(view.end, day=True)} "
            f"{clock.name})"
        ),
        data_table("explore-sites-table", ["site", "requests", "bytes", "share"], rows),
    ]


def _compare(view: ExploreView, clock: _Clock) -> list[Any]:
    if not view.comparison:
        return [html.H3("Range against the one before"), html.P(view.message or "")]
    g = view.comparison["general"]
    heads = ["item", "hits", "Δ hits", "bytes", "Δ bytes", ""]
    out: list[Any] = [
        html.H3(
            f"{clock.at(view.start, True)} – {clock.at(view.end, True)} against "
            f"{clock.at(view.previous_start, True)} – {clock.at(view.start, True)} {clock.name}"
            + (" (events)" if view.source == "events" else "")
        ),
        html.P(
            f"requests {g['total_requests']['current']:,} ({g['total_requests']['change']:+,})"
            f" · bytes {g['bandwidth_bytes']['current']:,} "
            f"({g['bandwidth_bytes']['change']:+,})",
            id="explore-totals",
        ),
    ]
    for table, items in view.comparison["tables"].items():
        rows = []
        for i in items[:TOP]:
            now, change = i["current"] or {}, i["change"]
            rows.append(
                html.Tr(
                    [
                        html.Td(i["data"]),
                        html.Td(_num(now.get("hits")), className="num"),
                        html.Td(_num(change["hits"], True), className="num"),
                        html.Td(_num(now.get("bytes")), className="num"),
                        html.Td(_num(change["bytes"], True), className="num"),
                        html.Td(_FLAG_TEXT.get(i["flag"], ""), className=f"flag {i['flag']}"),
                    ]
                )
            )
        out += [html.H4(_TITLES.get(table, table)), data_table(f"compare-{table}", heads, rows)]
    return out


def _num(value: int | None, signed: bool = False) -> str:
    if value is None:
        return "?"
    return f"{value:+,}" if signed else f"{value:,}"


def render_explore(view: ExploreView, zone: str | None = "log") -> tuple[Any, ...]:
    """The section's panels for ``view``: the message, the last minutes, the sites, the
    comparison, and the site selector's options; times in the page's ``zone`` (``log``:
    the log's offset, ``utc``)."""
    clock = _Clock.of(view, zone)
    sites = [r.site for r in view.sites if r.site != ALL_SITES]
    chosen = view.controls.site
    if chosen and chosen != ALL_SITES and chosen not in sites:
        # the site a URL chose is an option even before (or without) its rows: a dropdown
        # drops a value that none of its options has, and showed "all sites" instead
        sites.append(chosen)
    options = [{"label": ALL_SITES, "value": ALL_SITES}] + [{"label": s, "value": s} for s in sites]
    message: Any = view.message
    if not message and view.batch is not None:  # the page's header names its own
        message = f"As of micro-batch {view.batch}."
    return (message, _live(view, clock), _sites(view, clock), _compare(view, clock), options)


def register_explore(app: Dash, store_path: Path | str) -> None:
    """Add the section's two callbacks to ``app``: the controls and the URL kept equal, and
    the refresh of the panels from the URL at each of the section's ticks."""

    @app.callback(
        Output("explore-url", "search"),
        Output("explore-filter", "value"),
        Output("explore-since", "value"),
        Output("explore-until", "value"),
        Output("explore-site", "value"),
        Output("explore-minutes", "value"),
        Input("explore-url", "search"),
        Input("explore-filter", "value"),
        Input("explore-since", "value"),
        Input("explore-until", "value"),
        Input("explore-site", "value"),
        Input("explore-minutes", "value"),
    )
    def sync_controls(
        search: str | None,
        filter_text: str | None,
        since: str | None,
        until: str | None,
        site: str | None,
        minutes: int | None,
    ) -> tuple[Any, ...]:
        if dash.ctx.triggered_id in (None, "explore-url"):  # a URL (a shared view): controls
            c = Explore.from_query(search or "")
            return (dash.no_update, c.filter, c.since, c.until, c.site or None, c.minutes)
        controls = Explore(
            (filter_text or "").strip(),
            (since or "").strip(),
            (until or "").strip(),
            site or "",
            int(minutes or 5),
        )
        query = controls.query()
        return (query if query != (search or "") else dash.no_update, *(dash.no_update,) * 5)

    @app.callback(
        Output("explore-message", "children"),
        Output("explore-live", "children"),
        Output("explore-sites", "children"),
        Output("explore-compare", "children"),
        Output("explore-site", "options"),
        Input("explore-tick", "n_intervals"),
        Input("explore-url", "search"),
        Input("zone", "value"),
    )
    def refresh_explore(_tick: int, search: str | None, zone: str | None) -> tuple[Any, ...]:
        view = read_explore(store_path, Explore.from_query(search or ""))
        return render_explore(view, zone)
