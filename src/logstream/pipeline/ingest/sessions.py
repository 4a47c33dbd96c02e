"""Step 7 of the micro-batch, visitor sessions: merge, close, publish.

The batch's per-client, per-minute summaries (:func:`~logstream.analytics.sessions.session_parts`)
merge with the open sessions of snapshot ``N − 1``; the sessions the watermark closed go to
``sessions/``, the latest of them and their statistics per window to the serving store, and
the still-open ones to snapshot ``N``. Sessions close only in a micro-batch whose watermark
passes a minute (:meth:`~logstream.pipeline.ingest.AnalyticsSettings.closes_windows`); the
others keep their summaries unmerged until the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.analytics.sessions import merged_sessions, session_parts, split_sessions
from logstream.pipeline.ingest.settings import iso
from logstream.pipeline.state import SnapshotMeta
from logstream.serving import IngestBatchWrite
from logstream.serving.store import SESSIONS_KEPT

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["close_sessions", "merged_session_stats"]


def close_sessions(
    stage: StageContext,
    on_time: DataFrame,
    prev: SnapshotMeta,
    next_watermark: int,
    write: IngestBatchWrite,
    cached: list[DataFrame],
    closes: bool,
) -> DataFrame:
    """Merge the batch's per-client, per-minute summaries with the open sessions, publish
    the sessions the watermark closed; returns the open sessions of the new snapshot.

    Sessions close only in a micro-batch whose watermark passes a minute
    (:meth:`AnalyticsSettings.closes_windows`), like the final windows: in the others the
    summaries are kept beside the open sessions, unmerged (the snapshot's write computes
    them), and merged at the next such micro-batch. A session closes the same either way
    (a later event cannot join it once the watermark passed its end plus the gap), at
    most a minute of event time later."""
    s = stage.settings
    open_sessions = stage._state(prev, "sessions")
    parts = session_parts(on_time) if write.events else None
    if not closes:
        return open_sessions if parts is None else open_sessions.unionByName(parts)
    merged_input = parts if parts is not None else open_sessions.limit(0)
    gap_s = s.session_gap_ms // 1000
    merged = merged_sessions(merged_input, open_sessions, gap_s, stage.single_partition)
    merged = merged.persist(StorageLevel.MEMORY_AND_DISK)  # closed and still open: one pass
    cached.append(merged)
    closed, still_open = split_sessions(merged, gap_s, next_watermark, stage._inline_bounds)
    since = stage.since.get("sessions")
    if since is not None:  # a visitor seen before `since` may have started earlier
        closed = closed.where(
            F.unix_millis("session_start") > F.lit(since + stage.settings.session_gap_ms)
        )
    # this batch's statistics per window: one small collect that also counts the sessions
    fresh = [
        (*r[:7], bytes(r[7]))
        for r in analytics.session_stats_per_window(closed, s.session_stats_window)
        .select(
            iso("window_start"),
            iso("window_end"),
            "sessions",
            "bounces",
            "pages",
            "median_duration_s",
            "p95_duration_s",
            "sketch",
        )
        .collect()
    ]
    count = sum(r[2] for r in fresh)
    if count:
        stage.publish(closed, stage.output_dir / "sessions", write.batch_id)
        latest = (
            closed.orderBy(F.desc("session_end"), "client_host")
            .limit(SESSIONS_KEPT)
            .select(
                "client_host",
                "user_agent",
                iso("session_start"),
                iso("session_end"),
                "duration_s",
                "requests",
                "pages",
                "bytes",
                "entry_page",
                "exit_page",
                F.col("bounce").cast("int"),
            )
            .collect()
        )
        write.sessions_closed = count
        write.sessions = [tuple(r) for r in reversed(latest)]
        write.session_stats = merged_session_stats(stage, closed.sparkSession, fresh)
    return still_open


def merged_session_stats(
    stage: StageContext, spark: Any, fresh: list[tuple[Any, ...]]
) -> list[tuple[object, ...]]:
    """This batch's session statistics per window (``fresh``: window start and end, ISO
    text; sessions, bounces, pages; median and p95 duration; KLL sketch) merged with the
    stored ones. Only the windows the store already holds are merged, in Spark (KLL
    sketches of durations merge exactly: ``kll_merge_agg_bigint``); the others are
    stored as they are. Those few rows (a window of an earlier micro-batch that gained
    sessions) become a literal table (``inline``), not a Python-created DataFrame, so no
    Python worker starts; a backfill's hundreds of new windows stay out of the plan."""
    stored = stage.store.session_stats_rows(r[0] for r in fresh)
    if not stored:
        return list(fresh)
    again = {r[0] for r in stored}
    names = ("window_start", "window_end", "sessions", "bounces", "pages", "sketch")
    types = ("string", "string", "bigint", "bigint", "bigint", "binary")
    rows = F.array(
        *(
            F.struct(
                *(F.lit(v).cast(t).alias(n) for v, n, t in zip(row, names, types, strict=True))
            )
            for row in [(*r[:5], r[7]) for r in fresh if r[0] in again] + stored
        )
    )
    merged = spark.range(1).select(F.inline(rows))
    return [r for r in fresh if r[0] not in again] + [
        (*r[:7], bytes(r[7]))
        for r in merged.groupBy("window_start", "window_end")
        .agg(
            F.sum("sessions").alias("sessions"),
            F.sum("bounces").alias("bounces"),
            F.sum("pages").alias("pages"),
            F.kll_merge_agg_bigint("sketch").alias("sketch"),
        )
        .select(
            "window_start",
            "window_end",
            "sessions",
            "bounces",
            "pages",
            *analytics.duration_quantiles("sketch"),
            "sketch",
        )
        .collect()
    ]
