"""Steps 8 and 9 of the micro-batch: the store's transaction, then the snapshot.

**Commit.** The batch's counters, examples, closed sessions and their statistics, alerts and
bot scores (and its windows, unless step 6 wrote them) go to the serving store in one
transaction with the batch id in its ledger
(:meth:`logstream.serving.ServingStore.commit_ingest_batch`).

**Snapshot.** The open panes, open sessions and detector state are written as snapshot ``N``
(:meth:`logstream.pipeline.state.StateSnapshots.write`), the batch's last write: once it
exists, a replay of the batch skips it (step 1).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from logstream.pipeline.ingest.settings import INGEST_QUERY
from logstream.pipeline.state import SnapshotMeta
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["commit_batch"]


def commit_batch(
    stage: StageContext,
    write: IngestBatchWrite,
    meta: SnapshotMeta,
    state_parts: dict[str, DataFrame | None],
) -> bool:
    """Commit the batch to the serving store, then write its snapshot.

    The step hook runs before each of the two writes (``before_commit``,
    ``before_snapshot``) and after the last (``snapshot_written``).

    Returns
    -------
    bool
        Whether the store took the batch now: False for a replay of a batch its ledger
        already held (a crash between the store's commit and the snapshot, a snapshot
        deleted), whose lines a run's totals must not count again.
    """
    batch_id = write.batch_id
    stage._step("before_commit", batch_id)
    with stage._timed("store"):
        applied = stage.store.commit_ingest_batch(INGEST_QUERY, write)
    stage._step("before_snapshot", batch_id)
    with stage._timed("snapshot"):
        stage.state.write(replace(meta, offsets=stage.entry), state_parts)
    stage.store.set_state({"analytics_state_rows": str(stage.state.last_rows)})
    stage._step("snapshot_written", batch_id)
    return applied
