"""The micro-batch step: parse once, decide lateness, aggregate once, deliver exactly once.

The pipeline is one streaming query, ``ingest`` (source → [deduplication] → parse →
``foreachBatch``). Its ``foreachBatch`` function, :class:`IngestStage`, does everything else
with batch DataFrames, for micro-batch ``N``:

1. **Skip a delivered batch.** If snapshot ``N`` exists (:mod:`logstream.pipeline.state`), the
   batch was delivered before a crash: nothing to do.
2. **Reference tables.** When a reference-data output is on, the versions of the reference
   tables the batch uses are chosen and recorded before anything is written
   (:meth:`logstream.reference.ReferenceTables.for_batch`): a replay enriches the same way.
3. **Watermark.** The watermark of the batch is the newest event time of every earlier
   micro-batch minus the delay (``--watermark``), read from snapshot ``N − 1``: the textbook
   rule (Spark guide, "Handling Late Data and Watermarking"; book Ch. 12), deterministic, so
   a replay recomputes the same value.
4. **Split** the parsed rows: an event at or before the watermark is a *late event*, the other
   events are *on time*, an unparseable line is *quarantined*.
5. **Aggregate once.** One aggregation folds the batch's on-time events into the open panes
   of snapshot ``N − 1``, every view at once (:func:`~logstream.analytics.panes.fold_panes`:
   sums with one shuffle, and a small HLL aggregation for the visitors). A micro-batch of at
   most :attr:`AnalyticsSettings.single_partition_rows` lines is analysed in one partition,
   with no shuffle at all (:func:`~logstream.analytics.panes.gathered`).
6. **Serve the windows.** When the batch has on-time events and the outputs have pane views,
   the panes and windows it changed, with their merged values, the pruning of windows past
   the retention, the reference versions and the newest event time go to the serving store
   at once, in a transaction of their own
   (:meth:`logstream.serving.ServingStore.commit_ingest_views`): each of those writes is
   idempotent by itself, so a replay writes the same again, and the dashboard shows a line's
   window before the rest of its micro-batch is done. (Otherwise step 8 writes them.)
7. **Publish** on-time events to ``events/``, late events (with the watermark they missed) to
   ``late_events/`` and quarantined lines (and corrupt input files) to ``quarantine/``.
   Panes the new watermark (newest event time after this batch minus the delay) has passed
   are final: they are published, each once — ``traffic_per_minute/``, ``unique_visitors/``,
   ``trending_pages/`` (5-minute windows summed from 1-minute panes), ``top_clients/``,
   ``traffic_by_section/``, ``traffic_by_agent/``, ``traffic_by_network/`` (panes keyed by
   the columns the reference tables add: broadcast joins before the aggregation) — and
   the final per-minute series feed the anomaly detector (``alerts/``); with a bot model the
   final client windows are scored (``bot_scores/``, :mod:`logstream.ml.bots`). Visitor
   sessions merge the batch's per-client, per-minute summaries with the open sessions
   (``sessions/``). Every window ends on a whole minute, so only a micro-batch whose
   watermark passes one (:meth:`AnalyticsSettings.closes_windows`) can make a window final:
   the others skip the final windows and the detector, and keep their session summaries
   unmerged until the next one closes sessions — following a log in real time, most
   micro-batches. Lateness was decided in step 4, before any aggregation: nothing is
   dropped silently. These writes are independent of each other and run at once
   (:data:`WRITERS` threads); step 8 waits for all of them.
8. **Commit.** The batch's counters, examples, closed sessions and their statistics, alerts
   and bot scores (and its windows, unless step 6 wrote them) go to the serving store in one
   transaction with the batch id in its ledger
   (:meth:`logstream.serving.ServingStore.commit_ingest_batch`).
9. **Snapshot.** The open panes, open sessions and detector state are written as snapshot
   ``N``, the batch's last write.

Counts: ``on-time + late + quarantined = lines read`` for every micro-batch.

Every output is written once per batch id (:func:`logstream.sinks.publish_batch`), the store
once per ledger entry, the state once per snapshot: a replay after a crash at any point
delivers the batch exactly once (``tests/pipeline/test_recovery.py``, ``bench/drill_kill.py``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.ml import PipelineModel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.util import inheritable_thread_target

from logstream import analytics
from logstream.analytics.alerts import (
    ALERT_STATE_SCHEMA,
    SITE_SERIES,
    AlertConfig,
    scored_minutes,
    split_scored,
)
from logstream.analytics.bounds import above, at_most
from logstream.analytics.panes import (
    DIMENSION_VIEWS,
    PANE_SCHEMA,
    PaneSpec,
    dimension_windows,
    fold_panes,
    gathered,
    sliding_windows,
    traffic_windows,
)
from logstream.analytics.sessions import (
    SESSION_PARTS_SCHEMA,
    merged_sessions,
    session_parts,
    split_sessions,
)
from logstream.ml.model import ModelInfo
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.config import EVENT_QUERIES, REFERENCE_QUERIES
from logstream.pipeline.state import SnapshotMeta, StateSnapshots
from logstream.reference import Enricher, ReferenceTables, Table
from logstream.schema import EVENT_COLUMNS, QUARANTINE_SCHEMA
from logstream.serving import IngestBatchWrite, ServingStore
from logstream.serving.store import ALERTS_KEPT, BOTS_PER_BATCH, SESSIONS_KEPT
from logstream.sinks import run_stateful_plan
from logstream.sinks.route import OutputPublisher
from logstream.sources.integrity import (
    CORRUPT_FILE_REASON,
    check_files,
    files_of_batch,
    raise_if_corrupt,
    spark_file_uri,
)

__all__ = [
    "FAULT_ENV",
    "INGEST_QUERY",
    "OUTPUTS",
    "SINGLE_PARTITION_ROWS",
    "STATE_PARTS",
    "WRITERS",
    "AnalyticsSettings",
    "BotScorer",
    "IngestStage",
    "IngestTotals",
    "fault_hook",
    "iso",
]

#: The parts of the analytics state carried between micro-batches, and their schemas.
STATE_PARTS = {
    "panes": PANE_SCHEMA,
    "sessions": SESSION_PARTS_SCHEMA,
    "series": ALERT_STATE_SCHEMA,
}

#: Name of the streaming query (also its checkpoint folder and its key in the store's ledger).
INGEST_QUERY = "ingest"

#: The analytics outputs, in the order they are written; ``--queries`` chooses among them.
OUTPUTS = EVENT_QUERIES
#: The outputs of the dimension views (traffic per reference-data key), and their views.
DIMENSION_OUTPUTS = {
    "traffic_by_section": "sections",
    "traffic_by_agent": "agents",
    "traffic_by_network": "networks",
}
#: The event columns the analytics read (a narrower row before the reference joins).
_ANALYTICS_COLUMNS = ("event_time", "client_host", "url_path", "status", "bytes_sent", "user_agent")

#: Late and quarantined rows kept as examples per micro-batch.
_EXAMPLES_PER_BATCH = 5

_ADAPTIVE = "spark.sql.adaptive.enabled"

#: Default of :attr:`AnalyticsSettings.single_partition_rows`.
SINGLE_PARTITION_ROWS = 50_000


def _since(prev: SnapshotMeta, outputs: tuple[str, ...]) -> dict[str, int]:
    """``since_ms`` of the new snapshot: the outputs turned on now start after the newest event
    so far (windows starting later hold every event); the others keep theirs."""
    since = {o: t for o, t in prev.since_ms.items() if o in outputs}
    if prev.outputs is not None and prev.max_event_ms is not None:
        for output in outputs:
            if output not in prev.outputs:
                since[output] = prev.max_event_ms
    return since


def _iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(col: Column | str) -> Column:
    """Format a timestamp column as ISO 8601 UTC text (``1995-07-09T04:00:00Z``)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'")


def _iso_ms_col(col: str) -> Column:
    return iso(F.timestamp_millis(col))


#: Writes of one micro-batch run at once (its outputs, sessions, alerts: Spark jobs that read
#: the persisted panes and events, and write apart). A micro-batch's Spark jobs are small (a
#: task or two), and much of each is the driver's planning, code generation and output commit:
#: run together, one job's driver work overlaps another's tasks (the make-run-sized micro-batch
#: of 400 lines passing minutes, ``bench/profile_microbatch.py --chunk-lines 400 --chunks 20``,
#: 2 cores, a same-run pair: addBatch median 3.27 s → 3.02 s; ``profile-makerun-*-s18.json``).
WRITERS = 3

_pools: dict[int, ThreadPoolExecutor] = {}  # by size, kept for the process
_pools_lock = threading.Lock()


def _run_concurrently(tasks: list[Callable[[], None]], workers: int, spark: Any) -> None:
    """Run ``tasks`` at once on at most ``workers`` threads of one pool (the process's), wait
    for every one of them, then raise the first failure, if any.

    Each task runs with the local properties of the calling thread's JVM thread (PySpark's
    :func:`~pyspark.util.inheritable_thread_target`): the streaming query's job group among
    them, so that stopping the query cancels the jobs of every task, as it does its own.
    """
    if len(tasks) <= 1 or workers <= 1:
        for task in tasks:
            task()
        return
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, "logstream-writer")
    futures = [pool.submit(inheritable_thread_target(spark)(task)) for task in tasks]
    wait_all(futures)  # every task ends before the batch's cached frames are released
    for future in futures:
        future.result()


@dataclass(frozen=True)
class AnalyticsSettings:
    """The event-time settings of the micro-batch step, normalised to milliseconds.

    Attributes
    ----------
    watermark_ms : int
        Delay after which an event is late and a window final.
    traffic_ms, trending_ms, trending_slide_ms, clients_ms, session_gap_ms : int
        Window lengths: traffic and visitors, trending pages (and its slide, the page pane),
        top clients, the session inactivity gap.
    session_stats_window : str
        Spark interval of the session statistics' tumbling window.
    retention_ms : int
        Trending and client windows ending this long before the newest event leave the store.
    top : int
        Clients kept per window and measure in ``top_clients/``.
    alerts : AlertConfig
    outputs : tuple of str
        The outputs computed (from :data:`OUTPUTS`).
    single_partition_rows : int
        A micro-batch of at most this many lines (on time, late and quarantined) is analysed
        in one partition, with no shuffle (:func:`~logstream.analytics.panes.gathered`): the
        time of a small micro-batch is the fixed cost of its stages, not work, and every
        shuffle is a stage (with adaptive execution a Spark job of its own, re-planned).
        Larger ones (a backfill) are spread over every core. 0: never.
    """

    watermark_ms: int = 600_000
    traffic_ms: int = 60_000
    trending_ms: int = 300_000
    trending_slide_ms: int = 60_000
    clients_ms: int = 300_000
    session_gap_ms: int = 1_800_000
    session_stats_window: str = "3600 seconds"
    retention_ms: int = 2 * 3600 * 1000
    top: int = 10
    alerts: AlertConfig = field(default_factory=AlertConfig)
    outputs: tuple[str, ...] = tuple(q for q in OUTPUTS if REFERENCE_QUERIES.get(q) is None)
    single_partition_rows: int = SINGLE_PARTITION_ROWS

    def watermark_at(self, max_event_ms: int | None) -> int | None:
        """The watermark (epoch ms) after events up to ``max_event_ms``: the newest event time
        minus the delay (Spark guide, "Handling Late Data and Watermarking"); None before any
        event.

        Examples
        --------
        >>> AnalyticsSettings(watermark_ms=600_000).watermark_at(3_600_000)
        3000000
        >>> AnalyticsSettings().watermark_at(None) is None
        True
        """
        return None if max_event_ms is None else max_event_ms - self.watermark_ms

    def boundary_ms(self) -> int:
        """The step (ms) of every event-time boundary a watermark can pass: each window and
        pane ends at a multiple of its slide (panes are aligned to the epoch,
        :func:`~logstream.analytics.panes.pane_start`), and each detector deadline at a whole
        minute (:mod:`logstream.analytics.alerts`).

        Examples
        --------
        >>> AnalyticsSettings().boundary_ms()
        60000
        >>> AnalyticsSettings(traffic_ms=30_000).boundary_ms()
        30000
        """
        return math.gcd(
            self.traffic_ms, self.trending_ms, self.trending_slide_ms, self.clients_ms, 60_000
        )

    def on_boundary(self, epoch_ms: int) -> int:
        """``epoch_ms`` down to a boundary (:meth:`boundary_ms`). A window's end ``e`` is on
        one, so ``e > t`` exactly when ``e > on_boundary(t)``: the live views' horizon is
        rounded with it, so their conditions, built once and kept while the horizon holds
        (:meth:`IngestStage._live_columns`), change once a minute. (The comparisons themselves
        keep their bounds out of the generated code: :mod:`logstream.analytics.bounds`.)

        Examples
        --------
        >>> AnalyticsSettings().on_boundary(179_999)
        120000
        """
        return epoch_ms - epoch_ms % self.boundary_ms()

    def closes_windows(self, final_until_ms: int | None, watermark_ms: int) -> bool:
        """Whether a watermark moving from ``final_until_ms`` (None: before any) to
        ``watermark_ms`` passes a boundary (:meth:`boundary_ms`): only then can a window become
        final or a detector deadline pass. Following a log in real time, most micro-batches
        pass none, and skip publishing final windows and scoring alerts.

        Examples
        --------
        >>> s = AnalyticsSettings()
        >>> s.closes_windows(120_000, 179_999), s.closes_windows(120_000, 180_000)
        (False, True)
        >>> s.closes_windows(None, 5)
        True
        """
        if final_until_ms is None:
            return True
        step = self.boundary_ms()
        return watermark_ms // step > final_until_ms // step

    def pane_spec(self) -> PaneSpec:
        """The pane views the chosen outputs need."""
        wanted = set(self.outputs)
        views = []
        if wanted & {"traffic_per_minute", "alerts"}:
            views.append("traffic")
        if wanted & {"trending_pages", "alerts"}:
            views.append("pages")
        if "unique_visitors" in wanted:
            views.append("visitors")
        if wanted & {"top_clients", "bot_scores"}:
            views.append("clients")
        if "bot_scores" in wanted:
            views.append("client_pages")
        views += [view for output, view in DIMENSION_OUTPUTS.items() if output in wanted]
        return PaneSpec(
            traffic_ms=self.traffic_ms,
            page_pane_ms=self.trending_slide_ms,
            clients_ms=self.clients_ms,
            views=tuple(views),
        )


@dataclass(frozen=True)
class BotScorer:
    """A loaded bot model (:func:`logstream.ml.model.load_model`) and its metadata."""

    model: PipelineModel
    info: ModelInfo


@dataclass
class IngestTotals:
    """Running totals of this process's ingest stage (for the progress line)."""

    batches: int = 0
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    watermark_ms: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class _Folded:
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


class IngestStage:
    """The ``foreachBatch`` function of the ``ingest`` query (see the module docstring).

    Parameters
    ----------
    output_dir : Path
        Root of the Parquet outputs.
    store : ServingStore
        The serving store (ledger, live views).
    state : StateSnapshots
        The per-micro-batch snapshots of the analytics state.
    settings : AnalyticsSettings
    checkpoint : Path, optional
        The query's checkpoint when the source is a directory: the files of each micro-batch
        are read from its source log and checked for corruption
        (:mod:`logstream.sources.integrity`).
    strict : bool
        A corrupt input file fails the micro-batch (:class:`~logstream.errors.CorruptInputError`)
        instead of being quarantined.
    stateful_input : bool
        The parsed stream has a stateful operator (deduplication): a skipped replay still runs
        its plan so that the state store commits the batch.
    reference : ReferenceTables, optional
        The reference tables of the dimension views (default: the built-in agent classes and
        first-segment sections); each micro-batch records the versions it uses, so a replay
        enriches the same way.
    bot_model : BotScorer, optional
        The model of the ``bot_scores`` output: every client window that becomes final is
        scored with it (:func:`logstream.ml.bots.score_features`).
    publisher : OutputPublisher, optional
        Publishes every output (default: Parquet, no extra sink); with ``--output-format`` and
        ``--sink`` it writes JSON or CSV and sends outputs on after their publish
        (:mod:`logstream.sinks.route`).

    Notes
    -----
    Input of ``__call__``: the output of :func:`logstream.parsing.parse` for one micro-batch.
    """

    def __init__(
        self,
        output_dir: Path,
        store: ServingStore,
        state: StateSnapshots,
        settings: AnalyticsSettings,
        checkpoint: Path | None = None,
        strict: bool = False,
        stateful_input: bool = False,
        reference: ReferenceTables | None = None,
        bot_model: BotScorer | None = None,
        publisher: OutputPublisher | None = None,
    ) -> None:
        self.output_dir = output_dir
        self.publish = publisher if publisher is not None else OutputPublisher()
        self.store = store
        self.state = state
        self.settings = settings
        self.checkpoint = checkpoint
        self.strict = strict
        self.stateful_input = stateful_input
        self.reference = reference if reference is not None else ReferenceTables()
        self.bot_model = bot_model
        self._enricher: Enricher | None = None
        self._tables: dict[str, Table] = {}  # the reference tables of the running batch
        self.totals = IngestTotals()
        #: Seconds spent in each step of the micro-batches of this process (the profile:
        #: ``bench/profile_pipeline.py``); the steps of step 7 run at once, so their
        #: seconds overlap.
        self.timings: dict[str, float] = {}
        #: Called with a step name and the batch id between the writes of a micro-batch
        #: (``committed_views``, ``published_events``, ``published_late_events``,
        #: ``published_quarantine``,
        #: ``published_windows``, ``before_commit``, ``before_snapshot``) and after it
        #: (``snapshot_written``): tests stop or kill the pipeline there, benchmarks read the
        #: state's size.
        self.step_hook: Callable[[str, int], None] | None = None
        #: The SparkContext of the running micro-batch (for job descriptions).
        self.store_context: Any = None
        #: ``since_ms`` of the micro-batch being delivered (see :class:`SnapshotMeta`).
        self.since: dict[str, int] = {}
        #: The micro-batch being delivered is analysed in one partition
        #: (:attr:`AnalyticsSettings.single_partition_rows`).
        self.single_partition = False
        self._live_key: tuple[object, ...] | None = None
        # the session's own spark.sql.adaptive.enabled (see _adapt)
        self._adaptive_default: str | None = None
        self._spark: Any = None  # the session of the micro-batch being delivered
        self._live_cache: tuple[Any, ...] = ()
        self._timings_lock = threading.Lock()
        #: Writes of a micro-batch run at once (see :func:`_run_concurrently`); 1: in turn.
        self.writers = WRITERS

    def _complete(self, output: str, start: Column) -> Column:
        """Rows of ``output`` whose window (starting at ``start``, epoch ms) holds every event:
        all of them unless the output was turned on after the first micro-batch."""
        since = self.since.get(output)
        return F.lit(True) if since is None else start > F.lit(since)

    def _adapt(self) -> None:
        """Adaptive query execution off for a micro-batch in one partition, as the session
        had it otherwise. With one partition it has no partitions to coalesce or split, and
        it would make each stage a Spark job of its own, planned again (a warm make-run-sized
        micro-batch, ``bench/profile_microbatch.py --chunk-lines 400 --chunks 25``, 2 cores:
        21.7 → 13.8 jobs, addBatch median 2.39–2.52 s → 2.21 s). A large micro-batch keeps
        it: it coalesces the partitions of large shuffles. It is set in the micro-batch's
        session, the streaming query's own (``foreachBatch`` hands a clone of the one that
        started it), so the setting stays within the query."""
        conf = self._spark.conf
        if self._adaptive_default is None:
            self._adaptive_default = conf.get(_ADAPTIVE, "true")
        conf.set(_ADAPTIVE, "false" if self.single_partition else self._adaptive_default)

    @property
    def _inline_bounds(self) -> bool:
        """A large micro-batch writes its bounds into the generated code: it compiles once and
        filters many rows (:func:`logstream.analytics.bounds.at_most`)."""
        return not self.single_partition

    def _state(self, prev: SnapshotMeta, part: str) -> DataFrame:
        """Part ``part`` of snapshot ``prev``, in one partition for a small micro-batch."""
        return gathered(self.state.read(prev, part, self._spark), self.single_partition)

    def _step(self, name: str, batch_id: int) -> None:
        if self.step_hook is not None:
            self.step_hook(name, batch_id)

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        """Time a step, and name its Spark jobs after it (the Spark UI's job descriptions)."""
        context = self.store_context
        if context is not None:
            context.setJobDescription(f"logstream ingest: {name}")
        start = time.perf_counter()
        try:
            yield
        finally:
            with self._timings_lock:
                self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def watermark_for_next_batch(self) -> int | None:
        """The watermark (epoch ms) the next micro-batch is judged by; None before any event."""
        meta = self.state.latest_before(1 << 62)
        return self.settings.watermark_at(meta.max_event_ms)

    # -- the micro-batch --------------------------------------------------------------------

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """Deliver micro-batch ``batch_id`` exactly once (see the module docstring)."""
        if self.state.done(batch_id):
            if self.stateful_input:
                run_stateful_plan(parsed)  # the deduplication state still commits this batch
            return
        self._spark = parsed.sparkSession  # the query's own session (see _adapt)
        self.store_context = self._spark.sparkContext
        corrupt = self._corrupt_files(batch_id)
        if corrupt and self.strict:
            raise_if_corrupt(corrupt)  # before anything is written
        prev = self.state.latest_before(batch_id)
        if any(v in DIMENSION_VIEWS for v in self.settings.pane_spec().views):
            # chosen (and recorded) before anything is written: a replay uses the same
            self._tables = self.reference.for_batch(batch_id)
        # keep the raw text only where it is needed (quarantine): a much smaller cache
        parsed = parsed.withColumn(
            "raw_line", F.when(F.col(REASON_COLUMN).isNotNull(), F.col("raw_line"))
        ).persist(StorageLevel.MEMORY_AND_DISK)
        cached: list[DataFrame] = [parsed]
        try:
            write, meta, state_parts = self._deliver(parsed, batch_id, prev, corrupt, cached)
            if write is None:
                return  # a no-data micro-batch: nothing to record, nothing to replay
            self._step("before_commit", batch_id)
            with self._timed("store"):
                self.store.commit_ingest_batch(INGEST_QUERY, write)
            self._step("before_snapshot", batch_id)
            with self._timed("snapshot"):
                self.state.write(meta, state_parts)
            self.store.set_state({"analytics_state_rows": str(self.state.last_rows)})
            self._step("snapshot_written", batch_id)
        finally:
            for frame in cached:
                frame.unpersist()
        with self.totals.lock:
            self.totals.batches += 1
            self.totals.events += write.events
            self.totals.late_events += write.late_events
            self.totals.quarantined += write.quarantined
            if meta.max_event_ms is not None:
                self.totals.watermark_ms = self.settings.watermark_at(meta.max_event_ms)

    def _corrupt_files(self, batch_id: int) -> dict[str, str]:
        if self.checkpoint is None:
            return {}
        files = files_of_batch(self.checkpoint, batch_id)
        return check_files(files) if files else {}

    def _deliver(
        self,
        parsed: DataFrame,
        batch_id: int,
        prev: SnapshotMeta,
        corrupt: dict[str, str],
        cached: list[DataFrame],
    ) -> tuple[IngestBatchWrite | None, SnapshotMeta, dict[str, DataFrame | None]]:
        s = self.settings
        watermark_ms = s.watermark_at(prev.max_event_ms)
        is_event = F.col(REASON_COLUMN).isNull()
        if watermark_ms is None:
            is_late = F.lit(False)
            watermark = F.lit(None).cast("timestamp")
        else:
            watermark = F.timestamp_millis(F.lit(watermark_ms))
            is_late = at_most(F.unix_micros("event_time"), watermark_ms * 1000)
        with self._timed("parse"):  # materialises the cached parse
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
            return None, prev, {}
        lines = write.events + write.late_events + write.quarantined
        self.single_partition = lines <= s.single_partition_rows
        self._adapt()
        newest = max(prev.max_event_ms or 0, write.max_event_time_ms or 0) or None
        next_watermark = s.watermark_at(newest)
        since = _since(prev, s.outputs)
        meta = SnapshotMeta(batch_id, newest, prev.final_until_ms, list(s.outputs), since)

        on_time = gathered(
            parsed.where(is_event & ~is_late).select(*EVENT_COLUMNS), self.single_partition
        )
        self.since = since
        folded = self._fold(on_time, write, prev, next_watermark, cached)
        if write.events and folded is not None:  # its windows, to the store before the rest
            with self._timed("store"):
                self.store.commit_ingest_views(INGEST_QUERY, write)
            self._step("committed_views", batch_id)

        def publish_events() -> None:
            with self._timed("events"):
                if write.events:
                    self.publish(on_time, self.output_dir / "events", batch_id, files=None)
                    self._step("published_events", batch_id)
                if write.late_events:
                    self._publish_late(parsed.where(is_event & is_late), watermark, write)
                if write.quarantined or corrupt:
                    self._publish_quarantine(parsed.where(~is_event), corrupt, write)

        # the writes of the batch are independent of each other: run at once, the driver's
        # planning and commits of one overlap the tasks of another
        tasks: list[Callable[[], None]] = [publish_events]
        state_parts = self._analytics(folded, on_time, write, prev, next_watermark, cached, tasks)
        _run_concurrently(tasks, self.writers, parsed.sparkSession)
        if next_watermark is not None:
            final_until = max(prev.final_until_ms or 0, next_watermark)
            meta = SnapshotMeta(batch_id, newest, final_until, list(s.outputs), since)
        self._step("published_windows", batch_id)
        return write, meta, state_parts

    def _publish_late(self, late: DataFrame, watermark: Column, write: IngestBatchWrite) -> None:
        batch_id = write.batch_id
        late = late.select(*EVENT_COLUMNS, watermark.alias("watermark"))
        self.publish(late, self.output_dir / "late_events", batch_id)
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

    def _publish_quarantine(
        self, bad_rows: DataFrame, corrupt: dict[str, str], write: IngestBatchWrite
    ) -> None:
        batch_id = write.batch_id
        bad = bad_rows.select(
            "raw_line",
            "source_file",
            F.col(REASON_COLUMN).alias("reason"),
            F.lit(None).cast("string").alias("detail"),
        )
        rows = [
            (None, spark_file_uri(f), CORRUPT_FILE_REASON, e) for f, e in sorted(corrupt.items())
        ]
        if rows:
            bad = bad.unionByName(bad_rows.sparkSession.createDataFrame(rows, QUARANTINE_SCHEMA))
        self.publish(bad, self.output_dir / "quarantine", batch_id)
        self._step("published_quarantine", batch_id)
        examples = rows[:_EXAMPLES_PER_BATCH]
        if write.quarantined:
            examples += [tuple(r) for r in bad.limit(_EXAMPLES_PER_BATCH).collect()]
        write.quarantine_examples = [(batch_id, *r) for r in examples[:_EXAMPLES_PER_BATCH]]

    # -- the analytics: panes, windows, sessions, alerts ---------------------------------------

    def _fold(
        self,
        on_time: DataFrame,
        write: IngestBatchWrite,
        prev: SnapshotMeta,
        next_watermark: int | None,
        cached: list[DataFrame],
    ) -> _Folded | None:
        """Fold the batch's on-time events into the open panes, and fill ``write``'s live
        views with the panes and windows it changed. None without views or events so far."""
        s = self.settings
        spec = s.pane_spec()
        if next_watermark is None:  # no event yet: nothing to aggregate
            return None
        horizon_ms = next_watermark + s.watermark_ms - s.retention_ms
        write.prune_trending_before = _iso_ms(horizon_ms)
        write.final_before = _iso_ms(next_watermark)
        if not spec.views:
            return None
        final_until = prev.final_until_ms
        # windows ending in (final_until, next_watermark] became final in this micro-batch
        # (the bounds kept out of the generated code, but in a large micro-batch: see
        # logstream.analytics.bounds)
        inline = self._inline_bounds
        newly_final = at_most(F.col("end_ms"), next_watermark, inline) & (
            F.lit(True) if final_until is None else above(F.col("end_ms"), final_until, inline)
        )
        # a view turned off leaves the state (fold_panes keeps the views of the spec)
        open_panes = self._state(prev, "panes")
        events = on_time if write.events else None
        if events is not None and any(v in DIMENSION_VIEWS for v in spec.views):
            events = self._enriched(events, write)
        merged = fold_panes(open_panes, events, spec, self.single_partition)
        merged = merged.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(merged)
        windows = None
        if "trending_pages" in s.outputs:
            windows = sliding_windows(merged, "pages", s.trending_ms, s.trending_slide_ms)
            windows = windows.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(windows)
        if events is not None:
            with self._timed("live_views"):
                self._live_views(merged, windows, write, s.on_boundary(horizon_ms))
        return _Folded(merged, windows, newly_final, s.closes_windows(final_until, next_watermark))

    def _analytics(
        self,
        folded: _Folded | None,
        on_time: DataFrame,
        write: IngestBatchWrite,
        prev: SnapshotMeta,
        next_watermark: int | None,
        cached: list[DataFrame],
        tasks: list[Callable[[], None]],
    ) -> dict[str, DataFrame | None]:
        """Add to ``tasks`` the publishing of the windows that became final, their scoring,
        the merge of the sessions. Returns the state parts of the new snapshot (filled in
        by the tasks)."""
        s = self.settings
        parts: dict[str, DataFrame | None] = {}
        if next_watermark is None:  # no event yet: nothing to aggregate
            return parts
        if folded is not None:
            merged, finals, closes = folded.merged, folded.finals, folded.closes
            if closes:
                tasks += self._publish_windows(
                    finals, folded.windows, folded.newly_final, write.batch_id
                )
                if self.bot_model is not None and "bot_scores" in s.outputs:

                    def bot_scores() -> None:
                        with self._timed("bot_scores"):
                            self._bot_scores(finals, write)

                    tasks.append(bot_scores)
            keep_from = next_watermark - (s.trending_ms - s.trending_slide_ms)
            inline = self._inline_bounds
            parts["panes"] = merged.where(
                above(F.col("end_ms"), next_watermark, inline)
                | ((F.col("view") == "pages") & above(F.col("end_ms"), keep_from, inline))
            ).drop("touched")
            if "alerts" in s.outputs:

                def alerts() -> None:
                    with self._timed("alerts"):
                        parts["series"] = self._alerts(
                            finals if closes else None, prev, next_watermark, write, cached
                        )

                tasks.append(alerts)
        if "sessions" in s.outputs:
            closes = s.closes_windows(prev.final_until_ms, next_watermark)

            def sessions() -> None:
                with self._timed("sessions"):
                    parts["sessions"] = self._sessions(
                        on_time, prev, next_watermark, write, cached, closes
                    )

            tasks.append(sessions)
        return parts

    def _enriched(self, events: DataFrame, write: IngestBatchWrite) -> DataFrame:
        """The events with the reference columns, by the tables' versions of this batch."""
        tables = self._tables
        write.reference_versions = {k: t.digest for k, t in sorted(tables.items())}
        if self._enricher is None:
            self._enricher = Enricher(events.sparkSession)
        views = self.settings.pane_spec().views
        # only the joins a computed view reads (no agents join for a log without user agents);
        # a dimension view is named after the kind of table that keys it
        used = {k: t for k, t in tables.items() if k in views}
        return self._enricher.enrich(events.select(*_ANALYTICS_COLUMNS), used)

    def _publish_windows(
        self,
        finals: DataFrame,
        windows: DataFrame | None,
        newly_final: Column,
        batch_id: int,
    ) -> list[Callable[[], None]]:
        """The publishing of the windows that became final, a task per output: each exactly
        once, in one micro-batch."""
        s = self.settings
        out = self.output_dir
        start = F.col("start_ms")
        tasks: list[Callable[[], None]] = []

        def schedule(rows: DataFrame, output: str) -> None:
            def task() -> None:
                with self._timed("windows"):
                    self.publish(rows, out / output, batch_id)

            tasks.append(task)

        if "traffic_per_minute" in s.outputs:
            traffic = finals.where(self._complete("traffic_per_minute", start))
            schedule(traffic_windows(traffic), "traffic_per_minute")
        if "unique_visitors" in s.outputs:
            complete = self._complete("unique_visitors", start)
            visitors = finals.where((F.col("view") == "visitors") & complete).select(
                F.timestamp_millis("start_ms").alias("window_start"),
                F.timestamp_millis("end_ms").alias("window_end"),
                F.hll_sketch_estimate("sketch").alias("visitors"),
                "sketch",
            )
            schedule(visitors, "unique_visitors")
        if windows is not None:
            final_windows = windows.where(
                newly_final & self._complete("trending_pages", start)
            ).select(
                F.timestamp_millis("start_ms").alias("window_start"),
                F.timestamp_millis("end_ms").alias("window_end"),
                F.col("key").alias("url_path"),
                "requests",
            )
            schedule(final_windows, "trending_pages")
        for output, view in DIMENSION_OUTPUTS.items():
            if output in s.outputs:
                rows = finals.where(self._complete(output, start))
                schedule(dimension_windows(rows, view), output)
        if "top_clients" in s.outputs:
            complete = self._complete("top_clients", start)
            counts = finals.where((F.col("view") == "clients") & complete).select(
                F.timestamp_millis("start_ms").alias("window_start"),
                F.timestamp_millis("end_ms").alias("window_end"),
                F.col("key").alias("client_host"),
                "requests",
                "bytes",
            )
            schedule(analytics.top_clients_per_window(counts, s.top), "top_clients")
        return tasks

    def _bot_scores(self, finals: DataFrame, write: IngestBatchWrite) -> None:
        """Score the client windows that became final with the bot model: every window to
        ``bot_scores/``, the most likely bots and a summary per window to the store."""
        from logstream.ml.bots import client_features, score_features

        assert self.bot_model is not None
        complete = self._complete("bot_scores", F.col("start_ms"))
        panes = finals.where(F.col("view").isin("clients", "client_pages") & complete)
        scored = score_features(
            self.bot_model.model, client_features(panes), self.bot_model.info.version
        ).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self.publish(scored, self.output_dir / "bot_scores", write.batch_id)
            bots = F.col("is_bot") == 1
            summary = scored.groupBy("window_start", "window_end").agg(
                F.count("*").alias("clients"),
                F.count_if(bots).alias("bots"),
                F.sum(F.when(bots, F.col("requests")).otherwise(0)).alias("bot_requests"),
                F.sum("requests").alias("requests"),
            )
            write.bot_windows = [
                (
                    r["ws"],
                    r["we"],
                    r["clients"],
                    r["bots"],
                    int(r["bot_requests"]),
                    int(r["requests"]),
                )
                for r in summary.select(
                    iso("window_start").alias("ws"), iso("window_end").alias("we"), "*"
                ).collect()  # a row per client window: bounded by the micro-batch's event time
            ]
            top = (
                scored.where(bots)
                .orderBy(F.col("bot_probability").desc(), "window_start", "client_host")
                .limit(BOTS_PER_BATCH)
                .select(
                    iso("window_start"),
                    iso("window_end"),
                    "client_host",
                    "requests",
                    "bot_probability",
                    "distinct_pages",
                    "error_ratio",
                    "static_share",
                    "robots",
                    "model_version",
                )
            )
            write.bots = [tuple(r) for r in top.collect()]
        finally:
            scored.unpersist()

    def _live_views(
        self,
        merged: DataFrame,
        windows: DataFrame | None,
        write: IngestBatchWrite,
        horizon_ms: int,
    ) -> None:
        """The merged values of every pane and window this batch changed, for the store, in
        one collect (bounded by what one micro-batch can touch within the retention)."""
        panes, pane_columns, changed, window_columns = self._live_columns(horizon_ms)
        live = merged.where(panes).select(*pane_columns)
        if windows is not None:
            live = live.unionByName(windows.where(changed).select(*window_columns))
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
            (r["ws"], r["we"], r["key"], int(r["requests"]))
            for r in rows
            if r["view"] == "trending"
        ]
        write.dimensions = [
            (r["view"], r["key"], *r[2:12]) for r in rows if r["view"] in DIMENSION_VIEWS
        ]

    def _live_columns(self, horizon_ms: int) -> tuple:
        """:meth:`_live_views`' conditions and projections of the panes and the windows.

        Kept while their inputs hold (the outputs, ``since``, the retention's horizon, which
        moves once a minute): the same expressions for most micro-batches, built once (each
        Column costs Py4J round trips to build)."""
        s = self.settings
        key = (s.outputs, tuple(sorted(self.since.items())), horizon_ms, self._inline_bounds)
        if self._live_key != key:
            self._live_key, self._live_cache = key, self._build_live_columns(horizon_ms)
        return self._live_cache

    def _build_live_columns(self, horizon_ms: int) -> tuple:
        s = self.settings
        view_output = {
            "traffic": "traffic_per_minute",
            "visitors": "unique_visitors",
            "clients": "top_clients",
            **{view: output for output, view in DIMENSION_OUTPUTS.items()},
        }
        complete = F.lit(False)
        for view, output in view_output.items():
            if output in s.outputs:
                complete = complete | (
                    (F.col("view") == view) & self._complete(output, F.col("start_ms"))
                )
        # traffic and visitors keep every window (a row a minute); clients, trending pages and
        # the dimension views (a row per key and minute: 670K for the sections of a 31-day
        # backfill) keep the retention
        kept = ~F.col("view").isin("clients", *DIMENSION_VIEWS)
        inline = self._inline_bounds
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
            _iso_ms_col("start_ms").alias("ws"),
            _iso_ms_col("end_ms").alias("we"),
            *(F.col(c) for c in measures),
            F.when(F.col("view") == "visitors", F.hll_sketch_estimate("sketch")).alias("v"),
        )
        zero = F.lit(0).cast("bigint")
        changed = (
            F.col("touched")
            & above(F.col("end_ms"), horizon_ms, inline)
            & self._complete("trending_pages", F.col("start_ms"))
        )
        window_columns = (
            F.lit("trending").alias("view"),
            F.col("key"),
            _iso_ms_col("start_ms").alias("ws"),
            _iso_ms_col("end_ms").alias("we"),
            F.col("requests"),
            *(zero.alias(c) for c in measures[1:]),
            F.lit(None).cast("bigint").alias("v"),
        )
        return F.col("touched") & recent & complete, pane_columns, changed, window_columns

    def _sessions(
        self,
        on_time: DataFrame,
        prev: SnapshotMeta,
        next_watermark: int,
        write: IngestBatchWrite,
        cached: list[DataFrame],
        closes: bool,
    ) -> DataFrame:
        """Merge the batch's per-client, per-minute summaries with the open sessions, publish
        the sessions the watermark closed; returns the open sessions of the new snapshot.

        Sessions close only in a micro-batch whose watermark passes a minute
        (:meth:`AnalyticsSettings.closes_windows`), like the final windows: in the others the
        summaries are kept beside the open sessions, unmerged (the snapshot's write computes
        them), and merged at the next such micro-batch. A session closes the same either way
        (a later event cannot join it once the watermark passed its end plus the gap), at
        most a minute of event time later."""
        s = self.settings
        open_sessions = self._state(prev, "sessions")
        parts = session_parts(on_time) if write.events else None
        if not closes:
            return open_sessions if parts is None else open_sessions.unionByName(parts)
        merged_input = parts if parts is not None else open_sessions.limit(0)
        gap_s = s.session_gap_ms // 1000
        merged = merged_sessions(merged_input, open_sessions, gap_s, self.single_partition)
        merged = merged.persist(StorageLevel.MEMORY_AND_DISK)  # closed and still open: one pass
        cached.append(merged)
        closed, still_open = split_sessions(merged, gap_s, next_watermark, self._inline_bounds)
        since = self.since.get("sessions")
        if since is not None:  # a visitor seen before `since` may have started earlier
            closed = closed.where(
                F.unix_millis("session_start") > F.lit(since + self.settings.session_gap_ms)
            )
        # this batch's statistics per window: one small collect that also counts the sessions
        fresh = [
            (*r[:7], bytes(r[7]))
            for r in analytics.session_stats_per_window(closed, s.session_stats_window)
            .select(
                iso("window_start"),
                iso("window_end"),
                "sessions",
                "bounces",
                "pages",
                "median_duration_s",
                "p95_duration_s",
                "sketch",
            )
            .collect()
        ]
        count = sum(r[2] for r in fresh)
        if count:
            self.publish(closed, self.output_dir / "sessions", write.batch_id)
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
            write.sessions_closed = count
            write.sessions = [tuple(r) for r in reversed(latest)]
            write.session_stats = self._merged_session_stats(closed.sparkSession, fresh)
        return still_open

    def _merged_session_stats(
        self, spark: Any, fresh: list[tuple[Any, ...]]
    ) -> list[tuple[object, ...]]:
        """This batch's session statistics per window (``fresh``: window start and end, ISO
        text; sessions, bounces, pages; median and p95 duration; KLL sketch) merged with the
        stored ones. Only the windows the store already holds are merged, in Spark (KLL
        sketches of durations merge exactly: ``kll_merge_agg_bigint``); the others are
        stored as they are. Those few rows (a window of an earlier micro-batch that gained
        sessions) become a literal table (``inline``), not a Python-created DataFrame, so no
        Python worker starts; a backfill's hundreds of new windows stay out of the plan."""
        stored = self.store.session_stats_rows(r[0] for r in fresh)
        if not stored:
            return list(fresh)
        again = {r[0] for r in stored}
        names = ("window_start", "window_end", "sessions", "bounces", "pages", "sketch")
        types = ("string", "string", "bigint", "bigint", "bigint", "binary")
        rows = F.array(
            *(
                F.struct(
                    *(F.lit(v).cast(t).alias(n) for v, n, t in zip(row, names, types, strict=True))
                )
                for row in [(*r[:5], r[7]) for r in fresh if r[0] in again] + stored
            )
        )
        merged = spark.range(1).select(F.inline(rows))
        return [r for r in fresh if r[0] not in again] + [
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

    def _alerts(
        self,
        finals: DataFrame | None,
        prev: SnapshotMeta,
        next_watermark: int,
        write: IngestBatchWrite,
        cached: list[DataFrame],
    ) -> DataFrame:
        """Score the newly final minutes of the site and of each content page (``finals`` is
        None when the watermark did not move: the detectors' state carries over)."""
        state = self._state(prev, "series")
        if finals is None:
            return state
        complete = self._complete("alerts", F.col("start_ms"))
        minutes = finals.where(F.col("view").isin("traffic", "pages") & complete).select(
            F.when(F.col("view") == "traffic", F.lit(SITE_SERIES))
            .otherwise(F.col("key"))
            .alias("series"),
            F.col("start_ms").alias("minute_ms"),
            "requests",
            F.col("server_errors").alias("errors"),
        )
        scored = scored_minutes(minutes, state, next_watermark, self.settings.alerts)
        scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(scored)
        alerts, new_state = split_scored(scored)
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
        if rows:
            self.publish(alerts, self.output_dir / "alerts", write.batch_id)
            write.alerts = rows
        return new_state


#: Environment variable of the fault injection used by the crash drills (see :func:`fault_hook`).
FAULT_ENV = "LOGSTREAM_FAULT_INJECT"


def fault_hook(spec: str) -> Callable[[str, int], None]:
    """A step hook that SIGKILLs the pipeline's process group at one step of one micro-batch.

    For the recovery tests and ``bench/drill_kill.py``: ``logstream run`` installs it when
    ``$LOGSTREAM_FAULT_INJECT`` is ``STEP:BATCH_ID`` (a step of :attr:`IngestStage.step_hook`,
    e.g. ``before_snapshot:3``). The process group — the Python driver and its JVM — dies with
    no clean-up, exactly between two writes of the micro-batch.

    Raises
    ------
    ValueError
        When ``spec`` is not ``STEP:BATCH_ID``.
    """
    import os
    import signal

    step, _, batch = spec.partition(":")
    if not step or not batch.isdigit():
        raise ValueError(f"{FAULT_ENV}={spec!r} is not STEP:BATCH_ID (e.g. before_snapshot:3)")

    def hook(name: str, batch_id: int) -> None:
        if name == step and batch_id == int(batch):
            os.killpg(os.getpgid(0), signal.SIGKILL)

    return hook
