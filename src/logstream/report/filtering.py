"""The rows a filtered report aggregates: :func:`logstream.parsing.parse`'s output behind the
sites of ``--vhost-from-path`` and the filter of ``--since``, ``--until``, ``--filter`` and
``--grep`` (:mod:`logstream.filters`), counted on the way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from logstream.comparison import COMPARE_DEPTH, compare_reports, truncated
from logstream.filters import EventFilter
from logstream.parsing import REASON_COLUMN, CompiledFormat, fenced, parse
from logstream.parsing.parser import MAX_LINE_BYTES
from logstream.parsing.sites import with_site_from_path
from logstream.report.batch import build_report

__all__ = ["FilteredRows", "Filtering", "filtered_report", "filtered_rows"]


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
        self._counted: DataFrame | None = None
        if flt.active:
            # behind the fence: the filter reads the typed fields, and Spark would copy each
            # field's parse into it (logstream.parsing.fenced)
            self._read, self._kept = Observation("read"), Observation("kept")
            condition = flt.row_condition(REASON_COLUMN)
            self._counted = fenced(rows).select(
                F.count("*").alias("read"), F.count_if(condition).alias("kept")
            )
            rows = fenced(rows).observe(self._read, F.count("*").alias("lines"))
            rows = rows.where(condition)
            rows = rows.observe(self._kept, F.count("*").alias("lines"))
        self.rows = rows

    def left_out(self) -> int | None:
        """Lines the filter left out (events and unparsed lines), once the rows were read
        whole; None without a filter."""
        if self._read is None or self._kept is None or self._counted is None:
            return None
        read, kept = _observed(self._read), _observed(self._kept)
        if read is None or kept is None:  # the metrics are gone: one pass counts them
            counted = self._counted.first()
            read, kept = int(counted["read"]), int(counted["kept"])
        return read - kept


def _observed(observation: Observation) -> int | None:
    """The ``lines`` an observation counted, or None when Spark has none: a filter that
    keeps no line leaves an empty stage, which the adaptive optimizer replaces by an empty
    relation with the operator that collected the metrics (SPARK-54620), and the observation
    then holds an empty row."""
    try:
        return int(observation.get["lines"])
    except (Py4JJavaError, KeyError):
        return None


def filtered_rows(
    parsed: DataFrame, flt: EventFilter, site_pattern: str | None = None
) -> FilteredRows:
    """``parsed`` with its sites from the file path and its filter applied (see
    :class:`FilteredRows`)."""
    return FilteredRows(parsed, flt, site_pattern)


@dataclass(frozen=True)
class Filtering:
    """What a filtered report of ``logstream batch`` keeps, and what it is compared with."""

    current: EventFilter
    previous: EventFilter | None
    site_pattern: str | None
    threshold: float
    #: Lines longer than this are quarantined as ``line_too_long`` (:func:`parse`).
    max_line_bytes: int | None = MAX_LINE_BYTES


def filtered_report(
    lines: DataFrame,
    fmt: CompiledFormat,
    filtering: Filtering,
    top: int,
    options: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    """The report of ``lines`` filtered by ``filtering.current`` (``options`` and ``extra``:
    :func:`~logstream.report.build_report`'s), compared with its ``previous`` period when
    there is one; ``general`` says which filter made it and how many lines it left out."""
    f = filtering
    depth = max(top, COMPARE_DEPTH) if f.previous is not None else top
    parsed = parse(lines, fmt, max_line_bytes=f.max_line_bytes, time_text=True)
    rows = filtered_rows(parsed, f.current, f.site_pattern)
    report = build_report(rows.rows, top=depth, **options, **extra)
    report["general"]["filter"] = f.current.describe()
    report["general"]["filtered_out"] = rows.left_out()
    if f.previous is None:
        return report
    before = filtered_rows(parsed, f.previous, f.site_pattern).rows
    earlier = build_report(before, top=depth, **options)
    report = _compared(report, earlier, f.previous, top, depth, f.threshold)
    report["comparison"]["ranges"]["current"] = f.current.describe()
    return report


def _compared(
    report: dict[str, Any],
    before: dict[str, Any],
    previous: Any,
    top: int,
    depth: int,
    threshold: float,
) -> dict[str, Any]:
    """``report`` (computed with ``depth`` items a table) cut to ``top``, with the comparison
    against ``before``, the report of the ``previous`` filter's period
    (:mod:`logstream.comparison`)."""
    comparison = compare_reports(
        report,
        before,
        top=top,
        threshold=threshold,
        ranges={"previous": previous.describe()},
        depth=depth,
    )
    return {**truncated(report, top), "comparison": comparison}
