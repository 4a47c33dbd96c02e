"""Build, start and stop the streaming pipeline: one streaming query, ``ingest``.

=============  ==========================================================  =====================
query          what it does                                                sink, guarantee
=============  ==========================================================  =====================
``ingest``     source → [deduplication] → parse → per micro-batch           ``foreachBatch``:
               (:class:`~logstream.pipeline.ingest.IngestStage`): late      batch-id publish,
               events, quarantine, ``events/``; one aggregation into the    store ledger, state
               panes of every view, merged with the open panes; final        snapshot per batch
               windows, sessions and alerts; the store's live views
=============  ==========================================================  =====================

Each event is parsed once and aggregated once; the state the analytics carry from one
micro-batch to the next (open panes, open sessions, detector state) is a small snapshot per
batch id (:mod:`logstream.pipeline.state`). ``queries`` chooses which outputs are computed
(default: all). The ingest query drops lines delivered twice first
(:mod:`logstream.sources.dedup`) when ``dedup`` is on: its only Spark state operator, in the
RocksDB state store.

With ``--trigger available-now`` the query processes what exists, then stops; the windows
that the watermark has not passed yet stay open in the last snapshot, and the serving store
already holds their values.
"""

from __future__ import annotations

import glob
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructField, StructType, TimestampType

from logstream import analytics, errors
from logstream.analytics.alerts import AlertConfig
from logstream.connect import is_connect
from logstream.errors import LogFormatError, LogstreamError
from logstream.filters import FILTERED_REASON, EventFilter
from logstream.monitoring import ProgressListener
from logstream.parsing import REASON_COLUMN, CompiledFormat, events, parse, resolve_format
from logstream.parsing.detect import written_offset
from logstream.parsing.sites import with_site_from_path
from logstream.pipeline.checkpoint import recover_missing_snapshot, restore_offsets
from logstream.pipeline.config import PipelineConfig, interval_seconds
from logstream.pipeline.identity import claim
from logstream.pipeline.ingest import (
    INGEST_QUERY,
    AnalyticsSettings,
    BotScorer,
    IngestTotals,
)
from logstream.pipeline.ingest.driver import warm_up
from logstream.pipeline.ingest.settings import DRIVER_ROWS, local_driver_rows, stream_panels
from logstream.pipeline.remote import ConnectIngest, ingest_stage, ledger_totals
from logstream.replay import open_log
from logstream.schema import EVENT_SCHEMA, QUARANTINE_SCHEMA
from logstream.serving import open_store
from logstream.session import SPARK_LOG_LEVEL
from logstream.sinks import ensure_schema
from logstream.sinks.gate import StopGate, is_stop_requested
from logstream.sinks.route import OutputPublisher, check_sinks, parse_sink
from logstream.sources import drop_duplicate_lines, stream_lines
from logstream.sources.kafka import BrokerWatch, data_loss_error, unavailable_error

__all__ = ["Pipeline", "detect_file_format", "detect_stream_format", "marked_filtered"]


def _ms(interval: str) -> int:
    return int(interval_seconds(interval) * 1000)


_RAISED = re.compile(r"^logstream\.[\w.]+\.(\w+): (.+)$", re.MULTILINE)
#: Seconds a stop waits, after the last micro-batch was delivered, for Spark to report its
#: progress before the queries are stopped.
PROGRESS_WAIT_S = 10.0
#: Seconds a stop for brokers gone past ``--kafka-retry`` waits for the running micro-batch.
KAFKA_STOP_GRACE_S = 5.0


def _logstream_error(error: BaseException) -> LogstreamError | None:
    """The :class:`~logstream.errors.LogstreamError` a ``foreachBatch`` function raised, as
    found in the query's exception (Spark carries the Python traceback as text)."""
    match = _RAISED.search(str(error))
    cls = getattr(errors, match.group(1), None) if match else None
    if match is None or not (isinstance(cls, type) and issubclass(cls, LogstreamError)):
        return None
    return cls(match.group(2))


log = logging.getLogger(__name__)


def marked_filtered(parsed: DataFrame, flt: EventFilter) -> DataFrame:
    """The parsed stream with the lines ``flt`` leaves out marked: their
    :data:`~logstream.parsing.REASON_COLUMN` is :data:`~logstream.filters.FILTERED_REASON`.

    The mark is made once, in the stream both paths of the micro-batch read, before
    ``foreachBatch``: each path counts the marked lines as ``filtered`` where it counts the
    quarantined ones, and writes them nowhere (:func:`~logstream.pipeline.ingest.watermark.
    is_quarantined`), so ``on-time + late + quarantined + filtered = lines read``. An event
    must pass the time range and the expressions; every line (an unparseable one too) must
    match each ``--grep``; an unparseable line that does is quarantined as before.

    Parameters
    ----------
    parsed : DataFrame
        :func:`logstream.parsing.parse`'s output (streaming or batch).
    flt : EventFilter
        The run's filter; when empty, ``parsed`` is returned as it is.

    Returns
    -------
    DataFrame
        The same columns; a projection (no filter: nothing for Spark to push into the parse).
    """
    if not flt.active:
        return parsed
    reason = F.col(REASON_COLUMN)
    left_out = ~flt.line_condition() | (reason.isNull() & ~flt.event_condition())
    return parsed.withColumn(
        REASON_COLUMN, F.when(left_out, F.lit(FILTERED_REASON)).otherwise(reason)
    )


def detect_stream_format(cfg: PipelineConfig) -> CompiledFormat:
    """Resolve ``cfg.log_format``; ``auto`` reads the first lines of the oldest input file.

    Raises
    ------
    LogFormatError
        When ``auto`` finds no file to look at, or no format fits.
    """
    if cfg.log_format != "auto":
        return resolve_format(cfg.log_format)
    if cfg.source == "rate" and cfg.rate_sample is None:  # generated lines are Combined
        return resolve_format("combined")
    first = first_input_file(cfg)
    if first is None:
        where = ", ".join(cfg.follow or ()) if cfg.source == "follow" else str(cfg.input_dir)
        raise LogFormatError(
            f"--format auto needs a file in {where!r} to look at, and there is "
            "none yet: pass --format common|combined|'<LogFormat>'"
        )
    return detect_file_format(first)


def first_input_file(cfg: PipelineConfig) -> Path | None:
    """The oldest input file of a file source (``--rate-sample`` for the rate source); None
    without one (yet), or for another source."""
    if cfg.source == "rate":
        return cfg.rate_sample
    if cfg.source == "follow":
        patterns = cfg.follow or ()
        found = {Path(f) for pattern in patterns for f in glob.glob(pattern, recursive=True)}
        candidates = [p for p in found if p.is_file()]
    elif cfg.source == "dir" and cfg.input_dir is not None:
        candidates = [
            p for p in cfg.input_dir.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
        ]
    else:
        return None
    files = sorted(candidates, key=lambda p: (p.stat().st_mtime, p.name))
    return files[0] if files else None


def log_offset(path: Path | None) -> str | None:
    """The UTC offset the first 100 lines of ``path`` are written in (``-04:00``;
    :func:`logstream.parsing.detect.written_offset`), None without a file or an offset: the
    dashboard shows times in it by default, as the batch report does."""
    if path is None:
        return None
    try:
        with open_log(path) as fh:
            lines = [fh.readline().decode("utf-8", "replace") for _ in range(100)]
    except OSError:
        return None
    return written_offset(lines)


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
    stop_requested : threading.Event, optional
        Set to stop the pipeline between micro-batches (:meth:`request_stop` sets it); a
        caller may pass its own, set before the pipeline exists (a signal during start-up).
    """

    spark: SparkSession
    cfg: PipelineConfig
    on_progress: Callable[[dict[str, Any]], None] | None = None
    queries: list[StreamingQuery] = field(default_factory=list)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    gate: StopGate = field(default_factory=StopGate)
    #: The queries whose failure :meth:`run` raised (:meth:`stop` does not log it again).
    raised: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.fmt = detect_stream_format(self.cfg)
        self.outputs = self.cfg.queries
        if "traffic_by_agent" in self.outputs and "user_agent" not in self.fmt.fields:
            # every event would be "unknown": a view that costs and says nothing
            log.info("format %s has no user agent: traffic_by_agent is not computed", self.fmt.name)
            self.outputs = tuple(q for q in self.outputs if q != "traffic_by_agent")
        # a site taken from the file's path fills the virtual hosts panel of any format
        fields = (*self.fmt.fields, *(("virtual_host",) if self.cfg.vhost_from_path else ()))
        self.panels = stream_panels(self.cfg.no_panel, fields)
        self.filter = self.cfg.event_filter()  # relative times from this start
        if not self.panels:
            self.outputs = tuple(q for q in self.outputs if q != "traffic_by_panel")
        sinks = tuple(parse_sink(url, self.cfg.state_dir / "sinks") for url in self.cfg.sinks)
        check_sinks(self.spark, sinks)  # a kafka:// sink without the connector fails here
        self.publisher = OutputPublisher(
            self.cfg.output_format, sinks, frozenset(self.cfg.sink_outputs)
        )
        self.store = open_store(self.cfg.store_url, retry_s=self.cfg.store_retry_seconds)
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
                "store_retention": self.cfg.store_retention,
                # the offset the log is written in: the dashboard's times by default
                "log_offset": log_offset(first_input_file(self.cfg)) or "",
                "queries": ",".join(self.outputs) or "none",
                # where the dashboard reads the events a filter needs (logstream.filters)
                "output_dir": str(self.cfg.output_dir),
                "output_format": self.cfg.output_format,
            }
        )
        cfg = self.cfg
        settings = AnalyticsSettings(
            watermark_ms=_ms(cfg.watermark),
            traffic_ms=_ms(cfg.traffic_window),
            trending_ms=_ms(cfg.trending_window),
            trending_slide_ms=_ms(cfg.trending_slide),
            clients_ms=_ms(cfg.clients_window),
            session_gap_ms=_ms(cfg.session_gap),
            session_stats_window=cfg.session_stats_window,
            retention_ms=_ms(cfg.store_retention),
            top=cfg.top,
            alerts=AlertConfig(
                k=cfg.alert_sigma, warmup_minutes=int(interval_seconds(cfg.alert_warmup) // 60)
            ),
            outputs=self.outputs,
            panels=self.panels,
            static_extensions=cfg.static_ext,
            site_host=cfg.site_host,
            protocol_required="protocol" in self.fmt.fields,
            driver_rows=self._driver_rows(),
        )
        self.settings = settings
        self._ledger_start = ledger_totals(self.store) if is_connect(self.spark) else None
        self.ingest = ingest_stage(
            self.spark, cfg, self.store, settings, self.publisher, self._bot_model()
        )
        if settings.driver_rows > 0:  # the live path's libraries, while the query starts
            threading.Thread(target=warm_up, args=(settings,), daemon=True).start()
        self.listener = ProgressListener(self.store, self.on_progress)
        self.spark.streams.addListener(self.listener)

    @property
    def totals(self) -> IngestTotals:
        """Running totals of the ingest stage in this process; through Spark Connect, whose
        micro-batches are delivered in the server's process, those of the store's ledger since
        this pipeline started (:func:`logstream.pipeline.remote.ledger_totals`)."""
        if self._ledger_start is None:
            return self.ingest.totals
        return ledger_totals(self.store, self._ledger_start)

    # -- building blocks -------------------------------------------------------------------

    def _bot_model(self) -> BotScorer | None:
        """The bot model of ``bot_scores`` (checked when the options were read)."""
        if "bot_scores" not in self.outputs or self.cfg.bot_model is None:
            return None
        from logstream.ml.bots import KIND
        from logstream.ml.model import load_model

        return BotScorer(*load_model(self.cfg.bot_model, KIND))

    def _driver_rows(self) -> int:
        """The micro-batches delivered on the driver: up to :func:`local_driver_rows` lines
        where this process is the whole of Spark (a local master) and outputs are computed,
        so that a backfill's micro-batch takes the driver path; else the live bound (an
        ingest-only micro-batch past it is written by one Spark job, ``one_pass``)."""
        if self.cfg.driver_rows is not None:
            return self.cfg.driver_rows
        if not self.outputs or is_connect(self.spark):
            return DRIVER_ROWS
        local = self.spark.sparkContext.master.startswith("local")
        return local_driver_rows() if local else DRIVER_ROWS

    def _trigger(self, writer: Any) -> Any:
        if self.cfg.trigger == "available-now":
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=self.cfg.trigger)

    def _checkpoint_path(self, name: str) -> Path:
        return self.cfg.state_dir / name

    def _checkpoint(self, name: str) -> str:
        return str(self._checkpoint_path(name))

    def start_ingest(self) -> StreamingQuery:
        """Start the ingest query (source → parse → :class:`IngestStage`)."""
        late_schema = StructType([*EVENT_SCHEMA.fields, StructField("watermark", TimestampType())])
        for sub, schema in (
            ("events", EVENT_SCHEMA),
            ("late_events", late_schema),
            ("quarantine", QUARANTINE_SCHEMA),
        ):
            ensure_schema(self.spark, self.cfg.output_dir / sub, schema, self.cfg.output_format)
        checkpoint = self._checkpoint_path(INGEST_QUERY)
        state = self.ingest.state
        for repaired in (
            restore_offsets(checkpoint, state.recorded_offsets()),
            recover_missing_snapshot(checkpoint, state.newest_id(), state.snapshot_dir),
        ):
            if repaired is not None:
                log.warning("%s", repaired)
        lines = stream_lines(self.spark, self.cfg)
        if self.cfg.dedup:
            lines = drop_duplicate_lines(lines, self.cfg.dedup_window)
        parsed = parse(lines, self.fmt, self.cfg.max_future_seconds, self.cfg.max_line_bytes)
        parsed = marked_filtered(with_site_from_path(parsed, self.cfg.vhost_from_path), self.filter)
        if is_connect(self.spark):  # the function runs in a Python process of the server
            function: Any = ConnectIngest(self.cfg, self.settings, self.publisher)
        else:
            function = self.gate.wrap(INGEST_QUERY, self.ingest)
        writer = (
            parsed.writeStream.queryName(INGEST_QUERY)
            .foreachBatch(function)
            .option("checkpointLocation", self._checkpoint(INGEST_QUERY))
        )
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
        """Run to completion (available-now) or until :meth:`request_stop` / a failure.

        A stop requested before (``stop_requested`` may be an event the caller set while
        Spark was starting: ``logstream run``'s signal handler) starts no query.
        """
        if self.stop_requested.is_set():
            return
        if self.cfg.sink == "console":
            self.start_console()
        else:
            self.start_ingest()
        if self.cfg.source != "kafka":
            self._wait_all()
            return
        assert self.cfg.kafka_bootstrap is not None
        # brokers gone for longer than --kafka-retry stop the run, with one line
        watch = BrokerWatch(
            self.cfg.kafka_bootstrap,
            interval_seconds(self.cfg.kafka_retry),
            lambda _: self.request_stop(),
        )
        with watch:
            self._wait_all()
        if watch.failure is not None:
            # a micro-batch waiting for the brokers is not waited for: the next start replays it
            self.stop(grace_s=KAFKA_STOP_GRACE_S)
            raise watch.failure

    def _await(self, query: StreamingQuery) -> None:
        while not self.stop_requested.is_set():
            try:
                if query.awaitTermination(0.5):
                    break
            except StreamingQueryException:
                break  # reported (or ignored, for a stop) by _raise_failures
        self._raise_failures()

    def _wait_all(self) -> None:
        for query in self.queries:
            self._await(query)

    def _raise_failures(self) -> None:
        for query in self.queries:
            error = query.exception()
            if error is not None and not is_stop_requested(error):
                self.raised.add(query.name)  # reported by the caller, not again by stop()
                self.stop()
                raised = (
                    _logstream_error(error)
                    or data_loss_error(self.cfg, error)
                    or unavailable_error(self.cfg, error)
                )
                if raised is not None:
                    raise raised from error  # its cause: Spark's text, for the run's log
                raise error

    def request_stop(self) -> None:
        """Ask :meth:`run` to return (safe from a signal handler)."""
        self.stop_requested.set()

    def stop_for_duration(self, duration: str) -> str:
        """``--duration``'s stop: from now on no micro-batch starts (the gate closes, Spark's
        log is off as in :meth:`stop`), :meth:`run` returns once the micro-batches in
        progress end, and :meth:`stop` finishes the stop. Not for a signal handler (it takes
        the gate's lock).

        Returns
        -------
        str
            The line to print: the duration reached, and how many micro-batches in progress
            finish first (their progress lines follow it).
        """
        self.stop_requested.set()
        _log_level(self.spark)("OFF")  # a refused micro-batch is a stop, not an error
        self.gate.close(timeout=0)
        running = self.gate.running
        line = f"--duration {duration} reached: stopping the queries; no micro-batch starts now"
        if running == 1:
            line += " (the micro-batch in progress finishes first)"
        elif running:
            line += f" (the {running} micro-batches in progress finish first)"
        return line

    def _await_triggers(self, timeout_s: float) -> None:
        """Wait until no query is inside a trigger (with the gate closed a new one writes
        nothing, so this ends), at most ``timeout_s`` seconds."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while time.monotonic() < deadline:
            if not any(q.isActive and q.status.get("isTriggerActive") for q in self.queries):
                return
            time.sleep(0.02)

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
        # A micro-batch the closed gate refuses ends its query with StopRequested, which Spark
        # logs with a stack trace: a stop is not an error, so Spark's log is off meanwhile (a
        # real failure in this window is still reported below, in one line); a Connect
        # server's log is its own
        log_level = _log_level(self.spark)
        log_level("OFF")
        try:
            self.gate.close(grace_s)
            # Spark reports a micro-batch's progress after its function returns (commit log,
            # then the progress event, then the trigger ends): a query stopped before that
            # loses the last micro-batch's progress (its terminal line, its progress row)
            self._await_triggers(PROGRESS_WAIT_S if grace_s is None else grace_s)
            for query in self.queries:
                if query.isActive:
                    query.stop()
        finally:
            log_level(SPARK_LOG_LEVEL)
        for query in self.queries:
            error = query.exception()
            if error is not None and not is_stop_requested(error) and query.name not in self.raised:
                first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
                log.error("query %s failed while stopping: %s", query.name, first[:500])
        # Spark's listener bus is asynchronous: let each query's last progress reach the
        # listener (and so the store) before it is removed. Only a micro-batch that ran
        # (``addBatch`` in its durations) is posted to listeners; a trigger that found no data
        # updates ``lastProgress`` without an event, and waiting for it cost every stop after
        # one the deadline's 5 s
        expected = {
            (q.name, ran["batchId"])
            for q in self.queries
            if (ran := _last_ran(q.recentProgress)) is not None
        }
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self.listener.flush()
            seen = {(r["query"], r["batch_id"]) for r in self.listener.history}
            if expected <= seen:
                break
            time.sleep(0.05)  # the listener bus delivers on its own thread
        self.spark.streams.removeListener(self.listener)


def _log_level(spark: SparkSession) -> Callable[[str], None]:
    """Set the log level of Spark in this process (nothing through Spark Connect)."""
    if is_connect(spark):
        return lambda _level: None
    return spark.sparkContext.setLogLevel


def _last_ran(progress: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The progress of the last micro-batch that ran in ``progress`` (a query's
    ``recentProgress``, oldest first), or None: a trigger without data has no ``addBatch``."""
    for row in reversed(progress):
        if "addBatch" in (row.get("durationMs") or {}):
            return row
    return None
