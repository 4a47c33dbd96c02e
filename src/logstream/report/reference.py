"""The report's ``reference`` section: traffic per agent class, site section and network,
read from the report's ranked tables (:func:`logstream.report.items.ranked_tables`)."""

from __future__ import annotations

from typing import Any

from logstream.reference.tables import Table
from logstream.report.items import TableRows, crawler_share

__all__ = ["reference_section"]

#: The report's reference dimensions and the key each row names.
_DIMENSIONS = {"agent_classes": "agent_class", "sections": "section", "networks": "organisation"}


def reference_section(ranked: TableRows, tables: dict[str, Table], top: int) -> dict[str, Any]:
    """Traffic per agent class, section and network, top ``top`` keys of each.

    Each dimension is a function of one event column (an agent class of the user agent, a
    section of the path, a network of the host), so it is joined to the report's rows keyed
    by that column (a row per visitor, per request) rather than to every event: the same
    broadcast joins as ``logstream run`` (:class:`~logstream.reference.Enricher`), then a sum
    per key (``unknown`` without a value), ranked with the report's other tables.

    Returns
    -------
    dict
        ``crawler_share`` (0–1, None without requests); per dimension (networks only with a
        networks table) a list of ``{KEY, "requests", "bytes", "errors", "error_rate"}``;
        ``tables``: each table's source and version (SHA-256).
    """
    names = [n for n in _DIMENSIONS if n != "networks" or "networks" in tables]
    out: dict[str, Any] = {"crawler_share": crawler_share(ranked)}
    for name in names:
        out[name] = [
            {
                _DIMENSIONS[name]: r["data"],
                "requests": r["hits"],
                "bytes": int(r["bytes"] or 0),
                "errors": r["errors"],
                "error_rate": round(r["errors"] / r["hits"], 6),
            }
            for r in ranked.top(name, top)
        ]
    out["tables"] = {
        k: {"source": t.source, "version": t.digest} for k, t in sorted(tables.items())
    }
    return out
