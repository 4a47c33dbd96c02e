"""Step 5 of the micro-batch: aggregate once.

One aggregation folds the batch's on-time events into the open panes of snapshot ``N − 1``,
every view at once (:func:`~logstream.analytics.panes.fold_panes`: sums with one shuffle,
and a small HLL aggregation for the visitors). The dimension views read the columns the
reference tables add (broadcast joins before the aggregation, by the tables' versions of the
batch). GoAccess's panel views read the columns :mod:`.panels` adds (the distinct user
agents and hosts classified once). The trending pages' sliding windows are summed from the
folded 1-minute panes. The panes and windows the new watermark made final are marked for
step 7, and the ones the batch changed go to the live views of step 6
(:mod:`logstream.pipeline.ingest.live`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.bounds import above, at_most
from logstream.analytics.panes import (
    DAILY_VIEW,
    DIMENSION_VIEWS,
    PANEL_VIEWS,
    fold_panes,
    sliding_windows,
)
from logstream.pipeline.ingest.live import live_views
from logstream.pipeline.ingest.panels import PANEL_INPUTS, panel_columns
from logstream.pipeline.ingest.settings import iso_ms
from logstream.pipeline.state import SnapshotMeta
from logstream.reference import Enricher
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["Folded", "enriched", "fold_batch"]

#: The event columns the analytics read (a narrower row before the reference joins).
_ANALYTICS_COLUMNS = ("event_time", "client_host", "url_path", "status", "bytes_sent", "user_agent")


@dataclass(frozen=True)
class Folded:
    """The panes of a micro-batch (:func:`~logstream.analytics.panes.fold_panes`, persisted),
    its trending windows, and which of them became final."""

    merged: DataFrame
    windows: DataFrame | None  # the sliding trending windows (persisted), when computed
    newly_final: Column  # the panes and windows the new watermark made final
    closes: bool  # the watermark passed a boundary: windows may have become final

    @property
    def finals(self) -> DataFrame:
        """The panes the new watermark made final."""
        return self.merged.where(self.newly_final)


def fold_batch(
    stage: StageContext,
    on_time: DataFrame,
    write: IngestBatchWrite,
    prev: SnapshotMeta,
    next_watermark: int | None,
    cached: list[DataFrame],
) -> Folded | None:
    """Fold the batch's on-time events into the open panes, and fill ``write``'s live
    views with the panes and windows it changed. None without views or events so far.

    The frames it persists are appended to ``cached`` (released at the batch's end).
    """
    s = stage.settings
    spec = s.pane_spec()
    if next_watermark is None:  # no event yet: nothing to aggregate
        return None
    horizon_ms = next_watermark + s.watermark_ms - s.retention_ms
    write.prune_trending_before = iso_ms(horizon_ms)
    write.final_before = iso_ms(next_watermark)
    if not spec.views:
        return None
    final_until = prev.final_until_ms
    # windows ending in (final_until, next_watermark] became final in this micro-batch
    # (the bounds kept out of the generated code, but in a large micro-batch: see
    # logstream.analytics.bounds)
    inline = stage._inline_bounds
    newly_final = at_most(F.col("end_ms"), next_watermark, inline) & (
        F.lit(True) if final_until is None else above(F.col("end_ms"), final_until, inline)
    )
    # a view turned off leaves the state (fold_panes keeps the views of the spec)
    open_panes = stage._state(prev, "panes")
    events = on_time if write.events else None
    panels = any(v in PANEL_VIEWS or v == DAILY_VIEW for v in spec.views)
    if events is not None and any(v in DIMENSION_VIEWS for v in spec.views):
        events = enriched(stage, events, write, panels)
    if events is not None and panels:
        events = panel_columns(
            events,
            spec.views,
            stage._tables,
            s.static_extensions,
            s.site_host,
            stage.single_partition,
            s.protocol_required,
        )
    merged = fold_panes(open_panes, events, spec, stage.single_partition, sketch_events=on_time)
    merged = merged.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(merged)
    windows = None
    if "trending_pages" in s.outputs:
        windows = sliding_windows(merged, "pages", s.trending_ms, s.trending_slide_ms)
        windows = windows.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(windows)
    if events is not None:
        with stage._timed("live_views"):
            live_views(stage, merged, windows, write, s.on_boundary(horizon_ms))
    return Folded(merged, windows, newly_final, s.closes_windows(final_until, next_watermark))


def enriched(
    stage: StageContext, events: DataFrame, write: IngestBatchWrite, panels: bool = False
) -> DataFrame:
    """The events with the reference columns, by the tables' versions of this batch (and
    the columns the panel views read, with ``panels``)."""
    tables = stage._tables
    write.reference_versions = {k: t.digest for k, t in sorted(tables.items())}
    if stage._enricher is None:
        stage._enricher = Enricher(events.sparkSession)
    views = stage.settings.pane_spec().views
    # only the joins a computed view reads (no agents join for a log without user agents);
    # a dimension view is named after the kind of table that keys it
    used = {k: t for k, t in tables.items() if k in views}
    columns = (*_ANALYTICS_COLUMNS, *PANEL_INPUTS) if panels else _ANALYTICS_COLUMNS
    return stage._enricher.enrich(events.select(*columns), used)
