"""Render the batch report as rich tables in the terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from logstream.report.panels import shown_panels
from logstream.units import human_bytes

__all__ = ["UNBOUNDED_WIDTH", "render_terminal", "report_console"]


def _table(title: str, columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for key, header in columns:
        numeric = key in ("requests", "errors", "bytes", "rank", "lines", "hits", "visitors")
        table.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        cells = []
        for key, _ in columns:
            value = row.get(key)
            if key == "bytes":
                cells.append(human_bytes(value))
            elif isinstance(value, int):
                cells.append(f"{value:,}")
            else:
                cells.append("" if value is None else str(value))
        table.add_row(*cells)
    return table


def dedup_label(duplicates_dropped: int | None) -> str:
    """How the report speaks of deduplication: off, or the identical lines it dropped."""
    if duplicates_dropped is None:
        return "off (every line counts)"
    return f"on: {duplicates_dropped:,} identical lines dropped"


#: Columns of standard output when it is not a terminal: wider than any table, so that a
#: table takes its own width and no cell is folded in the middle of a word.
UNBOUNDED_WIDTH = 10_000


def report_console() -> Console:
    """The console the report is printed on: standard output's. On a terminal, its width (a
    cell too long for it is folded); written to a file or a pipe, unbounded: each table its
    own width, each cell whole on its line (``/images/NASA-logosmall.gif``, never
    ``/images/NASA-logosmall.gi⏎f``)."""
    console = Console()
    return console if console.is_terminal else Console(width=UNBOUNDED_WIDTH)


def _filter_rows(general: dict[str, Any]) -> list[tuple[str, str]]:
    """The filter that made the report and the lines it left out (none without one)."""
    f = general.get("filter")
    if not f:
        return []
    parts = [f"since {f['since_utc']}" if f.get("since_utc") else ""]
    parts += [f"until {f['until_utc']}" if f.get("until_utc") else ""]
    parts += [*f.get("filter", []), *(f"grep {g!r}" for g in f.get("grep", []))]
    rows = [("Filter", " · ".join(p for p in parts if p))]
    if general.get("filtered_out") is not None:
        rows.append(("Lines left out by the filter", f"{general['filtered_out']:,}"))
    return rows


def render_terminal(report: dict[str, Any], console: Console | None = None) -> None:
    """Print ``report`` (from :func:`~logstream.report.batch.build_report`) as tables
    (on :func:`report_console` unless ``console`` is given)."""
    console = console or report_console()
    g = report["general"]
    general = Table.grid(padding=(0, 2))
    general.add_column(style="bold")
    general.add_column(justify="right")
    for label, value in [
        ("Total requests", f"{g['total_requests']:,}"),
        ("Valid requests", f"{g['valid_requests']:,}"),
        ("Failed requests (quarantined)", f"{g['failed_requests']:,}"),
        ("Deduplication", dedup_label(g.get("duplicates_dropped"))),
        *(
            [("Corrupt files (quarantined)", f"{g['corrupt_files']:,}")]
            if g.get("corrupt_files")
            else []
        ),
        ("Unique visitors", f"{g['unique_visitors']:,}"),
        ("Hosts per day", f"{g['hosts_per_day']:,}"),
        ("Unique URLs", f"{g['unique_urls']:,}"),
        ("Unique 404 requests", f"{g['unique_not_found']:,}"),
        ("Bandwidth", human_bytes(g["bandwidth_bytes"])),
        ("First event", str(g["first_event"])),
        ("Last event", str(g["last_event"])),
        ("Log format", g["log_format"]),
        ("Time zone", g["time_zone"]),
        *_filter_rows(g),
    ]:
        general.add_row(label, value)
    console.print(Panel(general, title="logstream batch report", expand=False))

    statuses = [{"status": k, "requests": v} for k, v in report["status_codes"].items()]
    classes = [{"status": k, "requests": v} for k, v in report["status_classes"].items()]
    console.print(
        Group(
            _table("Status classes", [("status", "class"), ("requests", "requests")], classes),
            _table("Status codes", [("status", "status"), ("requests", "requests")], statuses),
        )
    )
    console.print(
        _table(
            "Top URLs",
            [("url_path", "URL"), ("requests", "requests"), ("bytes", "bytes")],
            report["top_urls"],
        )
    )
    for day in report["top_content_pages_by_day"]:
        console.print(
            _table(
                f"Top content pages on {day['day']}",
                [("rank", "#"), ("url_path", "page"), ("requests", "requests")],
                day["pages"],
            )
        )
    console.print(
        _table(
            "Hourly traffic",
            [("hour", "hour"), ("requests", "requests"), ("bytes", "bytes")],
            report["hourly"],
        )
    )
    console.print(
        _table(
            "Top hosts",
            [("client_host", "host"), ("requests", "requests"), ("bytes", "bytes")],
            report["top_hosts"],
        )
    )
    console.print(
        _table(
            "Top 404 URLs", [("url_path", "URL"), ("requests", "requests")], report["top_not_found"]
        )
    )
    v = report["sessions"]
    if v["sessions"]:
        visits = Table.grid(padding=(0, 2))
        visits.add_column(style="bold")
        visits.add_column(justify="right")
        visits.add_row("Sessions (30-minute gap)", f"{v['sessions']:,}")
        visits.add_row("Median duration", f"{v['median_duration_s']:,} s")
        visits.add_row("95th percentile duration", f"{v['p95_duration_s']:,} s")
        visits.add_row("Bounce rate", f"{v['bounce_rate']:.1%}")
        visits.add_row("Pages per session", f"{v['pages_per_session']:.2f}")
        console.print(Panel(visits, title="Visitor sessions", expand=False))
    ref = report.get("reference")
    if ref:
        share = ref["crawler_share"]
        columns = [("requests", "requests"), ("errors", "errors ≥400"), ("bytes", "bytes")]
        title = "Agent classes" + ("" if share is None else f" (crawler share {share:.1%})")
        console.print(_table(title, [("agent_class", "class"), *columns], ref["agent_classes"]))
        console.print(_table("Top sections", [("section", "section"), *columns], ref["sections"]))
        if "networks" in ref:
            console.print(
                _table(
                    "Top networks", [("organisation", "organisation"), *columns], ref["networks"]
                )
            )
    for _, title, columns, rows in shown_panels(report):
        console.print(_table(title, columns, rows))
    q = report["quarantine"]
    if q["failed_lines"]:
        reasons = [{"reason": k, "lines": v} for k, v in q["reasons"].items()]
        console.print(
            _table("Quarantined lines", [("reason", "reason"), ("lines", "lines")], reasons)
        )
    if q.get("corrupt_files"):
        console.print(
            _table(
                "Corrupt files (their readable lines count)",
                [("source_file", "file"), ("error", "error")],
                q["corrupt_files"],
            )
        )
    if q.get("path") and (q["failed_lines"] or q.get("corrupt_files")):
        console.print(f"Quarantine written to [bold]{q['path']}[/bold]")
