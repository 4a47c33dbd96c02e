"""``logstream rules``: the stateless rule-alert hot path under any trigger (continuous too)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from logstream.cli.app import MasterOption, app, err_console
from logstream.errors import ConfigError

__all__ = ["rules"]


SourceOption = Annotated[
    str | None,
    typer.Option(
        "--source",
        help="socket (a text server, e.g. logstream replay --tcp), rate, or kafka (a "
        "topic, e.g. logstream replay --kafka). Default: kafka with --kafka-topic, else "
        "socket.",
        show_default=False,
    ),
]
KafkaBootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--kafka-bootstrap", "--kafka", metavar="HOST:PORT", help="Brokers the Kafka source reads."
    ),
]
KafkaTopicOption = Annotated[
    str | None,
    typer.Option(
        "--kafka-topic",
        "--topic",
        metavar="TOPIC",
        help="Topic the Kafka source reads, one line a message (from its start, then from "
        "the checkpoint).",
    ),
]


@app.command("rules")
def rules(
    source: SourceOption = None,
    kafka_bootstrap: KafkaBootstrapOption = None,
    kafka_topic: KafkaTopicOption = None,
    socket: Annotated[
        str | None,
        typer.Option("--socket", metavar="HOST:PORT", help="Server the socket source reads."),
    ] = None,
    rate: Annotated[
        int | None, typer.Option("--rate", help="Lines per second of the rate source.")
    ] = None,
    rate_sample: Annotated[
        Path | None,
        typer.Option(
            "--rate-sample",
            help="Common/Combined log the rate source cycles through (default: generated "
            "Combined lines).",
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="common, combined or an Apache LogFormat; auto (the default) only with "
            "--rate-sample or the generated rate lines.",
        ),
    ] = "auto",
    sink: Annotated[
        str,
        typer.Option(
            "--sink",
            help="console (one JSON object per alert), an http(s):// webhook URL, or "
            "kafka://HOST:PORT/TOPIC.",
        ),
    ] = "console",
    trigger: Annotated[
        str,
        typer.Option(
            "--trigger",
            help="continuous:INTERVAL (continuous processing, INTERVAL = checkpoint interval), "
            "real-time:DURATION (Spark's real-time mode, DURATION = its batch's length: the "
            "Kafka source only), or a micro-batch interval: 0s (as fast as possible), 1s, 10s.",
        ),
    ] = "continuous:1s",
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Checkpoint directory (default: a temporary one)."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option("--duration", help="Stop after this long (30s, 5m); default: Ctrl-C."),
    ] = None,
    master: MasterOption = None,
) -> None:
    """Flag scanner probes, auth failures and server errors live.

    Line by line, with low latency.

    Example: logstream rules --socket 127.0.0.1:9999 --format common --trigger continuous:1s
    """
    from logstream.config import SparkSettings
    from logstream.pipeline.config import interval_seconds
    from logstream.rules.config import RulesConfig, parse_trigger

    duration_s = None
    if duration:
        try:
            duration_s = interval_seconds(duration)
        except ValueError as exc:
            raise ConfigError(f"--duration: {exc}") from None
    if source is None:
        source = "kafka" if kafka_topic or kafka_bootstrap else "socket"
    if source == "rate" and rate_sample is None and log_format == "auto":
        log_format = "combined"  # the generated lines are Combined
    cfg = RulesConfig(
        source=source,
        trigger=parse_trigger(trigger),
        sink=sink,
        socket=socket,
        rate=rate,
        rate_sample=rate_sample.resolve() if rate_sample else None,
        log_format=log_format,
        checkpoint=checkpoint.resolve() if checkpoint else None,
        duration_s=duration_s,
        kafka_bootstrap=kafka_bootstrap,
        kafka_topic=kafka_topic,
    )
    cfg.sink_kind  # noqa: B018 - checks the sink before the JVM starts

    from logstream.rules.query import start_alert_query
    from logstream.session import get_spark

    # Spark's Kafka connector for a Kafka source or sink only (docs/kafka.md)
    kafka = cfg.sink_kind == "kafka" or cfg.source == "kafka"
    spark = get_spark(
        SparkSettings(master=master, kafka=kafka) if master else SparkSettings(kafka=kafka)
    )
    query = start_alert_query(spark, cfg)
    err_console.print(
        f"rule alerts: {cfg.source} → {cfg.sink_kind} with the {cfg.trigger.kind} trigger "
        f"({cfg.trigger.interval})"
    )
    _wait(query, duration_s, spark)
    error = query.exception()
    if error is not None:
        err_console.print(f"[bold red]error:[/bold red] the alert query failed: {error}")
        raise typer.Exit(1)


def _wait(query: Any, duration_s: float | None, spark: Any) -> None:
    """Wait until ``query`` ends, SIGINT or SIGTERM arrives, or ``duration_s`` seconds pass
    (``None``: no limit); then stop it, Spark's log off meanwhile: the tasks a stop cancels
    (a real-time or continuous epoch's long-running tasks) log their interruption as errors."""
    stop = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while query.isActive and not stop.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            stop.wait(0.2 if remaining is None else min(0.2, remaining))
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if query.isActive:
            from logstream.session import SPARK_LOG_LEVEL

            spark.sparkContext.setLogLevel("OFF")
            query.stop()
            spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
