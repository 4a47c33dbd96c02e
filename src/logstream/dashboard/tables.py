"""The dashboard's tables: a head row, then the body, each heading aligned as its cells."""

from __future__ import annotations

from typing import Any

from dash import html

__all__ = ["data_table"]


def data_table(tid: str, headings: list[str], rows: list[Any]) -> html.Table:
    """Table ``tid``: a head row of ``headings``, then the body ``rows`` (``html.Tr``); a
    heading sits as its column's cells do (right-aligned over numbers, class ``n``)."""
    first = rows[0].children if rows and isinstance(rows[0].children, list) else []
    classes = [getattr(cell, "className", None) for cell in first]
    heads = [
        html.Th(h, className="n") if i < len(classes) and classes[i] == "n" else html.Th(h)
        for i, h in enumerate(headings)
    ]
    return html.Table([html.Thead(html.Tr(heads)), html.Tbody(rows)], id=tid)
