"""Period comparison: each panel's items of two reports side by side (``logstream batch
--compare``).

Two reports are computed over the same input with the same filter and two time ranges
(:meth:`logstream.filters.EventFilter.previous`), each with :data:`COMPARE_DEPTH` items per
table, so that an item of one period's top is found in the other's list. For every table
with items (the top URLs, hosts and 404s, GoAccess's panels but the daily visitors) the
comparison lists the items of either period's top ``top``, with their ``hits``, ``visitors``
and ``bytes`` in each period and the change, and a flag:

* ``new``: no hit in the previous period; ``gone``: no hit in the current one;
* ``up`` / ``down``: hits changed by more than ``threshold`` (a fraction of the previous
  hits, 0.5 by default);
* none otherwise.

An item past the other period's first :data:`COMPARE_DEPTH` items of a table that has more is
not known there: its values are null and it has no flag. Pure Python over the two reports'
dictionaries: no Spark here.
"""

from __future__ import annotations

from typing import Any

from logstream.config import PANELS
from logstream.units import human_bytes

__all__ = [
    "COMPARED_TABLES",
    "COMPARE_DEPTH",
    "TOTAL_LABELS",
    "compare_reports",
    "comparison_html",
    "comparison_lines",
    "print_comparison",
    "truncated",
]

#: Items per table the two reports of a comparison hold, to find each other's top items.
COMPARE_DEPTH = 1000
#: The metrics compared per item.
METRICS = ("hits", "visitors", "bytes")
#: The tables of logstream's own (key column, hits column) compared besides GoAccess's panels.
_OWN_TABLES = {
    "top_urls": ("url_path", "requests"),
    "top_hosts": ("client_host", "requests"),
    "top_not_found": ("url_path", "requests"),
}
#: Every table compared, in the report's order: logstream's own, then GoAccess's panels but
#: the daily visitors.
COMPARED_TABLES = (*_OWN_TABLES, *(p for p in PANELS if p != "visitors"))


def _items(
    report: dict[str, Any], table: str, depth: int
) -> tuple[dict[tuple, dict[str, Any]], bool]:
    """A table's items by key (data, method, protocol), as ``{hits, visitors, bytes}``, and
    whether the list is the whole table (no item past it: fewer than ``depth`` listed, or as
    many as the report counts)."""
    if table in _OWN_TABLES:
        key, hits = _OWN_TABLES[table]
        rows = report.get(table) or []
        items = {
            (r[key], None, None): {
                "hits": r[hits],
                "visitors": None,
                "bytes": r.get("bytes"),
            }
            for r in rows
        }
        total = report["general"].get(
            {"top_urls": "unique_urls", "top_not_found": "unique_not_found"}.get(table, ""), None
        )
        return items, len(items) < depth or (total is not None and len(items) >= total)
    panel = report.get(table)
    if panel is None:
        return {}, True
    items = {
        (i["data"], i.get("method"), i.get("protocol")): {m: i[m] for m in METRICS}
        for i in panel["data"]
    }
    return items, len(items) < depth or len(items) >= panel["metadata"]["items"]


def _flag(current: dict[str, Any] | None, previous: dict[str, Any] | None, threshold: float):
    if current is None or previous is None:
        return None
    now, before = current["hits"] or 0, previous["hits"] or 0
    if before == 0 and now > 0:
        return "new"
    if now == 0 and before > 0:
        return "gone"
    if before and abs(now - before) / before > threshold:
        return "up" if now > before else "down"
    return None


def compare_reports(
    current: dict[str, Any],
    previous: dict[str, Any],
    *,
    top: int,
    threshold: float = 0.5,
    ranges: dict[str, Any] | None = None,
    depth: int = COMPARE_DEPTH,
) -> dict[str, Any]:
    """The comparison of two reports (see the module's docstring).

    Parameters
    ----------
    current, previous : dict
        :func:`logstream.report.build_report`'s reports of the two periods, computed with
        at least ``top`` items per table (:data:`COMPARE_DEPTH` to find each other's items).
    top : int
        Items of each period's top compared per table.
    threshold : float
        A change in hits beyond this fraction of the previous hits flags ``up`` or ``down``.
    ranges : dict, optional
        ``{"current": {...}, "previous": {...}}``: the two filters' descriptions, echoed.
    depth : int
        The items per table the reports were computed with: a shorter list is the whole
        table, so an item missing from it has no hit there.

    Returns
    -------
    dict
        ``ranges``, ``threshold``, ``general`` (``total_requests``, ``valid_requests``,
        ``unique_visitors``, ``bandwidth_bytes``: ``{current, previous, change}``) and
        ``tables``: table → list of items, each ``data`` (and ``method``, ``protocol`` for
        requests), ``current`` and ``previous`` (``{hits, visitors, bytes}``, null when not
        known), ``change`` (current − previous per metric, null when either is) and
        ``flag`` (``new``, ``gone``, ``up``, ``down`` or null), ordered by the current
        hits, then the previous.

    Examples
    --------
    >>> def r(hits):
    ...     g = {"total_requests": sum(hits.values()), "valid_requests": 0,
    ...          "unique_visitors": 0, "bandwidth_bytes": 0, "unique_urls": len(hits)}
    ...     return {"general": g, "top_urls": [
    ...         {"url_path": k, "requests": v, "bytes": 0} for k, v in hits.items()]}
    >>> out = compare_reports(r({"/a": 10, "/b": 3}), r({"/a": 4, "/c": 2}), top=5)
    >>> [(i["data"], i["change"]["hits"], i["flag"]) for i in out["tables"]["top_urls"]]
    [('/a', 6, 'up'), ('/b', 3, 'new'), ('/c', -2, 'gone')]
    """
    tables: dict[str, list[dict[str, Any]]] = {}
    for table in COMPARED_TABLES:
        if table not in current and table not in previous:
            continue
        now, now_whole = _items(current, table, depth)
        before, before_whole = _items(previous, table, depth)
        keys = list(dict.fromkeys([*list(now)[:top], *list(before)[:top]]))
        zero = dict.fromkeys(METRICS, 0)
        rows = []
        for key in keys:
            a = now.get(key, zero if now_whole else None)
            b = before.get(key, zero if before_whole else None)
            change = (
                {m: None if a[m] is None or b[m] is None else a[m] - b[m] for m in METRICS}
                if a is not None and b is not None
                else dict.fromkeys(METRICS)
            )
            item: dict[str, Any] = {"data": key[0]}
            if key[1] is not None or key[2] is not None:
                item["method"], item["protocol"] = key[1], key[2]
            item.update(current=a, previous=b, change=change, flag=_flag(a, b, threshold))
            rows.append(item)
        rows.sort(key=lambda i: (-((i["current"] or {}).get("hits") or 0),
                                 -((i["previous"] or {}).get("hits") or 0)))  # fmt: skip
        tables[table] = rows
    general = {}
    for name in ("total_requests", "valid_requests", "unique_visitors", "bandwidth_bytes"):
        a, b = current["general"][name], previous["general"][name]
        general[name] = {"current": a, "previous": b, "change": a - b}
    return {"ranges": ranges or {}, "threshold": threshold, "general": general, "tables": tables}


def truncated(report: dict[str, Any], top: int) -> dict[str, Any]:
    """``report`` (computed with more items) with ``top`` items per table, as
    :func:`~logstream.report.build_report` would have returned it with ``top``; the panels'
    totals (``metadata``) already cover every item."""
    out = dict(report)
    for table in ("top_urls", "top_hosts", "top_not_found"):
        if table in out:
            out[table] = out[table][:top]
    out["top_content_pages_by_day"] = [
        {**d, "pages": d["pages"][:top]} for d in report.get("top_content_pages_by_day", [])
    ]
    if "reference" in out:
        ref = dict(out["reference"])
        for key, value in ref.items():
            if isinstance(value, list):
                ref[key] = value[:top]
        out["reference"] = ref
    for table in COMPARED_TABLES:
        if table in _OWN_TABLES or table not in out:
            continue
        panel = out[table]
        data = [
            {**i, "items": i["items"][:top]} if "items" in i else i for i in panel["data"][:top]
        ]
        out[table] = {**panel, "data": data}
    return out


#: How the comparison's totals are named on the terminal and the HTML page (the report's).
TOTAL_LABELS = {
    "total_requests": "Total requests",
    "valid_requests": "Valid requests",
    "unique_visitors": "Unique visitors",
    "bandwidth_bytes": "Bandwidth",
}


def comparison_lines(
    comparison: dict[str, Any], rows: int = 5
) -> list[tuple[str, list[list[str]]]]:
    """The comparison as text tables for the terminal and HTML reports: ``(title, rows)``,
    the first row the header; ``rows`` items per table (the request's target without its
    method and protocol, bytes in binary units; no visitors or bytes column where the table
    knows none: ``top_not_found`` counts requests per path, not their bytes)."""

    def cell(value: Any, signed: bool = False) -> str:
        if value is None:
            return "?"
        return f"{value:+,}" if signed else f"{value:,}"

    def size(value: Any) -> str:
        if value is None:
            return "?"
        return ("-" if value < 0 else "+") + human_bytes(abs(value))

    def total(name: str, v: dict[str, Any]) -> list[str]:
        if name == "bandwidth_bytes":  # bytes in binary units, as every table shows them
            shown = [human_bytes(v["current"]), human_bytes(v["previous"]), size(v["change"])]
            return [TOTAL_LABELS[name], *shown]
        values = [cell(v["current"]), cell(v["previous"]), cell(v["change"], True)]
        return [TOTAL_LABELS.get(name, name), *values]

    out = [
        (
            "Totals",
            [["total", "current", "previous", "change"]]
            + [total(name, v) for name, v in comparison["general"].items()],
        )
    ]
    for table, items in comparison["tables"].items():
        shown = items[:rows]
        # a metric is known where a change of it is (a gone item's zeros are not)
        visitors = any(i["change"]["visitors"] is not None for i in shown)
        sizes = any(i["change"]["bytes"] is not None for i in shown)
        lines = [
            [
                "item",
                "hits",
                "Δ hits",
                *(["Δ visitors"] if visitors else []),
                *(["Δ bytes"] if sizes else []),
                "",
            ]
        ]
        for i in shown:
            a, d = i["current"] or {}, i["change"]
            lines.append(
                [
                    i["data"] or "-",
                    cell(a.get("hits")),
                    cell(d["hits"], True),
                    *([cell(d["visitors"], True)] if visitors else []),
                    *([size(d["bytes"])] if sizes else []),
                    i["flag"] or "",
                ]
            )
        out.append((table, lines))
    return out


def _period(ranges: dict[str, Any], which: str) -> str:
    r = ranges.get(which) or {}
    return f"{r.get('since_utc') or '…'} – {r.get('until_utc') or '…'}"


def print_comparison(comparison: dict[str, Any], rows: int = 5) -> None:
    """Print the comparison's tables on the terminal (``rows`` items each)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    ranges = comparison["ranges"]
    console.print(
        f"[bold]Comparison[/bold]: {_period(ranges, 'current')} against "
        f"{_period(ranges, 'previous')} (flag beyond ±{comparison['threshold']:.0%} of hits)"
    )
    for title, lines in comparison_lines(comparison, rows):
        table = Table(title=title, title_justify="left")
        for i, name in enumerate(lines[0]):
            if i == 0:  # the item, whole: folded onto more lines on a narrow terminal
                table.add_column(name, overflow="fold", max_width=44)
            else:  # numbers and the flag are never cut ("…" said nothing)
                table.add_column(name, justify="right", no_wrap=True, min_width=len(name) or 4)
        for line in lines[1:]:
            table.add_row(*line)
        console.print(table)


def comparison_html(comparison: dict[str, Any] | None, rows: int = 10) -> str:
    """The comparison as an HTML section (``""`` without one), ``rows`` items a table."""
    import html

    if not comparison:
        return ""
    ranges = comparison["ranges"]
    parts = [
        '<h2 id="comparison">Compared with the previous period</h2>',
        f"<p>{html.escape(_period(ranges, 'current'))} against "
        f"{html.escape(_period(ranges, 'previous'))}; an item is flagged up or down beyond "
        f"±{comparison['threshold']:.0%} of its previous hits.</p>",
    ]
    for title, lines in comparison_lines(comparison, rows):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in lines[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>"
            for line in lines[1:]
        )
        parts.append(
            f"<h3>{html.escape(title)}</h3><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )
    return "\n".join(parts)
