"""Steps 3 and 4 of the micro-batch: its watermark, and the split of its parsed rows.

The watermark of micro-batch ``N`` is the newest event time of every earlier micro-batch
minus the delay (``--watermark``), read from snapshot ``N − 1``: the textbook rule (Spark
guide, "Handling Late Data and Watermarking"; book Ch. 12), deterministic, so a replay
recomputes the same value. An event at or before it is a *late event*, the other events are
*on time*, an unparseable line is *quarantined*, and a line the run's filter leaves out
(:func:`logstream.pipeline.run.marked_filtered`: its reason is ``filtered``) is *filtered*;
one aggregation counts the four and finds the newest event time, so that ``on-time + late +
quarantined + filtered = lines read``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.bounds import at_most
from logstream.analytics.panes import gathered
from logstream.filters import FILTERED_REASON
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.settings import iso_ms
from logstream.pipeline.ingest.skew import spark_skew, warn_once
from logstream.pipeline.state import SnapshotMeta
from logstream.schema import EVENT_COLUMNS
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = [
    "AHEAD_QUANTILE",
    "FUTURE_REASON",
    "Split",
    "ahead_bound_ms",
    "ahead_detail",
    "count_metrics",
    "is_quarantined",
    "judged",
    "lateness",
    "since_of",
    "split_batch",
]

#: The quarantine reason of an event too far ahead (of the clock, or of its micro-batch).
FUTURE_REASON = "future_event_time"
#: The share of a micro-batch's events the in-batch rule measures the others against.
AHEAD_QUANTILE = 0.999


def ahead_bound_ms(top_ms: np.ndarray, watermark_ms: int) -> int | None:
    """The newest event time a micro-batch's watermark may come from, from its newest events:
    those at or above its :data:`AHEAD_QUANTILE` quantile (``percentile_disc``: the smallest
    event time at or above which 0.1 % of them lie), ascending. Going up from the quantile,
    the first gap of more than the watermark delay between two of them ends it: the event
    below that gap is the bound. No such gap: no bound.

    An event after it (``t_ms`` greater) is quarantined as ``future_event_time``: the watermark
    follows the bulk of a micro-batch, never a few lines far ahead of it — a replayed 1995 log
    with a line typed 1996 would otherwise make every later line late. A log's own last
    minutes are no jump, however many the 0.1 % are (a 31-day backfill in one micro-batch:
    its last 1,093 events span 38 minutes of the night), so the rule asks for a gap, not for
    a distance from the quantile. The rule is exact and deterministic (a replay finds the
    same bound); it cannot see a jump in a micro-batch of fewer than 1,000 events, whose
    quantile is its newest event: there the clock's rule (``--max-future``,
    :func:`logstream.parsing.parse`) guards a live stream.

    Examples
    --------
    >>> ahead_bound_ms(np.array([1_000_000, 1_300_000, 1_500_000]), 600_000) is None
    True
    >>> ahead_bound_ms(np.array([1_000_000, 1_300_000, 99_000_000]), 600_000)
    1300000
    """
    gaps = np.flatnonzero(np.diff(top_ms) > watermark_ms)
    return int(top_ms[gaps[0]]) if len(gaps) else None


def quantile_index(events: int) -> int:
    """The 0-based rank of the :data:`AHEAD_QUANTILE` quantile among ``events`` sorted event
    times, as Spark's ``percentile_disc`` picks it (``ceil(p · n) − 1``, in doubles).

    Examples
    --------
    >>> quantile_index(1000), quantile_index(1001), quantile_index(1)
    (998, 999, 0)
    """
    return max(0, math.ceil(AHEAD_QUANTILE * events) - 1)


def ahead_detail(bound_ms: int) -> str:
    """The quarantine detail of an event quarantined by the in-batch rule."""
    return (
        "after a gap of more than the watermark delay above the 99.9th percentile of its "
        f"micro-batch's event times: after {iso_ms(bound_ms)}"
    )


def is_quarantined() -> Column:
    """A parsed row is a quarantined line: it has a reason, and that reason is not the
    filter's (a filtered line is counted, never quarantined)."""
    reason = F.col(REASON_COLUMN)
    return reason.isNotNull() & (reason != F.lit(FILTERED_REASON))


def since_of(prev: SnapshotMeta, outputs: tuple[str, ...]) -> dict[str, int]:
    """``since_ms`` of the new snapshot: the outputs turned on now start after the newest event
    so far (windows starting later hold every event); the others keep theirs."""
    since = {o: t for o, t in prev.since_ms.items() if o in outputs}
    if prev.outputs is not None and prev.max_event_ms is not None:
        for output in outputs:
            if output not in prev.outputs:
                since[output] = prev.max_event_ms
    return since


@dataclass(frozen=True)
class Split:
    """A micro-batch split by its watermark.

    Attributes
    ----------
    write : IngestBatchWrite
        The batch's store write, with its counts and newest event time filled in.
    is_event, is_late : Column
        Conditions on the parsed rows: parsed (not quarantined); at or before the watermark.
    watermark : Column
        The watermark as a timestamp literal (null before any event): the late events'
        ``watermark`` column.
    on_time : DataFrame
        The on-time events (:data:`logstream.schema.EVENT_COLUMNS`), in one partition for a
        small micro-batch.
    newest : int or None
        The newest event time so far, this batch included (epoch ms).
    next_watermark : int or None
        The watermark after this batch (epoch ms): the one that makes windows final.
    since : dict of str to int
        ``since_ms`` of the new snapshot (:func:`since_of`).
    parsed : DataFrame
        The parsed rows, with the in-batch rule's quarantine reasons.
    prepared : bool
        The on-time events are written already, hidden until published
        (:mod:`logstream.pipeline.ingest.one_pass`).
    """

    write: IngestBatchWrite
    is_event: Column
    is_late: Column
    watermark: Column
    on_time: DataFrame
    newest: int | None
    next_watermark: int | None
    since: dict[str, int]
    parsed: DataFrame
    prepared: bool = False


def split_batch(
    stage: StageContext,
    parsed: DataFrame,
    batch_id: int,
    prev: SnapshotMeta,
    corrupt: dict[str, str],
    prepared: bool = False,
) -> Split | None:
    """Judge micro-batch ``batch_id`` by the watermark of snapshot ``prev``.

    Counts its on-time events, late events and quarantined lines in one aggregation (the
    job that materialises the cached parse), then chooses how the batch is analysed: in one
    partition when it is small (:attr:`AnalyticsSettings.single_partition_rows`, set on
    ``stage`` with its adaptive execution), and records the batch's ``since_ms`` on ``stage``.

    Parameters
    ----------
    stage : StageContext
    parsed : DataFrame
        The micro-batch's parsed rows (persisted).
    batch_id : int
    prev : SnapshotMeta
        The snapshot before this batch.
    corrupt : dict of str to str
        The batch's corrupt input files and their errors.
    prepared : bool
        Its on-time events by that watermark are written already, hidden
        (:mod:`logstream.pipeline.ingest.one_pass`): they are the batch's unless an
        in-batch rule quarantines some of them (the split's ``prepared``).

    Returns
    -------
    Split or None
        None for a micro-batch with no line and no corrupt file: nothing to deliver.
    """
    s = stage.settings
    is_event, is_late, watermark = lateness(s.watermark_at(prev.max_event_ms))
    with stage._timed("parse"):  # materialises the cached parse
        counts = _counts(parsed, is_event, is_late)
        events = counts["on_time"] + counts["late"]
        bound = _ahead_bound(parsed, is_event, events, counts, s.watermark_ms)
        detail = None if bound is None else ahead_detail(bound)
        span = (counts["max_ms"] or 0) - (counts["min_ms"] or 0)
        skew = spark_skew(parsed, is_event, events, span, s.watermark_ms)
        if skew is not None:  # a minority ahead, between the lines: a clock set wrong
            bound = skew.cut_ms - 1 if bound is None else min(bound, skew.cut_ms - 1)
            detail = skew.detail()
            warn_once(stage, skew, batch_id)
        if bound is not None:
            # events far ahead of their micro-batch: quarantined (a second, rare pass)
            ahead = is_event & (F.unix_millis("event_time") > F.lit(bound))
            parsed = parsed.withColumn(
                REASON_COLUMN,
                F.when(ahead, F.lit(FUTURE_REASON)).otherwise(F.col(REASON_COLUMN)),
            )
            stage.ahead_detail = detail
            stage.ahead_bound = bound
            counts = _counts(parsed, is_event, is_late)
    assert counts is not None
    columns = (is_event, is_late, watermark)
    return judged(
        stage, parsed, batch_id, prev, corrupt, counts, columns, prepared and bound is None
    )


def lateness(watermark_ms: int | None) -> tuple[Column, Column, Column]:
    """The conditions of an event row and of a late one (at or before ``watermark_ms``, epoch
    ms; none before any event), and the watermark as a timestamp literal (null before any
    event): ``Split``'s ``is_event``, ``is_late`` and ``watermark``."""
    is_event = F.col(REASON_COLUMN).isNull()
    if watermark_ms is None:
        return is_event, F.lit(False), F.lit(None).cast("timestamp")
    is_late = at_most(F.unix_micros("event_time"), watermark_ms * 1000)
    return is_event, is_late, F.timestamp_millis(F.lit(watermark_ms))


def judged(
    stage: StageContext,
    parsed: DataFrame,
    batch_id: int,
    prev: SnapshotMeta,
    corrupt: dict[str, str],
    counts: Any,
    columns: tuple[Column, Column, Column],
    prepared: bool = False,
) -> Split | None:
    """The :class:`Split` of a micro-batch from its counts (:func:`count_metrics`' names) and
    :func:`lateness`' columns: chooses how the batch is analysed (in one partition when it is
    small, with its adaptive execution) and records its ``since_ms`` on ``stage``. None for a
    micro-batch with no line and no corrupt file. With ``prepared`` (its on-time events are
    written, hidden, and no rule quarantined any), the split is ``prepared`` when it has
    on-time events."""
    s = stage.settings
    is_event, is_late, watermark = columns
    write = IngestBatchWrite(
        batch_id=batch_id,
        events=counts["on_time"],
        late_events=counts["late"],
        quarantined=counts["quarantined"],
        filtered=counts["filtered"],
        corrupt_files=len(corrupt),
        max_event_time_ms=counts["max_ms"],
    )
    lines = write.events + write.late_events + write.quarantined + write.filtered
    if not (lines or write.corrupt_files):
        return None
    stage.single_partition = lines <= s.single_partition_rows
    stage._adapt()
    newest = max(prev.max_event_ms or 0, write.max_event_time_ms or 0) or None
    next_watermark = s.watermark_at(newest)
    since = since_of(prev, s.outputs)
    on_time = gathered(
        parsed.where(is_event & ~is_late).select(*EVENT_COLUMNS), stage.single_partition
    )
    stage.since = since
    return Split(
        write,
        is_event,
        is_late,
        watermark,
        on_time,
        newest,
        next_watermark,
        since,
        parsed,
        prepared and write.events > 0,
    )


def count_metrics(is_event: Column, is_late: Column) -> list[Column]:
    """The aggregates of a micro-batch's counts: ``on_time``, ``late``, ``quarantined`` and
    ``filtered`` rows, its oldest and newest event times (``min_ms``, ``max_ms``, epoch ms)."""
    t_ms = F.when(is_event, F.unix_millis("event_time"))
    filtered = F.coalesce(F.col(REASON_COLUMN) == F.lit(FILTERED_REASON), F.lit(False))
    return [
        F.count_if(is_event & ~is_late).alias("on_time"),
        F.count_if(is_event & is_late).alias("late"),
        F.count_if(~is_event & ~filtered).alias("quarantined"),
        F.count_if(filtered).alias("filtered"),
        F.max(t_ms).alias("max_ms"),
        F.min(t_ms).alias("min_ms"),
    ]


def _counts(parsed: DataFrame, is_event: Column, is_late: Column) -> Any:
    """The batch's :func:`count_metrics`, in one aggregation."""
    return parsed.agg(*count_metrics(is_event, is_late)).first()


def _ahead_bound(
    parsed: DataFrame, is_event: Column, events: int, counts: Any, watermark_ms: int
) -> int | None:
    """:func:`ahead_bound_ms` of the batch's events, in Spark: its ``m`` newest event times,
    ``m = events − quantile_index(events)`` (0.1 % of them and one, the quantile the lowest),
    by a top-``m`` (``TakeOrderedAndProject``: each task keeps its ``m`` newest; a
    ``percentile_disc``'s map of every event time was merged in one task, 1.2 s of a 31-day
    backfill), then their first gap above the watermark delay, one value to the driver.
    None without events, or when no event can be that far ahead (the newest within the
    delay of the oldest)."""
    if events == 0 or counts["max_ms"] - counts["min_ms"] <= watermark_ms:
        return None
    m = events - quantile_index(events)
    newest = (
        parsed.where(is_event)
        .select(F.unix_millis("event_time").alias("t"))
        .orderBy(F.desc("t"))
        .limit(m)
        .agg(F.sort_array(F.collect_list("t")).alias("top"))
    )
    top = F.col("top")
    ahead = F.filter(
        F.sequence(F.lit(1), F.greatest(F.size(top) - 1, F.lit(1))),
        lambda i: F.get(top, i) - F.get(top, i - 1) > F.lit(watermark_ms),
    )
    found = newest.select(F.get(top, F.get(ahead, 0) - 1).alias("bound")).first()
    assert found is not None
    return None if found["bound"] is None else int(found["bound"])
