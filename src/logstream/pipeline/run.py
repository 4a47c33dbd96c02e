"""Build, start and stop the streaming pipeline.

Queries (each with its own checkpoint under ``state_dir``; state in RocksDB):

=====================  ==========================================  ===================
query                  what it does                                sink, guarantee
=====================  ==========================================  ===================
``ingest``             source → parse → on-time / late / quarantine  ``foreachBatch``:
                       and live views (:mod:`.ingest`)             batch-id publish +
                                                                   store ledger
``traffic_per_minute``  ``events/`` → watermark → traffic per       Parquet file sink,
                       tumbling window                             append (commit log)
``trending_pages``     ``events/`` → watermark → requests per      Parquet file sink,
                       content page per sliding window             append
``unique_visitors``    ``events/`` → watermark → HLL sketch per    Parquet file sink,
                       window                                      append
``sessions``           ``events/`` → watermark → session window    ``foreachBatch``:
                       per visitor (:func:`~logstream.analytics.   batch-id publish +
                       sessions`)                                  store ledger
``top_clients``        ``events/`` → watermark → requests, bytes   ``foreachBatch``:
                       per client and window → top clients         batch-id publish
``alerts``             ``events/`` → watermark → per-minute        ``foreachBatch``:
                       series → ``transformWithStateInPandas``     batch-id publish +
                       (:func:`~logstream.analytics.               store ledger
                       anomaly_alerts`)
=====================  ==========================================  ===================

The ingest query drops lines delivered twice first (:mod:`logstream.sources.dedup`), unless
``dedup`` is off. ``queries`` chooses which of the others run (default: all).

With ``--trigger available-now`` the ingest query runs to completion first, then the window
queries, so a backfill is deterministic. With a processing-time trigger all run together.
In append mode a window is written once the watermark passes its end; the last windows of a
finished backfill stay in state until later events move the watermark (the serving store
already holds them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructField, StructType, TimestampType

from logstream import analytics
from logstream.analytics.alerts import anomaly_alerts
from logstream.errors import LogFormatError
from logstream.monitoring import ProgressListener
from logstream.parsing import CompiledFormat, events, parse, resolve_format
from logstream.pipeline.config import PipelineConfig, interval_seconds
from logstream.pipeline.identity import claim
from logstream.pipeline.ingest import INGEST_QUERY, IngestStage, IngestTotals
from logstream.pipeline.outputs import (
    ALERTS_QUERY,
    SESSIONS_QUERY,
    TOP_CLIENTS_QUERY,
    AlertsSink,
    SessionsSink,
    TopClientsSink,
)
from logstream.replay import open_log
from logstream.schema import EVENT_SCHEMA, QUARANTINE_SCHEMA
from logstream.serving import ServingStore
from logstream.sinks import ensure_schema
from logstream.sinks.gate import StopGate, is_stop_requested
from logstream.sources import drop_duplicate_lines, stream_lines

__all__ = ["Pipeline", "detect_file_format", "detect_stream_format"]


def detect_stream_format(cfg: PipelineConfig) -> CompiledFormat:
    """Resolve ``cfg.log_format``; ``auto`` reads the first lines of the oldest input file.

    Raises
    ------
    LogFormatError
        When ``auto`` finds no file to look at, or no format fits.
    """
    if cfg.log_format != "auto":
        return resolve_format(cfg.log_format)
    assert cfg.input_dir is not None
    files = sorted(
        (p for p in cfg.input_dir.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))),
        key=lambda p: (p.stat().st_mtime, p.name),
    )
    if not files:
        raise LogFormatError(
            f"--format auto needs a file in {str(cfg.input_dir)!r} to look at, and there is "
            "none yet: pass --format common|combined|'<LogFormat>'"
        )
    return detect_file_format(files[0])


def detect_file_format(path: Path) -> CompiledFormat:
    """Detect Combined or Common Log Format from the first 100 lines of ``path`` (plain or gzip).

    Raises
    ------
    LogFormatError
        When no format fits (see :func:`logstream.parsing.detect_format`).
    """
    with open_log(path) as fh:
        sample = [fh.readline().decode("utf-8", "replace") for _ in range(100)]
    return resolve_format("auto", sample)


@dataclass
class Pipeline:
    """The streaming job: build with a config, then :meth:`start`, :meth:`wait`, :meth:`stop`.

    Parameters
    ----------
    spark : SparkSession
    cfg : PipelineConfig
    on_progress : callable, optional
        Called (in a background thread) with each progress row of every query.
    """

    spark: SparkSession
    cfg: PipelineConfig
    on_progress: Callable[[dict[str, Any]], None] | None = None
    queries: list[StreamingQuery] = field(default_factory=list)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    gate: StopGate = field(default_factory=StopGate)

    def __post_init__(self) -> None:
        self.fmt = detect_stream_format(self.cfg)
        self.store = ServingStore(self.cfg.store_path)
        self.pipeline_id = claim(self.cfg.state_dir, self.cfg.output_dir, self.store)
        self.store.set_state(
            {
                "watermark_delay_ms": str(int(self.cfg.watermark_seconds * 1000)),
                "log_format": self.fmt.name,
                "traffic_window": self.cfg.traffic_window,
                "trending_window": self.cfg.trending_window,
                "trending_slide": self.cfg.trending_slide,
                "top": str(self.cfg.top),
                "dedup": str(self.cfg.dedup).lower(),
                "session_gap": self.cfg.session_gap,
                "session_stats_window": self.cfg.session_stats_window,
                "clients_window": self.cfg.clients_window,
                "alert_sigma": str(self.cfg.alert_sigma),
                "queries": ",".join(self.cfg.queries) or "none",
            }
        )
        self.ingest = IngestStage(
            self.cfg.output_dir,
            self.store,
            int(self.cfg.watermark_seconds * 1000),
            self.cfg.traffic_window,
            self.cfg.trending_window,
            self.cfg.trending_slide,
            int(interval_seconds(self.cfg.store_retention) * 1000),
            self.cfg.clients_window,
            session=self.spark if self.cfg.dedup else None,  # no copies to count without
        )
        self.listener = ProgressListener(self.store, self.on_progress)
        self.spark.streams.addListener(self.listener)

    @property
    def totals(self) -> IngestTotals:
        """Running totals of the ingest stage in this process."""
        return self.ingest.totals

    # -- building blocks -------------------------------------------------------------------

    def _trigger(self, writer: Any) -> Any:
        if self.cfg.trigger == "available-now":
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=self.cfg.trigger)

    def _checkpoint(self, name: str) -> str:
        return str(self.cfg.state_dir / name)

    def start_ingest(self) -> StreamingQuery:
        """Start the ingest query (source → parse → :class:`IngestStage`)."""
        late_schema = StructType([*EVENT_SCHEMA.fields, StructField("watermark", TimestampType())])
        for sub, schema in (
            ("events", EVENT_SCHEMA),
            ("late_events", late_schema),
            ("quarantine", QUARANTINE_SCHEMA),
        ):
            ensure_schema(self.spark, self.cfg.output_dir / sub, schema)
        lines = stream_lines(self.spark, self.cfg)
        if self.cfg.dedup:
            lines = drop_duplicate_lines(lines, self.cfg.dedup_window)
        parsed = parse(lines, self.fmt)
        writer = (
            parsed.writeStream.queryName(INGEST_QUERY)
            .foreachBatch(self.gate.wrap(INGEST_QUERY, self.ingest))
            .option("checkpointLocation", self._checkpoint(INGEST_QUERY))
        )
        query = self._trigger(writer).start()
        self.queries.append(query)
        return query

    def on_time_events(self) -> DataFrame:
        """The on-time events published by the ingest stage, as a watermarked stream."""
        reader = self.spark.readStream.schema(EVENT_SCHEMA).option("recursiveFileLookup", "true")
        if self.cfg.max_files_per_trigger:  # one file per ingest micro-batch
            reader = reader.option("maxFilesPerTrigger", self.cfg.max_files_per_trigger)
        return reader.parquet(str(self.cfg.output_dir / "events")).withWatermark(
            "event_time", self.cfg.watermark
        )

    def window_frames(self) -> dict[str, DataFrame]:
        """The three window aggregations over :meth:`on_time_events`."""
        ev = self.on_time_events()
        return {
            "traffic_per_minute": analytics.traffic_per_window(ev, self.cfg.traffic_window),
            "trending_pages": analytics.page_counts_per_window(
                ev, self.cfg.trending_window, self.cfg.trending_slide
            ),
            "unique_visitors": analytics.visitor_sketches_per_window(ev, self.cfg.traffic_window),
        }

    def stateful_frames(self) -> dict[str, tuple[DataFrame, Callable[[DataFrame, int], None]]]:
        """The stateful queries written through ``foreachBatch``: frame and writer by name."""
        ev = self.on_time_events()
        cfg = self.cfg
        return {
            SESSIONS_QUERY: (
                analytics.sessions(ev, cfg.session_gap),
                SessionsSink(cfg.output_dir, self.store, cfg.session_stats_window),
            ),
            TOP_CLIENTS_QUERY: (
                analytics.client_counts_per_window(ev, cfg.clients_window),
                TopClientsSink(cfg.output_dir, cfg.top),
            ),
            ALERTS_QUERY: (
                anomaly_alerts(
                    ev,
                    k=cfg.alert_sigma,
                    warmup_minutes=int(interval_seconds(cfg.alert_warmup) // 60),
                ),
                AlertsSink(cfg.output_dir, self.store),
            ),
        }

    def start_windows(self) -> list[StreamingQuery]:
        """Start the window queries (Parquet file sinks) and the stateful ``foreachBatch``
        queries chosen by ``cfg.queries``, all in append mode."""
        started = []
        chosen = set(self.cfg.queries)
        for name, frame in self.window_frames().items():
            if name not in chosen:
                continue
            writer = (
                frame.writeStream.queryName(name)
                .format("parquet")
                .outputMode("append")
                .option("path", str(self.cfg.output_dir / name))
            )
            started.append(self._start(name, writer))
        for name, (frame, sink) in self.stateful_frames().items():
            if name not in chosen:
                continue
            writer = (
                frame.writeStream.queryName(name)
                .outputMode("append")
                .foreachBatch(self.gate.wrap(name, sink))
            )
            started.append(self._start(name, writer))
        return started

    def _start(self, name: str, writer: Any) -> StreamingQuery:
        writer = writer.option("checkpointLocation", self._checkpoint(name))
        query = self._trigger(writer).start()
        self.queries.append(query)
        return query

    def start_console(self) -> StreamingQuery:
        """The book's exploration query: trending pages per window printed per micro-batch."""
        ev = events(parse(stream_lines(self.spark, self.cfg), self.fmt)).withWatermark(
            "event_time", self.cfg.watermark
        )
        counts = analytics.page_counts_per_window(
            ev, self.cfg.trending_window, self.cfg.trending_slide
        )
        writer = (
            counts.writeStream.queryName("trending_console")
            .format("console")
            .outputMode("update")
            .option("truncate", "false")
            .option("numRows", self.cfg.top)
            .option("checkpointLocation", self._checkpoint("trending_console"))
        )
        query = self._trigger(writer).start()
        self.queries.append(query)
        return query

    # -- lifecycle ---------------------------------------------------------------------

    def run(self) -> None:
        """Run to completion (available-now) or until :meth:`request_stop` / a failure."""
        if self.cfg.sink == "console":
            self.start_console()
            self._wait_all()
            return
        if self.cfg.trigger == "available-now":
            ingest = self.start_ingest()
            self._await(ingest)
            if self.stop_requested.is_set():
                return
            for query in self.start_windows():
                self._await(query)
        else:
            self.start_ingest()
            self.start_windows()
            self._wait_all()

    def _await(self, query: StreamingQuery) -> None:
        while not self.stop_requested.is_set():
            try:
                if query.awaitTermination(0.5):
                    break
            except StreamingQueryException:
                break  # reported (or ignored, for a stop) by _raise_failures
        self._raise_failures()

    def _wait_all(self) -> None:
        while not self.stop_requested.is_set() and any(q.isActive for q in self.queries):
            self.stop_requested.wait(0.5)
            self._raise_failures()
        self._raise_failures()

    def _raise_failures(self) -> None:
        for query in self.queries:
            error = query.exception()
            if error is not None and not is_stop_requested(error):
                self.stop()
                raise error

    def request_stop(self) -> None:
        """Ask :meth:`run` to return (safe from a signal handler)."""
        self.stop_requested.set()

    def stop(self, grace_s: float | None = None) -> None:
        """Stop every query between micro-batches, then flush the progress rows.

        The stop is atomic per micro-batch (:mod:`logstream.sinks.gate`): the gate is closed
        first, so a micro-batch that starts from now on writes nothing (a restart replays
        it); the micro-batches being delivered finish, outputs and store commit alike; then
        the queries are stopped. Afterwards every output and the store hold the same
        micro-batches.

        Parameters
        ----------
        grace_s : float, optional
            Seconds to wait for the running micro-batches; None (the default) waits as long
            as they take. A micro-batch still running after a finite grace is interrupted
            and replayed on restart (the checkpoint and the ledger make that safe), but its
            outputs and the store may then disagree until the restart.
        """
        self.stop_requested.set()
        self.gate.close(grace_s)
        for query in self.queries:
            if query.isActive:
                query.stop()
        # Spark's listener bus is asynchronous: let each query's last progress reach the
        # listener (and so the store) before it is removed
        expected = {(q.name, q.lastProgress["batchId"]) for q in self.queries if q.lastProgress}
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self.listener.flush()
            seen = {(r["query"], r["batch_id"]) for r in self.listener.history}
            if expected <= seen:
                break
            time.sleep(0.05)  # the listener bus delivers on its own thread
        self.spark.streams.removeListener(self.listener)
