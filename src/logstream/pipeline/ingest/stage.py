"""The ``foreachBatch`` function of the ``ingest`` query: the steps of a micro-batch, in order.

:class:`IngestStage` holds what the steps share — the settings, the serving store, the state
snapshots, the publisher, the session of the running micro-batch and the timings — and its
``__call__`` runs the steps of :mod:`logstream.pipeline.ingest` in order: it skips a delivered
batch (step 1) and chooses the reference tables (step 2) itself, and hands the others to the
modules of the package.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.panes import DIMENSION_VIEWS, gathered
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.commit import commit_batch
from logstream.pipeline.ingest.fold import fold_batch
from logstream.pipeline.ingest.live import commit_views
from logstream.pipeline.ingest.publish import (
    WRITERS,
    analytics_tasks,
    events_task,
    run_concurrently,
)
from logstream.pipeline.ingest.settings import AnalyticsSettings, BotScorer, IngestTotals
from logstream.pipeline.ingest.watermark import split_batch
from logstream.pipeline.state import SnapshotMeta, StateSnapshots
from logstream.reference import Enricher, ReferenceTables, Table
from logstream.serving import IngestBatchWrite, ServingStore
from logstream.sinks import run_stateful_plan
from logstream.sinks.route import OutputPublisher
from logstream.sources.integrity import check_files, files_of_batch, raise_if_corrupt

__all__ = ["IngestStage"]

_ADAPTIVE = "spark.sql.adaptive.enabled"


class IngestStage:
    """The ``foreachBatch`` function of the ``ingest`` query (see :mod:`logstream.pipeline.ingest`).

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
        #: Writes of a micro-batch run at once (see
        #: :func:`~logstream.pipeline.ingest.publish.run_concurrently`); 1: in turn.
        self.writers = WRITERS

    # -- what the steps share ---------------------------------------------------------------

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
        """Deliver micro-batch ``batch_id`` exactly once (see :mod:`logstream.pipeline.ingest`)."""
        if self.state.done(batch_id):  # 1. skip a delivered batch
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
            # 2. reference tables: chosen (and recorded) before anything is written, so that
            # a replay uses the same
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
            commit_batch(self, write, meta, state_parts)  # 8. commit, 9. snapshot
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
        """Steps 3 to 7: returns the batch's store write (None: no data), the meta of its
        snapshot and the state parts the snapshot writes."""
        s = self.settings
        split = split_batch(self, parsed, batch_id, prev, corrupt)  # 3. watermark, 4. split
        if split is None:
            return None, prev, {}
        write, newest, since = split.write, split.newest, split.since
        next_watermark = split.next_watermark
        meta = SnapshotMeta(batch_id, newest, prev.final_until_ms, list(s.outputs), since)
        # 5. aggregate once
        folded = fold_batch(self, split.on_time, write, prev, next_watermark, cached)
        if write.events and folded is not None:  # 6. its windows, to the store before the rest
            commit_views(self, write)
        # 7. publish: the writes of the batch are independent of each other, run at once, the
        # driver's planning and commits of one overlap the tasks of another
        tasks: list[Callable[[], None]] = [events_task(self, parsed, split, corrupt)]
        state_parts = analytics_tasks(
            self, folded, split.on_time, write, prev, next_watermark, cached, tasks
        )
        run_concurrently(tasks, self.writers, parsed.sparkSession)
        if next_watermark is not None:
            final_until = max(prev.final_until_ms or 0, next_watermark)
            meta = SnapshotMeta(batch_id, newest, final_until, list(s.outputs), since)
        self._step("published_windows", batch_id)
        return write, meta, state_parts
