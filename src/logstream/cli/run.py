"""``logstream run``: the streaming job, or with no source the live demo."""

from __future__ import annotations

import os
import signal
import threading
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from logstream.cli.app import (
    app,
    given_on_command_line,
    spark_conf,
)
from logstream.config import SparkSettings
from logstream.errors import ConfigError
from logstream.units import plural

__all__ = ["load_config_file", "run"]

_console = Console(stderr=True, soft_wrap=True, highlight=False)

_PATH_PARAMS = {"input_dir", "output_dir", "state_dir", "demo_out", "config", "rate_sample"}

#: What a stop leaves (said when it came before the queries started).
_STOPPED = "a restart begins where the checkpoint is"


class StopSignals:
    """While inside, SIGINT and SIGTERM set ``stop`` instead of ending the process.

    The pipeline stops between micro-batches once ``stop`` is set (the one being delivered is
    finished, a later one is not started: :mod:`logstream.sinks.gate`), Spark stops, and the
    command exits 0. A signal before the queries exist is kept: none of them starts.
    More signals while stopping change nothing (SIGKILL ends the run at once, and the next
    start repairs the micro-batch it cut). The JVM does not get the signals a terminal or
    ``kill -- -PGID`` sends the driver's group (:func:`logstream.jvm.launch_gateway`).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # only it can catch them
            self.previous = {s: signal.signal(s, self.handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *_exc: object) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)

    def handle(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.stop.is_set():
            _console.print(f"received {name}: already stopping")
            return
        self.stop.set()
        _console.print(f"received {name}: stopping the queries")


def load_config_file(path: Path, ctx: typer.Context) -> dict[str, Any]:
    """Read the ``[run]`` table of a TOML file, keyed by parameter name.

    Keys are the long option names without dashes (``input_dir``, ``format``,
    ``watermark``, ``dashboard``, ``replay`` …).

    Raises
    ------
    ConfigError
        When the file is missing, is not TOML, has no ``[run]`` table, or names an unknown
        option.
    """
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
    run_table = table.get("run")
    if not isinstance(run_table, dict):
        raise ConfigError(f"config file {str(path)!r} needs a [run] table")
    by_option: dict[str, str] = {}
    for param in ctx.command.params:
        for opt in param.opts:
            if opt.startswith("--"):
                by_option[opt[2:].replace("-", "_")] = param.name or ""
    values = {}
    for key, value in run_table.items():
        name = by_option.get(key)
        if name is None or name == "config":
            raise ConfigError(
                f"config file {str(path)!r}: unknown option {key!r} in [run]; "
                f"known: {', '.join(sorted(k for k in by_option if k != 'config'))}"
            )
        if name in _PATH_PARAMS and isinstance(value, str):
            value = Path(value)
        if name == "replay":
            value = [Path(v) for v in (value if isinstance(value, list) else [value])]
        values[name] = value
    return values


def _reference_values(value: object) -> list[str]:
    """``--reference`` values from the command line (a list) or a config file (a list, or a
    table ``{kind = "FILE"}``)."""
    if not value:
        return []
    if isinstance(value, dict):
        return [f"{kind}={path}" for kind, path in value.items()]
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def follow_losses_text(losses: dict[str, int] | None) -> str:
    """``; N bytes (~M lines) lost to rotation …`` when the follow source lost any, else ``""``.

    ``losses`` has the follow source's running ``lost_bytes`` and ``lost_lines`` (an
    estimate), as a progress row's ``follow_losses`` or, with a ``follow_`` prefix, as
    :meth:`~logstream.serving.ServingStore.follow_losses` returns them.
    """
    if not losses:
        return ""
    lost = losses.get("lost_bytes", losses.get("follow_lost_bytes", 0))
    lines = losses.get("lost_lines", losses.get("follow_lost_lines", 0))
    if not lost:
        return ""
    return (
        f"; [yellow]{plural(lost, 'byte')} (~{plural(lines, 'line')}) lost to rotation"
        "[/yellow] (docs/follow.md)"
    )


def _progress_printer(ref: list[Any]) -> Any:
    reported = [0]  # lost bytes printed so far: a loss found in an empty micro-batch shows too

    def show(row: dict[str, Any]) -> None:
        lost = (row.get("follow_losses") or {}).get("lost_bytes", 0)
        if not ref or not (row.get("num_input_rows") or lost > reported[0]):
            return
        reported[0] = max(reported[0], lost)
        totals = ref[0].totals
        state_rows = row.get("state_rows") or 0  # the deduplication operator's (Spark)
        ingest = getattr(ref[0], "ingest", None)
        if ingest is not None:  # open panes, sessions and series of the analytics snapshot
            state_rows += ingest.state.last_rows or 0
        watermark = row.get("watermark")
        if row["query"] == "ingest":
            # logstream's own event-time watermark (Spark's, with deduplication on, is the
            # arrival-time watermark of that operator)
            watermark = (
                None
                if totals.watermark_ms is None
                else datetime.fromtimestamp(totals.watermark_ms / 1000, UTC).isoformat()
            )
        _console.print(
            f"[bold]{row['query']}[/bold] batch {row['batch_id']}: "
            f"{plural(row['num_input_rows'], 'row')}, "
            f"in {row.get('input_rows_per_s') or 0:,.0f}/s, "
            f"processed {row.get('processed_rows_per_s') or 0:,.0f}/s, "
            f"{row['batch_duration_ms']:,} ms; watermark {watermark or '-'}; "
            f"state rows {state_rows:,}; events {totals.events:,}, "
            f"late {totals.late_events:,}, quarantined {totals.quarantined:,}"
            + (
                f"; {plural(dups, 'duplicate')} dropped"
                if (dups := row.get("duplicates_dropped"))
                else ""
            )
            + follow_losses_text(row.get("follow_losses"))
        )

    return show


#: The groups of ``run --help`` (every option in detail: docs/streaming.md's option table).
_INPUT = "Input"
_OUTPUT = "Output"
_WINDOWS = "Windows and analytics"
_STATE = "Triggers and state"
_DASHBOARD = "Dashboard and demo"
_SPARK = "Spark"


@app.command()
def run(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            rich_help_panel=_INPUT,
            help="TOML file with a \\[run] table of these options; flags win.",
        ),
    ] = None,
    input_dir: Annotated[
        Path | None,
        typer.Option(
            "--input-dir",
            metavar="DIR",
            rich_help_panel=_INPUT,
            help="Watch this directory for log files (plain or .gz).",
        ),
    ] = None,
    follow: Annotated[
        list[str] | None,
        typer.Option(
            "--follow",
            metavar="FILE",
            rich_help_panel=_INPUT,
            help="Follow a growing log file or glob, like tail -F (repeatable).",
        ),
    ] = None,
    max_bytes_per_trigger: Annotated[
        int | None,
        typer.Option(
            "--max-bytes-per-trigger",
            min=1,
            metavar="BYTES",
            rich_help_panel=_INPUT,
            help="With --follow: bytes per micro-batch at most.",
        ),
    ] = None,
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket",
            metavar="HOST:PORT",
            rich_help_panel=_INPUT,
            help="Read lines from a TCP server; needs --format.",
        ),
    ] = None,
    kafka_bootstrap: Annotated[
        str | None,
        typer.Option(
            "--kafka-bootstrap",
            metavar="SERVERS",
            rich_help_panel=_INPUT,
            help="Kafka bootstrap servers.",
        ),
    ] = None,
    kafka_topic: Annotated[
        str | None,
        typer.Option("--kafka-topic", metavar="TOPIC", rich_help_panel=_INPUT, help="Kafka topic."),
    ] = None,
    rate: Annotated[
        int | None,
        typer.Option(
            "--rate",
            min=1,
            metavar="N",
            rich_help_panel=_INPUT,
            help="Load test: N lines a second from Spark's rate source.",
        ),
    ] = None,
    rate_sample: Annotated[
        Path | None,
        typer.Option(
            "--rate-sample",
            metavar="FILE",
            rich_help_panel=_INPUT,
            help="With --rate: the log whose lines are cycled through.",
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            rich_help_panel=_INPUT,
            help="Log format: auto, common, combined, nginx, json, a LogFormat….",
        ),
    ] = "auto",
    output_dir: Annotated[
        Path,
        typer.Option(
            "--output-dir", metavar="DIR", rich_help_panel=_OUTPUT, help="Root of the outputs."
        ),
    ] = Path("out/stream"),
    state_dir: Annotated[
        Path,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            rich_help_panel=_STATE,
            help="Root of the checkpoints.",
        ),
    ] = Path("out/state"),
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            rich_help_panel=_OUTPUT,
            help="Serving store: sqlite:///PATH or postgresql://… "
            "\\[default: OUTPUT_DIR/logstream.db]",
        ),
    ] = None,
    watermark: Annotated[
        str,
        typer.Option(
            "--watermark",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Event-time delay after which events are late.",
        ),
    ] = "10 minutes",
    window: Annotated[
        str,
        typer.Option(
            "--window",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Window of traffic and visitors.",
        ),
    ] = "1 minute",
    trending_window: Annotated[
        str,
        typer.Option(
            "--trending-window",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Sliding window of trending pages.",
        ),
    ] = "5 minutes",
    trending_slide: Annotated[
        str,
        typer.Option(
            "--trending-slide",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Slide of the trending-pages window.",
        ),
    ] = "1 minute",
    top: Annotated[
        int,
        typer.Option(
            "--top", metavar="N", rich_help_panel=_WINDOWS, help="Trending pages per window."
        ),
    ] = 10,
    store_retention: Annotated[
        str,
        typer.Option(
            "--store-retention",
            metavar="SPAN",
            rich_help_panel=_OUTPUT,
            help="Event time of trending windows kept in the store.",
        ),
    ] = "2 hours",
    trigger: Annotated[
        str,
        typer.Option(
            "--trigger",
            metavar="WHEN",
            rich_help_panel=_STATE,
            help="'available-now' or an interval such as '5 seconds'.",
        ),
    ] = "5 seconds",
    max_files_per_trigger: Annotated[
        int | None,
        typer.Option(
            "--max-files-per-trigger",
            metavar="N",
            rich_help_panel=_INPUT,
            help="With --input-dir: files per micro-batch at most.",
        ),
    ] = None,
    sink: Annotated[
        list[str] | None,
        typer.Option(
            "--sink",
            metavar="SINK",
            rich_help_panel=_OUTPUT,
            help="parquet, console, or a kafka:// or http(s):// URL (repeatable).",
        ),
    ] = None,
    sink_outputs: Annotated[
        str,
        typer.Option(
            "--sink-outputs",
            metavar="LIST",
            rich_help_panel=_OUTPUT,
            help="Outputs sent to the --sink URLs: default, all or a list.",
        ),
    ] = "default",
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format",
            metavar="FORMAT",
            rich_help_panel=_OUTPUT,
            help="parquet, json (JSON lines) or csv.",
        ),
    ] = "parquet",
    dedup: Annotated[
        bool,
        typer.Option(
            "--dedup/--keep-duplicates",
            rich_help_panel=_STATE,
            help="Count a line delivered again once.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            rich_help_panel=_INPUT,
            help="Fail on a corrupt input file instead of quarantining it.",
        ),
    ] = False,
    dedup_window: Annotated[
        str,
        typer.Option(
            "--dedup-window",
            metavar="SPAN",
            rich_help_panel=_STATE,
            help="Processing time in which a re-sent line is recognised.",
        ),
    ] = "10 minutes",
    session_gap: Annotated[
        str,
        typer.Option(
            "--session-gap",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Inactivity that ends a visitor's session.",
        ),
    ] = "30 minutes",
    session_stats_window: Annotated[
        str,
        typer.Option(
            "--session-stats-window",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Window of session count and durations.",
        ),
    ] = "1 hour",
    clients_window: Annotated[
        str,
        typer.Option(
            "--clients-window",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Window of the top clients.",
        ),
    ] = "5 minutes",
    alert_sigma: Annotated[
        float,
        typer.Option(
            "--alert-sigma",
            metavar="X",
            rich_help_panel=_WINDOWS,
            help="Alert at this many standard deviations.",
        ),
    ] = 5.0,
    alert_warmup: Annotated[
        str,
        typer.Option(
            "--alert-warmup",
            metavar="SPAN",
            rich_help_panel=_WINDOWS,
            help="Observed time before a series may alert.",
        ),
    ] = "30 minutes",
    reference: Annotated[
        list[str] | None,
        typer.Option(
            "--reference",
            metavar="KIND=FILE",
            rich_help_panel=_INPUT,
            help="Reference table: networks, agents or sections (repeatable).",
        ),
    ] = None,
    queries: Annotated[
        str,
        typer.Option(
            "--queries",
            metavar="LIST",
            rich_help_panel=_OUTPUT,
            help="Analytics outputs: all, none or a comma-separated list.",
        ),
    ] = "all",
    bot_model: Annotated[
        Path | None,
        typer.Option(
            "--bot-model",
            metavar="DIR",
            rich_help_panel=_OUTPUT,
            help="Score client windows with this bot model.",
        ),
    ] = None,
    dashboard: Annotated[
        bool | None,
        typer.Option(
            "--dashboard/--no-dashboard",
            rich_help_panel=_DASHBOARD,
            help="Serve the live dashboard \\[default: on for the demo].",
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host", metavar="HOST", rich_help_panel=_DASHBOARD, help="Dashboard address."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", rich_help_panel=_DASHBOARD, help="Dashboard port."),
    ] = 8050,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            metavar="SPAN",
            rich_help_panel=_STATE,
            help="Stop after this long \\[default: until Ctrl-C].",
        ),
    ] = None,
    replay: Annotated[
        list[Path] | None,
        typer.Option(
            "--replay",
            metavar="FILE",
            rich_help_panel=_DASHBOARD,
            help="Demo: replay this log (repeatable).",
        ),
    ] = None,
    speedup: Annotated[
        float,
        typer.Option(
            "--speedup",
            metavar="X",
            rich_help_panel=_DASHBOARD,
            help="Demo: event seconds replayed per second.",
        ),
    ] = 600.0,
    rotate_every: Annotated[
        str,
        typer.Option(
            "--rotate-every",
            metavar="SPAN",
            rich_help_panel=_DASHBOARD,
            help="Demo: event time between log rotations.",
        ),
    ] = "12h",
    demo_out: Annotated[
        Path,
        typer.Option(
            "--demo-out",
            metavar="DIR",
            rich_help_panel=_DASHBOARD,
            help="Demo: where everything is written (emptied).",
        ),
    ] = Path("out/demo"),
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", rich_help_panel=_STATE, help="No progress lines."),
    ] = False,
    master: Annotated[
        str | None,
        typer.Option("--master", metavar="URL", rich_help_panel=_SPARK, help="Spark master URL."),
    ] = None,
    conf: Annotated[
        list[str] | None,
        typer.Option(
            "--conf",
            metavar="KEY=VALUE",
            rich_help_panel=_SPARK,
            help="A Spark setting, as spark-submit's --conf (repeatable).",
        ),
    ] = None,
) -> None:
    """Run the streaming pipeline, or with no source the live demo.

    Windows in event time, late data, exactly-once outputs and a serving store.

    With no source: real NASA logs replayed live onto the dashboard.

    Every option in detail: docs/streaming.md.

    Example: logstream run --input-dir landing/ --trigger available-now
    """
    values = dict(locals())
    # set by SIGINT or SIGTERM (caught from here on: docs/operations.md), --duration, or the
    # demo's end; the pipeline stops between micro-batches once it is set
    stop = threading.Event()
    with StopSignals(stop):
        _run(ctx, values, stop)


def _run(ctx: typer.Context, values: dict[str, Any], stop: threading.Event) -> None:
    """:func:`run`'s work, with SIGINT and SIGTERM already turned into ``stop``."""
    from pyspark.sql import SparkSession

    from logstream.pipeline import Pipeline, PipelineConfig, interval_seconds
    from logstream.pipeline.ingest import FAULT_ENV, fault_hook
    from logstream.reference import parse_reference_options
    from logstream.session import get_spark

    config = values["config"]
    if config is not None:
        for name, value in load_config_file(config, ctx).items():
            if not given_on_command_line(ctx, name):
                values[name] = value
    v = values
    sources = [
        name
        for name, given in (
            ("--input-dir", v["input_dir"]),
            ("--follow", v["follow"]),
            ("--socket", v["socket"]),
            ("--kafka-bootstrap/--kafka-topic", v["kafka_bootstrap"] or v["kafka_topic"]),
            ("--rate", v["rate"]),
        )
        if given
    ]
    if len(sources) > 1:
        raise ConfigError(
            f"one source at a time: got {' and '.join(sources)}; run one pipeline per source"
        )
    demo = not sources
    duration_s = None
    if v["duration"]:
        try:
            duration_s = interval_seconds(str(v["duration"]))
        except ValueError as exc:
            raise ConfigError(f"--duration: {exc}") from exc
    with_dashboard = demo if v["dashboard"] is None else v["dashboard"]
    try:
        rotate_every_s = interval_seconds(str(v["rotate_every"]))
        if rotate_every_s <= 0:
            raise ValueError(f"{v['rotate_every']!r} must be longer than zero")
    except ValueError as exc:
        raise ConfigError(f"--rotate-every: {exc}") from exc

    sinks = [v["sink"]] if isinstance(v["sink"], str) else list(v["sink"] or ["parquet"])
    settings = SparkSettings.build(master=v["master"], extra=spark_conf(v["conf"]))
    cfg = None  # checked before the JVM starts, so a bad option fails at once
    if not demo:
        source = (
            "follow"
            if v["follow"]
            else "socket"
            if v["socket"]
            else "kafka"
            if v["kafka_bootstrap"] or v["kafka_topic"]
            else "rate"
            if v["rate"]
            else "dir"
        )
        follow_paths = None
        if v["follow"]:
            from logstream.sources.follow import check_follow_paths, rotation_warnings

            paths = v["follow"] if isinstance(v["follow"], list) else [v["follow"]]
            follow_paths = tuple(check_follow_paths(paths))  # before the JVM starts
            for warning in rotation_warnings(follow_paths):
                _console.print(f"[yellow]warning:[/yellow] {warning}")
        if source == "dir" and v["input_dir"] is not None:  # Spark skips them without a word
            from rich.markup import escape

            from logstream.sources.files import skipped_files, skipped_note

            if note := skipped_note(skipped_files([v["input_dir"]])):
                _console.print(f"[yellow]warning:[/yellow] {escape(note)}")
        cfg = PipelineConfig.build(
            source=source,
            input_dir=v["input_dir"],
            follow=follow_paths,
            max_bytes_per_trigger=v["max_bytes_per_trigger"],
            socket=v["socket"],
            kafka_bootstrap=v["kafka_bootstrap"],
            kafka_topic=v["kafka_topic"],
            rate=v["rate"],
            rate_sample=v["rate_sample"],
            log_format=v["log_format"],
            output_dir=v["output_dir"],
            state_dir=v["state_dir"],
            store=v["store"],
            watermark=v["watermark"],
            traffic_window=v["window"],
            trending_window=v["trending_window"],
            trending_slide=v["trending_slide"],
            top=v["top"],
            store_retention=v["store_retention"],
            trigger=v["trigger"],
            max_files_per_trigger=v["max_files_per_trigger"],
            sink="console" if "console" in sinks else "parquet",
            sinks=tuple(s for s in sinks if s not in ("parquet", "console")),
            sink_outputs=v["sink_outputs"],
            output_format=v["output_format"],
            dedup=v["dedup"],
            strict=v["strict"],
            dedup_window=v["dedup_window"],
            session_gap=v["session_gap"],
            session_stats_window=v["session_stats_window"],
            clients_window=v["clients_window"],
            alert_sigma=v["alert_sigma"],
            alert_warmup=v["alert_warmup"],
            reference=parse_reference_options(_reference_values(v["reference"])),
            bot_model=v["bot_model"],
            queries=v["queries"],
        )
        # a store or output directory of another checkpoint stops the run before the JVM starts
        # (a refused run creates no store file; the store is closed again: the pipeline opens
        # its own, and a PostgreSQL pool is not left open)
        from logstream.pipeline.identity import claim_store

        claim_store(cfg.state_dir, cfg.output_dir, cfg.store_url)
    owns_session = SparkSession.getActiveSession() is None
    ref: list[Any] = []
    printer = None if v["quiet"] else _progress_printer(ref)
    if stop.is_set():
        _console.print(f"stopped before Spark started: nothing was read ({_STOPPED})")
        return
    # PySpark's SparkContext would install a SIGINT handler that cancels every job mid-batch;
    # ours (StopSignals) is kept, and lets the running micro-batch finish instead
    spark = get_spark(settings, keep_signal_handlers=True)
    pipeline = None
    try:
        if stop.is_set():
            pass  # a stop while Spark started: no query is started
        elif demo:
            from logstream.demo import DemoSettings, run_demo

            demo_settings = DemoSettings(
                logs=list(v["replay"] or []),
                speedup=v["speedup"],
                rotate_every_s=rotate_every_s,
                duration_s=duration_s,
                out_dir=v["demo_out"],
                dashboard=with_dashboard,
                host=v["host"],
                port=v["port"],
            )
            pipeline = run_demo(spark, demo_settings, _console, printer, stop, ref.append)
            outputs = f"{pipeline.store.get_state('source_label')}; outputs in {v['demo_out']}"
        else:
            assert cfg is not None
            # the CLI's stop event is the pipeline's: a stop requested while the pipeline is
            # being built starts no query, one while the query starts stops it
            pipeline = Pipeline(spark, cfg, on_progress=printer, stop_requested=stop)
            ref.append(pipeline)
            if fault := os.environ.get(FAULT_ENV):  # the crash drills
                pipeline.ingest.step_hook = fault_hook(fault)
            server = None
            if with_dashboard:
                from logstream.dashboard.app import start_dashboard_thread

                server = start_dashboard_thread(
                    cfg.store_url,
                    v["host"],
                    v["port"],
                    top=cfg.top,
                    spark_ui_url=spark.sparkContext.uiWebUrl,
                )
                _console.print(f"dashboard: {server.url}")
            if duration_s is not None:

                def duration_reached() -> None:
                    _console.print(f"--duration {v['duration']} reached: stopping the queries")
                    pipeline.request_stop()

                timer = threading.Timer(duration_s, duration_reached)
                timer.daemon = True
                timer.start()
            try:
                pipeline.run()
            finally:
                pipeline.stop()
                if server is not None:
                    server.stop()
            outputs = f"outputs in {cfg.output_dir}, store {pipeline.store.url}"  # no password
    finally:
        if owns_session:  # drain Spark's listener bus before Python goes away
            spark.stop()
    if pipeline is None:
        _console.print(f"stopped before the queries started: nothing was read ({_STOPPED})")
        return
    t = pipeline.totals
    if pipeline.cfg.dedup:
        dedup = f"{pipeline.store.counters()['duplicates']:,} duplicate lines dropped"
    else:
        dedup = "deduplication off"
    _console.print(
        f"done: {t.events:,} on-time events, {t.late_events:,} late, {t.quarantined:,} "
        f"quarantined, {dedup}, in {plural(t.batches, 'micro-batch')}; {outputs}"
        + (follow_losses_text(pipeline.store.follow_losses()) if pipeline.cfg.follow else "")
    )
