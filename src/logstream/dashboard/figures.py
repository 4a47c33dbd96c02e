"""Plotly figures (plain dictionaries, fast to build) and SVG sparklines of a snapshot.

Figures are dictionaries in Plotly's JSON schema rather than ``plotly.graph_objects``: no
validation pass on every refresh, and the browser draws them with the plotly.js bundle that
Dash serves locally. Times are sent as ``YYYY-MM-DD HH:MM:SS`` in the zone the page shows
(:attr:`Snapshot.zone_name`: the log's offset by default, or UTC; plotly.js has no time zones,
so the times are shifted and the axis titles name the zone). The micro-batches' chart is in
wall-clock UTC.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from logstream.dashboard.data import Alert, Snapshot, Traffic, epoch_s
from logstream.units import chart_text

__all__ = [
    "ALERT_TRACE",
    "DIMENSION_TITLES",
    "QUERY_OFF",
    "STATUS_COLORS",
    "bytes_figure",
    "dimension_figure",
    "empty_figure",
    "errors_figure",
    "health_figure",
    "plot_time",
    "requests_figure",
    "sessions_figure",
    "sparkline_uri",
    "visitors_figure",
]

#: Colour of each status class in the stacked chart.
STATUS_COLORS = {
    "1xx": "#9aa5b1",
    "2xx": "#3b9a5a",
    "3xx": "#4a7fc1",
    "4xx": "#e8a33d",
    "5xx": "#d64545",
}
_HEIGHT = 250
#: Bottom margins, px: with the legend under the axis, and without a legend.
_LEGEND_MARGIN = 62
_NO_LEGEND_MARGIN = 36
#: A legend of one line per key, on the right of the plot, top down; the bottom margin then
#: holds the tick labels' two lines (time, then date) and the axis title.
_SIDE_LEGEND = {"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top"}
_SIDE_LEGEND_MARGIN = 48
#: Height of the requests chart, in px.
REQUESTS_HEIGHT = 400
#: Name of the trace of site-wide request alerts in the requests chart.
ALERT_TRACE = "alerts"
_ALERT_COLOR = "#c53030"
_CONFIG_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


#: What a panel says when ``logstream run --queries`` left its query out.
QUERY_OFF = "The {query} query is off (logstream run --queries)."


def plot_time(text: str | None) -> str | None:
    """``1995-07-09T04:00:00Z`` → ``1995-07-09 04:00:00`` (what plotly.js parses as a date).

    Examples
    --------
    >>> plot_time("1995-07-09T04:00:00Z")
    '1995-07-09 04:00:00'
    >>> plot_time("2025-01-01T10:00:00.250Z")
    '2025-01-01 10:00:00.250'
    """
    if not text:
        return None
    return text.replace("T", " ").removesuffix("Z")


def _layout(title: str, revision: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        "height": _HEIGHT,
        "margin": {"l": 55, "r": 15, "t": 36, "b": _LEGEND_MARGIN},
        "font": _CONFIG_FONT,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "xaxis": {"type": "date", "gridcolor": "#eef0f2", "title": {"text": ""}},
        "yaxis": {"gridcolor": "#eef0f2", "rangemode": "tozero", "zerolinecolor": "#dde1e5"},
        # at the bottom of the chart, under the axis: beside the title it ran over it
        # ("Requests per minute by status class" cut by its legend at 1400 px)
        "legend": {
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "x": 0,
            "xanchor": "left",
        },
        "hovermode": "x unified",
        "uirevision": revision,  # keep the user's zoom across refreshes of the same range
    }
    layout.update(extra)
    return layout


def empty_figure(text: str, title: str = "") -> dict[str, Any]:
    """A blank chart saying ``text`` (no data in the range, waiting …)."""
    return {
        "data": [],
        "layout": {
            "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
            "height": _HEIGHT,
            "margin": {"l": 20, "r": 20, "t": 36, "b": 20},
            "font": _CONFIG_FONT,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {
                    "text": html.escape(text),
                    "showarrow": False,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "font": {"size": 13, "color": "#6b7785"},
                }
            ],
        },
    }


def _no_data(snap: Snapshot, title: str, otherwise: str) -> dict[str, Any]:
    """The empty chart ``title``: it says the store's state, else ``otherwise``."""
    if snap.state in ("missing", "waiting"):
        text = "Waiting for data…"
    elif snap.state == "unreadable":
        text = "The store cannot be read (see above)."
    else:
        text = otherwise
    return empty_figure(text, title)


def _watermark_marks(snap: Snapshot) -> dict[str, Any]:
    if not snap.watermark:
        return {}
    x = snap.shown(snap.watermark)
    return {
        "shapes": [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": x,
                "x1": x,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#8d6ad8", "width": 1, "dash": "dot"},
            }
        ],
        "annotations": [
            {
                "text": "watermark",
                "x": x,
                "xref": "x",
                "yref": "paper",
                "y": 1,
                "showarrow": False,
                "xanchor": "right",
                "yanchor": "top",
                "font": {"size": 10, "color": "#8d6ad8"},
            }
        ],
    }


def _range_layout(snap: Snapshot, title: str, **extra: Any) -> dict[str, Any]:
    """Layout of a chart of the selected time range (event time), the watermark marked."""
    layout = _layout(title, snap.filters.time_range, **extra, **_watermark_marks(snap))
    layout["xaxis"]["title"] = {"text": f"event time ({snap.zone_name})", "font": {"size": 11}}
    return layout


def _right_axis(layout: dict[str, Any], left: str, right: str) -> dict[str, Any]:
    """``layout`` with the y axis titled ``left`` and a second one on the right titled
    ``right`` (for the traces with ``yaxis="y2"``); changed in place and returned."""
    layout["yaxis"]["title"] = {"text": left}
    layout["yaxis2"] = {
        "title": {"text": right},
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
        "showgrid": False,
    }
    layout["margin"]["r"] = 55
    return layout


def _one_point_axis(
    layout: dict[str, Any], times: list[str], pad_s: float, offset_s: int = 0
) -> dict[str, Any]:
    """``layout`` with an x axis that reads well when every point is at one instant.

    Plotly.js zooms a date axis with a single point into its millisecond (ticks
    ``07:24:41.5016 … .5024``): the axis gets a range of ``pad_s`` seconds either side of
    the point instead, with ticks to the second. Changed in place and returned.

    Parameters
    ----------
    times : list of str
        ISO UTC times of the points (None entries ignored).
    pad_s : float
        Seconds shown either side of a single point.
    offset_s : int
        Seconds east of UTC of the times shown (:attr:`Snapshot.zone_offset_s`).
    """
    instants = {epoch_s(t) for t in times if t}
    if len(instants) != 1:
        return layout
    (at,) = instants
    at += offset_s

    def shown(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")

    layout["xaxis"].update(
        range=[shown(at - pad_s), shown(at + pad_s)],
        tickformat="%H:%M:%S" if pad_s < 600 else "%H:%M",
    )
    return layout


def _trace(kind: str, name: str, x: list[Any], y: list[Any], **style: Any) -> dict[str, Any]:
    """One trace of a figure.

    Parameters
    ----------
    kind : str
        ``"bar"``, else the mode of a scatter trace (``"lines"``, ``"markers"``,
        ``"lines+markers"``).
    name : str
        Name in the legend and the hover label.
    x, y : list
        Coordinates, of equal length: times as :func:`plot_time` returns them, values in the
        chart's unit (``None`` leaves a gap).
    **style
        More Plotly trace attributes (``line``, ``marker``, ``yaxis``, ``hovertemplate`` …),
        in this order.
    """
    head: dict[str, Any] = {"type": "bar"} if kind == "bar" else {"type": "scatter", "mode": kind}
    return {**head, "name": name, "x": x, "y": y, **style}


def _times(snap: Snapshot, values: list[str]) -> list[str | None]:
    """ISO UTC times as plotly.js parses them, in the zone the page shows
    (:meth:`Snapshot.shown` of each)."""
    return [snap.shown(v) for v in values]


def _per(snap: Snapshot) -> str:
    assert snap.traffic is not None
    bucket = snap.traffic.bucket_s
    if bucket <= max(60, snap.traffic.window_s):
        return ""
    return f" ({bucket // 60}-minute averages)"


def requests_figure(snap: Snapshot) -> dict[str, Any]:
    """Requests per minute, stacked by the selected status classes."""
    t = snap.traffic
    title = "Requests per minute by status class"
    if t is None or not t.times:
        return _no_data(snap, title, "No traffic in this time range.")
    if not snap.filters.status_classes:
        return empty_figure("No status class selected.", title)
    x = _times(snap, t.times)
    data = [
        _trace(
            "lines",
            cls,
            x,
            t.per_class[cls],
            stackgroup="status",
            line={"width": 0, "color": STATUS_COLORS[cls]},
            fillcolor=STATUS_COLORS[cls],
            hovertemplate="%{y:,.0f}",
        )
        for cls in snap.filters.status_classes
    ]
    marks = snap.alerts.site_requests if snap.alerts else []
    if marks:
        data.append(_alert_trace(snap, marks))
    return {
        "data": data,
        # beside the trending table: as tall as ten rows
        "layout": _one_point_axis(
            _range_layout(snap, title + _per(snap), height=REQUESTS_HEIGHT),
            t.times,
            t.bucket_s,
            snap.zone_offset_s,
        ),
    }


def _alert_trace(snap: Snapshot, marks: list[Alert]) -> dict[str, Any]:
    """Site-wide request alerts as red triangles at the alerting minute, at its request count
    (every status class: what the detector saw), on top of the stacked areas."""
    return _trace(
        "markers",
        ALERT_TRACE,
        _times(snap, [a.window_start for a in marks]),
        [a.value for a in marks],
        customdata=[[a.direction, a.mean, a.std, a.z] for a in marks],
        marker={
            "color": _ALERT_COLOR,
            "size": 10,
            "symbol": ["triangle-up" if a.direction == "spike" else "triangle-down" for a in marks],
            "line": {"color": "#ffffff", "width": 1},
        },
        hovertemplate="%{customdata[0]}: %{y:,.0f} req/min "
        "(mean %{customdata[1]:,.1f} ± %{customdata[2]:,.1f}, z %{customdata[3]:+.1f})"
        "<extra>alert</extra>",
    )


def _traffic_line(
    snap: Snapshot,
    title: str,
    name: str,
    series: Callable[[Traffic], list[Any]],
    yaxis: dict[str, Any],
    *,
    averaged: bool,
    **style: Any,
) -> dict[str, Any]:
    """A chart of one traffic series of the selected range, without legend.

    Parameters
    ----------
    snap : Snapshot
        What the refresh read.
    title, name : str
        Title of the chart; name of the series (hover label).
    series : callable
        The values of :attr:`Snapshot.traffic` drawn, one per bucket (``None``: a gap).
    yaxis : dict
        Attributes of the y axis for the series' unit (tick format or suffix).
    averaged : bool
        Whether the title says so when a point stands for several minutes.
    **style
        Attributes of the trace (line, fill, hover template …).
    """
    t = snap.traffic
    if t is None or not t.times:
        return _no_data(snap, title, "No traffic in this time range.")
    trace = _trace("lines", name, _times(snap, t.times), series(t), **style)
    layout = _range_layout(snap, title + _per(snap) if averaged else title)
    _one_point_axis(layout, t.times, t.bucket_s, snap.zone_offset_s)
    layout["yaxis"].update(yaxis)
    layout["showlegend"] = False
    layout["margin"]["b"] = _NO_LEGEND_MARGIN
    return {"data": [trace], "layout": layout}


def bytes_figure(snap: Snapshot) -> dict[str, Any]:
    """Bytes per minute (every status class)."""
    return _traffic_line(
        snap,
        "Bytes per minute",
        "bytes/min",
        lambda t: t.bytes_per_min,
        {"tickformat": "~s"},
        averaged=True,
        line={"width": 1.2, "color": "#4a7fc1"},
        fill="tozeroy",
        fillcolor="rgba(74,127,193,0.15)",
        hovertemplate="%{y:,.3s}B",
    )


def errors_figure(snap: Snapshot) -> dict[str, Any]:
    """Error rate: requests answered ≥ 400 as a percentage of all requests."""
    return _traffic_line(
        snap,
        "Error rate (status ≥ 400), % of all requests",
        "error rate",
        lambda t: t.error_rate,
        {"ticksuffix": " %"},
        averaged=False,  # a share of the requests of each point, not a per-minute rate
        line={"width": 1.2, "color": "#d64545"},
        hovertemplate="%{y:.2f} %",
        connectgaps=False,
    )


def visitors_figure(snap: Snapshot) -> dict[str, Any]:
    """Unique visitors per traffic window (HyperLogLog estimates)."""
    v = snap.visitors
    title = "Unique visitors per window"
    if v is None or not v.times:
        return _no_data(snap, title, "No visitor counts in this time range.")
    bucketed = snap.traffic is not None and v.bucket_s > max(60, snap.traffic.window_s)
    x = _times(snap, v.times)
    data = [
        _trace(
            "lines",
            "mean per window" if bucketed else "visitors",
            x,
            v.mean,
            line={"width": 1.2, "color": "#3b9a5a"},
            hovertemplate="%{y:,.1f}" if bucketed else "%{y:,.0f}",
        )
    ]
    if bucketed:
        data.append(
            _trace(
                "lines",
                "busiest window",
                x,
                v.peak,
                line={"width": 0.8, "color": "#9bcfa9"},
                hovertemplate="%{y:,.0f}",
            )
        )
        title += f" ({v.bucket_s // 60}-minute buckets)"
    layout = _one_point_axis(_range_layout(snap, title), v.times, v.bucket_s, snap.zone_offset_s)
    layout["showlegend"] = bucketed
    if not bucketed:
        layout["margin"]["b"] = _NO_LEGEND_MARGIN
    return {"data": data, "layout": layout}


#: Titles of the reference-data charts, by dimension.
DIMENSION_TITLES = {
    "sections": "Requests per minute by site section",
    "agents": "Requests per minute by agent class",
}


def dimension_figure(snap: Snapshot, dimension: str) -> dict[str, Any]:
    """Requests per minute of the chosen sections or agent classes (one line each; the top
    keys when none is chosen), from the reference-data views."""
    d = getattr(snap, dimension)
    title = DIMENSION_TITLES[dimension]
    if d is None or not d.times:
        output = {"sections": "traffic_by_section", "agents": "traffic_by_agent"}[dimension]
        if snap.state == "ok" and snap.query_off(output):
            return empty_figure(snap.not_computed(output), title)
        return _no_data(snap, title, "No reference-data traffic in this time range.")
    x = _times(snap, d.times)
    data = [  # a section is the log's text: a plain label, never a link (chart_text)
        _trace("lines", chart_text(key), x, values, line={"width": 1.2}, hovertemplate="%{y:,.1f}")
        for key, values in d.series.items()
    ]
    if d.bucket_s > 60:
        title += f" ({d.bucket_s // 60}-minute averages)"
    if note := snap.coverage_note(d.covered_from):  # kept for less than the range
        title += f"<br><sup>{html.escape(note)}</sup>"
    layout = _range_layout(snap, title)
    # one line per key: a legend under the axis wraps into rows the bottom margin does not
    # hold, and ran over the axis title and the date under the ticks ("Jul 9,"): beside it
    layout["legend"] = _SIDE_LEGEND
    layout["margin"]["b"] = _SIDE_LEGEND_MARGIN
    return {
        "data": data,
        "layout": _one_point_axis(layout, d.times, d.bucket_s, snap.zone_offset_s),
    }


def sessions_figure(snap: Snapshot) -> dict[str, Any]:
    """Sessions per window of session start (bars) and their median and p95 duration."""
    s = snap.sessions
    title = "Sessions per window (by session start)"
    if s is None or not s.windows:
        if snap.state == "ok" and snap.query_off("sessions"):
            return empty_figure(QUERY_OFF.format(query="sessions"), title)
        return _no_data(snap, title, "No closed session in this time range yet.")
    width_ms = (s.window_s or 3600) * 1000
    x = [snap.shown(_midpoint(w.window_start, w.window_end)) for w in s.windows]
    labels = [
        [
            f"{snap.shown(w.window_start)} – {(snap.shown(w.window_end) or '')[11:]}",
            "–" if w.bounce_rate is None else f"{w.bounce_rate:.1f} %",
            w.pages / w.sessions if w.sessions else 0,
        ]
        for w in s.windows
    ]

    def minutes(values: list[int | None]) -> list[float | None]:
        return [None if v is None else v / 60 for v in values]

    durations = [  # (quantile, seconds per window, line style)
        ("median", [w.median_duration_s for w in s.windows], {"color": "#3b9a5a", "width": 1.4}),
        (
            "p95",
            [w.p95_duration_s for w in s.windows],
            {"color": "#d9480f", "width": 1.2, "dash": "dot"},
        ),
    ]
    layout = _layout(title, snap.filters.time_range, hovermode="closest")
    return {
        "data": [
            _trace(
                "bar",
                "sessions",
                x,
                [w.sessions for w in s.windows],
                width=[width_ms * 0.9] * len(x),
                customdata=labels,
                marker={"color": "rgba(74,127,193,0.45)"},
                hovertemplate="%{customdata[0]}<br>%{y:,} sessions, bounce rate "
                "%{customdata[1]}, %{customdata[2]:.1f} pages/session<extra></extra>",
            ),
            *(
                _trace(
                    "lines+markers",
                    f"{which} duration",
                    x,
                    minutes(values),
                    yaxis="y2",
                    line=line,
                    marker={"size": 4},
                    hovertemplate=f"{which} %{{y:,.1f}} min<extra></extra>",
                )
                for which, values, line in durations
            ),
        ],
        "layout": _right_axis(layout, "sessions", "duration, min"),
    }


def _midpoint(start: str, end: str) -> str:
    """Middle of a window, ISO UTC (where its bar is centred)."""
    middle = (epoch_s(start) + epoch_s(end)) / 2
    return datetime.fromtimestamp(middle, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:23] + "Z"


def health_figure(snap: Snapshot) -> dict[str, Any]:
    """Input and processing rate (events/s) and batch duration (ms) of the latest batches."""
    h = snap.health
    title = "Ingest micro-batches"
    if h is None or not h.times:
        return _no_data(snap, title, "No progress reported yet.")
    x = [plot_time(t) for t in h.times]
    rates = [
        ("input rate", h.input_rate, "#4a7fc1"),
        ("processing rate", h.processing_rate, "#3b9a5a"),
    ]
    layout = _one_point_axis(_layout(title + " (wall clock)", "health"), h.times, 30)
    return {
        "data": [
            *(
                _trace("lines+markers", name, x, y, line={"color": color}, marker={"size": 4})
                for name, y, color in rates
            ),
            _trace(
                "bar",
                "batch duration",
                x,
                h.duration_ms,
                yaxis="y2",
                marker={"color": "rgba(141,106,216,0.35)"},
            ),
        ],
        "layout": _right_axis(layout, "events/s", "ms"),
    }


def sparkline_uri(values: list[int], width: int = 120, height: int = 26) -> str:
    """A small SVG line of ``values`` as a ``data:`` URI (drawn by the browser, no request).

    Examples
    --------
    >>> sparkline_uri([1, 3, 2]).startswith("data:image/svg+xml,")
    True
    """
    pad = 2.0
    top = max(values) if values and max(values) > 0 else 1
    n = max(len(values) - 1, 1)
    points = " ".join(
        f"{pad + i * (width - 2 * pad) / n:.1f},{height - pad - v * (height - 2 * pad) / top:.1f}"
        for i, v in enumerate(values)
    )
    last = ""
    if values:
        lx = pad + (len(values) - 1) * (width - 2 * pad) / n
        ly = height - pad - values[-1] * (height - 2 * pad) / top
        last = f'<circle cx="{lx:.1f}" cy="{ly:.1f}" r="2" fill="#d9480f"/>'
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><polyline fill="none" stroke="#4a7fc1" '
        f'stroke-width="1.4" points="{points}"/>{last}</svg>'
    )
    return "data:image/svg+xml," + quote(svg)
