"""Text a serving store can hold: every value written to a store goes through :func:`safe_row`.

A log line is whatever bytes a client sent. The parser quarantines a line with NUL
(``control_character``, :mod:`logstream.parsing.parser`), but its raw text, a file name or an
error message still reach the store as quarantine examples, and two kinds of character there
stop a transaction — and so the pipeline, at every restart:

* **NUL** (U+0000): PostgreSQL's ``text`` cannot hold it (``DataError: PostgreSQL text fields
  cannot contain NUL (0x00) bytes``). SQLite stores it, but its string functions stop at it.
* **lone surrogates** (U+D800–U+DFFF): what Python decodes an undecodable file name into
  (``surrogateescape``); neither psycopg nor :mod:`sqlite3` can encode them as UTF-8.

Both stores write the same replacement, so a SQLite and a PostgreSQL store of one run hold
the same rows: NUL becomes U+2400 (SYMBOL FOR NULL, ``␀``: visible on the dashboard), a lone
surrogate U+FFFD (the replacement character, as for any undecodable byte). The raw line keeps
its bytes in the ``quarantine/`` output (Parquet strings hold NUL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["NUL_SHOWN_AS", "SafeConnection", "safe_row", "safe_rows", "safe_text"]

#: What a NUL is written as in a store.
NUL_SHOWN_AS = "\u2400"
_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(value: str) -> str:
    """``value`` with NUL written as U+2400 and lone surrogates as U+FFFD.

    Parameters
    ----------
    value : str

    Returns
    -------
    str
        ``value`` itself when it holds neither (the common case: one scan, no copy).

    Examples
    --------
    >>> safe_text("GET /a\\x00b"), safe_text("caf\\udce9.log"), safe_text("/ok")
    ('GET /a␀b', 'caf\\ufffd.log', '/ok')
    """
    if "\x00" in value:
        value = value.replace("\x00", NUL_SHOWN_AS)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = _SURROGATE.sub("\ufffd", value)
    return value


def safe_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row of query parameters with every ``str`` made safe (:func:`safe_text`); other
    values (numbers, bytes, None) as they are.

    Examples
    --------
    >>> safe_row(("a\\x00", 1, None, b"\\x00"))
    ('a␀', 1, None, b'\\x00')
    """
    return tuple(safe_text(v) if isinstance(v, str) else v for v in row)


def safe_rows(rows: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """:func:`safe_row` of each row; the rows themselves when no text among them needs it
    (one scan of all their text, the common case: a micro-batch's windows write tens of
    thousands of rows)."""
    rows = rows if isinstance(rows, list) else list(rows)
    joined = "".join([v for r in rows for v in r if isinstance(v, str)])
    if "\x00" not in joined and joined.isascii():
        return rows
    return [safe_row(r) for r in rows]


class SafeConnection:
    """A :mod:`sqlite3` connection whose bound parameters are made safe for the store
    (:func:`safe_row`); everything else is the connection's."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        """``conn.execute`` with :func:`safe_row` of ``params`` (by position or name)."""
        if isinstance(params, Mapping):
            safe = {k: safe_text(v) if isinstance(v, str) else v for k, v in params.items()}
            return self.raw.execute(sql, safe)
        return self.raw.execute(sql, safe_row(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        """``conn.executemany`` with :func:`safe_rows` of ``rows``."""
        return self.raw.executemany(sql, safe_rows(rows))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
