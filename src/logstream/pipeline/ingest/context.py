"""What the steps of the micro-batch share: the stage's settings, state and helpers.

:class:`StageContext` is the base of :class:`~logstream.pipeline.ingest.IngestStage`: the
step modules (:mod:`.watermark`, :mod:`.fold`, :mod:`.live`, :mod:`.publish`,
:mod:`.sessions`, :mod:`.alerts`, :mod:`.commit`) take it as their first argument, and the
stage (:mod:`.stage`) runs them in order. It sits below them, so no step imports the stage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.panes import gathered
from logstream.pipeline.ingest.settings import WRITERS, AnalyticsSettings, BotScorer, IngestTotals
from logstream.pipeline.state import SnapshotMeta, StateSnapshots
from logstream.reference import Enricher, ReferenceTables, Table
from logstream.serving import ServingStore
from logstream.sinks.route import OutputPublisher

__all__ = ["StageContext"]

_ADAPTIVE = "spark.sql.adaptive.enabled"


class StageContext:
    """The settings, state and helpers of the ingest stage that its steps share.

    Built through :class:`~logstream.pipeline.ingest.IngestStage` (its parameters are
    described there).
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
        #: The checkpoint's offset-log entry of the running micro-batch (what it is delivered
        #: over: :mod:`logstream.pipeline.checkpoint`); None without a checkpoint.
        self.entry: str | None = None
        #: The quarantine detail of the running micro-batch's events too far ahead of it, when
        #: it has some (:func:`logstream.pipeline.ingest.watermark.ahead_bound_ms`).
        self.ahead_detail: str | None = None
        #: The bound of that rule in the Spark steps (epoch ms), when it quarantined events.
        self.ahead_bound: int | None = None
        #: The sources a warning named for skewed events (:mod:`.skew`: once a run each).
        self.skew_sources: set[str | None] = set()
        #: The running micro-batch's parsed rows as Spark handed them (not cached).
        self._unpersisted: DataFrame | None = None
        #: Frames the running micro-batch persisted (released at its end).
        self._cached: list[DataFrame] = []
        #: How the running micro-batch is delivered: ``driver`` (the live path), ``one_pass``
        #: (:mod:`.one_pass`) or ``spark`` (the Spark steps).
        self.path = ""
        #: Micro-batches delivered each way in this process.
        self.paths: dict[str, int] = {"driver": 0, "one_pass": 0, "spark": 0}
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
        """Time a step, and name its Spark jobs after it (the Spark UI's job descriptions; a
        step of the live path that runs no Spark job is only timed: a description is a Py4J
        round trip)."""
        context = self.store_context
        if context is not None and (self.path != "driver" or name == "parse"):
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
