"""Visitors: unique clients and the busiest hosts."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["local_day", "top_hosts", "unique_visitors_per_day", "visitor_sketches_per_window"]


def local_day(time_zone: str = "UTC") -> Column:
    """Calendar day (date) of ``event_time`` in ``time_zone``."""
    ts = F.col("event_time")
    if time_zone != "UTC":
        ts = F.from_utc_timestamp(ts, time_zone)
    return F.to_date(ts)


def unique_visitors_per_day(events: DataFrame, time_zone: str = "UTC") -> DataFrame:
    """Distinct client hosts per calendar day (exact).

    Parameters
    ----------
    events : DataFrame
        Columns ``client_host`` (string), ``event_time`` (timestamp).
    time_zone : str
        IANA zone whose calendar days are counted.

    Returns
    -------
    DataFrame
        ``day`` (date), ``visitors`` (bigint), ordered by day.
    """
    return (
        events.groupBy(local_day(time_zone).alias("day"))
        .agg(F.count_distinct("client_host").alias("visitors"))
        .orderBy("day")
    )


def top_hosts(events: DataFrame, n: int = 10) -> DataFrame:
    """The ``n`` client hosts with the most requests.

    Parameters
    ----------
    events : DataFrame
        Columns ``client_host``, ``bytes_sent``.
    n : int
        Rows returned.

    Returns
    -------
    DataFrame
        ``client_host``, ``requests`` (bigint), ``bytes`` (bigint), most requests first
        (ties by host name).
    """
    return (
        events.groupBy("client_host")
        .agg(F.count("*").alias("requests"), F.sum("bytes_sent").alias("bytes"))
        .orderBy(F.col("requests").desc(), F.col("client_host"))
        .limit(n)
    )


def visitor_sketches_per_window(events: DataFrame, window_duration: str = "1 minute") -> DataFrame:
    """Approximate unique visitors per event-time window with HyperLogLog sketches.

    Uses Spark's DataSketches functions (``hll_sketch_agg``, ``hll_sketch_estimate``; Spark SQL
    reference, "Sketch functions"): state per window is one small sketch, whatever the number
    of hosts, and sketches of the same window merge (``hll_union_agg``) across micro-batches.

    Parameters
    ----------
    events : DataFrame
        Columns ``event_time``, ``client_host``; a streaming caller sets a watermark first.
    window_duration : str
        Tumbling window length.

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp, UTC), ``visitors`` (bigint, estimated
        distinct ``client_host``; lgConfigK 12, relative error about 1.6 %), ``sketch``
        (binary, the HLL sketch for later merges).
    """
    return (
        events.groupBy(F.window("event_time", window_duration).alias("window"))
        .agg(F.hll_sketch_agg("client_host").alias("sketch"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            F.hll_sketch_estimate("sketch").alias("visitors"),
            "sketch",
        )
    )
