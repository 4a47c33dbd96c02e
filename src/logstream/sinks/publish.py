"""Publish one micro-batch's rows as a Parquet directory, atomically and idempotently.

Delivery guarantee: **exactly-once per batch id**, for outputs written inside
``foreachBatch``. The steps, in order:

1. if ``ROOT/batch_id=<id>`` exists, the batch was published before a crash: do nothing;
2. write the rows to a hidden staging directory ``ROOT/.staging-batch_id=<id>`` (Spark's file
   source and readers skip names starting with ``.`` or ``_``), replacing any leftover of an
   interrupted attempt;
3. rename the staging directory to ``ROOT/batch_id=<id>`` — one atomic ``rename`` on a local or
   HDFS file system, so a reader sees all of the batch or none of it.

Small outputs are written as one Parquet file per batch; ``events`` keeps the micro-batch's
partitions so that a backfill is written by every core. The directory names make
``batch_id`` a partition column: ``spark.read.parquet(ROOT)`` reads every batch with it.
Object stores without atomic rename (S3) are not supported by this writer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

__all__ = [
    "BATCH_DIR_PREFIX",
    "SCHEMA_BATCH_ID",
    "batch_dir",
    "ensure_schema",
    "publish_batch",
    "run_stateful_plan",
]

BATCH_DIR_PREFIX = "batch_id="

#: The batch id of the empty file that carries an output's schema before it has rows.
SCHEMA_BATCH_ID = -1


def batch_dir(root: Path, batch_id: int) -> Path:
    """The directory of ``batch_id`` under ``root`` (``batch_id=0000000042``)."""
    return root / f"{BATCH_DIR_PREFIX}{batch_id:010d}"


def publish_batch(df: DataFrame, root: Path, batch_id: int, files: int | None = 1) -> bool:
    """Write ``df`` as the Parquet of micro-batch ``batch_id`` under ``root``, exactly once.

    Parameters
    ----------
    df : DataFrame
        A batch DataFrame (inside ``foreachBatch``).
    root : Path
        Output root, created when missing.
    batch_id : int
        The micro-batch id Spark passed to ``foreachBatch``.
    files : int, optional
        Parquet files written (``coalesce``); None keeps the DataFrame's partitions, so a
        large micro-batch is written by several tasks at once.

    Returns
    -------
    bool
        True when written now, False when the batch was already published.
    """
    final = batch_dir(root, batch_id)
    if final.exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{final.name}"
    if staging.exists():
        shutil.rmtree(staging)
    (df if files is None else df.coalesce(files)).write.mode("overwrite").parquet(str(staging))
    staging.rename(final)
    return True


def ensure_schema(spark: SparkSession, root: Path, schema: StructType) -> None:
    """Give an output with no batch yet an empty Parquet file carrying its schema.

    Without it ``spark.read.parquet(root)`` fails ("unable to infer schema") until the first
    row arrives, e.g. for ``late_events`` on a run with no late event. The file is published as
    batch :data:`SCHEMA_BATCH_ID` and holds no row.
    """
    if any(root.glob(f"{BATCH_DIR_PREFIX}*")):
        return
    publish_batch(spark.createDataFrame([], schema), root, SCHEMA_BATCH_ID)


def run_stateful_plan(df: DataFrame) -> None:
    """Execute a micro-batch's plan and discard the rows (Spark's ``noop`` sink).

    A ``foreachBatch`` function that skips a micro-batch already written (a replay after a
    crash) must still run it when the plan holds a stateful operator (deduplication, session
    windows, ``transformWithState``): every state store partition has to commit the batch's
    version, or Spark fails the query (``STATE_STORE_COMMIT_VALIDATION_FAILED``).
    """
    df.write.format("noop").mode("overwrite").save()
