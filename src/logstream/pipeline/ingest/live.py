"""Step 6 of the micro-batch: serve the windows.

When the batch has on-time events and the outputs have pane views, the panes and windows it
changed, with their merged values, the pruning of windows past the retention, the reference
versions and the newest event time go to the serving store at once, in a transaction of their
own (:meth:`logstream.serving.ServingStore.commit_ingest_views`): each of those writes is
idempotent by itself, so a replay writes the same again, and the dashboard shows a line's
window before the rest of its micro-batch is done. (Otherwise step 8 writes them.)

The changed panes and windows are read in one collect, bounded by what one micro-batch can
touch within the retention. The conditions and projections of that collect are built once
and kept while their inputs hold (:func:`live_columns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.analytics.bounds import above
from logstream.analytics.panes import (
    DAILY_VIEW,
    DIMENSION_VIEWS,
    PANEL_VIEWS,
    day_sums,
    gathered,
)
from logstream.pipeline.ingest.settings import DIMENSION_OUTPUTS, INGEST_QUERY, iso_ms_col
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["commit_views", "live_columns", "live_views"]


def commit_views(stage: StageContext, write: IngestBatchWrite) -> None:
    """Write the batch's live views to the serving store, ahead of the rest of the batch
    (:meth:`logstream.serving.ServingStore.commit_ingest_views`)."""
    with stage._timed("store"):
        stage.store.commit_ingest_views(INGEST_QUERY, write)
    stage._step("committed_views", write.batch_id)


def live_views(
    stage: StageContext,
    merged: DataFrame,
    windows: DataFrame | None,
    write: IngestBatchWrite,
    horizon_ms: int,
) -> None:
    """The merged values of every pane and window this batch changed, for the store, in
    one collect (bounded by what one micro-batch can touch within the retention)."""
    panes, pane_columns, changed, window_columns, daily = live_columns(stage, horizon_ms)
    live = merged.where(panes).select(*pane_columns)
    if windows is not None:
        live = live.unionByName(windows.where(changed).select(*window_columns))
    if daily is not None:  # the days the batch changed, each summed over its visitors
        of_view, sums, day_row = daily
        of_days = gathered(merged.where(of_view), stage.single_partition)
        days = of_days.groupBy("start_ms", "end_ms").agg(*sums)
        live = live.unionByName(days.where(F.col("touched")).select(*day_row))
    rows = live.collect()
    write.traffic = [tuple(r[2:12]) for r in rows if r["view"] == "traffic"]
    write.visitors = [
        (r["ws"], r["we"], int(r["v"]), None) for r in rows if r["view"] == "visitors"
    ]
    write.clients = [
        (r["ws"], r["we"], r["key"], int(r["requests"]), int(r["bytes"]))
        for r in rows
        if r["view"] == "clients"
    ]
    write.pages = [
        (r["ws"], r["we"], r["key"], int(r["requests"])) for r in rows if r["view"] == "trending"
    ]
    write.dimensions = [
        (r["view"], r["key"], *r[2:12])
        for r in rows
        if r["view"] in DIMENSION_VIEWS or r["view"] in PANEL_VIEWS
    ]
    write.daily_visitors = [
        (r["key"], r["ws"], r["we"], int(r["requests"]), int(r["v"]), int(r["bytes"]))
        for r in rows
        if r["view"] == DAILY_VIEW
    ]


def live_columns(stage: StageContext, horizon_ms: int) -> tuple:
    """:func:`live_views`' conditions and projections of the panes and the windows.

    Kept on ``stage`` while their inputs hold (the outputs, ``since``, the retention's
    horizon, which moves once a minute): the same expressions for most micro-batches, built
    once (each Column costs Py4J round trips to build)."""
    s = stage.settings
    key = (s.outputs, tuple(sorted(stage.since.items())), horizon_ms, stage._inline_bounds)
    if stage._live_key != key:
        stage._live_key, stage._live_cache = key, _build_live_columns(stage, horizon_ms)
    return stage._live_cache


def _build_live_columns(stage: StageContext, horizon_ms: int) -> tuple:
    s = stage.settings
    view_output = {
        "traffic": "traffic_per_minute",
        "visitors": "unique_visitors",
        "clients": "top_clients",
        **{view: output for output, view in DIMENSION_OUTPUTS.items()},
        **dict.fromkeys(PANEL_VIEWS, "traffic_by_panel"),
    }
    complete = F.lit(False)
    for view, output in view_output.items():
        if output in s.outputs:
            complete = complete | (
                (F.col("view") == view) & stage._complete(output, F.col("start_ms"))
            )
    # traffic and visitors keep every window (a row a minute); clients, trending pages and
    # the dimension and panel views (a row per key and minute: 670K for the sections of a
    # 31-day backfill) keep the retention
    kept = ~F.col("view").isin("clients", *DIMENSION_VIEWS, *PANEL_VIEWS)
    inline = stage._inline_bounds
    recent = kept | above(F.col("end_ms"), horizon_ms, inline)
    measures = (
        "requests",
        "bytes",
        *(f"status_{c}" for c in analytics.STATUS_CLASSES),
        "errors",
    )
    pane_columns = (
        F.col("view"),
        F.col("key"),
        iso_ms_col("start_ms").alias("ws"),
        iso_ms_col("end_ms").alias("we"),
        *(F.col(c) for c in measures),
        F.when(F.col("view") == "visitors", F.hll_sketch_estimate("sketch")).alias("v"),
    )
    zero = F.lit(0).cast("bigint")
    changed = (
        F.col("touched")
        & above(F.col("end_ms"), horizon_ms, inline)
        & stage._complete("trending_pages", F.col("start_ms"))
    )
    window_columns = (
        F.lit("trending").alias("view"),
        F.col("key"),
        iso_ms_col("start_ms").alias("ws"),
        iso_ms_col("end_ms").alias("we"),
        F.col("requests"),
        *(zero.alias(c) for c in measures[1:]),
        F.lit(None).cast("bigint").alias("v"),
    )
    daily = None
    if "traffic_by_panel" in s.outputs and DAILY_VIEW in s.pane_spec().views:
        daily = _daily_columns(stage._complete("traffic_by_panel", F.col("start_ms")), measures)
    return F.col("touched") & recent & complete, pane_columns, changed, window_columns, daily


def _daily_columns(complete: Column, measures: tuple[str, ...]) -> tuple:
    """The daily visitors' condition, aggregates and row for :func:`live_views`
    (:func:`~logstream.analytics.panes.day_sums`, and whether the batch touched the day)."""
    sums, day = day_sums()
    day_row = (
        F.lit(DAILY_VIEW).alias("view"),
        day.alias("key"),
        iso_ms_col("start_ms").alias("ws"),
        iso_ms_col("end_ms").alias("we"),
        *(F.col(m) for m in measures),
        F.col("visitors").alias("v"),
    )
    touched = F.max("touched").alias("touched")
    return (F.col("view") == DAILY_VIEW) & complete, (*sums, touched), day_row
