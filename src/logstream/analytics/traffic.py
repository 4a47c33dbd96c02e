"""Traffic: requests, bytes and status codes, over everything or per event-time window."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = [
    "ERROR_STATUS_MIN",
    "STATUS_CLASSES",
    "general_summary",
    "status_class",
    "status_class_counts",
    "status_counts",
    "traffic_per_window",
]

#: Status classes reported, in order. A status outside 100–599 cannot reach analytics
#: (the parser quarantines it).
STATUS_CLASSES: tuple[str, ...] = ("1xx", "2xx", "3xx", "4xx", "5xx")

#: A response counts as an error from this status on (4xx client and 5xx server errors).
ERROR_STATUS_MIN = 400


def status_class(status: Column | str = "status") -> Column:
    """Return the status class of ``status`` as ``"2xx"``-style text."""
    col = F.col(status) if isinstance(status, str) else status
    return F.concat(F.floor(col / 100).cast("string"), F.lit("xx"))


def status_counts(events: DataFrame) -> DataFrame:
    """Count requests per status code.

    Parameters
    ----------
    events : DataFrame
        Columns ``status`` (int).

    Returns
    -------
    DataFrame
        ``status`` (int), ``requests`` (bigint), ordered by status.
    """
    return events.groupBy("status").agg(F.count("*").alias("requests")).orderBy("status")


def status_class_counts(events: DataFrame) -> DataFrame:
    """Count requests per status class.

    Parameters
    ----------
    events : DataFrame
        Columns ``status`` (int).

    Returns
    -------
    DataFrame
        ``status_class`` (string, ``"2xx"``), ``requests`` (bigint), ordered by class.
    """
    return (
        events.groupBy(status_class().alias("status_class"))
        .agg(F.count("*").alias("requests"))
        .orderBy("status_class")
    )


def traffic_per_window(
    events: DataFrame, window_duration: str = "1 minute", slide_duration: str | None = None
) -> DataFrame:
    """Requests, bytes, status classes and error rate per event-time window.

    The streaming pipeline calls it on a watermarked stream (tumbling 1-minute windows); the
    batch report calls it with 1-hour windows for hourly traffic.

    Parameters
    ----------
    events : DataFrame
        Columns ``event_time`` (timestamp), ``status`` (int), ``bytes_sent`` (bigint).
    window_duration : str
        Window length, a Spark interval string (``"1 minute"``, ``"1 hour"``).
    slide_duration : str, optional
        Slide for sliding windows; tumbling when omitted.

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp, UTC), ``requests`` (bigint),
        ``bytes`` (bigint, bytes), ``status_1xx`` … ``status_5xx`` (bigint),
        ``error_rate`` (double, share of requests with status ≥ 400, 0–1).

    Notes
    -----
    Windows are aligned on the epoch (UTC), as ``pyspark.sql.functions.window`` does.
    """
    win = (
        F.window("event_time", window_duration, slide_duration)
        if slide_duration
        else F.window("event_time", window_duration)
    )
    per_class = [
        F.count_if(F.floor(F.col("status") / 100) == int(c[0])).alias(f"status_{c}")
        for c in STATUS_CLASSES
    ]
    agg = events.groupBy(win.alias("window")).agg(
        F.count("*").alias("requests"),
        F.sum("bytes_sent").alias("bytes"),
        F.count_if(F.col("status") >= ERROR_STATUS_MIN).alias("errors"),
        *per_class,
    )
    return agg.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "requests",
        "bytes",
        *[f"status_{c}" for c in STATUS_CLASSES],
        "errors",
        (F.col("errors") / F.col("requests")).alias("error_rate"),
    )


def general_summary(events: DataFrame, time_zone: str = "UTC") -> DataFrame:
    """GoAccess-style general statistics over all events, as one row.

    Parameters
    ----------
    events : DataFrame
        Event schema columns ``client_host``, ``event_time``, ``url_path``, ``status``,
        ``bytes_sent``.
    time_zone : str
        IANA zone whose calendar days count unique visitors.

    Returns
    -------
    DataFrame
        One row: ``valid_requests`` (bigint), ``unique_visitors`` (bigint: distinct
        ``client_host`` per calendar day, summed over days, GoAccess's definition without the
        user agent), ``unique_urls`` (bigint), ``unique_not_found`` (bigint, distinct URL paths
        answered 404), ``bandwidth_bytes`` (bigint, bytes), ``first_event``, ``last_event``
        (timestamp, UTC).
    """
    from logstream.analytics.visitors import unique_visitors_per_day

    totals = events.agg(
        F.count("*").alias("valid_requests"),
        F.count_distinct("url_path").alias("unique_urls"),
        F.count_distinct(F.when(F.col("status") == 404, F.col("url_path"))).alias(
            "unique_not_found"
        ),
        F.coalesce(F.sum("bytes_sent"), F.lit(0)).cast("bigint").alias("bandwidth_bytes"),
        F.min("event_time").alias("first_event"),
        F.max("event_time").alias("last_event"),
    )
    visitors = unique_visitors_per_day(events, time_zone).agg(
        F.coalesce(F.sum("visitors"), F.lit(0)).cast("bigint").alias("unique_visitors")
    )
    return totals.crossJoin(visitors).select(
        "valid_requests",
        "unique_visitors",
        "unique_urls",
        "unique_not_found",
        "bandwidth_bytes",
        "first_event",
        "last_event",
    )
