"""Formatting of quantities and labels for people (terminal, HTML report, dashboard)."""

from __future__ import annotations

import html
from datetime import UTC, datetime

__all__ = ["chart_text", "human_bytes", "iso_instant", "plural"]


def chart_text(value: object) -> str:
    """Text from the log (a URL path, a section) as a Plotly chart label shows it as itself.

    Plotly reads a subset of HTML in every label (tick labels, legends, hover text):
    ``<a href="…">`` is a link, ``<b>`` bold. With ``&``, ``<`` and ``>`` as entities, which it
    turns back into the characters only after it has looked for tags, a label is plain text.

    Examples
    --------
    >>> chart_text('<a href="https://evil.example/">clickme</a> & co')
    '&lt;a href="https://evil.example/"&gt;clickme&lt;/a&gt; &amp; co'
    >>> chart_text(None)
    'None'
    """
    return html.escape(str(value), quote=False)


def human_bytes(value: float | None, missing: str = "–") -> str:
    """Format a byte count with binary units.

    Parameters
    ----------
    value : float or None
        Bytes.
    missing : str
        What to show for None.

    Examples
    --------
    >>> human_bytes(1536)
    '1.5 KiB'
    >>> human_bytes(512)
    '512 B'
    >>> human_bytes(None)
    '–'
    """
    if value is None:
        return missing
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def plural(count: float | None, one: str, many: str | None = None, missing: str = "–") -> str:
    """``count`` with thousands separators and the noun that agrees with it.

    Parameters
    ----------
    count : int or None
        How many.
    one : str
        The noun for one (``micro-batch``).
    many : str, optional
        The noun for any other count (default: ``one`` + ``s``; give it for ``entry`` →
        ``entries`` and the like).
    missing : str
        What to show for None, before the plural noun.

    Examples
    --------
    >>> plural(1, "micro-batch"), plural(25, "micro-batch"), plural(0, "file")
    ('1 micro-batch', '25 micro-batches', '0 files')
    >>> plural(1_000, "entry", "entries"), plural(None, "row")
    ('1,000 entries', '– rows')
    """
    if count is None:
        return f"{missing} {many or _plural_of(one)}"
    noun = one if count == 1 else (many or _plural_of(one))
    return f"{count:,} {noun}"


def _plural_of(noun: str) -> str:
    """``batch`` → ``batches``, ``line`` → ``lines``."""
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x", "z")) else "s")


def iso_instant(text: str) -> datetime:
    """An ISO 8601 time as Spark casts it: a space for the ``T`` allowed, UTC without an
    offset; the instant in UTC.

    Raises
    ------
    ValueError
        When ``text`` is not ISO 8601.

    Examples
    --------
    >>> iso_instant("2015-05-18 10:00").isoformat(), iso_instant("2015-05-18T12:00+02:00").hour
    ('2015-05-18T10:00:00+00:00', 10)
    """
    moment = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
