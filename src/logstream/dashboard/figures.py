"""Plotly figures (plain dictionaries, fast to build) and SVG sparklines of a snapshot.

Figures are dictionaries in Plotly's JSON schema rather than ``plotly.graph_objects``: no
validation pass on every refresh, and the browser draws them with the plotly.js bundle that
Dash serves locally. Times are sent as ``YYYY-MM-DD HH:MM:SS`` (UTC; plotly.js has no time
zones, the axis titles say UTC).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from logstream.dashboard.data import Alert, Snapshot, epoch_s

__all__ = [
    "ALERT_TRACE",
    "STATUS_COLORS",
    "bytes_figure",
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
#: Height of the requests chart, in px.
REQUESTS_HEIGHT = 400
#: Name of the trace of site-wide request alerts in the requests chart.
ALERT_TRACE = "alerts"
_ALERT_COLOR = "#c53030"
_CONFIG_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


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
        "margin": {"l": 55, "r": 15, "t": 36, "b": 36},
        "font": _CONFIG_FONT,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "xaxis": {"type": "date", "gridcolor": "#eef0f2", "title": {"text": ""}},
        "yaxis": {"gridcolor": "#eef0f2", "rangemode": "tozero", "zerolinecolor": "#dde1e5"},
        "legend": {"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"},
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


def _no_data(snap: Snapshot, otherwise: str) -> str:
    """What an empty chart says: the store's state, else ``otherwise``."""
    if snap.state in ("missing", "waiting"):
        return "Waiting for data…"
    if snap.state == "unreadable":
        return "The store cannot be read (see above)."
    return otherwise


def _watermark_marks(snap: Snapshot) -> dict[str, Any]:
    if not snap.watermark:
        return {}
    x = plot_time(snap.watermark)
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
        return empty_figure(_no_data(snap, "No traffic in this time range."), title)
    if not snap.filters.status_classes:
        return empty_figure("No status class selected.", title)
    x = [plot_time(v) for v in t.times]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": cls,
            "x": x,
            "y": t.per_class[cls],
            "stackgroup": "status",
            "line": {"width": 0, "color": STATUS_COLORS[cls]},
            "fillcolor": STATUS_COLORS[cls],
            "hovertemplate": "%{y:,.0f}",
        }
        for cls in snap.filters.status_classes
    ]
    marks = snap.alerts.site_requests if snap.alerts else []
    if marks:
        data.append(_alert_trace(marks))
    return {
        "data": data,
        "layout": _layout(
            title + _per(snap),
            snap.filters.time_range,
            height=REQUESTS_HEIGHT,  # beside the trending table: as tall as ten rows
            **_watermark_marks(snap),
        ),
    }


def _alert_trace(marks: list[Alert]) -> dict[str, Any]:
    """Site-wide request alerts as red triangles at the alerting minute, at its request count
    (every status class: what the detector saw), on top of the stacked areas."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": ALERT_TRACE,
        "x": [plot_time(a.window_start) for a in marks],
        "y": [a.value for a in marks],
        "customdata": [[a.direction, a.mean, a.std, a.z] for a in marks],
        "marker": {
            "color": _ALERT_COLOR,
            "size": 10,
            "symbol": ["triangle-up" if a.direction == "spike" else "triangle-down" for a in marks],
            "line": {"color": "#ffffff", "width": 1},
        },
        "hovertemplate": "%{customdata[0]}: %{y:,.0f} req/min "
        "(mean %{customdata[1]:,.1f} ± %{customdata[2]:,.1f}, z %{customdata[3]:+.1f})"
        "<extra>alert</extra>",
    }


def bytes_figure(snap: Snapshot) -> dict[str, Any]:
    """Bytes per minute (every status class)."""
    t = snap.traffic
    title = "Bytes per minute"
    if t is None or not t.times:
        return empty_figure(_no_data(snap, "No traffic in this time range."), title)
    layout = _layout(title + _per(snap), snap.filters.time_range, **_watermark_marks(snap))
    layout["yaxis"]["tickformat"] = "~s"
    layout["showlegend"] = False
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "bytes/min",
                "x": [plot_time(v) for v in t.times],
                "y": t.bytes_per_min,
                "line": {"width": 1.2, "color": "#4a7fc1"},
                "fill": "tozeroy",
                "fillcolor": "rgba(74,127,193,0.15)",
                "hovertemplate": "%{y:,.3s}B",
            }
        ],
        "layout": layout,
    }


def errors_figure(snap: Snapshot) -> dict[str, Any]:
    """Error rate: requests answered ≥ 400 as a percentage of all requests."""
    t = snap.traffic
    title = "Error rate (status ≥ 400), % of all requests"
    if t is None or not t.times:
        return empty_figure(_no_data(snap, "No traffic in this time range."), title)
    layout = _layout(title, snap.filters.time_range, **_watermark_marks(snap))
    layout["yaxis"]["ticksuffix"] = " %"
    layout["showlegend"] = False
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "error rate",
                "x": [plot_time(v) for v in t.times],
                "y": t.error_rate,
                "line": {"width": 1.2, "color": "#d64545"},
                "hovertemplate": "%{y:.2f} %",
                "connectgaps": False,
            }
        ],
        "layout": layout,
    }


def visitors_figure(snap: Snapshot) -> dict[str, Any]:
    """Unique visitors per traffic window (HyperLogLog estimates)."""
    v = snap.visitors
    title = "Unique visitors per window"
    if v is None or not v.times:
        return empty_figure(_no_data(snap, "No visitor counts in this time range."), title)
    bucketed = snap.traffic is not None and v.bucket_s > max(60, snap.traffic.window_s)
    x = [plot_time(s) for s in v.times]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "mean per window" if bucketed else "visitors",
            "x": x,
            "y": v.mean,
            "line": {"width": 1.2, "color": "#3b9a5a"},
            "hovertemplate": "%{y:,.1f}" if bucketed else "%{y:,.0f}",
        }
    ]
    if bucketed:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "busiest window",
                "x": x,
                "y": v.peak,
                "line": {"width": 0.8, "color": "#9bcfa9"},
                "hovertemplate": "%{y:,.0f}",
            }
        )
        title += f" ({v.bucket_s // 60}-minute buckets)"
    layout = _layout(title, snap.filters.time_range, **_watermark_marks(snap))
    layout["showlegend"] = bucketed
    return {"data": data, "layout": layout}


def sessions_figure(snap: Snapshot) -> dict[str, Any]:
    """Sessions per window of session start (bars) and their median and p95 duration."""
    s = snap.sessions
    title = "Sessions per window (by session start)"
    if s is None or not s.windows:
        return empty_figure(_no_data(snap, "No closed session in this time range yet."), title)
    width_ms = (s.window_s or 3600) * 1000
    x = [plot_time(_midpoint(w.window_start, w.window_end)) for w in s.windows]
    labels = [
        [
            f"{plot_time(w.window_start)} – {(plot_time(w.window_end) or '')[11:]}",
            "–" if w.bounce_rate is None else f"{w.bounce_rate:.1f} %",
            w.pages / w.sessions if w.sessions else 0,
        ]
        for w in s.windows
    ]

    def minutes(values: list[int | None]) -> list[float | None]:
        return [None if v is None else v / 60 for v in values]

    layout = _layout(title, snap.filters.time_range, hovermode="closest")
    layout["yaxis"]["title"] = {"text": "sessions"}
    layout["yaxis2"] = {
        "title": {"text": "duration, min"},
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
        "showgrid": False,
    }
    layout["margin"]["r"] = 55
    return {
        "data": [
            {
                "type": "bar",
                "name": "sessions",
                "x": x,
                "y": [w.sessions for w in s.windows],
                "width": [width_ms * 0.9] * len(x),
                "customdata": labels,
                "marker": {"color": "rgba(74,127,193,0.45)"},
                "hovertemplate": "%{customdata[0]}<br>%{y:,} sessions, bounce rate "
                "%{customdata[1]}, %{customdata[2]:.1f} pages/session<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "median duration",
                "x": x,
                "y": minutes([w.median_duration_s for w in s.windows]),
                "yaxis": "y2",
                "line": {"color": "#3b9a5a", "width": 1.4},
                "marker": {"size": 4},
                "hovertemplate": "median %{y:,.1f} min<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "p95 duration",
                "x": x,
                "y": minutes([w.p95_duration_s for w in s.windows]),
                "yaxis": "y2",
                "line": {"color": "#d9480f", "width": 1.2, "dash": "dot"},
                "marker": {"size": 4},
                "hovertemplate": "p95 %{y:,.1f} min<extra></extra>",
            },
        ],
        "layout": layout,
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
        return empty_figure(_no_data(snap, "No progress reported yet."), title)
    x = [plot_time(s) for s in h.times]
    layout = _layout(title + " (wall clock)", "health")
    layout["yaxis"]["title"] = {"text": "events/s"}
    layout["yaxis2"] = {
        "title": {"text": "ms"},
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
        "showgrid": False,
    }
    layout["margin"]["r"] = 55
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "input rate",
                "x": x,
                "y": h.input_rate,
                "line": {"color": "#4a7fc1"},
                "marker": {"size": 4},
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "processing rate",
                "x": x,
                "y": h.processing_rate,
                "line": {"color": "#3b9a5a"},
                "marker": {"size": 4},
            },
            {
                "type": "bar",
                "name": "batch duration",
                "x": x,
                "y": h.duration_ms,
                "yaxis": "y2",
                "marker": {"color": "rgba(141,106,216,0.35)"},
            },
        ],
        "layout": layout,
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
