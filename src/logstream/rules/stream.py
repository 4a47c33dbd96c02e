"""The alert stream: raw lines → parsed events → rule alerts, with map-like operators only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from logstream.parsing import REASON_COLUMN, CompiledFormat, fenced, parse
from logstream.parsing.parser import MAX_FUTURE_S
from logstream.rules.catalog import rule_alerts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["alert_stream"]


def alert_stream(lines: DataFrame, fmt: CompiledFormat, *, continuous: bool = False) -> DataFrame:
    """Parse raw lines and keep the ones a rule flags.

    Parameters
    ----------
    lines : DataFrame
        Batch or streaming, with ``value`` (string, one log line) and optionally
        ``received_at`` (timestamp: the socket source's receive time with
        ``includeTimestamp``, or the rate source's ``generated_at``).
    fmt : CompiledFormat
        The log format (:func:`logstream.parsing.compile_format`).
    continuous : bool, default False
        Build a plan the continuous trigger accepts: no ``current_timestamp()``, so
        ``detected_at`` is null (see :func:`~logstream.rules.rule_alerts`).

    Returns
    -------
    DataFrame
        :data:`~logstream.rules.ALERT_COLUMNS`. A line that cannot be parsed is an alert of
        rule ``unparseable`` with its raw text and ``reason`` (the quarantine of the alert
        path: nothing is dropped unseen, and a wrong ``--format`` shows at the first line).

    Notes
    -----
    The parser (:func:`logstream.parsing.parse`) keeps only ``raw_line`` and ``source_file``
    of its input. The socket and rate sources have no file, so ``received_at`` rides through
    the parser in ``source_file`` as text (microseconds kept) and is read back after: one
    projection each way, no join, so the plan stays continuous-compatible. Every parser
    expression (``regexp_replace``, ``split``, ``get``, ``try_cast``, ``try_to_timestamp``) is
    a plain projection, which the continuous trigger accepts. Under micro-batch triggers the
    parsed lines are :func:`~logstream.parsing.fenced`, so Spark evaluates the parse once a
    line; under the continuous trigger it copies the regular expression into the alert
    filter once for each typed field the quarantine reason reads (a ``Generate`` is not
    allowed there).
    """
    received = (
        F.col("received_at").cast("string")
        if "received_at" in lines.columns
        else F.lit(None).cast("string")
    )
    # the future-time rule reads current_timestamp(), which the continuous trigger refuses
    max_future = None if continuous else MAX_FUTURE_S
    parsed = parse(lines.select("value", received.alias("source_file")), fmt, max_future)
    if not continuous:  # each line parsed once (a Generate: not under the continuous trigger)
        parsed = fenced(parsed)
    return rule_alerts(
        parsed,
        received_at=F.col("source_file").try_cast("timestamp"),
        detected_at=not continuous,
        reason=F.col(REASON_COLUMN),
    )
