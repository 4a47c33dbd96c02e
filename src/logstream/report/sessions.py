"""The batch report's ``sessions`` section: visitor sessions merged from visit summaries
(book Ch. 2, "how long was the user session?")."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from logstream.analytics.sessions import summary_session

__all__ = ["SESSION_GAP_S", "session_summary"]

#: The report's inactivity gap between two sessions of a visitor (seconds).
SESSION_GAP_S = 1800


def session_summary(visits: DataFrame, gap_s: int = SESSION_GAP_S) -> dict[str, Any]:
    """Count and describe the sessions of ``visits`` in one job.

    Parameters
    ----------
    visits : DataFrame
        The ``visit`` rows of :func:`logstream.report.views.view_counts`: ``l1`` (a hash of
        the visitor: client host and user agent), ``first_ms``, ``last_ms`` (epoch ms) and
        ``pages`` (content pages) of the visitor's requests within a half-hour. Requests
        within one summary lie less than ``gap_s`` apart, so the summaries merge by Spark's
        session windows (:func:`logstream.analytics.sessions.summary_session`) exactly as
        :func:`logstream.analytics.sessions` merges single requests.
    gap_s : int
        Inactivity timeout, seconds, at least the summaries' length (30 minutes).

    Returns
    -------
    dict
        ``gap_s``; ``sessions``; ``median_duration_s`` and ``p95_duration_s`` (seconds from a
        session's first to its last request, whole seconds; exact: the smallest duration that
        at least half, 95 %, of the sessions do not exceed; None without sessions);
        ``bounce_rate`` (0–1: sessions of at most one content page) and
        ``pages_per_session``.
    """
    merged = visits.groupBy(summary_session(gap_s), F.col("l1")).agg(
        F.min("first_ms").alias("first_ms"),
        F.max("last_ms").alias("last_ms"),
        F.sum("pages").alias("pages"),
    )
    seconds = F.floor(F.col("last_ms") / 1000) - F.floor(F.col("first_ms") / 1000)
    # the durations' histogram (as many rows as distinct durations), then its running total
    # in one partition: the quantiles are exact and the same in every run
    histogram = merged.groupBy(seconds.cast("bigint").alias("seconds")).agg(
        F.count("*").alias("n"),
        F.count_if(F.col("pages") <= 1).alias("bounces"),
        F.sum("pages").alias("pages"),
    )
    running = F.sum("n").over(
        Window.orderBy("seconds").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    total = F.sum("n").over(Window.partitionBy())
    cumulative = histogram.select("*", running.alias("cum"), total.alias("total"))
    row = cumulative.agg(
        F.sum("n").alias("sessions"),
        F.sum("bounces").alias("bounces"),
        F.sum("pages").alias("pages"),
        F.min(F.when(F.col("cum") * 2 >= F.col("total"), F.col("seconds"))).alias("median"),
        F.min(F.when(F.col("cum") * 20 >= F.col("total") * 19, F.col("seconds"))).alias("p95"),
    ).first()
    assert row is not None  # a global aggregate has one row
    sessions = int(row["sessions"] or 0)
    return {
        "gap_s": gap_s,
        "sessions": sessions,
        "median_duration_s": row["median"],
        "p95_duration_s": row["p95"],
        "bounce_rate": round(row["bounces"] / sessions, 6) if sessions else None,
        "pages_per_session": round(row["pages"] / sessions, 3) if sessions else None,
    }
