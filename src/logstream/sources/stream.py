"""Streaming sources of raw lines: a watched directory, followed log files, a text socket,
Kafka, or Spark's rate source for load tests.

Every source yields the same two columns as :func:`logstream.sources.read_lines`:
``value`` (one log line) and ``source_file`` (the file's URI; null for socket and Kafka), so
the parser runs unchanged on batch and stream.
"""

from __future__ import annotations

import gzip
import re
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from logstream.errors import ConfigError, InputPathError
from logstream.session import KAFKA_PACKAGE, kafka_available

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from logstream.pipeline.config import PipelineConfig

__all__ = [
    "KAFKA_PACKAGE",
    "RATE_SAMPLE_LINES",
    "kafka_available",
    "rate_lines",
    "rate_sample",
    "stream_lines",
]

#: Lines the rate source cycles through at most (read from the sample file, or generated).
RATE_SAMPLE_LINES = 10_000

# the bracketed time of a Common/Combined line: ``[09/Jul/1995:00:00:01 -0400]``
_CLF_TIME = r"\[[^\]]*\]"
_CLF_TIME_RE = re.compile(_CLF_TIME)


def rate_sample(sample: Path | None, limit: int = RATE_SAMPLE_LINES) -> list[str]:
    """The lines the rate source cycles through.

    Parameters
    ----------
    sample : Path or None
        A Common or Combined log (plain or ``.gz``); its first ``limit`` lines with a
        bracketed time are used. None: ``limit`` lines of logstream's own traffic generator
        (Combined, :mod:`logstream.generate`).
    limit : int
        Lines kept at most.

    Returns
    -------
    list of str

    Raises
    ------
    InputPathError
        When ``sample`` does not exist.
    ConfigError
        When ``sample`` has no line with a bracketed ``[time]`` (the rate source rewrites
        that time, so only Common/Combined-style lines can be replayed).
    """
    if sample is None:
        from logstream.generate.traffic import TrafficConfig, generate_lines

        return list(islice(generate_lines(TrafficConfig(max_lines=limit, duration_s=None)), limit))
    if not sample.is_file():
        raise InputPathError(
            f"rate sample {str(sample)!r} does not exist: point --rate-sample at a Common or "
            "Combined log file (plain or .gz), or leave it out to use generated lines"
        )
    opener = gzip.open if sample.suffix == ".gz" else open
    with opener(sample, "rt", encoding="utf-8", errors="replace") as fh:
        lines = [line.rstrip("\r\n") for line in islice(fh, limit) if _CLF_TIME_RE.search(line)]
    if not lines:
        raise ConfigError(
            f"rate sample {str(sample)!r} has no line with a bracketed [time]: the rate "
            "source needs Common or Combined log lines"
        )
    return lines


def rate_lines(spark: SparkSession, rows_per_second: int, sample: list[str]) -> DataFrame:
    """Real or generated log lines at a fixed rate, stamped with the time they are made.

    Spark's ``rate`` source makes ``rows_per_second`` rows a second, each with a ``timestamp``
    and a counter ``value`` (Spark docs, "Structured Streaming Programming Guide", Input
    Sources; book Ch. 10). Row ``n`` becomes line ``n mod len(sample)`` of ``sample`` with its
    bracketed time replaced by the row's timestamp (UTC), so event time is the time the line
    was made: a live load test, with watermarks and windows behaving as for a real server.
    Only projections are used, so the continuous trigger can read it too.

    Parameters
    ----------
    spark : SparkSession
    rows_per_second : int
        Lines per second (≥ 1).
    sample : list of str
        Lines with a bracketed time (:func:`rate_sample`).

    Returns
    -------
    DataFrame
        Streaming; ``value`` (string, the line), ``source_file`` (string, null) and
        ``generated_at`` (timestamp: when the rate source made the row).
    """
    # one literal array, folded once by the optimizer; the line is picked by the counter
    lines = F.split(F.lit("\n".join(sample)), "\n")
    rate = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .option("numPartitions", 1)
        .load()
    )
    stamp = F.concat(
        F.lit("["), F.date_format("timestamp", "dd/MMM/yyyy:HH:mm:ss"), F.lit(" +0000]")
    )
    line = F.element_at(lines, (F.col("value") % len(sample) + 1).cast("int"))
    return rate.select(
        F.regexp_replace(line, F.lit(_CLF_TIME), stamp).alias("value"),
        F.lit(None).cast("string").alias("source_file"),
        F.col("timestamp").alias("generated_at"),
    )


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
        When the Kafka source is asked for but the connector is not on the classpath, or
        its broker is unreachable.
    KafkaDataLossError
        When unread messages of the topic were deleted and the run fails on data loss.

    Notes
    -----
    * Directory: Spark's file source (plain and ``.gz``); each file is read once, tracked in
      the checkpoint; ``maxFilesPerTrigger`` bounds a micro-batch. Files must appear
      atomically (write elsewhere, then rename into the directory). Subdirectories are read
      (``recursiveFileLookup``), as by ``logstream batch DIR``; names Spark skips
      (:func:`logstream.sources.files.skipped_files`) are skipped by both.
    * Follow: growing log files read like ``tail -F``, exactly once across rotation, with
      file identities and byte offsets in the checkpoint (:mod:`logstream.sources.follow`,
      ``docs/follow.md``); ``max_bytes_per_trigger`` bounds a micro-batch.
    * Socket: Spark's ``socket`` source, as in the book's TCP example. It keeps no offsets,
      so it cannot replay after a failure: use it for demos, not for exactly-once.
    * Kafka: Spark's own connector, ``subscribe`` to one topic, the message value as the line,
      offsets in the checkpoint, earliest on a new one; deleted unread messages are counted
      and stop the run unless allowed (:mod:`logstream.sources.kafka`, ``docs/kafka.md``);
      ``kafka_max_offsets_per_trigger`` bounds a micro-batch.
    * Rate: ``rate`` lines a second from a sample log or generated lines, stamped with the
      time they are made (:func:`rate_lines`); for load tests.
    """
    if cfg.source == "dir":
        assert cfg.input_dir is not None
        if not cfg.input_dir.is_dir():
            raise InputPathError(
                f"input directory {str(cfg.input_dir)!r} does not exist: create it, or point "
                "--input-dir at the directory where log files land"
            )
        # subdirectories are read too, as by `logstream batch DIR` (read_lines); without this
        # Spark's stream reads only the directory's own files, and fails when partition-like
        # subdirectories (`day=1`) sit beside others
        reader = spark.readStream.format("text").option("recursiveFileLookup", "true")
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
    if cfg.source == "rate":
        assert cfg.rate is not None
        sample = rate_sample(cfg.rate_sample)
        return rate_lines(spark, cfg.rate, sample).select("value", "source_file")
    from logstream.sources.kafka import kafka_lines

    return kafka_lines(spark, cfg)
