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


@app.command("rules")
def rules(
    source: Annotated[
        str,
        typer.Option(
            "--source", help="socket (a text server, e.g. logstream replay --tcp) or rate."
        ),
    ] = "socket",
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
            "real-time:DURATION (Spark's real-time mode: Kafka sources only, refused here), or "
            "a micro-batch interval: 0s (as fast as possible), 1s, 10s.",
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
    )
    cfg.sink_kind  # noqa: B018 - checks the sink before the JVM starts

    from logstream.rules.query import start_alert_query
    from logstream.session import get_spark

    # Spark's Kafka connector for a kafka:// sink only (docs/kafka.md)
    kafka = cfg.sink_kind == "kafka"
    spark = get_spark(
        SparkSettings(master=master, kafka=kafka) if master else SparkSettings(kafka=kafka)
    )
    query = start_alert_query(spark, cfg)
    err_console.print(
        f"rule alerts: {cfg.source} → {cfg.sink_kind} with the {cfg.trigger.kind} trigger "
        f"({cfg.trigger.interval})"
    )
    _wait(query, duration_s)
    error = query.exception()
    if error is not None:
        err_console.print(f"[bold red]error:[/bold red] the alert query failed: {error}")
        raise typer.Exit(1)


def _wait(query: Any, duration_s: float | None) -> None:
    """Wait until ``query`` ends, SIGINT or SIGTERM arrives, or ``duration_s`` seconds pass
    (``None``: no limit); then stop it."""
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
        query.stop()
