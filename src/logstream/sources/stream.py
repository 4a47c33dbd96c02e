"""Streaming sources of raw lines: a watched directory, followed log files, a text socket, or
Kafka.

Every source yields the same two columns as :func:`logstream.sources.read_lines`:
``value`` (one log line) and ``source_file`` (the file's URI; null for socket and Kafka), so
the parser runs unchanged on batch and stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from logstream.errors import ConfigError, InputPathError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from logstream.pipeline.config import PipelineConfig

__all__ = ["KAFKA_PACKAGE", "kafka_available", "stream_lines"]

#: The connector users add with ``spark-submit --packages`` for the Kafka source.
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0"


def kafka_available(spark: SparkSession) -> bool:
    """Whether Spark's Kafka connector is on the classpath: Spark resolves the ``kafka`` source
    (a missing data source fails when the stream is defined, before anything runs)."""
    try:
        spark.readStream.format("kafka").option("subscribe", "t").option(
            "kafka.bootstrap.servers", "localhost:9092"
        ).load()
    except Exception:
        return False
    return True


def stream_lines(spark: SparkSession, cfg: PipelineConfig) -> DataFrame:
    """Open the configured streaming source.

    Parameters
    ----------
    spark : SparkSession
    cfg : PipelineConfig
        ``source`` and its options.

    Returns
    -------
    DataFrame
        Streaming DataFrame with ``value`` (string) and ``source_file`` (string, nullable).

    Raises
    ------
    InputPathError
        When the watched directory does not exist.
    ConfigError
        When the Kafka source is asked for but the connector is not on the classpath.

    Notes
    -----
    * Directory: Spark's file source (plain and ``.gz``); each file is read once, tracked in
      the checkpoint; ``maxFilesPerTrigger`` bounds a micro-batch. Files must appear
      atomically (write elsewhere, then rename into the directory).
    * Follow: growing log files read like ``tail -F``, exactly once across rotation, with
      file identities and byte offsets in the checkpoint (:mod:`logstream.sources.follow`,
      ``docs/follow.md``); ``max_bytes_per_trigger`` bounds a micro-batch.
    * Socket: Spark's ``socket`` source, as in the book's TCP example. It keeps no offsets,
      so it cannot replay after a failure: use it for demos, not for exactly-once.
    * Kafka: Spark's own connector, ``subscribe`` to one topic, the message value as the line.
      Not testable on a machine without the connector jar and a broker.
    """
    if cfg.source == "dir":
        assert cfg.input_dir is not None
        if not cfg.input_dir.is_dir():
            raise InputPathError(
                f"input directory {str(cfg.input_dir)!r} does not exist: create it, or point "
                "--input-dir at the directory where log files land"
            )
        reader = spark.readStream.format("text")
        if cfg.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", cfg.max_files_per_trigger)
        return reader.load(str(cfg.input_dir)).select(
            "value", F.col("_metadata.file_path").alias("source_file")
        )
    if cfg.source == "follow":
        from logstream.sources.follow import follow_lines

        assert cfg.follow
        return follow_lines(spark, cfg.follow, cfg.max_bytes_per_trigger)
    if cfg.source == "socket":
        assert cfg.socket is not None
        host, _, port = cfg.socket.rpartition(":")
        return (
            spark.readStream.format("socket").option("host", host).option("port", int(port)).load()
        ).select("value", F.lit(None).cast("string").alias("source_file"))
    if not kafka_available(spark):
        raise ConfigError(
            "the Kafka source needs Spark's Kafka connector, which is not on the classpath: "
            f"launch with spark-submit --packages {KAFKA_PACKAGE} (or set spark.jars.packages)"
        )
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cfg.kafka_bootstrap)
        .option("subscribe", cfg.kafka_topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            F.col("value").cast("string").alias("value"),
            F.lit(None).cast("string").alias("source_file"),
        )
    )
