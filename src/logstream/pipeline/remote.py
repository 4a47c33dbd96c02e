"""The ingest query's ``foreachBatch`` function built where it runs: in this process, or in
the Python process of a Spark Connect server.

Through Spark Connect (``logstream run --remote``), ``foreachBatch`` pickles its function and
the server runs it in a Python process of its own, once per query, with a session of its own
on the same server (PySpark's ``pyspark.sql.connect.streaming.worker.foreach_batch_worker``):
the function "doesn't have access to variables defined outside of it" (PySpark's
``DataStreamWriter.foreachBatch``). :class:`ConnectIngest` carries only the run's settings,
which pickle, and builds its :class:`~logstream.pipeline.ingest.IngestStage` in that process at
the first micro-batch (:func:`ingest_stage`, as :class:`logstream.pipeline.Pipeline` builds its
own): the serving store, the state snapshots and the outputs are opened from there, so their
paths are the server's; the exactly-once delivery (the ledger, the snapshot per batch id) is
the same code.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from logstream.pipeline.config import PipelineConfig
from logstream.pipeline.ingest import (
    INGEST_QUERY,
    STATE_PARTS,
    AnalyticsSettings,
    BotScorer,
    IngestStage,
    IngestTotals,
)
from logstream.pipeline.state import StateSnapshots
from logstream.reference import ReferenceTables
from logstream.sinks.route import OutputPublisher

__all__ = ["ConnectIngest", "ingest_stage", "ledger_totals"]


def ingest_stage(
    spark: SparkSession,
    cfg: PipelineConfig,
    store: Any,
    settings: AnalyticsSettings,
    publisher: OutputPublisher,
    bot_model: BotScorer | None = None,
) -> IngestStage:
    """The ``foreachBatch`` function of the ingest query of ``cfg``, its snapshots checked.

    Raises
    ------
    StateCorruptError
        When the newest analytics snapshot is damaged (the message names the file).
    """
    snapshots = StateSnapshots(spark, cfg.state_dir / "analytics", STATE_PARTS)
    snapshots.checkpoint = cfg.state_dir / INGEST_QUERY
    snapshots.check()  # a damaged newest snapshot refuses the start, naming the file
    return IngestStage(
        cfg.output_dir,
        store,
        snapshots,
        settings,
        checkpoint=cfg.state_dir / INGEST_QUERY if cfg.source == "dir" else None,
        strict=cfg.strict,
        stateful_input=cfg.dedup,
        reference=ReferenceTables(cfg.reference, snapshot_dir=cfg.state_dir / "reference"),
        bot_model=bot_model,
        publisher=publisher,
    )


class ConnectIngest:
    """The ingest query's ``foreachBatch`` function through Spark Connect (module docstring).

    Parameters
    ----------
    cfg : PipelineConfig
    settings : AnalyticsSettings
    publisher : OutputPublisher

    Notes
    -----
    Without :class:`~logstream.sinks.gate.StopGate`, whose event lives in the client's
    process: a stop (``query.stop()`` from the client) may cut a micro-batch, which the next
    start replays from the checkpoint and the ledger, as after a ``kill -9``.
    """

    def __init__(
        self, cfg: PipelineConfig, settings: AnalyticsSettings, publisher: OutputPublisher
    ) -> None:
        self.cfg = cfg
        self.settings = settings
        self.publisher = publisher
        self._stage: IngestStage | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_stage": None}  # built where it runs

    def __call__(self, parsed: DataFrame, batch_id: int) -> None:
        """Deliver micro-batch ``batch_id`` (:meth:`IngestStage.__call__`), the stage built at
        the first call with the micro-batch's own session."""
        if self._stage is None:
            from logstream.serving import open_store

            store = open_store(self.cfg.store_url, retry_s=self.cfg.store_retry_seconds)
            self._stage = ingest_stage(
                parsed.sparkSession, self.cfg, store, self.settings, self.publisher
            )
        self._stage(parsed, batch_id)


def ledger_totals(store: Any, since: IngestTotals | None = None) -> IngestTotals:
    """The ingest totals the store's ledger holds (micro-batches, events, late events,
    quarantined and filtered lines), less ``since``'s: a run's own when ``since`` was read at
    its start. Exactly once, as the ledger is (a replayed micro-batch is not counted again)."""
    counters = store.counters()
    rows = store.query("SELECT COUNT(*) AS n FROM ledger WHERE query = ?", (INGEST_QUERY,))
    before = since or IngestTotals()
    return IngestTotals(
        batches=int(rows[0]["n"]) - before.batches,
        events=counters.get("events", 0) - before.events,
        late_events=counters.get("late_events", 0) - before.late_events,
        quarantined=counters.get("quarantined", 0) - before.quarantined,
        filtered=counters.get("filtered", 0) - before.filtered,
    )
