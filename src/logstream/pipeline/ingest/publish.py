"""Step 7 of the micro-batch: publish its outputs, as tasks on the writers pool.

On-time events go to ``events/``, late events (with the watermark they missed) to
``late_events/`` and quarantined lines (and corrupt input files) to ``quarantine/``. Panes the
new watermark has passed are final: they are published, each once — ``traffic_per_minute/``,
``unique_visitors/``, ``trending_pages/`` (5-minute windows summed from 1-minute panes),
``top_clients/``, ``traffic_by_section/``, ``traffic_by_agent/``, ``traffic_by_network/``,
``traffic_by_panel/``.
Every window ends on a whole minute, so only a micro-batch whose watermark passes one
(:meth:`~logstream.pipeline.ingest.AnalyticsSettings.closes_windows`) can make a window
final: the others skip the final windows, the detector and the bot scores
(:mod:`logstream.pipeline.ingest.alerts`), and keep their session summaries unmerged
(:mod:`logstream.pipeline.ingest.sessions`).

These writes are independent of each other and run at once (:data:`WRITERS` threads,
:func:`run_concurrently`); the commit (step 8) waits for all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.util import inheritable_thread_target

from logstream import analytics
from logstream.analytics.bounds import above
from logstream.analytics.panes import dimension_windows, panel_windows, traffic_windows
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.alerts import score_alerts, score_bots
from logstream.pipeline.ingest.fold import Folded
from logstream.pipeline.ingest.sessions import close_sessions
from logstream.pipeline.ingest.settings import DIMENSION_OUTPUTS, WRITERS, iso
from logstream.pipeline.ingest.watermark import FUTURE_REASON, Split, is_quarantined
from logstream.pipeline.state import SnapshotMeta
from logstream.schema import EVENT_COLUMNS, QUARANTINE_SCHEMA
from logstream.serving import IngestBatchWrite
from logstream.sources.integrity import CORRUPT_FILE_REASON, spark_file_uri

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["WRITERS", "analytics_tasks", "events_task", "publish_windows", "run_concurrently"]

#: Late and quarantined rows kept as examples per micro-batch.
_EXAMPLES_PER_BATCH = 5


_pools: dict[int, ThreadPoolExecutor] = {}  # by size, kept for the process
_pools_lock = threading.Lock()


def run_concurrently(tasks: list[Callable[[], None]], workers: int, spark: Any) -> None:
    """Run ``tasks`` at once on at most ``workers`` threads of one pool (the process's), wait
    for every one of them, then raise the first failure, if any.

    Each task runs with the local properties of the calling thread's JVM thread (PySpark's
    :func:`~pyspark.util.inheritable_thread_target`): the streaming query's job group among
    them, so that stopping the query cancels the jobs of every task, as it does its own.
    """
    if len(tasks) <= 1 or workers <= 1:
        for task in tasks:
            task()
        return
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, "logstream-writer")
    futures = [pool.submit(inheritable_thread_target(spark)(task)) for task in tasks]
    wait_all(futures)  # every task ends before the batch's cached frames are released
    for future in futures:
        future.result()


def events_task(stage: StageContext, split: Split, corrupt: dict[str, str]) -> Callable[[], None]:
    """The task publishing the batch's on-time events, late events and quarantined lines."""
    parsed = split.parsed
    write = split.write
    batch_id = write.batch_id
    is_event, is_late = split.is_event, split.is_late

    def publish_events() -> None:
        with stage._timed("events"):
            root = stage.output_dir / "events"
            if split.prepared:  # written by the job that parsed the batch (one_pass.py)
                stage.publish.publish_prepared(root, batch_id)
            elif write.events:
                stage.publish(split.on_time, root, batch_id, files=None)
            if write.events:
                stage._step("published_events", batch_id)
            if write.late_events:
                _publish_late(stage, parsed.where(is_event & is_late), split.watermark, write)
            if write.quarantined or corrupt:
                _publish_quarantine(stage, parsed.where(is_quarantined()), corrupt, write)

    return publish_events


def _gathered(stage: StageContext, rows: DataFrame) -> DataFrame:
    """``rows``, a filter of the micro-batch's cached parse written as one file, gathered in
    one cached partition: every core filters the parse (a shuffle of the rows kept), where
    the writer's ``coalesce(1)`` would read the whole parse in one task, and the examples are
    then read from the cache instead of the parse again (a 31-day backfill, 860 quarantined
    lines, 2 cores: 3.8 s in one task and 3.0 s for five examples before). A micro-batch
    already in one partition is left as it is."""
    if stage.single_partition:
        return rows
    gathered = rows.repartition(1).persist(StorageLevel.MEMORY_AND_DISK)
    stage._cached.append(gathered)  # released at the micro-batch's end
    return gathered


def _publish_late(
    stage: StageContext, late: DataFrame, watermark: Column, write: IngestBatchWrite
) -> None:
    batch_id = write.batch_id
    late = _gathered(stage, late.select(*EVENT_COLUMNS, watermark.alias("watermark")))
    stage.publish(late, stage.output_dir / "late_events", batch_id)
    stage._step("published_late_events", batch_id)
    write.late_examples = [
        (batch_id, r["t"], r["w"], r["client_host"], r["url_path"], r["source_file"])
        for r in late.select(
            iso("event_time").alias("t"),
            iso("watermark").alias("w"),
            "client_host",
            "url_path",
            "source_file",
        )
        .limit(_EXAMPLES_PER_BATCH)
        .collect()
    ]


def _publish_quarantine(
    stage: StageContext, bad_rows: DataFrame, corrupt: dict[str, str], write: IngestBatchWrite
) -> None:
    batch_id = write.batch_id
    bad = bad_rows.select(
        "raw_line",
        "source_file",
        F.col(REASON_COLUMN).alias("reason"),
        F.lit(None).cast("string").alias("detail"),
    )
    if stage.ahead_bound is not None:  # the in-batch rule's (logstream.pipeline.ingest.watermark)
        # their raw text was dropped from the cached parse (it keeps a quarantined line's
        # only): read again from the micro-batch for them
        ahead = stage._unpersisted.where(
            F.col(REASON_COLUMN).isNull() & (F.unix_millis("event_time") > F.lit(stage.ahead_bound))
        ).select(
            "raw_line",
            "source_file",
            F.lit(FUTURE_REASON).alias("reason"),
            F.lit(stage.ahead_detail).alias("detail"),
        )
        own = ~((F.col("reason") == FUTURE_REASON) & F.col("raw_line").isNull())
        bad = bad.where(own).unionByName(ahead)
    rows = [(None, spark_file_uri(f), CORRUPT_FILE_REASON, e) for f, e in sorted(corrupt.items())]
    if rows:
        bad = bad.unionByName(bad_rows.sparkSession.createDataFrame(rows, QUARANTINE_SCHEMA))
    bad = _gathered(stage, bad)
    stage.publish(bad, stage.output_dir / "quarantine", batch_id)
    stage._step("published_quarantine", batch_id)
    examples = rows[:_EXAMPLES_PER_BATCH]
    if write.quarantined:
        examples += [tuple(r) for r in bad.limit(_EXAMPLES_PER_BATCH).collect()]
    write.quarantine_examples = [(batch_id, *r) for r in examples[:_EXAMPLES_PER_BATCH]]


def analytics_tasks(
    stage: StageContext,
    folded: Folded | None,
    on_time: DataFrame,
    write: IngestBatchWrite,
    prev: SnapshotMeta,
    next_watermark: int | None,
    cached: list[DataFrame],
    tasks: list[Callable[[], None]],
) -> dict[str, DataFrame | None]:
    """Add to ``tasks`` the publishing of the windows that became final, their scoring,
    the merge of the sessions. Returns the state parts of the new snapshot (filled in
    by the tasks)."""
    s = stage.settings
    parts: dict[str, DataFrame | None] = {}
    if next_watermark is None:  # no event yet: nothing to aggregate
        return parts
    if folded is not None:
        merged, finals, closes = folded.merged, folded.finals, folded.closes
        if closes:
            tasks += publish_windows(stage, finals, folded.windows, folded.newly_final, write)
            if stage.bot_model is not None and "bot_scores" in s.outputs:

                def bot_scores() -> None:
                    with stage._timed("bot_scores"):
                        score_bots(stage, finals, write)

                tasks.append(bot_scores)
        keep_from = next_watermark - (s.trending_ms - s.trending_slide_ms)
        inline = stage._inline_bounds
        parts["panes"] = merged.where(
            above(F.col("end_ms"), next_watermark, inline)
            | ((F.col("view") == "pages") & above(F.col("end_ms"), keep_from, inline))
        ).drop("touched")
        if "alerts" in s.outputs:

            def alerts() -> None:
                with stage._timed("alerts"):
                    parts["series"] = score_alerts(
                        stage, finals if closes else None, prev, next_watermark, write, cached
                    )

            tasks.append(alerts)
    if "sessions" in s.outputs:
        closes = s.closes_windows(prev.final_until_ms, next_watermark)

        def sessions() -> None:
            with stage._timed("sessions"):
                parts["sessions"] = close_sessions(
                    stage, on_time, prev, next_watermark, write, cached, closes
                )

        tasks.append(sessions)
    return parts


def publish_windows(
    stage: StageContext,
    finals: DataFrame,
    windows: DataFrame | None,
    newly_final: Column,
    write: IngestBatchWrite,
) -> list[Callable[[], None]]:
    """The publishing of the windows that became final, a task per output: each exactly
    once, in one micro-batch."""
    s = stage.settings
    out = stage.output_dir
    batch_id = write.batch_id
    start = F.col("start_ms")
    tasks: list[Callable[[], None]] = []

    def schedule(rows: DataFrame, output: str) -> None:
        def task() -> None:
            with stage._timed("windows"):
                stage.publish(rows, out / output, batch_id)

        tasks.append(task)

    if "traffic_per_minute" in s.outputs:
        traffic = finals.where(stage._complete("traffic_per_minute", start))
        schedule(traffic_windows(traffic), "traffic_per_minute")
    if "unique_visitors" in s.outputs:
        complete = stage._complete("unique_visitors", start)
        visitors = finals.where((F.col("view") == "visitors") & complete).select(
            F.timestamp_millis("start_ms").alias("window_start"),
            F.timestamp_millis("end_ms").alias("window_end"),
            F.hll_sketch_estimate("sketch").alias("visitors"),
            "sketch",
        )
        schedule(visitors, "unique_visitors")
    if windows is not None:
        final_windows = windows.where(
            newly_final & stage._complete("trending_pages", start)
        ).select(
            F.timestamp_millis("start_ms").alias("window_start"),
            F.timestamp_millis("end_ms").alias("window_end"),
            F.col("key").alias("url_path"),
            "requests",
        )
        schedule(final_windows, "trending_pages")
    for output, view in DIMENSION_OUTPUTS.items():
        if output in s.outputs:
            rows = finals.where(stage._complete(output, start))
            schedule(dimension_windows(rows, view), output)
    if "traffic_by_panel" in s.outputs:  # every panel in one output, one job
        schedule(
            panel_windows(finals.where(stage._complete("traffic_by_panel", start))),
            "traffic_by_panel",
        )
    if "top_clients" in s.outputs:
        complete = stage._complete("top_clients", start)
        counts = finals.where((F.col("view") == "clients") & complete).select(
            F.timestamp_millis("start_ms").alias("window_start"),
            F.timestamp_millis("end_ms").alias("window_end"),
            F.col("key").alias("client_host"),
            "requests",
            "bytes",
        )
        schedule(analytics.top_clients_per_window(counts, s.top), "top_clients")
    return tasks
