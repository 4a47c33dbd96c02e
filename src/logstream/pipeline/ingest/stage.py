"""The ``foreachBatch`` function of the ``ingest`` query: the steps of a micro-batch, in order.

:class:`IngestStage` holds what the steps share — the settings, the serving store, the state
snapshots, the publisher, the session of the running micro-batch and the timings — and its
``__call__`` runs the steps of :mod:`logstream.pipeline.ingest` in order: it skips a delivered
batch (step 1) and chooses the reference tables (step 2) itself, and hands the others to the
modules of the package.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream.analytics.panes import DIMENSION_VIEWS
from logstream.connect import is_connect
from logstream.errors import ReplayMismatchError
from logstream.pipeline.checkpoint import check_replay, offset_entry
from logstream.pipeline.ingest.commit import commit_batch
from logstream.pipeline.ingest.context import StageContext
from logstream.pipeline.ingest.driver import batch_rows, deliver_on_driver, driver_eligible
from logstream.pipeline.ingest.fold import fold_batch
from logstream.pipeline.ingest.live import commit_views
from logstream.pipeline.ingest.one_pass import OnePass, one_pass_eligible, prepare_events
from logstream.pipeline.ingest.panels import AGENT_PANELS
from logstream.pipeline.ingest.publish import (
    analytics_tasks,
    events_task,
    run_concurrently,
)
from logstream.pipeline.ingest.settings import DRIVER_ROWS, DRIVER_TEXT_BYTES
from logstream.pipeline.ingest.watermark import Split, is_quarantined, split_batch
from logstream.pipeline.state import SnapshotMeta
from logstream.serving import IngestBatchWrite
from logstream.sinks import run_stateful_plan
from logstream.sinks.publish import discard_prepared
from logstream.sources.files import lines_at_most
from logstream.sources.integrity import check_files, files_of_batch, raise_if_corrupt

__all__ = ["IngestStage"]


class IngestStage(StageContext):
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

    # -- the micro-batch --------------------------------------------------------------------

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """Deliver micro-batch ``batch_id`` exactly once (see :mod:`logstream.pipeline.ingest`)."""
        checkpoint = self.state.checkpoint
        self.ahead_detail = self.ahead_bound = None
        self._unpersisted = parsed
        self.entry = offset_entry(checkpoint, batch_id) if checkpoint is not None else None
        if self.state.done(batch_id):  # 1. skip a delivered batch: the same input only
            if checkpoint is not None:
                recorded = self.state.meta(batch_id).offsets
                check_replay(checkpoint, batch_id, recorded, self.state.snapshot_dir(batch_id))
            if self.stateful_input:
                run_stateful_plan(parsed)  # the deduplication state still commits this batch
            return
        if checkpoint is not None:
            self._check_not_rolled_back(checkpoint, batch_id)
        self._spark = parsed.sparkSession  # the query's own session (see _adapt)
        self.store_context = None if is_connect(self._spark) else self._spark.sparkContext
        corrupt = self._corrupt_files(batch_id)
        if corrupt and self.strict:
            raise_if_corrupt(corrupt)  # before anything is written
        prev = self.state.latest_before(batch_id)
        if any(v in DIMENSION_VIEWS or v in AGENT_PANELS for v in self.settings.pane_spec().views):
            # 2. reference tables: chosen (and recorded) before anything is written, so that
            # a replay uses the same
            self._tables = self.reference.for_batch(batch_id)
        cached = self._cached = []
        large = False
        try:
            delivered = None
            fit = self._driver_fit(parsed, batch_id) if driver_eligible(self) else None
            if fit is not None:
                # the live path: one Spark job, then the driver
                rows = batch_rows(self, parsed, counted=fit == "counted")
                if rows is not None:
                    self.path = "driver"
                    large = rows.num_rows > DRIVER_ROWS
                    delivered = deliver_on_driver(self, rows, batch_id, prev, corrupt, parsed)
            if delivered is None:
                one = OnePass(False, None, False)
                if one_pass_eligible(self, batch_id):
                    # no output but the events: parsed and written by one job (one_pass.py)
                    one = prepare_events(self, parsed, batch_id, prev, corrupt)
                split = one.split
                if one.certified:
                    self.path = "one_pass"
                else:
                    self.path = "spark"
                    # keep the raw text only where it is needed (quarantine): a smaller cache
                    parsed = parsed.withColumn(
                        "raw_line", F.when(is_quarantined(), F.col("raw_line"))
                    ).persist(StorageLevel.MEMORY_AND_DISK)
                    cached.append(parsed)
                    # 3. watermark, 4. split: judged exactly
                    split = split_batch(self, parsed, batch_id, prev, corrupt, one.prepared)
                if one.prepared and (split is None or not split.prepared):
                    # the prepared events are not the batch's (a rule fired) or it has none
                    discard_prepared(self.output_dir / "events", batch_id)
                delivered = self._deliver_split(parsed, split, prev, corrupt, cached)
            write, meta, state_parts = delivered
            if write is None:
                return  # a no-data micro-batch: nothing to record, nothing to replay
            applied = commit_batch(self, write, meta, state_parts)  # 8. commit, 9. snapshot
            self.paths[self.path] += 1
        finally:
            for frame in cached:
                frame.unpersist()
            self._cached = []
            if large:  # a backfill's micro-batch on the driver: its memory back to the system
                gc.collect()
                pa.default_memory_pool().release_unused()
        with self.totals.lock:
            if applied:  # a replay the store already held is not counted again
                self.totals.batches += 1
                self.totals.events += write.events
                self.totals.late_events += write.late_events
                self.totals.quarantined += write.quarantined
                self.totals.filtered += write.filtered
            if meta.max_event_ms is not None:
                self.totals.watermark_ms = self.settings.watermark_at(meta.max_event_ms)

    def _check_not_rolled_back(self, checkpoint: Path, batch_id: int) -> None:
        """Refuse a batch planned again over other input than it began to be delivered over,
        or older than the newest delivered state (:mod:`logstream.pipeline.checkpoint`);
        record what this one is delivered over, before anything of it is written."""
        newest = self.state.newest_id()
        if newest is not None and newest > batch_id:
            raise ReplayMismatchError(
                f"Spark replays micro-batch {batch_id}, but the analytics state was delivered "
                f"up to micro-batch {newest} ({self.state.snapshot_dir(newest)}): the "
                f"checkpoint {checkpoint} was rolled back behind its state. Put its offsets "
                f"and commits from {batch_id} on back, or start anew with an empty "
                "--state-dir, --output-dir and store"
            )
        pending = self.state.pending(batch_id)
        check_replay(checkpoint, batch_id, pending, self.state.root / "pending")
        if pending is None and self.entry is not None:
            self.state.record_pending(batch_id, self.entry)

    def _driver_fit(self, parsed: DataFrame, batch_id: int) -> Literal["counted", "may"] | None:
        """Whether micro-batch ``batch_id`` has at most ``driver_rows`` lines: ``counted`` when
        its lines were counted (or its files hold fewer bytes than that), ``may`` when nothing
        tells (a source without files: :func:`.driver.batch_rows` bounds it by a limit), None
        when it has more. A directory source's lines are counted instead of the live path's
        parse of up to ``driver_rows`` lines a partition that a backfill's micro-batch would
        throw away (31 NASA days in one micro-batch, 2 cores: 10.8 s of executor time): the
        newlines of local files on the driver (:func:`~logstream.sources.files.lines_at_most`,
        about 20 ms for 100 MB, stopping past ``driver_rows``), else a Spark count, a pass
        that reads but parses nothing (the first job of a cold JVM: 4.0 s of a 31-day
        backfill). Files of more than :data:`~.settings.DRIVER_TEXT_BYTES` of text never fit."""
        if self.checkpoint is None:
            return "may"
        files = files_of_batch(self.checkpoint, batch_id) or []
        size = 0
        for name in files:
            try:
                size += Path(name).stat().st_size * (10 if name.endswith(".gz") else 1)
            except OSError:
                continue
        if size > DRIVER_TEXT_BYTES:  # its Arrow rows could pass spark.driver.maxResultSize
            return None
        if size <= self.settings.driver_rows:  # a line holds at least one byte
            return "counted"
        fits = lines_at_most(files, self.settings.driver_rows)  # the files' newlines, here
        if fits is None:
            with self._timed("parse"):
                fits = parsed.count() <= self.settings.driver_rows
        return "counted" if fits else None

    def _corrupt_files(self, batch_id: int) -> dict[str, str]:
        if self.checkpoint is None:
            return {}
        files = files_of_batch(self.checkpoint, batch_id)
        return check_files(files) if files else {}

    def _deliver_split(
        self,
        parsed: DataFrame,
        split: Split | None,
        prev: SnapshotMeta,
        corrupt: dict[str, str],
        cached: list[DataFrame],
    ) -> tuple[IngestBatchWrite | None, SnapshotMeta, dict[str, DataFrame | None]]:
        """Steps 5 to 7 of a split batch: returns the batch's store write (None: no data,
        ``split`` None), the meta of its snapshot and the state parts the snapshot writes."""
        s = self.settings
        if split is None:
            return None, prev, {}
        batch_id = split.write.batch_id
        write, newest, since = split.write, split.newest, split.since
        next_watermark = split.next_watermark
        meta = SnapshotMeta(batch_id, newest, prev.final_until_ms, list(s.outputs), since)
        # 5. aggregate once
        folded = fold_batch(self, split.on_time, write, prev, next_watermark, cached)
        if write.events and folded is not None:  # 6. its windows, to the store before the rest
            commit_views(self, write)
        # 7. publish: the writes of the batch are independent of each other, run at once, the
        # driver's planning and commits of one overlap the tasks of another
        tasks: list[Callable[[], None]] = [events_task(self, split, corrupt)]
        state_parts = analytics_tasks(
            self, folded, split.on_time, write, prev, next_watermark, cached, tasks
        )
        run_concurrently(tasks, self.writers, parsed.sparkSession)
        if next_watermark is not None:
            final_until = max(prev.final_until_ms or 0, next_watermark)
            meta = SnapshotMeta(batch_id, newest, final_until, list(s.outputs), since)
        self._step("published_windows", batch_id)
        return write, meta, state_parts
