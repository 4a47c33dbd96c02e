"""Steps 3 and 4 of the micro-batch: its watermark, and the split of its parsed rows.

The watermark of micro-batch ``N`` is the newest event time of every earlier micro-batch
minus the delay (``--watermark``), read from snapshot ``N − 1``: the textbook rule (Spark
guide, "Handling Late Data and Watermarking"; book Ch. 12), deterministic, so a replay
recomputes the same value. An event at or before it is a *late event*, the other events are
*on time*, an unparseable line is *quarantined*; one aggregation counts the three and finds
the newest event time, so that ``on-time + late + quarantined = lines read``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.bounds import at_most
from logstream.analytics.panes import gathered
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.state import SnapshotMeta
from logstream.schema import EVENT_COLUMNS
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["Split", "since_of", "split_batch"]


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
    """

    write: IngestBatchWrite
    is_event: Column
    is_late: Column
    watermark: Column
    on_time: DataFrame
    newest: int | None
    next_watermark: int | None
    since: dict[str, int]


def split_batch(
    stage: StageContext,
    parsed: DataFrame,
    batch_id: int,
    prev: SnapshotMeta,
    corrupt: dict[str, str],
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

    Returns
    -------
    Split or None
        None for a micro-batch with no line and no corrupt file: nothing to deliver.
    """
    s = stage.settings
    watermark_ms = s.watermark_at(prev.max_event_ms)
    is_event = F.col(REASON_COLUMN).isNull()
    if watermark_ms is None:
        is_late = F.lit(False)
        watermark = F.lit(None).cast("timestamp")
    else:
        watermark = F.timestamp_millis(F.lit(watermark_ms))
        is_late = at_most(F.unix_micros("event_time"), watermark_ms * 1000)
    with stage._timed("parse"):  # materialises the cached parse
        counts = parsed.agg(
            F.count_if(is_event & ~is_late).alias("on_time"),
            F.count_if(is_event & is_late).alias("late"),
            F.count_if(~is_event).alias("quarantined"),
            F.max(F.when(is_event, F.unix_millis("event_time"))).alias("max_ms"),
        ).first()
    assert counts is not None
    write = IngestBatchWrite(
        batch_id=batch_id,
        events=counts["on_time"],
        late_events=counts["late"],
        quarantined=counts["quarantined"],
        corrupt_files=len(corrupt),
        max_event_time_ms=counts["max_ms"],
    )
    if not (write.events or write.late_events or write.quarantined or write.corrupt_files):
        return None
    lines = write.events + write.late_events + write.quarantined
    stage.single_partition = lines <= s.single_partition_rows
    stage._adapt()
    newest = max(prev.max_event_ms or 0, write.max_event_time_ms or 0) or None
    next_watermark = s.watermark_at(newest)
    since = since_of(prev, s.outputs)
    on_time = gathered(
        parsed.where(is_event & ~is_late).select(*EVENT_COLUMNS), stage.single_partition
    )
    stage.since = since
    return Split(write, is_event, is_late, watermark, on_time, newest, next_watermark, since)
