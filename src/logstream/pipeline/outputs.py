"""``foreachBatch`` writers of the stateful queries: sessions, top clients, anomaly alerts.

Each is called with the rows a stateful query emits in append mode for micro-batch ``N``
(closed sessions, finished client windows, alerts) and writes them exactly once:

* the Parquet output through :func:`logstream.sinks.publish_batch` (``batch_id=N``, one
  atomic rename, skipped when present);
* the serving store, for sessions and alerts, in one SQLite transaction keyed by
  ``(query, N)`` in the ledger (:meth:`logstream.serving.ServingStore.commit_batch`).

A replay of micro-batch ``N`` after a crash recomputes the same rows from the checkpointed
state and finds both writes done; it still runs the plan, so that every state store commits
the batch (:func:`logstream.sinks.run_stateful_plan`). Only bounded data reaches the driver:
per-window statistics, at most :data:`~logstream.serving.store.SESSIONS_KEPT` sessions and
:data:`~logstream.serving.store.ALERTS_KEPT` alerts per micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.pipeline.ingest import iso
from logstream.serving import ServingStore
from logstream.serving.store import ALERTS_KEPT, SESSIONS_KEPT
from logstream.sinks import batch_dir, publish_batch, run_stateful_plan

__all__ = ["AlertsSink", "SessionsSink", "TopClientsSink"]

SESSIONS_QUERY = "sessions"
TOP_CLIENTS_QUERY = "top_clients"
ALERTS_QUERY = "alerts"


class _ExactlyOnceSink:
    """The exactly-once skeleton of a ``foreachBatch`` writer.

    ``__call__`` skips a micro-batch already written (:meth:`_written`) after running its
    plan, so its state stores still commit it; otherwise it persists the batch, lets
    :meth:`_write` publish the Parquet output, then runs the store commit ``_write``
    returns, outside the cached batch's lifetime.
    """

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` exactly once."""
        if self._written(batch_id):
            run_stateful_plan(df)  # its state stores still commit this batch
            return
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            commit = self._write(df, batch_id)
        finally:
            df.unpersist()
        if commit is not None:
            commit()

    def _written(self, batch_id: int) -> bool:
        raise NotImplementedError

    def _write(self, df: DataFrame, batch_id: int) -> Callable[[], None] | None:
        """Publish the persisted micro-batch; return the store commit to run, if any."""
        raise NotImplementedError


class SessionsSink(_ExactlyOnceSink):
    """Closed sessions → ``sessions/`` Parquet, the latest sessions and merged per-window
    statistics → serving store.

    Parameters
    ----------
    output_dir : Path
        Root of the Parquet outputs (``sessions`` is written).
    store : ServingStore
    stats_window : str
        Tumbling window (by session start) of the statistics.

    Notes
    -----
    Input of ``__call__``: the output of :func:`logstream.analytics.sessions` for one
    micro-batch. A window's statistics may grow over many micro-batches (sessions that
    started in it close later); its KLL sketch of durations is merged with the stored one
    (``kll_merge_agg_bigint``), so median and p95 are those of all its sessions.
    """

    def __init__(self, output_dir: Path, store: ServingStore, stats_window: str) -> None:
        self.root = output_dir / SESSIONS_QUERY
        self.store = store
        self.stats_window = stats_window

    def _written(self, batch_id: int) -> bool:
        return self.store.is_committed(SESSIONS_QUERY, batch_id)

    def _write(self, closed: DataFrame, batch_id: int) -> Callable[[], None] | None:
        count = closed.count()
        if count == 0:
            return None
        publish_batch(closed, self.root, batch_id)
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
        stats = self._merged_stats(closed)
        rows = [tuple(r) for r in reversed(latest)]
        return lambda: self.store.commit_sessions(batch_id, count, rows, stats)

    def _merged_stats(self, closed: DataFrame) -> list[tuple[object, ...]]:
        fresh = [
            (r[0], r[1], r[2], r[3], r[4], bytes(r[5]))
            for r in analytics.session_stats_per_window(closed, self.stats_window)
            .select(
                iso("window_start"), iso("window_end"), "sessions", "bounces", "pages", "sketch"
            )
            .collect()
        ]
        stored = self.store.session_stats_rows(r[0] for r in fresh)
        merged = closed.sparkSession.createDataFrame(
            fresh + stored,
            "window_start string, window_end string, sessions bigint, bounces bigint, "
            "pages bigint, sketch binary",
        )
        return [
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


class TopClientsSink(_ExactlyOnceSink):
    """Finished client windows → the top clients by requests and by bytes → ``top_clients/``.

    Parameters
    ----------
    output_dir : Path
        Root of the Parquet outputs (``top_clients`` is written).
    top : int
        Clients kept per window and measure.

    Notes
    -----
    Input of ``__call__``: the output of :func:`logstream.analytics.client_counts_per_window`
    for one micro-batch (append mode: only windows the watermark has passed, each once).
    The live counts of open windows reach the serving store through the ingest stage.
    """

    def __init__(self, output_dir: Path, top: int) -> None:
        self.root = output_dir / TOP_CLIENTS_QUERY
        self.top = top

    def _written(self, batch_id: int) -> bool:
        return batch_dir(self.root, batch_id).exists()

    def _write(self, counts: DataFrame, batch_id: int) -> None:
        if counts.count():  # runs the whole plan once: every state store commits
            publish_batch(analytics.top_clients_per_window(counts, self.top), self.root, batch_id)


class AlertsSink(_ExactlyOnceSink):
    """Anomaly alerts → ``alerts/`` Parquet and the store's alert list.

    Parameters
    ----------
    output_dir : Path
        Root of the Parquet outputs (``alerts`` is written).
    store : ServingStore

    Notes
    -----
    Input of ``__call__``: the output of :func:`logstream.analytics.anomaly_alerts` for one
    micro-batch.
    """

    def __init__(self, output_dir: Path, store: ServingStore) -> None:
        self.root = output_dir / ALERTS_QUERY
        self.store = store

    def _written(self, batch_id: int) -> bool:
        return self.store.is_committed(ALERTS_QUERY, batch_id)

    def _write(self, alerts: DataFrame, batch_id: int) -> Callable[[], None] | None:
        rows = [
            tuple(r)
            for r in alerts.orderBy("window_start", "series", "metric")
            .select(
                "series",
                "metric",
                iso("window_start"),
                iso("window_end"),
                "value",
                "mean",
                "std",
                "z",
                "direction",
            )
            .limit(ALERTS_KEPT)
            .collect()
        ]
        if not rows:
            return None
        publish_batch(alerts, self.root, batch_id)
        return lambda: self.store.commit_alerts(batch_id, rows)
