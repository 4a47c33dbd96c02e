"""Visitors: unique clients and the busiest hosts."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

__all__ = [
    "client_counts_per_window",
    "local_day",
    "top_clients_per_window",
    "top_hosts",
    "unique_visitors_per_day",
    "visitor_sketches_per_window",
]


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


def client_counts_per_window(events: DataFrame, window_duration: str = "5 minutes") -> DataFrame:
    """Requests and bytes per client host and tumbling event-time window.

    The exact heavy-hitter count (book Ch. 13 discusses count-min sketches for this): state
    is one row per client seen in an open window, bounded by the watermark, and the answer
    is exact. A count-min sketch would only pay off with millions of distinct clients per
    window, and it cannot list the heavy clients by itself.

    Parameters
    ----------
    events : DataFrame
        Columns ``event_time``, ``client_host``, ``bytes_sent``; a streaming caller sets a
        watermark first.
    window_duration : str
        Tumbling window length.

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp, UTC), ``client_host``, ``requests``
        (bigint), ``bytes`` (bigint, bytes sent).
    """
    return (
        events.groupBy(F.window("event_time", window_duration).alias("window"), "client_host")
        .agg(F.count("*").alias("requests"), F.sum("bytes_sent").alias("bytes"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "client_host",
            "requests",
            "bytes",
        )
    )


def top_clients_per_window(counts: DataFrame, n: int = 10) -> DataFrame:
    """The heavy hitters of each window: top ``n`` clients by requests and top ``n`` by bytes.

    Parameters
    ----------
    counts : DataFrame
        Output of :func:`client_counts_per_window`, a batch DataFrame (in a stream, run this
        inside ``foreachBatch`` on the finished windows).
    n : int
        Clients kept per window and measure, ≥ 1.

    Returns
    -------
    DataFrame
        ``counts``' columns plus ``rank_requests`` and ``rank_bytes`` (int, 1 = highest; null
        when the client is not in that top ``n``). Ties are broken by host name.

    Raises
    ------
    ValueError
        When ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    per_window = Window.partitionBy("window_start")
    ranked = counts.withColumn(
        "_rr", F.row_number().over(per_window.orderBy(F.desc("requests"), "client_host"))
    ).withColumn("_rb", F.row_number().over(per_window.orderBy(F.desc("bytes"), "client_host")))
    return ranked.where((F.col("_rr") <= n) | (F.col("_rb") <= n)).select(
        *counts.columns,
        F.when(F.col("_rr") <= n, F.col("_rr")).alias("rank_requests"),
        F.when(F.col("_rb") <= n, F.col("_rb")).alias("rank_bytes"),
    )
