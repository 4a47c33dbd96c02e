"""A micro-batch of a run without analytics (``--queries none``) writes an empty snapshot: no
Spark job for it, and both readers (Spark's and the driver's) find every part empty."""

from __future__ import annotations

from logstream.pipeline.ingest.settings import STATE_PARTS
from logstream.pipeline.state import SnapshotMeta, StateSnapshots

GROUP = "empty-snapshot-test"


def test_an_empty_snapshot_is_written_without_a_spark_job_and_reads_empty(spark, tmp_path):
    snapshots = StateSnapshots(spark, tmp_path / "analytics", STATE_PARTS)
    meta = SnapshotMeta(batch_id=0, max_event_ms=804_571_201_000)
    spark.sparkContext.setJobGroup(GROUP, "the empty snapshot's write")
    try:
        snapshots.write(meta, dict.fromkeys(STATE_PARTS))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(GROUP) == []
    assert snapshots.last_rows == 0
    written = snapshots.latest_before(1)
    assert written is not None and written.batch_id == 0
    assert written.max_event_ms == 804_571_201_000
    for part, schema in STATE_PARTS.items():
        frame = snapshots.read(written, part)
        assert frame.schema.fieldNames() == schema.fieldNames()
        assert frame.count() == 0
    # a new process (no snapshot in memory) reads the file for the driver's path too
    again = StateSnapshots(spark, tmp_path / "analytics", STATE_PARTS)
    tables = again.read_tables(written)
    assert set(tables) == set(STATE_PARTS)
    assert all(t.num_rows == 0 for t in tables.values())
