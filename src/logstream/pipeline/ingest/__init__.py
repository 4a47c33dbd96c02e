"""The micro-batch step: parse once, decide lateness, aggregate once, deliver exactly once.

The pipeline is one streaming query, ``ingest`` (source → [deduplication] → parse →
``foreachBatch``). Its ``foreachBatch`` function, :class:`IngestStage`, does everything else.
A micro-batch of at most :attr:`AnalyticsSettings.driver_rows` lines (the live path,
``driver.py``) runs one Spark job that collects its parsed and classified rows as Arrow, and
the steps below on the driver with :mod:`logstream.analytics.arrow`; a larger one (a
backfill's) runs them with batch DataFrames. Either way, for micro-batch ``N`` the steps run
in this order (the Spark forms in the module named):

1. **Skip a delivered batch** (``stage.py``). If snapshot ``N`` exists
   (:mod:`logstream.pipeline.state`), the batch was delivered before a crash: nothing to do,
   if Spark planned it over the same input (:mod:`logstream.pipeline.checkpoint`: refused
   otherwise). A batch begun is recorded with the offsets it is delivered over first.
2. **Reference tables** (``stage.py``). When a reference-data output is on, the versions of
   the reference tables the batch uses are chosen and recorded before anything is written
   (:meth:`logstream.reference.ReferenceTables.for_batch`): a replay enriches the same way.
3. **Watermark** (``watermark.py``). The watermark of the batch is the newest event time of
   every earlier micro-batch minus the delay (``--watermark``), read from snapshot ``N − 1``:
   the textbook rule (Spark guide, "Handling Late Data and Watermarking"; book Ch. 12),
   deterministic, so a replay recomputes the same value.
4. **Split** (``watermark.py``) the parsed rows: an event at or before the watermark is a
   *late event*, the other events are *on time*, an unparseable line is *quarantined*.
5. **Aggregate once** (``fold.py``). One aggregation folds the batch's on-time events into
   the open panes of snapshot ``N − 1``, every view at once
   (:func:`~logstream.analytics.panes.fold_panes`: sums with one shuffle, and a small HLL
   aggregation for the visitors). A micro-batch of at most
   :attr:`AnalyticsSettings.single_partition_rows` lines is analysed in one partition, with
   no shuffle at all (:func:`~logstream.analytics.panes.gathered`).
6. **Serve the windows** (``live.py``). When the batch has on-time events and the outputs
   have pane views, the panes and windows it changed, with their merged values, the pruning
   of windows past the retention, the reference versions and the newest event time go to the
   serving store at once, in a transaction of their own
   (:meth:`logstream.serving.ServingStore.commit_ingest_views`): each of those writes is
   idempotent by itself, so a replay writes the same again, and the dashboard shows a line's
   window before the rest of its micro-batch is done. (Otherwise step 8 writes them.)
7. **Publish**, as tasks run at once on the writers pool (:data:`WRITERS` threads); step 8
   waits for all of them:

   * ``publish.py``: on-time events to ``events/``, late events (with the watermark they
     missed) to ``late_events/``, quarantined lines (and corrupt input files) to
     ``quarantine/``; the panes the new watermark (newest event time after this batch minus
     the delay) has passed are final and published, each once — ``traffic_per_minute/``,
     ``unique_visitors/``, ``trending_pages/`` (5-minute windows summed from 1-minute panes),
     ``top_clients/``, ``traffic_by_section/``, ``traffic_by_agent/``,
     ``traffic_by_network/`` (panes keyed by the columns the reference tables add: broadcast
     joins before the aggregation);
   * ``alerts.py``: the final per-minute series feed the anomaly detector (``alerts/``); with
     a bot model the final client windows are scored (``bot_scores/``,
     :mod:`logstream.ml.bots`);
   * ``sessions.py``: visitor sessions merge the batch's per-client, per-minute summaries
     with the open sessions (``sessions/``).

   Every window ends on a whole minute, so only a micro-batch whose watermark passes one
   (:meth:`AnalyticsSettings.closes_windows`) can make a window final: the others skip the
   final windows and the detector, and keep their session summaries unmerged until the next
   one closes sessions — following a log in real time, most micro-batches. Lateness was
   decided in step 4, before any aggregation: nothing is dropped silently.
8. **Commit** (``commit.py``). The batch's counters, examples, closed sessions and their
   statistics, alerts and bot scores (and its windows, unless step 6 wrote them) go to the
   serving store in one transaction with the batch id in its ledger
   (:meth:`logstream.serving.ServingStore.commit_ingest_batch`).
9. **Snapshot** (``commit.py``). The open panes, open sessions and detector state are
   written as snapshot ``N``, the batch's last write.

A large micro-batch whose only outputs are its events, late events and quarantine
(``--queries none``) runs steps 3, 4 and the events' write in one Spark job when a
certificate shows that neither in-batch rule can fire (``one_pass.py``).

``stage.py`` holds :class:`IngestStage`, whose ``__call__`` runs the steps in order (and
chooses the path); ``driver.py`` the live path's steps;
``context.py`` its base, what the steps share (they take it, not the stage);
``settings.py`` the settings and names they share; ``faults.py`` the crash drills' fault
injection (:func:`fault_hook`).

Counts: ``on-time + late + quarantined = lines read`` for every micro-batch.

Every output is written once per batch id (:func:`logstream.sinks.publish_batch`), the store
once per ledger entry, the state once per snapshot: a replay after a crash at any point
delivers the batch exactly once (``tests/pipeline/test_recovery.py``, ``bench/drill_kill.py``).
"""

from logstream.pipeline.ingest.faults import FAULT_ENV, fault_hook
from logstream.pipeline.ingest.publish import WRITERS
from logstream.pipeline.ingest.settings import (
    INGEST_QUERY,
    OUTPUTS,
    SINGLE_PARTITION_ROWS,
    STATE_PARTS,
    AnalyticsSettings,
    BotScorer,
    IngestTotals,
    iso,
)
from logstream.pipeline.ingest.stage import IngestStage

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
