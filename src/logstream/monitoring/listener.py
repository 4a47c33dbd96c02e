"""A :class:`~pyspark.sql.streaming.StreamingQueryListener` that never blocks.

Spark calls listener callbacks on its listener bus; a slow callback delays every query
(PySpark ``listener.py`` docs). :class:`ProgressListener` only turns the progress event into
a small dictionary and puts it on a bounded queue (dropping it when full); a daemon thread
takes rows off the queue, writes them to the serving store's ``progress`` table and hands
them to an optional callback (the terminal progress line). Nothing raised by that thread
reaches Spark.

Spark's own metrics are switched on by the session (``spark.sql.streaming.metricsEnabled``,
the UI's Prometheus servlet at ``/metrics/prometheus``); this listener does not replace them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from logstream.monitoring.kafka import KAFKA_LOST, KAFKA_STATE, kafka_progress
from logstream.serving import ServingStore
from logstream.serving.schema import FOLLOW_LOSSES

__all__ = ["ProgressListener", "progress_row", "record_kafka"]

log = logging.getLogger(__name__)


def progress_row(progress: Any) -> dict[str, Any]:
    """Flatten a ``StreamingQueryProgress`` into the store's ``progress`` columns.

    Returns
    -------
    dict
        ``query``, ``batch_id``, ``timestamp``, ``input_rows_per_s`` (events/s; None when
        Spark could not measure it: the first micro-batch of a run has no earlier trigger to
        time its input against, and Spark reports 0 for it) and ``processed_rows_per_s``
        (events/s), ``batch_duration_ms`` (ms), ``num_input_rows``,
        ``watermark`` and ``max_event_time`` (ISO 8601 or None), ``state_rows``,
        ``state_memory_bytes`` (bytes), ``dropped_by_watermark`` (summed over the
        query's stateful operators), ``duplicates_dropped`` (the deduplication operator's
        ``numDroppedDuplicateRows``; None without one) and ``follow_losses`` (the follow
        source's running ``truncations``, ``lost_bytes``, ``lost_lines`` and ``lost_files``
        from its end offset, see ``docs/follow.md``; None without that source) and
        ``kafka`` (the Kafka source's offsets, lag per partition, rows/s and lost messages:
        :func:`logstream.monitoring.kafka.kafka_progress`; None without that source).
    """
    event_time = progress.eventTime or {}
    ops = list(progress.stateOperators or [])
    watermark = event_time.get("watermark")
    input_rate = _finite(progress.inputRowsPerSecond)
    if input_rate == 0 and progress.numInputRows:  # no earlier trigger: not a rate of 0
        input_rate = None
    return {
        "query": progress.name or str(progress.id),
        "batch_id": progress.batchId,
        "timestamp": progress.timestamp,
        "input_rows_per_s": input_rate,
        "processed_rows_per_s": _finite(progress.processedRowsPerSecond),
        "batch_duration_ms": progress.batchDuration,
        "num_input_rows": progress.numInputRows,
        "watermark": None if watermark in (None, "1970-01-01T00:00:00.000Z") else watermark,
        "max_event_time": event_time.get("max"),
        "state_rows": sum(op.numRowsTotal for op in ops) if ops else None,
        "state_memory_bytes": sum(op.memoryUsedBytes for op in ops) if ops else None,
        "dropped_by_watermark": sum(op.numRowsDroppedByWatermark for op in ops) if ops else None,
        "duplicates_dropped": _duplicates_dropped(ops),
        "follow_losses": _follow_losses(progress.sources or []),
        "kafka": kafka_progress(progress.sources or []),
    }


def _follow_losses(sources: list[Any]) -> dict[str, int] | None:
    """The follow source's loss counts from its end offset (a JSON object), or None."""
    for source in sources:
        try:
            end = json.loads(source.endOffset or "null")
        except (TypeError, ValueError):
            continue
        if isinstance(end, dict) and "lost_bytes" in end and "files" in end:
            return {key: int(end.get(key) or 0) for key in FOLLOW_LOSSES}
    return None


def record_kafka(store: ServingStore, batch_id: int, kafka: dict[str, Any]) -> None:
    """Keep a Kafka source's latest offsets and lag, and add its lost messages, in the store's
    ``pipeline_state`` (the dashboard and Prometheus read them)."""
    values = {KAFKA_STATE: json.dumps({**kafka, "batch_id": batch_id})}
    if kafka.get("lost"):
        values[KAFKA_LOST] = str(int(store.get_state(KAFKA_LOST) or 0) + int(kafka["lost"]))
    store.set_state(values)


def _duplicates_dropped(ops: list[Any]) -> int | None:
    counts = [
        int(op.customMetrics["numDroppedDuplicateRows"])
        for op in ops
        if "numDroppedDuplicateRows" in (op.customMetrics or {})
    ]
    return sum(counts) if counts else None


def _finite(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


class ProgressListener(StreamingQueryListener):
    """Queue progress events; a daemon thread stores them and calls ``on_row``.

    Parameters
    ----------
    store : ServingStore, optional
        Where progress rows are appended.
    on_row : callable, optional
        Called with each progress row in the worker thread (e.g. to print a status line).
    capacity : int
        Queue size; events beyond it are dropped (and counted in ``dropped``) so Spark's
        listener bus never waits.
    """

    def __init__(
        self,
        store: ServingStore | None = None,
        on_row: Callable[[dict[str, Any]], None] | None = None,
        capacity: int = 1000,
    ) -> None:
        self.store = store
        self.on_row = on_row
        self.rows: queue.Queue[dict[str, Any] | threading.Event] = queue.Queue(maxsize=capacity)
        self.dropped = 0
        self.history: list[dict[str, Any]] = []
        self._worker = threading.Thread(target=self._drain, name="logstream-progress", daemon=True)
        self._worker.start()

    def onQueryStarted(self, event: Any) -> None:
        """Nothing to do when a query starts."""

    def onQueryProgress(self, event: Any) -> None:
        """Queue the progress row; never blocks, never raises."""
        try:
            self.rows.put_nowait(progress_row(event.progress))
        except queue.Full:
            self.dropped += 1
        except Exception:  # a listener must not fail the query
            log.exception("could not read streaming progress")

    def onQueryIdle(self, event: Any) -> None:
        """Nothing to do when a query is idle."""

    def onQueryTerminated(self, event: Any) -> None:
        """Nothing to do when a query ends (errors surface through the query itself)."""

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until the rows queued so far are handled (for orderly shutdown and tests)."""
        done = threading.Event()
        self.rows.put(done)  # handled after every row queued before it
        done.wait(timeout)

    def _drain(self) -> None:
        while True:
            row = self.rows.get()
            if isinstance(row, threading.Event):
                row.set()
                continue
            self.history.append(row)
            with contextlib.suppress(Exception):
                if self.store is not None:
                    self.store.record_progress([row])
                    if row.get("duplicates_dropped") is not None:
                        self.store.record_duplicates(row["batch_id"], row["duplicates_dropped"])
                    if row.get("follow_losses"):
                        self.store.record_follow_losses(row["follow_losses"])
                    if row.get("kafka"):
                        record_kafka(self.store, row["batch_id"], row["kafka"])
            with contextlib.suppress(Exception):
                if self.on_row is not None:
                    self.on_row(row)
