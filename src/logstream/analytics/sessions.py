"""Visitor sessions: requests of one visitor with no gap as long as the inactivity timeout.

Spark's session windows (``session_window``; Spark guide, "Types of time windows") do the
grouping, so :func:`sessions` runs on batch DataFrames and, with a watermark, on streams (append
mode emits a session once the watermark passes its end: last event + gap). Book Ch. 2 asks
"how long was the user session on our site?"; this is that answer.

Incremental sessions, one micro-batch at a time (inside ``foreachBatch``, on batch
DataFrames, without Spark's state store): :func:`session_parts` summarises the micro-batch's
events per visitor and minute, and :func:`merge_sessions` merges those summaries with the
sessions left open by the previous micro-batch, then splits the result into the sessions the
watermark closes and those still open. Both shapes are :data:`SESSION_PARTS_SCHEMA`, so the
open sessions are stored and read back as they are.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from logstream.analytics.bounds import at_most
from logstream.analytics.pages import is_content_page
from logstream.analytics.panes import gathered

__all__ = [
    "MIN_MERGE_GAP_S",
    "SESSION_PARTS_SCHEMA",
    "duration_quantiles",
    "merge_sessions",
    "merged_sessions",
    "session_parts",
    "session_stats_per_window",
    "sessions",
    "split_sessions",
    "summary_session",
]

_PAGE = StructType([StructField("t_ms", LongType(), True), StructField("page", StringType(), True)])

#: A session summary: the per-minute partial summary of :func:`session_parts`, and the shape
#: in which :func:`merge_sessions` keeps an open session (its whole span and its totals).
#: Every field is nullable, as Spark reads it back from Parquet.
SESSION_PARTS_SCHEMA = StructType(
    [
        StructField("client_host", StringType(), True),
        StructField("agent", StringType(), True),
        StructField("first_ms", LongType(), True),
        StructField("last_ms", LongType(), True),
        StructField("requests", LongType(), True),
        StructField("pages", LongType(), True),
        StructField("bytes", LongType(), True),
        StructField("entry", _PAGE, True),
        StructField("exit", _PAGE, True),
    ]
)

#: The shortest gap :func:`merge_sessions` accepts: the requests :func:`session_parts` sums up
#: lie less than one minute apart, so they belong to one session only when the gap is at least
#: that long.
MIN_MERGE_GAP_S = 60


def sessions(events: DataFrame, gap: str = "30 minutes") -> DataFrame:
    """One row per visitor session.

    A visitor is a ``client_host`` together with its ``user_agent`` when the format has one.
    A session ends when the visitor is inactive for longer than ``gap``: a request at most
    ``gap`` after the previous one continues the session (Spark merges session windows that
    touch).

    Parameters
    ----------
    events : DataFrame
        Columns ``client_host``, ``user_agent``, ``event_time``, ``url_path``,
        ``bytes_sent``; a streaming caller sets a watermark first.
    gap : str
        Inactivity timeout, a Spark interval string.

    Returns
    -------
    DataFrame
        ``client_host``, ``user_agent`` (null when the format has none), ``session_start``,
        ``session_end`` (timestamp, UTC: first and last request), ``duration_s`` (bigint,
        seconds between them), ``requests`` (bigint, every request), ``pages`` (bigint,
        content-page views, see :func:`~logstream.analytics.is_content_page`), ``bytes``
        (bigint, bytes), ``entry_page`` and ``exit_page`` (first and last content page, the
        smallest path first among requests of the same second; null without pages),
        ``bounce`` (boolean: at most one page viewed).
    """
    page = F.when(is_content_page(), F.struct("event_time", "url_path"))
    agg = events.groupBy(
        F.session_window("event_time", gap).alias("session"),
        "client_host",
        F.coalesce("user_agent", F.lit("")).alias("_agent"),
    ).agg(
        F.min("event_time").alias("session_start"),
        F.max("event_time").alias("session_end"),
        F.count("*").alias("requests"),
        F.count(page).alias("pages"),
        F.sum("bytes_sent").alias("bytes"),
        F.min(page).alias("_entry"),
        F.max(page).alias("_exit"),
    )
    return agg.select(
        "client_host",
        F.when(F.col("_agent") != "", F.col("_agent")).alias("user_agent"),
        "session_start",
        "session_end",
        (F.unix_seconds("session_end") - F.unix_seconds("session_start")).alias("duration_s"),
        "requests",
        "pages",
        "bytes",
        F.col("_entry.url_path").alias("entry_page"),
        F.col("_exit.url_path").alias("exit_page"),
        (F.col("pages") <= 1).alias("bounce"),
    )


def session_parts(events: DataFrame) -> DataFrame:
    """Per-visitor, per-minute summaries of events, which merge into sessions exactly.

    Requests of one visitor within one UTC minute lie less than a minute apart, so with any gap
    of at least :data:`MIN_MERGE_GAP_S` they belong to one session: as the interval
    ``[first_ms, last_ms]`` with its totals, a summary merges in :func:`merge_sessions` exactly
    as its requests would (the partial aggregates of Spark's session windows, taken one step
    early; Spark guide, "Types of time windows").

    Parameters
    ----------
    events : DataFrame
        Batch DataFrame with columns ``client_host``, ``user_agent``, ``event_time``,
        ``url_path``, ``bytes_sent``, e.g. one micro-batch inside ``foreachBatch``.

    Returns
    -------
    DataFrame
        :data:`SESSION_PARTS_SCHEMA`, one row per (``client_host``, ``agent``, minute of
        ``event_time``): ``client_host``; ``agent`` (string, the user agent, ``''`` when null);
        ``first_ms`` and ``last_ms`` (bigint, epoch milliseconds of the first and last request
        of the minute; a finer ``event_time`` is truncated to the millisecond); ``requests``
        (bigint, every request); ``pages`` (bigint, content-page views, see
        :func:`~logstream.analytics.is_content_page`); ``bytes`` (bigint, bytes); ``entry``
        and ``exit`` (struct ``t_ms`` bigint epoch milliseconds, ``page`` string: the smallest
        and largest (time, path) of the minute's content pages; null without pages).
    """
    keys, aggregates = _part_columns()
    return _as_parts(events.groupBy(*keys).agg(*aggregates))


@functools.cache
def _part_columns() -> tuple[tuple[Column, ...], tuple[Column, ...]]:
    """:func:`session_parts`' grouping and aggregates (cached: the same expressions every
    micro-batch, built once; see :mod:`logstream.analytics.panes`)."""
    t_ms = F.unix_millis("event_time")
    page = F.when(is_content_page(), F.struct(t_ms.alias("t_ms"), F.col("url_path").alias("page")))
    keys = (
        F.col("client_host"),
        F.coalesce("user_agent", F.lit("")).alias("agent"),
        (t_ms - F.pmod(t_ms, F.lit(60_000))).alias("_minute_ms"),
    )
    aggregates = (
        F.min(t_ms).alias("first_ms"),
        F.max(t_ms).alias("last_ms"),
        F.count("*").alias("requests"),
        F.count(page).alias("pages"),
        F.sum("bytes_sent").alias("bytes"),
        F.min(page).alias("entry"),
        F.max(page).alias("exit"),
    )
    return keys, aggregates


def merge_sessions(
    parts: DataFrame, open_sessions: DataFrame, gap_s: int, watermark_ms: int | None
) -> tuple[DataFrame, DataFrame]:
    """Merge new session summaries with the open sessions; split off the closed sessions.

    The incremental form of :func:`sessions` for one micro-batch (batch DataFrames, inside
    ``foreachBatch``). Each summary is the interval ``[first_ms, last_ms]`` of some requests of
    a visitor; Spark's session window with a dynamic gap (Spark guide, "Types of time windows",
    dynamic gap duration) gives it the window ``[first_ms, last_ms + gap)`` and merges windows
    that overlap or touch, so two summaries join when the later starts at most ``gap_s`` after
    the earlier ends: exactly the rule :func:`sessions` applies to single requests. The
    result does not depend on how the requests were cut into micro-batches or summaries, as
    long as each event of a later micro-batch is later than the watermark of an earlier one.

    Parameters
    ----------
    parts : DataFrame
        :data:`SESSION_PARTS_SCHEMA` rows, e.g. :func:`session_parts` of this micro-batch.
    open_sessions : DataFrame
        :data:`SESSION_PARTS_SCHEMA` rows: the ``still_open`` of the previous call (empty at
        first).
    gap_s : int
        Inactivity timeout, seconds; at least :data:`MIN_MERGE_GAP_S`.
    watermark_ms : int or None
        Epoch milliseconds; every later request is later than it. A session is closed when
        ``last_ms + gap_s * 1000 <= watermark_ms``: no later request can continue it. None
        closes every session (batch use).

    Returns
    -------
    closed : DataFrame
        The closed sessions, with the columns, types and order of :func:`sessions`:
        ``client_host``, ``user_agent`` (null for ``agent == ''``), ``session_start``,
        ``session_end`` (timestamp, UTC, millisecond precision), ``duration_s`` (bigint,
        seconds), ``requests``, ``pages``, ``bytes`` (bigint), ``entry_page``, ``exit_page``
        (string), ``bounce`` (boolean: at most one page viewed).
    still_open : DataFrame
        :data:`SESSION_PARTS_SCHEMA`, one row per open session: its first and last request,
        totals, and entry and exit pages; pass it as ``open_sessions`` to the next call.

    Raises
    ------
    ValueError
        When ``gap_s`` is shorter than :data:`MIN_MERGE_GAP_S`.

    Notes
    -----
    Both results are computed from the same deterministic aggregation (integer sums, minima
    and maxima), so evaluating ``closed`` and ``still_open`` separately agrees. To run the
    session window aggregation once for both, persist :func:`merged_sessions` and split it
    with :func:`split_sessions` (what the pipeline does).
    """
    merged = merged_sessions(parts, open_sessions, gap_s)
    return split_sessions(merged, gap_s, watermark_ms)


def merged_sessions(
    parts: DataFrame, open_sessions: DataFrame, gap_s: int, single_partition: bool = False
) -> DataFrame:
    """The first step of :func:`merge_sessions`: summaries and open sessions merged into
    sessions (:data:`SESSION_PARTS_SCHEMA`, one row per session), closed or not.

    Persist the result when both parts of :func:`split_sessions` are used: the session window
    aggregation then runs once. With ``single_partition`` the merge runs in one partition,
    with no shuffle (:func:`logstream.analytics.panes.gathered`): for a small micro-batch.

    Raises
    ------
    ValueError
        When ``gap_s`` is shorter than :data:`MIN_MERGE_GAP_S`.
    """
    if gap_s < MIN_MERGE_GAP_S:
        raise ValueError(
            f"gap_s={gap_s}: sessions merged from per-minute summaries need a gap of at least "
            f"{MIN_MERGE_GAP_S} seconds"
        )
    columns, keys, aggregates = _merge_columns(gap_s)
    both = gathered(
        parts.select(*columns).unionByName(open_sessions.select(*columns)), single_partition
    )
    return _as_parts(both.groupBy(*keys).agg(*aggregates))


@functools.cache
def _merge_columns(gap_s: int) -> tuple[tuple[Column, ...], tuple[Column, ...], tuple]:
    """:func:`merged_sessions`' columns, grouping and aggregates (cached)."""
    return (
        tuple(F.col(c) for c in SESSION_PARTS_SCHEMA.fieldNames()),
        (summary_session(gap_s).alias("_session"), F.col("client_host"), F.col("agent")),
        (
            F.min("first_ms").alias("first_ms"),
            F.max("last_ms").alias("last_ms"),
            F.sum("requests").alias("requests"),
            F.sum("pages").alias("pages"),
            F.sum("bytes").alias("bytes"),
            F.min("entry").alias("entry"),
            F.max("exit").alias("exit"),
        ),
    )


def summary_session(gap_s: int) -> Column:
    """Spark's session window of a summary of requests, ``[first_ms, last_ms]`` (columns,
    epoch milliseconds): ``[first_ms, last_ms + gap_s)``, a dynamic gap (Spark guide, "Types of
    time windows"). Grouped by it, summaries whose windows overlap or touch merge: the later
    starts at most ``gap_s`` after the earlier ends, the rule :func:`sessions` applies to single
    requests. :func:`merged_sessions` and the batch report (:mod:`logstream.report.batch`)
    group by it.

    Parameters
    ----------
    gap_s : int
        Inactivity timeout, seconds; for summaries of up to a minute (:func:`session_parts`)
        at least :data:`MIN_MERGE_GAP_S`.

    Returns
    -------
    Column
        A ``session_window`` grouping expression over the columns ``first_ms`` and
        ``last_ms`` (bigint, epoch milliseconds).
    """
    # Spark's gap must be a CalendarInterval (a day-time interval is rejected): make_interval
    # with exact decimal seconds. The window [first_ms, last_ms + gap) ends exclusively, but
    # Spark merges windows that touch, so a start exactly gap_s after an end joins the session.
    reach_ms = F.col("last_ms") - F.col("first_ms") + F.lit(gap_s * 1000)
    reach_s = reach_ms.cast("decimal(18,3)") / 1000
    gap = F.make_interval(secs=reach_s.cast("decimal(18,6)"))
    return F.session_window(F.timestamp_millis("first_ms"), gap)


def split_sessions(
    merged: DataFrame, gap_s: int, watermark_ms: int | None, inline: bool = False
) -> tuple[DataFrame, DataFrame]:
    """The second step of :func:`merge_sessions`: ``closed`` (as :func:`sessions` rows) and
    ``still_open`` (:data:`SESSION_PARTS_SCHEMA`) of :func:`merged_sessions`' output; a session
    is closed when ``last_ms + gap_s * 1000 <= watermark_ms`` (every one when None). The
    watermark stays out of the generated code unless ``inline``
    (:func:`logstream.analytics.bounds.at_most`)."""
    if watermark_ms is None:
        done = F.lit(True)
    else:
        done = at_most(F.col("last_ms") + F.lit(gap_s * 1000), watermark_ms, inline)
    return _closed_sessions(merged.where(done)), merged.where(~done)


def _as_parts(frame: DataFrame) -> DataFrame:
    """``frame``'s :data:`SESSION_PARTS_SCHEMA` columns with exactly its order, types and
    nullability: a column that differs is cast and wrapped in ``CASE WHEN x IS NOT NULL THEN x``,
    which only widens nullability (Spark's optimizer drops it where ``x`` cannot be null)."""
    return frame.select(*_conformed(frame.schema))


@functools.cache
def _conformed(schema: StructType) -> tuple[Column, ...]:
    """:func:`_as_parts`' projection of a frame of ``schema`` (cached by the schema)."""
    have = {f.name: f for f in schema}

    def conform(f: StructField) -> Column:
        if have[f.name] == f:
            return F.col(f.name)
        return F.when(F.col(f.name).isNotNull(), F.col(f.name).cast(f.dataType)).alias(f.name)

    return tuple(conform(f) for f in SESSION_PARTS_SCHEMA)


def _closed_sessions(merged: DataFrame) -> DataFrame:
    """Merged :data:`SESSION_PARTS_SCHEMA` rows as :func:`sessions` rows."""
    start = F.timestamp_millis("first_ms")
    end = F.timestamp_millis("last_ms")
    return merged.select(
        "client_host",
        F.when(F.col("agent") != "", F.col("agent")).alias("user_agent"),
        start.alias("session_start"),
        end.alias("session_end"),
        (F.unix_seconds(end) - F.unix_seconds(start)).alias("duration_s"),
        "requests",
        "pages",
        "bytes",
        F.col("entry.page").alias("entry_page"),
        F.col("exit.page").alias("exit_page"),
        (F.col("pages") <= 1).alias("bounce"),
    )


def session_stats_per_window(sessions: DataFrame, window_duration: str = "1 hour") -> DataFrame:
    """Session statistics per tumbling window of session start.

    Durations go into a KLL quantile sketch (``kll_sketch_agg_bigint``; Spark SQL reference,
    "Sketch functions"), so the statistics of one window computed in several micro-batches
    merge exactly as one sketch would (``kll_merge_agg_bigint``): state is a few kilobytes per
    window, whatever the number of sessions.

    Parameters
    ----------
    sessions : DataFrame
        Output of :func:`sessions` (batch, or one micro-batch of closed sessions).
    window_duration : str
        Tumbling window length; a session belongs to the window of its ``session_start``.

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp, UTC), ``sessions`` (bigint),
        ``bounces`` (bigint, sessions with at most one page), ``pages`` (bigint, summed),
        ``median_duration_s`` and ``p95_duration_s`` (bigint, seconds; KLL estimates with a
        normalized rank error of about 1.3 % at the default k=200), ``sketch`` (binary, the
        KLL sketch of ``duration_s``).
    """
    return (
        sessions.groupBy(F.window("session_start", window_duration).alias("window"))
        .agg(
            F.count("*").alias("sessions"),
            F.count_if("bounce").alias("bounces"),
            F.sum("pages").alias("pages"),
            F.kll_sketch_agg_bigint("duration_s").alias("sketch"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "sessions",
            "bounces",
            "pages",
            *duration_quantiles("sketch"),
            "sketch",
        )
    )


def duration_quantiles(sketch: str) -> list[Column]:
    """``median_duration_s`` and ``p95_duration_s`` read from a KLL sketch column (null for
    an empty sketch, which Spark's quantile function rejects)."""
    filled = F.kll_sketch_get_n_bigint(sketch) > 0
    return [
        F.when(filled, F.kll_sketch_get_quantile_bigint(sketch, F.lit(q))).alias(name)
        for q, name in ((0.5, "median_duration_s"), (0.95, "p95_duration_s"))
    ]
