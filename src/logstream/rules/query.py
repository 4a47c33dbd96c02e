"""Start the rule-alert query: source → :func:`~logstream.rules.alert_stream` → sink."""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from logstream.errors import ConfigError
from logstream.parsing import resolve_format
from logstream.rules.catalog import ALERT_COLUMNS
from logstream.rules.stream import alert_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from logstream.rules.config import RulesConfig

__all__ = ["CONSOLE_ROWS", "alert_lines", "start_alert_query"]

#: Rows the console sink prints per micro-batch or epoch at most.
CONSOLE_ROWS = 1_000_000


def alert_lines(spark: SparkSession, cfg: RulesConfig) -> DataFrame:
    """The configured source as ``value`` and ``received_at`` (timestamp).

    Socket: Spark's ``socket`` source with ``includeTimestamp`` (the time Spark's reader got
    the line) and one partition, so the continuous trigger needs one core for it. Rate:
    :func:`logstream.sources.stream.rate_lines` (``generated_at``: when the rate source made
    the row). Kafka: Spark's ``kafka`` source, one line a message (its value, UTF-8), from the
    topic's earliest offsets at a first start (then from the checkpoint's); ``received_at``
    is the message's timestamp, the time its producer sent it (``logstream replay --kafka``).
    """
    if cfg.source == "kafka":
        raw = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", cfg.kafka_bootstrap)
            .option("subscribe", cfg.kafka_topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        return raw.select(
            F.col("value").cast("string").alias("value"), F.col("timestamp").alias("received_at")
        )
    if cfg.source == "socket":
        assert cfg.socket is not None
        from logstream.replay import parse_host_port

        host, port = parse_host_port(cfg.socket)
        raw = (
            spark.readStream.format("socket")
            .option("host", host)
            .option("port", port)
            .option("includeTimestamp", True)
            .option("numPartitions", 1)
            .load()
        )
        return raw.select("value", F.col("timestamp").alias("received_at"))
    from logstream.sources.stream import rate_lines, rate_sample

    assert cfg.rate is not None
    lines = rate_lines(spark, cfg.rate, rate_sample(cfg.rate_sample))
    return lines.select("value", F.col("generated_at").alias("received_at"))


def _sample(cfg: RulesConfig) -> list[str]:
    if cfg.rate_sample is None:
        return []
    from logstream.sources.stream import rate_sample

    return rate_sample(cfg.rate_sample, limit=100)


def start_alert_query(spark: SparkSession, cfg: RulesConfig) -> StreamingQuery:
    """Start the alert query of ``cfg`` and return it (running).

    Sinks: ``console`` prints one JSON object per alert (``to_json`` of
    :data:`~logstream.rules.ALERT_COLUMNS`, untruncated); a webhook URL gets
    :class:`logstream.sinks.webhook.WebhookWriter` (``Idempotency-Key`` per partition and
    epoch, a ledger under the checkpoint); ``kafka://HOST:PORT/TOPIC`` writes
    :func:`logstream.sinks.kafka.kafka_records` (key ``rule_alerts|<SHA-256 of the value>``,
    value the JSON object) with Spark's Kafka sink, at least once.

    Raises
    ------
    ConfigError
        When the Kafka sink is asked for and Spark's Kafka connector is not on the classpath
        (checked before the query starts), or the format cannot be used.
    """
    from logstream.errors import LogFormatError

    try:
        fmt = resolve_format(cfg.log_format, _sample(cfg))
    except LogFormatError as exc:
        raise ConfigError(f"--format {cfg.log_format!r}: {exc}") from None
    kind = cfg.sink_kind
    if kind == "kafka" or cfg.source == "kafka":
        from logstream.sinks.kafka import check_kafka_sink

        check_kafka_sink(spark)
    # real-time mode's batches last its whole duration: current_timestamp() would be the
    # batch's start, so the plan is the continuous trigger's (detected_at null)
    continuous = cfg.trigger.kind in ("continuous", "real-time")
    alerts = alert_stream(alert_lines(spark, cfg), fmt, continuous=continuous)
    checkpoint = str(cfg.checkpoint or tempfile.mkdtemp(prefix="logstream-rules-"))
    as_json = F.to_json(
        F.struct(*ALERT_COLUMNS),
        {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
    )
    if kind == "console":
        writer = (
            alerts.select(as_json.alias("alert"))
            .writeStream.format("console")
            .option("truncate", False)
            .option("numRows", CONSOLE_ROWS)
        )
    elif kind == "webhook":
        from pathlib import Path

        from logstream.sinks.webhook import WebhookWriter

        ledger = Path(checkpoint) / "webhook-ledger"
        writer = alerts.writeStream.foreach(
            WebhookWriter(cfg.sink, name="alerts", ledger_dir=str(ledger))
        )
    else:
        from logstream.sinks.kafka import kafka_records

        servers, topic = cfg.kafka_target()
        writer = (
            kafka_records(alerts, "rule_alerts", key_cols=())
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("topic", topic)
        )
    writer = writer.queryName("rule_alerts").option("checkpointLocation", checkpoint)
    return cfg.trigger.apply(writer.outputMode("append")).start()  # real-time: update
