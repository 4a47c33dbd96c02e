"""GoAccess's panels in the batch report: daily visitors, hosts, static files, not-found
requests, operating systems, browsers, referrers, referring sites, remote users and geolocation.

Each panel holds GoAccess's metrics per item: ``hits`` (requests), ``visitors`` and ``bytes``.
The definitions are GoAccess's (1.7, ``src/parser.c`` and ``src/gstorage.c``), so that the
two reports agree on the same log:

* a **visitor** is a client host, a calendar day (the date written in the line) and a user
  agent; requests answered with a 4xx status do not make a visitor (GoAccess's default,
  ``4xx-to-unique-count false``). An item's ``visitors`` counts the distinct visitors among
  its requests;
* a **request** is the request's target with its query string, ``%xx``-decoded, and with its
  method and protocol (``GET /a.css HTTP/1.1``);
* a **not-found** request is one answered 404; a **static** request is any other whose target
  ends with a static extension (:data:`STATIC_EXTENSIONS`, case-insensitive; a target with a
  query string after the extension is not static); the **requests** panel (GoAccess's
  "requested files") holds the others: neither answered 404 nor static;
* a **referring site** is the referrer's host: the text after its first ``//`` up to the next
  ``/``. With ``site_host`` the site's own referrals are left out of both referrer panels
  (GoAccess's ``--hide-referer``);
* **operating systems** and **browsers** are families with versions as children
  (:mod:`logstream.analytics.useragents`): a visitor's user agent names one child, so a
  family's visitors are the sum of its children's;
* **geolocation** is the client's continent with its countries as children
  (:mod:`logstream.analytics.geo`: GoAccess's names, ``NA North America`` and
  ``US United States``); a host name is ``Unresolved``, never looked up.

Where logstream differs on purpose: the referrers panel leaves out requests with no referrer
(GoAccess lists them as ``-``), and the visitors panel's days are ISO dates (``2015-05-17``,
GoAccess writes ``20150517``).

The panels are read from the report's one aggregation
(:func:`logstream.report.views.view_counts`: a row per request, per visitor — host, day and
user agent —, per referrer, user and virtual host, and an item's visitors counted from its
pairs of item and visitor), ranked with every other table of the report in one job
(:func:`logstream.report.items.ranked_tables`), and laid out here (:func:`assemble_panels`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from logstream.analytics.requests import STATIC_EXTENSIONS
from logstream.config import PANEL_TITLES, PANELS, check_panels
from logstream.report.items import NESTED, TableRows

__all__ = ["PANELS", "STATIC_EXTENSIONS", "assemble_panels", "check_panels", "shown_panels"]

#: The panels of requests, keyed by target, method and protocol.
_REQUEST_PANELS = ("requests", "static_requests", "not_found")


def assemble_panels(ranked: TableRows, panels: Sequence[str], top: int) -> dict[str, Any]:
    """The panels in GoAccess's layout, from the ranked tables of the report.

    Parameters
    ----------
    ranked : TableRows
        :func:`logstream.report.items.ranked_tables`' rows.
    panels : sequence of str
        The panels to lay out.
    top : int
        Items per panel, and children per item (the visitors panel has every day).

    Returns
    -------
    dict
        Panel name → ``{"metadata": {"hits", "visitors", "bytes", "items"}, "data": [...]}``;
        each item of ``data`` has ``data`` (its key), ``hits``, ``visitors``, ``bytes``, plus
        ``method`` and ``protocol`` for requests and ``items`` (its children, the same shape)
        for ``os``, ``browsers`` and ``geolocation``. Totals in ``metadata`` cover every item,
        not only the top.
    """
    out: dict[str, Any] = {}
    for name in panels:
        totals = ranked.totals.get(name, {})
        metadata = {k: totals.get(k, 0) for k in ("hits", "visitors", "bytes", "items")}
        roots = ranked.top(name, None if name == "visitors" else top)
        data = [_item(r) for r in roots]
        if name in NESTED:
            for item in data:
                item["items"] = [_item(c) for c in ranked.top(name, top, parent=item["data"])]
        if name == "visitors":
            data.sort(key=lambda i: i["data"] or "")
        out[name] = {"metadata": metadata, "data": data}
    return out


def _item(row: dict[str, Any]) -> dict[str, Any]:
    """A panel item from a ranked row: its method and protocol split from ``mp`` for a
    request (none for the request ``-``, whose ``mp`` is empty)."""
    item: dict[str, Any] = {
        "data": row["data"],
        "hits": int(row["hits"]),
        "visitors": int(row["visitors"]),
        "bytes": int(row["bytes"]),
    }
    mp = row["mp"]
    if mp:
        item["method"] = mp.split(" ", 1)[0]
        item["protocol"] = mp.rsplit(" ", 1)[1] if " " in mp else None
    return item


#: The versions shown under each family in the terminal and HTML reports (the JSON has
#: ``top``).
SHOWN_CHILDREN = 3


def shown_panels(
    report: dict[str, Any],
) -> Iterator[tuple[str, str, list[tuple[str, str]], list[dict[str, Any]]]]:
    """The report's panels as tables for the terminal and HTML reports, in :data:`PANELS`'s
    order: ``(name, title, columns, rows)``, with columns ``(key, header)`` and flat rows (a
    family, an OS, browser or continent, followed by its first :data:`SHOWN_CHILDREN`
    children, ``└ Chrome 32.0.1700``)."""
    for name in PANELS:
        if name not in report:
            continue
        first = "day" if name == "visitors" else "data"
        columns = [("data", first)]
        if name in _REQUEST_PANELS:
            columns.append(("request", "method · protocol"))
        columns += [("hits", "hits"), ("visitors", "visitors"), ("bytes", "bytes")]
        rows: list[dict[str, Any]] = []
        for item in report[name]["data"]:
            request = " ".join(p for p in (item.get("method"), item.get("protocol")) if p)
            rows.append({**item, "request": request})
            for child in item.get("items", [])[:SHOWN_CHILDREN]:
                rows.append({**child, "data": f"  └ {child['data']}"})
        yield name, PANEL_TITLES[name], columns, rows
