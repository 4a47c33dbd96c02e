"""``logstream run``: the streaming job."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from logstream.cli.app import FormatOption, MasterOption, app
from logstream.config import SparkSettings

_console = Console(stderr=True, soft_wrap=True)


def _progress_printer(pipeline_ref: list[Any]) -> Any:
    def show(row: dict[str, Any]) -> None:
        if not pipeline_ref:
            return
        totals = pipeline_ref[0].totals
        rate = row.get("processed_rows_per_s")
        _console.print(
            f"[bold]{row['query']}[/bold] batch {row['batch_id']}: "
            f"{row['num_input_rows']:,} rows, "
            f"in {row.get('input_rows_per_s') or 0:,.0f}/s, "
            f"processed {rate or 0:,.0f}/s, {row['batch_duration_ms']:,} ms; "
            f"watermark {row.get('watermark') or '-'}; state rows {row.get('state_rows') or 0:,}; "
            f"late {totals.late_events:,}; quarantined {totals.quarantined:,}",
            highlight=False,
        )

    return show


@app.command()
def run(
    input_dir: Annotated[
        Path | None,
        typer.Option(
            "--input-dir",
            help="Watch this directory for log files (plain or .gz, "
            "placed atomically). The default source.",
        ),
    ] = None,
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket",
            help="Read lines from a TCP server HOST:PORT (e.g. `logstream replay --tcp`).",
        ),
    ] = None,
    kafka_bootstrap: Annotated[
        str | None,
        typer.Option(
            "--kafka-bootstrap",
            help="Kafka bootstrap servers (needs Spark's spark-sql-kafka-0-10 connector).",
        ),
    ] = None,
    kafka_topic: Annotated[str | None, typer.Option("--kafka-topic", help="Kafka topic.")] = None,
    log_format: FormatOption = "auto",
    output_dir: Annotated[
        Path, typer.Option("--output-dir", help="Root of the Parquet outputs.")
    ] = Path("out/stream"),
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Root of the checkpoints (one per query).")
    ] = Path("out/state"),
    store: Annotated[
        str, typer.Option("--store", help="Serving store URL for live views.")
    ] = "sqlite:///out/logstream.db",
    watermark: Annotated[
        str,
        typer.Option(
            "--watermark",
            help="Event-time delay: older events are late, windows older than this are final.",
        ),
    ] = "10 minutes",
    window: Annotated[
        str, typer.Option("--window", help="Tumbling window of traffic and visitors.")
    ] = "1 minute",
    trending_window: Annotated[
        str, typer.Option("--trending-window", help="Sliding window of trending pages.")
    ] = "5 minutes",
    trending_slide: Annotated[
        str, typer.Option("--trending-slide", help="Slide of the trending-pages window.")
    ] = "1 minute",
    top: Annotated[int, typer.Option("--top", help="Trending pages per window.")] = 10,
    store_retention: Annotated[
        str, typer.Option("--store-retention", help="Event-time span of trending windows "
                          "kept in the serving store (Parquet keeps all).")
    ] = "2 hours",
    trigger: Annotated[
        str,
        typer.Option(
            "--trigger",
            help="'available-now' (process what exists, then exit) "
            "or a processing-time interval such as '5 seconds'.",
        ),
    ] = "5 seconds",
    max_files_per_trigger: Annotated[
        int | None, typer.Option("--max-files-per-trigger", help="Files per micro-batch.")
    ] = None,
    sink: Annotated[
        str,
        typer.Option(
            "--sink",
            help="'parquet' (the full pipeline) or 'console' "
            "(print trending pages per micro-batch, as in the book).",
        ),
    ] = "parquet",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    master: MasterOption = None,
) -> None:
    """Run the streaming pipeline: event-time windows, watermark, late-data channel,
    exactly-once Parquet outputs and a SQLite serving store.

    Example: logstream run --input-dir landing/ --trigger available-now
    """
    from logstream.pipeline import Pipeline, PipelineConfig
    from logstream.session import get_spark

    source = "socket" if socket else "kafka" if kafka_bootstrap or kafka_topic else "dir"
    cfg = PipelineConfig.build(
        source=source,
        input_dir=input_dir,
        socket=socket,
        kafka_bootstrap=kafka_bootstrap,
        kafka_topic=kafka_topic,
        log_format=log_format,
        output_dir=output_dir,
        state_dir=state_dir,
        store=store,
        watermark=watermark,
        traffic_window=window,
        trending_window=trending_window,
        trending_slide=trending_slide,
        top=top,
        trigger=trigger,
        max_files_per_trigger=max_files_per_trigger,
        sink=sink,
    )
    from pyspark.sql import SparkSession

    settings = SparkSettings.build(master=master)
    owns_session = SparkSession.getActiveSession() is None
    spark = get_spark(settings)
    ref: list[Any] = []
    pipeline = Pipeline(spark, cfg, on_progress=None if quiet else _progress_printer(ref))
    ref.append(pipeline)

    def handle(signum: int, _frame: Any) -> None:
        _console.print(f"received {signal.Signals(signum).name}: stopping the queries")
        pipeline.request_stop()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        pipeline.run()
    finally:
        pipeline.stop()
        for s, h in previous.items():
            signal.signal(s, h)
        if owns_session:  # drain Spark's listener bus before Python goes away
            spark.stop()
    t = pipeline.totals
    _console.print(
        f"done: {t.events:,} on-time events, {t.late_events:,} late, {t.quarantined:,} "
        f"quarantined in {t.batches} micro-batches; outputs in {cfg.output_dir}, store {cfg.store}",
        highlight=False,
    )
