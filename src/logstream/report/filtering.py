"""The rows a filtered report aggregates: :func:`logstream.parsing.parse`'s output behind the
sites of ``--vhost-from-path`` and the filter of ``--since``, ``--until``, ``--filter`` and
``--grep`` (:mod:`logstream.filters`), counted on the way."""

from __future__ import annotations

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from logstream.filters import EventFilter
from logstream.parsing import REASON_COLUMN, fenced
from logstream.parsing.sites import with_site_from_path

__all__ = ["FilteredRows", "filtered_rows"]


class FilteredRows:
    """The filtered rows of a parse, and how many the filter left out.

    Attributes
    ----------
    rows : DataFrame
        The rows that pass (``parse``'s columns).
    """

    def __init__(self, parsed: DataFrame, flt: EventFilter, site_pattern: str | None) -> None:
        rows = with_site_from_path(parsed, site_pattern)
        self._read: Observation | None = None
        self._kept: Observation | None = None
        if flt.active:
            # behind the fence: the filter reads the typed fields, and Spark would copy each
            # field's parse into it (logstream.parsing.fenced)
            self._read, self._kept = Observation("read"), Observation("kept")
            rows = fenced(rows).observe(self._read, F.count("*").alias("lines"))
            rows = rows.where(flt.row_condition(REASON_COLUMN))
            rows = rows.observe(self._kept, F.count("*").alias("lines"))
        self.rows = rows

    def left_out(self) -> int | None:
        """Lines the filter left out (events and unparsed lines), once the rows were read
        whole; None without a filter."""
        if self._read is None or self._kept is None:
            return None
        return int(self._read.get["lines"]) - int(self._kept.get["lines"])


def filtered_rows(
    parsed: DataFrame, flt: EventFilter, site_pattern: str | None = None
) -> FilteredRows:
    """``parsed`` with its sites from the file path and its filter applied (see
    :class:`FilteredRows`)."""
    return FilteredRows(parsed, flt, site_pattern)
