"""Render the batch report as one self-contained HTML file with Plotly charts.

plotly.js is embedded in the page (``include_plotlyjs=True``), so the report opens offline;
nothing is loaded from a CDN. Text from the log is escaped in the tables and is plain text in
the charts' labels (:func:`logstream.units.chart_text`: Plotly would make a link of a URL path
holding ``<a href=…>``).
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from logstream.comparison import comparison_html
from logstream.report.panels import shown_panels
from logstream.report.terminal import dedup_label
from logstream.units import chart_text, human_bytes

__all__ = ["render_html"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .75rem; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(12rem, 1fr)); gap: .5rem; }
.card { background: #f4f6f8; border-radius: .4rem; padding: .6rem .8rem; min-width: 0; }
.card b { display: block; font-size: 1.3rem; overflow-wrap: anywhere; }
.card b .t { white-space: nowrap; }
"""

#: The Top URLs chart's margins above (its title) and below (its axis), px.
_TOP_MARGIN, _BOTTOM_MARGIN = 40, 40


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            value = row.get(key)
            if key == "bytes":
                cells.append(f'<td class="n">{human_bytes(value)}</td>')
            elif isinstance(value, int):
                cells.append(f'<td class="n">{value:,}</td>')
            else:
                cells.append(f"<td>{html.escape('' if value is None else str(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _reference_html(ref: dict[str, Any] | None) -> str:
    """Agent classes (with the crawler share), sections and networks, when the report has them."""
    if not ref:
        return ""
    columns = [("requests", "requests"), ("errors", "errors ≥400"), ("bytes", "bytes")]
    share = ref.get("crawler_share")
    parts = [
        "<h2>Agent classes</h2>",
        f"<p>Crawler share: {'–' if share is None else f'{share:.1%}'}</p>",
        _table(ref["agent_classes"], [("agent_class", "class"), *columns]),
        "<h2>Top sections</h2>",
        _table(ref["sections"], [("section", "section"), *columns]),
    ]
    if "networks" in ref:
        parts += [
            "<h2>Top networks</h2>",
            _table(ref["networks"], [("organisation", "organisation"), *columns]),
        ]
    return "\n".join(parts)


def _panels_html(report: dict[str, Any]) -> str:
    """GoAccess's panels of the report, one section each (``id="panel-os"``)."""
    parts = []
    for name, title, columns, rows in shown_panels(report):
        body = _table(rows, columns) if rows else "<p>None.</p>"
        parts.append(f'<section id="panel-{name}"><h2>{html.escape(title)}</h2>\n{body}</section>')
    return "\n".join(parts)


def _instant_html(iso: str | None) -> str:
    """An ISO 8601 instant for a tile: the date, then the time and offset, which wrap to a
    second line as a whole when the tile is narrow (``1995-07-09T00:00:00-04:00`` in one
    piece is wider than a tile at a 1400 px viewport)."""
    if not iso:
        return "–"
    date, _, time = iso.partition("T")
    return f'{html.escape(date)} <span class="t">{html.escape(time)}</span>'


def _sessions_html(v: dict[str, Any] | None) -> str:
    """Visitor sessions (30-minute gap) as tiles, as the terminal's panel shows them."""
    if not v or not v.get("sessions"):
        return "<h2>Visitor sessions</h2>\n<p>None.</p>"
    gap_min = v.get("gap_s", 1800) // 60

    def seconds(value: int | None) -> str:
        return "–" if value is None else f"{value:,} s"

    cards = [
        (f"Sessions ({gap_min}-minute gap)", f"{v['sessions']:,}"),
        ("Median duration", seconds(v.get("median_duration_s"))),
        ("95th percentile duration", seconds(v.get("p95_duration_s"))),
        ("Bounce rate", "–" if v.get("bounce_rate") is None else f"{v['bounce_rate']:.1%}"),
        (
            "Pages per session",
            "–" if v.get("pages_per_session") is None else f"{v['pages_per_session']:.2f}",
        ),
    ]
    tiles = "".join(
        f'<div class="card">{html.escape(k)}<b>{html.escape(val)}</b></div>' for k, val in cards
    )
    return f'<h2>Visitor sessions</h2>\n<div class="grid" id="sessions">{tiles}</div>'


def _filter_html(general: dict[str, Any]) -> str:
    """The filter that made the report (``logstream batch --since/--until/--filter/--grep``)
    and the lines it left out; ``""`` without one."""
    f = general.get("filter")
    if not f:
        return ""
    parts = [f"since {f['since_utc']}" if f.get("since_utc") else ""]
    parts += [f"until {f['until_utc']}" if f.get("until_utc") else ""]
    parts += [*f.get("filter", []), *(f"grep {g!r}" for g in f.get("grep", []))]
    shown = " · ".join(html.escape(p) for p in parts if p)
    out = general.get("filtered_out")
    left = f"; {out:,} lines left out" if out is not None else ""
    return f'<p id="filter">Filtered: <code>{shown}</code>{left}.</p>'


def render_html(report: dict[str, Any]) -> str:
    """Return the report as a self-contained HTML document (charts work offline)."""
    g = report["general"]
    cards = [
        ("Total requests", f"{g['total_requests']:,}"),
        ("Valid requests", f"{g['valid_requests']:,}"),
        ("Failed requests", f"{g['failed_requests']:,}"),
        ("Deduplication", dedup_label(g.get("duplicates_dropped"))),
        *([("Corrupt files", f"{g['corrupt_files']:,}")] if g.get("corrupt_files") else []),
        ("Unique visitors", f"{g['unique_visitors']:,}"),
        ("Hosts per day", f"{g['hosts_per_day']:,}"),
        ("Unique URLs", f"{g['unique_urls']:,}"),
        ("Unique 404 requests", f"{g['unique_not_found']:,}"),
        ("Bandwidth", human_bytes(g["bandwidth_bytes"])),
    ]
    card_html = "".join(
        f'<div class="card">{html.escape(k)}<b>{html.escape(v)}</b></div>' for k, v in cards
    ) + "".join(
        f'<div class="card">{k}<b>{_instant_html(g[key])}</b></div>'
        for k, key in (("First event", "first_event"), ("Last event", "last_event"))
    )

    hourly = report["hourly"]
    traffic = go.Figure()
    traffic.add_bar(
        x=[h["hour"] for h in hourly], y=[h["requests"] for h in hourly], name="requests"
    )
    traffic.update_layout(title="Requests per hour", height=360, margin={"t": 40})
    classes = report["status_classes"]
    status = go.Figure(go.Bar(x=list(classes), y=list(classes.values())))
    status.update_layout(title="Status classes", height=320, margin={"t": 40})
    top = report["top_urls"]
    urls = go.Figure(
        go.Bar(
            y=[chart_text(u["url_path"]) for u in top][::-1],  # plain text, never a link
            x=[u["requests"] for u in top][::-1],
            orientation="h",
        )
    )
    # a 28-px row per bar inside the margins, each bar labelled (``dtick`` 1): with the
    # margins inside that height, five bars had three labels
    urls.update_layout(
        title="Top URLs",
        height=_TOP_MARGIN + _BOTTOM_MARGIN + 28 * max(len(top), 1),
        margin={"t": _TOP_MARGIN, "b": _BOTTOM_MARGIN},
        yaxis={"dtick": 1, "automargin": True},
    )

    charts = [
        traffic.to_html(full_html=False, include_plotlyjs=True, div_id="chart-hourly"),
        status.to_html(full_html=False, include_plotlyjs=False, div_id="chart-status"),
        urls.to_html(full_html=False, include_plotlyjs=False, div_id="chart-top-urls"),
    ]
    days = "".join(
        f"<h3>{html.escape(d['day'])}</h3>"
        + _table(d["pages"], [("rank", "#"), ("url_path", "page"), ("requests", "requests")])
        for d in report["top_content_pages_by_day"]
    )
    q = report["quarantine"]
    reasons = [{"reason": k, "lines": v} for k, v in q["reasons"].items()]
    title = "logstream report — " + ", ".join(html.escape(p) for p in g.get("inputs", [])[:3])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head>
<body>
<h1>{title}</h1>
<p>Log format <code>{html.escape(g["log_format"])}</code>; calendar in {
        html.escape(g["time_zone"])
    }{" (the log's own offset)" if g.get("time_zone_source") == "log" else ""}.</p>
{_filter_html(g)}
<div class="grid" id="general">{card_html}</div>
{charts[0]}
<h2>Status codes</h2>
{charts[1]}
{
        _table(
            [{"status": k, "requests": v} for k, v in report["status_codes"].items()],
            [("status", "status"), ("requests", "requests")],
        )
    }
<h2>Top URLs</h2>
{charts[2]}
{_table(top, [("url_path", "URL"), ("requests", "requests"), ("bytes", "bytes")])}
<h2>Top content pages by day</h2>
{days}
<h2>Top hosts</h2>
{
        _table(
            report["top_hosts"],
            [("client_host", "host"), ("requests", "requests"), ("bytes", "bytes")],
        )
    }
{_sessions_html(report.get("sessions"))}
<h2>Top 404 URLs</h2>
{_table(report["top_not_found"], [("url_path", "URL"), ("requests", "requests")])}
{_reference_html(report.get("reference"))}
{_panels_html(report)}
{comparison_html(report.get("comparison"))}
<h2>Quarantined lines</h2>
{_table(reasons, [("reason", "reason"), ("lines", "lines")]) if reasons else "<p>None.</p>"}
{
        "<h2>Corrupt files (their readable lines count)</h2>"
        + _table(q["corrupt_files"], [("source_file", "file"), ("error", "error")])
        if q.get("corrupt_files")
        else ""
    }
</body></html>
"""
