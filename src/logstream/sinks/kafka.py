"""A Kafka sink for micro-batch outputs: JSON values, deterministic keys for consumer de-dup.

Delivery guarantee: **at-least-once, with keys that let a consumer de-duplicate.** Spark's
Kafka sink does not write transactionally (Spark guide, "Structured Streaming + Kafka
Integration", *Writing Data to Kafka*: "Kafka's own semantics are at-least-once"); when a
micro-batch is replayed after a crash, its records are written again. Every record's key is
built only from the output's name and the row's identity — window start and key columns —
never from processing time, so a replayed batch writes the same keys again:

* a consumer that keeps the last value per key (a compacted topic, a table upsert) holds each
  row once; the values of a replayed window are identical, because final windows are
  published once, when the watermark passes them;
* a consumer that counts records must remember the keys it has seen (or, for outputs keyed by
  window, the newest ``window_start`` per output) and drop repeats.

Keys: ``<output>|<window_start>|<key columns...>`` with timestamps as ISO 8601 UTC
(``traffic_per_minute|1995-07-01T00:00:00Z``, ``trending_pages|1995-07-01T00:00:00Z|/``),
from :data:`KEY_COLUMNS`; an output without key columns (``events``, ``late_events``,
``quarantine``) is keyed by the SHA-256 of its JSON value. Values: the row as a JSON object
(``to_json(struct(*))``), timestamps in ISO 8601 UTC, binary columns in base64.

Headers: ``output`` and ``batch_id``, so a consumer also sees which micro-batch wrote a record:
a record written again by a replayed micro-batch has the same key, value and ``batch_id``.

Spark's Kafka connector is not part of the PySpark wheel: ``logstream run`` with a
``kafka://`` sink puts the cached jars (:mod:`logstream.kafka.maven`) on the session it
starts; under ``spark-submit``, ``--packages`` :data:`~logstream.session.KAFKA_PACKAGE` adds
it. :func:`check_kafka_sink` fails at start, before any query runs, when it is missing, as
the Kafka source does. ``tests/kafka/test_kafka_broker.py`` runs it against a real broker
(``docs/kafka.md``). The technique is the book's Kafka sink
("Stream Processing with Apache Spark", Ch. 11 "Structured Streaming Sinks", *The Kafka
Sink*: a ``key`` and a ``value`` column, at-least-once).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from logstream.errors import ConfigError
from logstream.session import KAFKA_PACKAGE, kafka_available
from logstream.sinks.publish import TIMESTAMP_FORMAT

__all__ = ["KEY_COLUMNS", "check_kafka_sink", "kafka_records", "record_key", "write_kafka"]

#: The columns that identify a row of each output (its Kafka key, after the output's name).
KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "traffic_per_minute": ("window_start",),
    "unique_visitors": ("window_start",),
    "trending_pages": ("window_start", "url_path"),
    "top_clients": ("window_start", "client_host"),
    "traffic_by_section": ("window_start", "section"),
    "traffic_by_agent": ("window_start", "agent_class"),
    "traffic_by_network": ("window_start", "organisation"),
    "traffic_by_panel": ("window_start", "panel", "key"),
    "alerts": ("window_start", "series", "metric"),
    "sessions": ("session_start", "client_host", "user_agent"),
    "bot_scores": ("window_start", "client_host"),
}

#: Separator of the parts of a key.
KEY_SEPARATOR = "|"


def _text(df: DataFrame, name: str) -> Column:
    """A key column as text: timestamps in ISO 8601 UTC, null as the empty string."""
    column = F.col(name)
    if isinstance(df.schema[name].dataType, TimestampType):
        text = F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss'Z'")
    else:
        text = column.cast("string")
    return F.coalesce(text, F.lit(""))


def _value(df: DataFrame) -> Column:
    return F.to_json(
        F.struct(*[F.col(c) for c in df.columns]), {"timestampFormat": TIMESTAMP_FORMAT}
    )


def record_key(df: DataFrame, name: str, key_cols: tuple[str, ...] | None = None) -> Column:
    """The Kafka key of each row of output ``name`` (see the module docstring).

    Parameters
    ----------
    df : DataFrame
        Rows of the output.
    name : str
        The output's name, the key's first part.
    key_cols : tuple of str, optional
        Columns identifying a row; default :data:`KEY_COLUMNS` of ``name``; empty: the
        SHA-256 of the row's JSON value.
    """
    cols = KEY_COLUMNS.get(name, ()) if key_cols is None else key_cols
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ConfigError(
            f"Kafka key column {missing[0]!r} is not a column of output {name!r} "
            f"(columns: {', '.join(df.columns)})"
        )
    if not cols:
        return F.concat_ws(KEY_SEPARATOR, F.lit(name), F.sha2(_value(df), 256))
    return F.concat_ws(KEY_SEPARATOR, F.lit(name), *[_text(df, c) for c in cols])


def kafka_records(
    df: DataFrame,
    name: str,
    key_cols: tuple[str, ...] | None = None,
    batch_id: int | None = None,
) -> DataFrame:
    """The Kafka records of a batch of output ``name``: a key and a JSON value per row.

    Parameters
    ----------
    df : DataFrame
        Batch DataFrame of any schema (a published output's rows).
    name : str
        The output's name.
    key_cols : tuple of str, optional
        As :func:`record_key`.
    batch_id : int, optional
        When given, every record gets the headers ``output`` (``name``) and ``batch_id``.

    Returns
    -------
    DataFrame
        ``key`` (string), ``value`` (string, ``to_json(struct(*))``) and, with ``batch_id``,
        ``headers`` (array of struct ``key`` string, ``value`` binary): the columns Spark's
        Kafka sink writes.
    """
    columns = [record_key(df, name, key_cols).alias("key"), _value(df).alias("value")]
    if batch_id is not None:
        columns.append(
            F.array(
                F.struct(F.lit("output").alias("key"), F.lit(name).cast("binary").alias("value")),
                F.struct(
                    F.lit("batch_id").alias("key"),
                    F.lit(str(batch_id)).cast("binary").alias("value"),
                ),
            ).alias("headers")
        )
    return df.select(*columns)


def check_kafka_sink(spark: SparkSession) -> None:
    """Fail at start when Spark's Kafka connector is not on the classpath.

    Raises
    ------
    ConfigError
        Naming :data:`~logstream.session.KAFKA_PACKAGE` and how to add it.
    """
    if not kafka_available(spark):
        raise ConfigError(
            "a kafka:// sink needs Spark's Kafka connector, which is not on this session's "
            "classpath: logstream run adds it to the session it starts; a session started "
            f"before (a notebook, spark-submit) needs spark-submit --packages {KAFKA_PACKAGE} "
            "(or set spark.jars.packages); or leave the kafka:// --sink out"
        )


def write_kafka(records: DataFrame, bootstrap: str, topic: str) -> None:
    """Write :func:`kafka_records` rows to ``topic`` (a batch write, inside ``foreachBatch``).

    At-least-once: a replayed micro-batch writes its records again, with the same keys.

    Parameters
    ----------
    records : DataFrame
        ``key``, ``value`` [, ``headers``], as :func:`kafka_records` returns.
    bootstrap : str
        ``HOST:PORT[,HOST:PORT...]`` of the Kafka brokers.
    topic : str
        The topic written to.
    """
    (
        records.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
