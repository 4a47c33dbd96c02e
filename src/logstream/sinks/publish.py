"""Publish one micro-batch's rows as a Parquet, JSON or CSV directory, atomically and idempotently.

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

The format is Parquet by default; ``fmt="json"`` writes JSON lines and ``fmt="csv"`` CSV
files with a header line, by the same protocol (``logstream run --output-format``). JSON and
CSV write timestamps as ISO 8601 in UTC (``1995-07-01T00:00:01.000Z``); CSV cannot hold a
binary column, so a binary column (the ``sketch`` of ``unique_visitors``) is written as base64
text under the same name (JSON writes binary as base64 by itself). Read an output back with
:func:`read_output`, which knows each format's options.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructType

from logstream.sinks.spec import OUTPUT_FORMATS

__all__ = [
    "BATCH_DIR_PREFIX",
    "OUTPUT_FORMATS",
    "SCHEMA_BATCH_ID",
    "batch_dir",
    "discard_prepared",
    "ensure_schema",
    "prepare_batch",
    "prepared_dir",
    "publish_batch",
    "publish_prepared",
    "publish_table",
    "read_output",
    "run_stateful_plan",
]

BATCH_DIR_PREFIX = "batch_id="

#: The file formats of :func:`publish_batch` (``logstream run --output-format``).

#: Timestamps in JSON and CSV outputs: ISO 8601 with milliseconds, in the session zone (UTC).
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"

#: The batch id of the empty file that carries an output's schema before it has rows.
SCHEMA_BATCH_ID = -1


def batch_dir(root: Path, batch_id: int) -> Path:
    """The directory of ``batch_id`` under ``root`` (``batch_id=0000000042``)."""
    return root / f"{BATCH_DIR_PREFIX}{batch_id:010d}"


def _check_format(fmt: str) -> str:
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"output format {fmt!r} is not one of {', '.join(OUTPUT_FORMATS)}")
    return fmt


def _csv_safe(df: DataFrame) -> DataFrame:
    """``df`` with every binary column as base64 text under the same name (CSV has no binary)."""
    binary = {f.name for f in df.schema.fields if isinstance(f.dataType, BinaryType)}
    if not binary:
        return df
    # Spark's base64 may cut its text into 76-character MIME lines: one line per value here
    return df.select(
        *(
            F.regexp_replace(F.base64(c), r"\s", "").alias(c) if c in binary else F.col(c)
            for c in df.columns
        )
    )


def publish_batch(
    df: DataFrame, root: Path, batch_id: int, files: int | None = 1, fmt: str = "parquet"
) -> bool:
    """Write ``df`` as the files of micro-batch ``batch_id`` under ``root``, exactly once.

    Parameters
    ----------
    df : DataFrame
        A batch DataFrame (inside ``foreachBatch``).
    root : Path
        Output root, created when missing.
    batch_id : int
        The micro-batch id Spark passed to ``foreachBatch``.
    files : int, optional
        Files written (``coalesce``); None keeps the DataFrame's partitions, so a
        large micro-batch is written by several tasks at once.
    fmt : {"parquet", "json", "csv"}
        File format (see the module docstring for JSON and CSV).

    Returns
    -------
    bool
        True when written now, False when the batch was already published.
    """
    _check_format(fmt)
    rows = df if files is None else df.coalesce(files)
    return _publish(root, batch_id, lambda staging: _write_rows(rows, staging, fmt))


def _write_rows(rows: DataFrame, path: Path, fmt: str) -> None:
    """Write ``rows`` as a directory of ``fmt`` files at ``path`` (replacing it)."""
    if fmt == "parquet":
        rows.write.mode("overwrite").parquet(str(path))
    elif fmt == "json":
        rows.write.mode("overwrite").option("timestampFormat", TIMESTAMP_FORMAT).json(str(path))
    else:
        _csv_safe(rows).write.mode("overwrite").option("header", True).option(
            "timestampFormat", TIMESTAMP_FORMAT
        ).csv(str(path))


def prepared_dir(root: Path, batch_id: int) -> Path:
    """The hidden directory :func:`prepare_batch` writes (``ROOT/.prepared-batch_id=<id>``)."""
    return root / f".prepared-{batch_dir(root, batch_id).name}"


def prepare_batch(
    df: DataFrame, root: Path, batch_id: int, files: int | None = 1, fmt: str = "parquet"
) -> bool:
    """Write ``df`` as the files of micro-batch ``batch_id`` under ``root``, hidden, to be
    published later by :func:`publish_prepared` or dropped by :func:`discard_prepared`.

    For a writer that decides whether the rows are right only once the job that writes them is
    done (:mod:`logstream.pipeline.ingest.one_pass`). The prepared directory is hidden like
    the staging one (readers skip it); a leftover of an interrupted attempt is replaced.

    Parameters
    ----------
    df, root, batch_id, files, fmt
        As :func:`publish_batch`.

    Returns
    -------
    bool
        True when written now, False when the batch was already published (nothing written).
    """
    _check_format(fmt)
    if batch_dir(root, batch_id).exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    _write_rows(df if files is None else df.coalesce(files), prepared_dir(root, batch_id), fmt)
    return True


def publish_prepared(root: Path, batch_id: int) -> bool:
    """Publish the directory :func:`prepare_batch` wrote for ``batch_id`` by the steps of
    :func:`publish_batch` (its rename is step 2's write, then the atomic rename of step 3).

    Returns
    -------
    bool
        True when published now, False when the batch was already published.

    Raises
    ------
    FileNotFoundError
        Nothing was prepared for ``batch_id`` (and it is not published).
    """
    published = _publish(root, batch_id, prepared_dir(root, batch_id).rename)
    if not published:  # published by an earlier attempt: this copy is not needed
        discard_prepared(root, batch_id)
    return published


def discard_prepared(root: Path, batch_id: int) -> None:
    """Remove what :func:`prepare_batch` wrote for ``batch_id``, if anything."""
    shutil.rmtree(prepared_dir(root, batch_id), ignore_errors=True)


def publish_table(table: Any, root: Path, batch_id: int) -> bool:
    """Write an Arrow table as the Parquet file of micro-batch ``batch_id`` under ``root``,
    exactly once, by the steps of :func:`publish_batch` (the live path's outputs, written on
    the driver without a Spark job: :mod:`logstream.pipeline.ingest.driver`).

    Parameters
    ----------
    table : pyarrow.Table
        The rows, in the output's Arrow schema (Spark's types: ``timestamp[us, UTC]`` for a
        timestamp, so that Spark reads both writers' files as one dataset).
    root : Path
        Output root, created when missing.
    batch_id : int
        The micro-batch id.

    Returns
    -------
    bool
        True when written now, False when the batch was already published.
    """
    import pyarrow.parquet as pq

    def write(staging: Path) -> None:
        staging.mkdir()
        pq.write_table(table, staging / "part-00000.snappy.parquet")

    return _publish(root, batch_id, write)


def _publish(root: Path, batch_id: int, write: Callable[[Path], None]) -> bool:
    """Steps 1–3 of the module docstring; ``write`` fills the staging directory."""
    final = batch_dir(root, batch_id)
    if final.exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{final.name}"
    if staging.exists():
        shutil.rmtree(staging)
    write(staging)
    staging.rename(final)
    if batch_id != SCHEMA_BATCH_ID:  # a batch carries the schema now: no placeholder left
        shutil.rmtree(batch_dir(root, SCHEMA_BATCH_ID), ignore_errors=True)
    return True


def ensure_schema(
    spark: SparkSession, root: Path, schema: StructType, fmt: str = "parquet"
) -> None:
    """Give an output with no batch yet an empty file carrying its schema.

    Without it ``spark.read.parquet(root)`` fails ("unable to infer schema") until the first
    row arrives, e.g. for ``late_events`` on a run with no late event. The file is published as
    batch :data:`SCHEMA_BATCH_ID` and holds no row; the output's first micro-batch removes it.
    (A JSON file cannot carry a schema, a CSV file only its header: read those formats with
    :func:`read_output` and a schema.)
    """
    if any(root.glob(f"{BATCH_DIR_PREFIX}*")):
        return
    if fmt != "parquet":
        publish_batch(spark.createDataFrame([], schema), root, SCHEMA_BATCH_ID, fmt=fmt)
        return
    # an empty Parquet file is written by Arrow, not by a Spark job (three of them cost a
    # pipeline's start about 2 s): Spark reads Arrow's types as the schema's own
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    def write(staging: Path) -> None:
        staging.mkdir()
        arrow = to_arrow_schema(schema, timezone="UTC")  # Spark's timestamps are instants
        pq.write_table(arrow.empty_table(), staging / "part-00000.parquet")

    _publish(root, SCHEMA_BATCH_ID, write)


def read_output(
    spark: SparkSession, root: Path, fmt: str = "parquet", schema: StructType | None = None
) -> DataFrame:
    """Read every published batch of an output, with its ``batch_id`` partition column.

    Parameters
    ----------
    spark : SparkSession
    root : Path
        The output's root (``OUTPUT_DIR/traffic_per_minute``).
    fmt : {"parquet", "json", "csv"}
        The format it was published in.
    schema : StructType, optional
        The columns (without ``batch_id``) for JSON and CSV; without it their types are
        inferred (timestamps included). A CSV binary column is read as its base64 text.

    Returns
    -------
    DataFrame
        The rows of every batch, ``batch_id`` last.
    """
    _check_format(fmt)
    if fmt == "parquet":
        return spark.read.parquet(str(root))
    reader = spark.read.option("timestampFormat", TIMESTAMP_FORMAT)
    if schema is not None:
        if fmt == "csv":
            schema = StructType(
                [
                    f.__class__(f.name, StringType(), f.nullable)
                    if isinstance(f.dataType, BinaryType)
                    else f
                    for f in schema.fields
                ]
            )
        reader = reader.schema(schema)
    elif fmt == "csv":
        reader = reader.option("inferSchema", True)
    if fmt == "json":
        return reader.json(str(root))
    return reader.option("header", True).csv(str(root))


def run_stateful_plan(df: DataFrame) -> None:
    """Execute a micro-batch's plan and discard the rows (Spark's ``noop`` sink).

    A ``foreachBatch`` function that skips a micro-batch already written (a replay after a
    crash) must still run it when the plan holds a stateful operator (deduplication, session
    windows, ``transformWithState``): every state store partition has to commit the batch's
    version, or Spark fails the query (``STATE_STORE_COMMIT_VALIDATION_FAILED``).
    """
    df.write.format("noop").mode("overwrite").save()
