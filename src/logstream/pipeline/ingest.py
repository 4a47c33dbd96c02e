"""The ingest stage: parsed lines → on-time events, late events, quarantine, live views.

It runs inside ``foreachBatch`` of the first streaming query (the only one that reads the
source and parses). For micro-batch ``N`` it:

1. skips the batch if the serving store's ledger already holds it (a replay after a crash);
2. computes the **watermark** of the batch: the largest event time of every earlier
   micro-batch minus the delay (``--watermark``). The rule is the textbook one (Spark guide,
   "Handling Late Data and Watermarking"; book Ch. 12) and is deterministic: it depends on
   committed batches only, so a replay recomputes the same value;
3. splits the parsed events: an event whose event time is **at or before** the watermark is
   a *late event*; the others are *on time*;
4. publishes on-time events to ``events/``, late events (with the watermark they missed) to
   ``late_events/`` and unparseable lines to ``quarantine/`` — each one Parquet file per batch,
   atomically (:func:`logstream.sinks.publish_batch`);
5. adds the batch's per-window counts (traffic, trending pages, visitor sketches, requests
   and bytes per client) and its counters and examples to the serving store in one
   transaction, with the batch id in the ledger
   (:meth:`logstream.serving.ServingStore.commit_ingest_batch`).

Why the window queries read ``events/`` and not the source: Spark drops rows behind the
watermark *silently*, and which rows it drops depends on micro-batch boundaries and on whether
a no-data batch ran in between (since Spark 3.4 a stateful operator judges lateness by the
previous batch's watermark). Reading only on-time events, whose event times are after a
watermark that is never lower than Spark's own for the same data, the window queries drop
nothing (``numRowsDroppedByWatermark`` stays 0), every late event is in ``late_events``, and
``on-time + late + quarantined = lines read``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from logstream import analytics
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.config import interval_seconds
from logstream.schema import EVENT_COLUMNS
from logstream.serving import IngestBatchWrite, ServingStore
from logstream.sinks import publish_batch, run_stateful_plan
from logstream.sources import dropped_in_running_batch

__all__ = ["INGEST_QUERY", "IngestStage", "IngestTotals", "iso"]

#: Name of the ingest query (also its key in the store's ledger and its checkpoint folder).
INGEST_QUERY = "ingest"

#: Late and quarantined rows kept as examples per micro-batch.
_EXAMPLES_PER_BATCH = 5


def _iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reaching(on_time: DataFrame, horizon_ms: int, window: str) -> DataFrame:
    """The events that can reach a window ending after ``horizon_ms``: dropping the others
    first spares the window expansion (5-fold for sliding windows) on backfills."""
    window_ms = int(interval_seconds(window) * 1000)
    return on_time.where(F.col("event_time") > F.timestamp_millis(F.lit(horizon_ms - window_ms)))


def iso(col: Column | str) -> Column:
    """Format a timestamp column as ISO 8601 UTC text (``1995-07-09T04:00:00Z``)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'")


@dataclass
class IngestTotals:
    """Running totals of this process's ingest stage (for the progress line)."""

    batches: int = 0
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    watermark_ms: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class IngestStage:
    """The ``foreachBatch`` function of the ingest query.

    Parameters
    ----------
    output_dir : Path
        Root of the Parquet outputs (``events``, ``late_events``, ``quarantine`` are written).
    store : ServingStore
        The serving store (ledger, live views).
    watermark_ms : int
        The watermark delay, milliseconds.
    traffic_window, trending_window, trending_slide, clients_window : str
        Spark interval strings of the live views.
    retention_ms : int
        Trending-page and client windows ending this long (ms) before the newest event are
        not written to, and are pruned from, the store.
    session : SparkSession, optional
        The session that started the ingest query, whose query manager lists it: the copies
        the deduplication operator dropped are read from the running micro-batch
        (:func:`~logstream.sources.dropped_in_running_batch`). ``foreachBatch`` hands over
        DataFrames of a cloned session that does not. None: duplicates are not counted.

    Notes
    -----
    Input of ``__call__``: the output of :func:`logstream.parsing.parse` for one micro-batch.
    """

    def __init__(
        self,
        output_dir: Path,
        store: ServingStore,
        watermark_ms: int,
        traffic_window: str = "60 seconds",
        trending_window: str = "300 seconds",
        trending_slide: str = "60 seconds",
        retention_ms: int = 2 * 3600 * 1000,
        clients_window: str = "300 seconds",
        session: SparkSession | None = None,
    ) -> None:
        self.output_dir = output_dir
        self.store = store
        self.watermark_ms = watermark_ms
        self.traffic_window = traffic_window
        self.trending_window = trending_window
        self.trending_slide = trending_slide
        self.retention_ms = retention_ms
        self.clients_window = clients_window
        self.totals = IngestTotals()
        self.session = session
        #: Called with a step name and the batch id between the writes of a micro-batch
        #: (``published_events``, ``published_late_events``, ``published_quarantine``,
        #: ``before_commit``): tests stop the pipeline there.
        self.step_hook: Callable[[str, int], None] | None = None

    def _step(self, name: str, batch_id: int) -> None:
        if self.step_hook is not None:
            self.step_hook(name, batch_id)

    def watermark_for_next_batch(self) -> int | None:
        """The watermark (epoch ms) the next micro-batch is judged by; None before any event."""
        max_ms = self.store.max_event_time_ms()
        return None if max_ms is None else max_ms - self.watermark_ms

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """Process micro-batch ``batch_id`` exactly once (see the module docstring)."""
        if self.store.is_committed(INGEST_QUERY, batch_id):
            run_stateful_plan(parsed)  # the deduplication state still commits this batch
            return
        # the one read of the store's newest event time for this micro-batch
        before_ms = self.store.max_event_time_ms()
        # keep the raw text only where it is needed (quarantine): a much smaller cache
        parsed = parsed.withColumn(
            "raw_line", F.when(F.col(REASON_COLUMN).isNotNull(), F.col("raw_line"))
        ).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            write = self._process(parsed, batch_id, before_ms)
        finally:
            parsed.unpersist()
        # the plan has run: the copies it dropped are committed with the batch
        if self.session is not None:
            write.duplicates = dropped_in_running_batch(self.session, INGEST_QUERY) or 0
        if not (write.events or write.late_events or write.quarantined or write.duplicates):
            # a no-data micro-batch (Spark runs one after a batch to move the deduplication
            # watermark): nothing to record, and a replay has nothing to skip
            return
        self._step("before_commit", batch_id)
        self.store.commit_ingest_batch(INGEST_QUERY, write)
        with self.totals.lock:
            self.totals.batches += 1
            self.totals.events += write.events
            self.totals.late_events += write.late_events
            self.totals.quarantined += write.quarantined
            newest = max(before_ms or 0, write.max_event_time_ms or 0)
            if before_ms is not None or write.max_event_time_ms is not None:
                self.totals.watermark_ms = newest - self.watermark_ms

    def _process(self, parsed: DataFrame, batch_id: int, before_ms: int | None) -> IngestBatchWrite:
        """``before_ms``: newest event time of the committed batches (None before any)."""
        watermark_ms = None if before_ms is None else before_ms - self.watermark_ms
        is_event = F.col(REASON_COLUMN).isNull()
        if watermark_ms is None:
            is_late = F.lit(False)
            watermark = F.lit(None).cast("timestamp")
        else:
            watermark = F.timestamp_millis(F.lit(watermark_ms))
            is_late = F.col("event_time") <= watermark

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
            max_event_time_ms=counts["max_ms"],
        )
        on_time = parsed.where(is_event & ~is_late).select(*EVENT_COLUMNS)
        if write.events:
            publish_batch(on_time, self.output_dir / "events", batch_id)
            self._step("published_events", batch_id)
            self._live_views(on_time, write, max(before_ms or 0, write.max_event_time_ms or 0))
        if write.late_events:
            late = parsed.where(is_event & is_late).select(
                *EVENT_COLUMNS,
                watermark.alias("watermark"),
            )
            publish_batch(late, self.output_dir / "late_events", batch_id)
            self._step("published_late_events", batch_id)
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
        if write.quarantined:
            bad = parsed.where(~is_event).select(
                "raw_line",
                "source_file",
                F.col(REASON_COLUMN).alias("reason"),
            )
            publish_batch(bad, self.output_dir / "quarantine", batch_id)
            self._step("published_quarantine", batch_id)
            write.quarantine_examples = [
                (batch_id, r["raw_line"], r["source_file"], r["reason"])
                for r in bad.limit(_EXAMPLES_PER_BATCH).collect()
            ]
        return write

    def _live_views(self, on_time: DataFrame, write: IngestBatchWrite, newest: int) -> None:
        """Per-window counts of this batch's on-time events (bounded by windows touched).

        ``newest`` is the newest event time (epoch ms) after this batch.
        """
        traffic = analytics.traffic_per_window(on_time, self.traffic_window)
        write.traffic = [
            tuple(r)
            for r in traffic.select(
                iso("window_start"),
                iso("window_end"),
                "requests",
                "bytes",
                "status_1xx",
                "status_2xx",
                "status_3xx",
                "status_4xx",
                "status_5xx",
                "errors",
            ).collect()
        ]
        horizon_ms = newest - self.retention_ms
        horizon = F.timestamp_millis(F.lit(horizon_ms))
        pages = analytics.page_counts_per_window(
            _reaching(on_time, horizon_ms, self.trending_window),
            self.trending_window,
            self.trending_slide,
        ).where(F.col("window_end") > horizon)
        write.prune_trending_before = _iso_ms(horizon_ms)
        write.pages = [
            (r[0], r[1], r[2], r[3])
            for r in pages.select(
                iso("window_start"), iso("window_end"), "url_path", "requests"
            ).collect()
        ]
        clients = analytics.client_counts_per_window(
            _reaching(on_time, horizon_ms, self.clients_window), self.clients_window
        ).where(F.col("window_end") > horizon)
        write.clients = [
            (r[0], r[1], r[2], int(r[3]), int(r[4]))
            for r in clients.select(
                iso("window_start"), iso("window_end"), "client_host", "requests", "bytes"
            ).collect()
        ]
        write.visitors = self._merged_sketches(on_time, newest)
        write.final_before = _iso_ms(newest - self.watermark_ms)

    def _merged_sketches(
        self, on_time: DataFrame, newest_ms: int
    ) -> list[tuple[str, str, int, bytes | None]]:
        """This batch's visitor estimates per window, merged with stored open sketches.

        A window whose end is at or before the next watermark is final: only its estimate is
        kept. Open windows keep their sketch so the next micro-batches can merge into it.
        """
        open_stored = self.store.open_sketches()
        next_watermark = F.timestamp_millis(F.lit(newest_ms - self.watermark_ms))
        keep_sketch = (F.col("window_end") > next_watermark) | iso("window_start").isin(
            list(open_stored) or [""]
        )
        fresh = [
            (r[0], r[1], int(r[2]), None if r[3] is None else bytes(r[3]), r[4])
            for r in analytics.visitor_sketches_per_window(on_time, self.traffic_window)
            .select(
                iso("window_start"),
                iso("window_end"),
                "visitors",
                F.when(keep_sketch, F.col("sketch")),
                keep_sketch & (F.col("window_end") > next_watermark),
            )
            .collect()
        ]
        to_merge = [(w, e, sk) for w, e, _, sk, _ in fresh if w in open_stored]
        merged: dict[str, tuple[int, bytes]] = {}
        if to_merge:
            rows = to_merge + [(w, *open_stored[w]) for w, _, _ in to_merge]
            merged = {
                r[0]: (int(r[1]), bytes(r[2]))
                for r in on_time.sparkSession.createDataFrame(
                    rows, "window_start string, window_end string, sketch binary"
                )
                .groupBy("window_start")
                .agg(F.hll_union_agg("sketch").alias("sketch"))
                .select("window_start", F.hll_sketch_estimate("sketch"), "sketch")
                .collect()
            }
        out = []
        for start, end, visitors, sketch, still_open in fresh:
            if start in merged:
                visitors, sketch = merged[start]
            out.append((start, end, visitors, sketch if still_open else None))
        return out
