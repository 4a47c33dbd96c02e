"""Visitors: unique clients and the busiest hosts."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["local_day", "top_hosts", "unique_visitors_per_day"]


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
