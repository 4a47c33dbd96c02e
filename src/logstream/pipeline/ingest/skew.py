"""Skewed clocks: a minority of a micro-batch far ahead of the rest, written between its lines.

A stream's watermark follows the newest event time (Spark, Flink and Kafka Streams alike), so
300 lines of a server whose clock runs three days fast, mixed into one file of a replayed day,
move it three days on and send every real event after them to ``late_events/``. Flink's answer
for many sources is a watermark per source with the minimum across them; Druid rejects events
too far ahead of the task's clock (``earlyMessageRejectionPeriod``, here ``--max-future``).
Neither sees a skew *inside* one source whose dates are in the clock's past, so this rule
reads the micro-batch's own distribution:

1. **A gap.** The events are put in buckets of the watermark delay ``D`` (``floor(t / D)``);
   from the top down, the lowest run of at least one empty bucket (a gap of more than ``D``)
   with at most :data:`SKEW_SHARE` of the batch's events above it splits them into *the rest*
   and *the ones ahead*. No such gap: nothing to do (one bucket per ``D`` of event time,
   :data:`MAX_BUCKETS` at most, is all that is counted).
2. **Between the lines.** A clock set wrong writes its lines among the others; a log that
   really moved on (a server back after two days down, the next day of a backfill, a replay at
   600×) writes them after. So the ones ahead are *skewed* only when, in the input's order,
   at least :data:`SKEW_MIX` of them are followed by an event of the rest from the same
   source (file): a block at the end is time that passed, and moves the watermark as ever.
3. **Held apart.** Skewed events are quarantined as ``future_event_time`` with their raw text
   and a detail that says why (the in-batch rule's reason:
   :func:`~logstream.pipeline.ingest.watermark.ahead_bound_ms`), counted, and never move the
   watermark; the first micro-batch in which a source shows them names it in a warning.

The rule reads the batch's events and their order only, so a replayed micro-batch decides the
same way, on the Spark steps (:func:`spark_skew`, two small jobs over the cached parse, the
second only when a gap is found) and on the driver (:func:`arrow_skew`, numpy).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from logstream.pipeline.ingest.settings import iso_ms
from logstream.units import plural

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from logstream.pipeline.ingest.context import StageContext

__all__ = [
    "MAX_BUCKETS",
    "SKEW_MIX",
    "SKEW_SHARE",
    "Skew",
    "arrow_skew",
    "mixed",
    "skew_cut",
    "spark_skew",
    "warn_once",
]

log = logging.getLogger(__name__)

#: The largest share of a micro-batch's events a skewed minority may be.
SKEW_SHARE = 0.2
#: The share of the events ahead that must be followed by one of the rest (same source).
SKEW_MIX = 0.2
#: Buckets (of the watermark delay) read from the top of a micro-batch's event times.
MAX_BUCKETS = 100_000


@dataclass(frozen=True)
class Skew:
    """A micro-batch's skewed events.

    Attributes
    ----------
    cut_ms : int
        Events at or after this instant (epoch ms) are the skewed ones.
    rest_max_ms : int
        The newest event time of the rest (epoch ms).
    events : int
        Skewed events.
    sources : tuple of (str or None, int)
        Their sources (files) with their counts, most first (three at most).
    """

    cut_ms: int
    rest_max_ms: int
    events: int
    sources: tuple[tuple[str | None, int], ...]

    def detail(self) -> str:
        """The quarantine detail of a skewed event."""
        return (
            "more than the watermark delay ahead of the rest of its micro-batch (after "
            f"{iso_ms(self.rest_max_ms)}), among a minority written between its lines: a "
            "clock set wrong"
        )


def skew_cut(buckets: np.ndarray, counts: np.ndarray, events: int) -> int | None:
    """The lowest bucket above a gap with at most :data:`SKEW_SHARE` of ``events`` from it on.

    Parameters
    ----------
    buckets : numpy.ndarray
        Non-empty buckets (``floor(t / D)``), ascending, distinct; the top ones at least.
    counts : numpy.ndarray
        Events in each.
    events : int
        The micro-batch's events.

    Returns
    -------
    int or None
        The bucket, or None without such a gap.

    Examples
    --------
    >>> skew_cut(np.array([10, 11, 12, 440]), np.array([400, 500, 80, 60]), 1040)
    440
    >>> skew_cut(np.array([10, 11, 13]), np.array([400, 500, 300]), 1200) is None  # 25 %
    True
    """
    if len(buckets) < 2:
        return None
    above = np.cumsum(counts[::-1])[::-1]  # events from each bucket on
    gap_below = np.concatenate([[False], np.diff(buckets) >= 2])
    ok = gap_below & (above <= SKEW_SHARE * events)
    return int(buckets[np.flatnonzero(ok)[0]]) if ok.any() else None


def mixed(ahead: np.ndarray, sources: np.ndarray) -> bool:
    """Whether the events ``ahead`` (a mask, in input order) are written between the others:
    at least :data:`SKEW_MIX` of them followed by an event of the rest from the same source.

    Examples
    --------
    >>> a, src = np.array([0, 1, 0, 1, 0, 0], bool), np.array(["f"] * 6, object)
    >>> mixed(a, src), mixed(np.array([0, 0, 0, 0, 1, 1], bool), src)
    (True, False)
    """
    n = int(ahead.sum())
    if n == 0:
        return False
    same = sources[:-1] == sources[1:]
    followed = int((ahead[:-1] & ~ahead[1:] & same).sum())
    return followed >= max(1, SKEW_MIX * n)


def _top_sources(sources: np.ndarray) -> tuple[tuple[str | None, int], ...]:
    names, counts = np.unique(sources.astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")[:3]
    return tuple((None if names[i] == "None" else str(names[i]), int(counts[i])) for i in order)


def arrow_skew(t_ms: np.ndarray, sources: np.ndarray, watermark_ms: int) -> Skew | None:
    """The skew (module docstring) of a micro-batch's events on the driver.

    Parameters
    ----------
    t_ms : numpy.ndarray
        The events' times (epoch ms), in input order.
    sources : numpy.ndarray
        Their sources (object array of file names or None).
    watermark_ms : int
        The watermark delay, the buckets' width.

    Returns
    -------
    Skew or None
    """
    if len(t_ms) < 2 or watermark_ms <= 0 or int(t_ms.max() - t_ms.min()) <= watermark_ms:
        return None
    buckets, counts = np.unique(t_ms // watermark_ms, return_counts=True)
    cut = skew_cut(buckets[-MAX_BUCKETS:], counts[-MAX_BUCKETS:], len(t_ms))
    if cut is None:
        return None
    cut_ms = cut * watermark_ms
    ahead = t_ms >= cut_ms
    if not mixed(ahead, np.asarray(sources, dtype=object)):
        return None
    rest = int(t_ms[~ahead].max())
    return Skew(cut_ms, rest, int(ahead.sum()), _top_sources(np.asarray(sources)[ahead]))


def spark_skew(
    parsed: DataFrame, is_event: Column, events: int, span_ms: int, watermark_ms: int
) -> Skew | None:
    """The skew (module docstring) of a micro-batch's cached parse, in Spark.

    One aggregation counts the events per bucket (the top :data:`MAX_BUCKETS`); only when
    they show a gap, a second job reads the events ahead in input order (their position in
    the cached partitions, ``monotonically_increasing_id``) per source.

    Parameters
    ----------
    parsed : DataFrame
        The micro-batch's parsed rows (persisted: their order is the input's).
    is_event : Column
        The condition of an event row.
    events : int
        The batch's events.
    span_ms : int
        Its newest event time minus its oldest.
    watermark_ms : int
        The watermark delay, the buckets' width.

    Returns
    -------
    Skew or None
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if events < 2 or watermark_ms <= 0 or span_ms <= watermark_ms:
        return None
    t_ms = F.unix_millis("event_time")
    bucket = F.floor(t_ms / F.lit(watermark_ms)).alias("b")
    rows = (
        parsed.where(is_event)
        .groupBy(bucket)
        .count()
        .orderBy(F.desc("b"))
        .limit(MAX_BUCKETS)
        .collect()
    )[::-1]
    cut = skew_cut(np.array([r["b"] for r in rows]), np.array([r["count"] for r in rows]), events)
    if cut is None:
        return None
    cut_ms = cut * watermark_ms
    ahead = t_ms >= F.lit(cut_ms)
    order = Window.partitionBy("source_file").orderBy("_at")
    seq = (
        parsed.withColumn("_at", F.monotonically_increasing_id())
        .where(is_event)
        .select("source_file", ahead.alias("_a"), t_ms.alias("_t"), "_at")
        .withColumn("_next", F.lead("_a").over(order))
    )
    found = seq.agg(
        F.count_if("_a").alias("ahead"),
        F.count_if(F.col("_a") & ~F.col("_next")).alias("followed"),
        F.max(F.when(~F.col("_a"), F.col("_t"))).alias("rest"),
    ).first()
    assert found is not None
    n, followed = int(found["ahead"]), int(found["followed"])
    if n == 0 or followed < max(1, SKEW_MIX * n):
        return None
    top = seq.where("_a").groupBy("source_file").count().orderBy(F.desc("count")).limit(3).collect()
    sources = tuple((r["source_file"], int(r["count"])) for r in top)
    return Skew(cut_ms, int(found["rest"]), n, sources)


def warn_once(stage: StageContext, skew: Skew, batch_id: int) -> None:
    """Name the skewed events' sources in a warning, once a run for each."""
    new = [s for s, _ in skew.sources if s not in stage.skew_sources]
    if not new:
        return
    stage.skew_sources.update(new)
    where = ", ".join(f"{s or 'the stream'} ({n:,})" for s, n in skew.sources)
    ahead_s = (skew.cut_ms - skew.rest_max_ms) / 1000
    log.warning(
        "warning: micro-batch %d: %s are at least %s ahead of the rest, written between its "
        "lines (%s): a clock set wrong? They are quarantined as future_event_time and do not "
        "move the watermark",
        batch_id, plural(skew.events, "event"), _span(ahead_s), where,
    )  # fmt: skip


def _span(seconds: float) -> str:
    """``3.0 days``, ``5.2 hours``, ``12 minutes``."""
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 3_600:
        return f"{seconds / 3_600:.1f} hours"
    return f"{seconds / 60:.0f} minutes"
