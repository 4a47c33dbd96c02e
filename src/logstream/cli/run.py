"""``logstream run``: the streaming job, or with no source the live demo."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from logstream.cli.app import app, given_on_command_line, spark_conf
from logstream.cli.faults import RunLog, check_writable, run_fault
from logstream.cli.run_options import RUN_OPTIONS, run_signature
from logstream.cli.run_progress import (
    backlog_progress,
    follow_losses_text,
    print_summary,
    progress_printer,
)
from logstream.config import SparkSettings, remote_default
from logstream.errors import ConfigError, LogstreamError, RunFault

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from logstream.dashboard.process import DashboardProcess
    from logstream.pipeline import Pipeline, PipelineConfig

__all__ = ["StopSignals", "follow_losses_text", "load_config_file", "run"]

_console = Console(stderr=True, soft_wrap=True, highlight=False)

#: Options whose config-file text is a path (``replay``: a list of paths).
_PATH_PARAMS = {o.name for o in RUN_OPTIONS if o.type in (Path, Path | None)}

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
        """Set ``stop`` (once; a later signal is only reported)."""
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


def run(ctx: typer.Context, **values: Any) -> None:
    """Run the streaming pipeline, or with no source the live demo.

    Windows in event time, late data, exactly-once outputs and a serving store.

    With no source: real NASA logs replayed live onto the dashboard.

    Every option in detail: docs/options.md.

    Example: logstream run --input-dir landing/ --trigger available-now
    """
    # set by SIGINT or SIGTERM (caught from here on: docs/operations.md), --duration, or the
    # demo's end; the pipeline stops between micro-batches once it is set
    stop = threading.Event()
    with StopSignals(stop):
        _run(ctx, values, stop)


# the options, their defaults and help: logstream.cli.run_options (from the config models)
run.__signature__ = run_signature()  # type: ignore[attr-defined]
app.command()(run)


@dataclass(frozen=True)
class _Plan:
    """What the options ask for, checked before the JVM starts (a bad option fails at once)."""

    demo: bool
    duration_s: float | None
    rotate_every_s: float
    dashboard: bool
    settings: SparkSettings
    cfg: PipelineConfig | None  # None for the demo


def _with_config_file(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with those of ``--config``'s file that were not given on the command line."""
    if values["config"] is not None:
        for name, value in load_config_file(values["config"], ctx).items():
            if not given_on_command_line(ctx, name):
                values[name] = value
    return values


def _source(v: dict[str, Any]) -> str | None:
    """The one source the options name (``None``: the demo).

    Raises
    ------
    ConfigError
        When they name more than one.
    """
    given = {
        "--input-dir": ("dir", v["input_dir"]),
        "--follow": ("follow", v["follow"]),
        "--socket": ("socket", v["socket"]),
        "--kafka-bootstrap/--kafka-topic": ("kafka", v["kafka_bootstrap"] or v["kafka_topic"]),
        "--rate": ("rate", v["rate"]),
    }
    sources = [option for option, (_, value) in given.items() if value]
    if len(sources) > 1:
        raise ConfigError(
            f"one source at a time: got {' and '.join(sources)}; run one pipeline per source"
        )
    return given[sources[0]][0] if sources else None


def _plan(v: dict[str, Any]) -> _Plan:
    """Check every option and build the pipeline's configuration, before the JVM starts.

    Raises
    ------
    ConfigError
        When an option is wrong, named with the fix; or the store or output directory
        belongs to another checkpoint (:func:`logstream.pipeline.identity.claim_store`).
    """
    from logstream.pipeline import interval_seconds

    source = _source(v)
    demo = source is None
    duration_s = None
    if v["duration"]:
        try:
            duration_s = interval_seconds(str(v["duration"]))
        except ValueError as exc:
            raise ConfigError(f"--duration: {exc}") from exc
    with_dashboard = demo if v["dashboard"] is None else v["dashboard"]
    if with_dashboard:  # an exposed dashboard without a password, a bad --allowed-host
        from logstream.dashboard.guard import allowed_hosts, check_exposure, credentials_from_env

        check_exposure(v["host"], credentials_from_env(), v["no_auth"])
        allowed_hosts(v["host"], v["allowed_host"] or ())
    try:
        rotate_every_s = interval_seconds(str(v["rotate_every"]))
        if rotate_every_s <= 0:
            raise ValueError(f"{v['rotate_every']!r} must be longer than zero")
    except ValueError as exc:
        raise ConfigError(f"--rotate-every: {exc}") from exc
    remote = remote_default(v.get("remote"))  # else $SPARK_REMOTE, as PySpark
    settings = SparkSettings.build(master=v["master"], extra=spark_conf(v["conf"]), **remote)
    if settings.remote:
        _check_remote(source, v)
    cfg = None
    if source is not None:
        cfg = _pipeline_config(v, source)
        # a location that cannot be written stops the run here, not seconds into Spark's
        # start with a misleading trace (docs/operations.md "Faults")
        check_writable(_locations(cfg))
        if cfg.source == "kafka":  # the broker answers, no unread message was deleted
            from logstream.sources.kafka import check_kafka_source

            check_kafka_source(cfg)
        # a store or output directory of another checkpoint stops the run before the JVM
        # starts (a refused run creates no store file; the store is closed again: the pipeline
        # opens its own, and a PostgreSQL pool is not left open)
        from logstream.pipeline.identity import claim_store

        claim_store(cfg.state_dir, cfg.output_dir, cfg.store_url)
    else:
        check_writable({"--demo-out": (Path(v["demo_out"]), False)})
    if cfg is not None and (
        cfg.source == "kafka" or any(url.startswith("kafka://") for url in cfg.sinks)
    ):  # Spark's Kafka connector only for a run that reads or writes Kafka (docs/kafka.md)
        settings = settings.model_copy(update={"kafka": True})
    return _Plan(demo, duration_s, rotate_every_s, with_dashboard, settings, cfg)


#: What ``logstream run --remote`` does, said at its start (docs/cluster.md).
CONNECT_NOTE = (
    "the server's Python process delivers the micro-batches (outputs, store and state at "
    "the server's paths); a stop ends the query at once and the next start replays the "
    "micro-batch it cut"
)


def _check_remote(source: str | None, v: dict[str, Any]) -> None:
    """Refuse what ``run --remote`` cannot do, and say what it does (:data:`CONNECT_NOTE`).

    Raises
    ------
    ConfigError
        For the demo and the sources read by this process (``--follow``, ``--socket``,
        ``--rate``), and for ``--bot-model`` (a Spark ML model loaded in this process).
    """
    if source not in ("dir", "kafka"):
        given = {None: "the demo", "follow": "--follow", "socket": "--socket", "rate": "--rate"}
        raise ConfigError(
            f"--remote runs an --input-dir or --kafka source; {given[source]} is read by "
            "logstream's own process: run it without --remote (docs/cluster.md)"
        )
    if v.get("bot_model"):
        raise ConfigError("--bot-model needs Spark in this process: run it without --remote")
    from logstream.connect import not_through_connect

    not_through_connect(CONNECT_NOTE)


def _locations(cfg: PipelineConfig) -> dict[str, tuple[Path, bool]]:
    """What the run writes, by option: ``{option: (path, is_file)}`` (the store when it is a
    SQLite file)."""
    from logstream.serving import is_postgres_url

    written = {"--state-dir": (cfg.state_dir, False), "--output-dir": (cfg.output_dir, False)}
    if not is_postgres_url(cfg.store_url):
        written["--store"] = (cfg.store_path, True)
    return written


def _roots(plan: _Plan, v: dict[str, Any]) -> tuple[dict[str, Path], Path]:
    """The run's locations by option (what a fault's line names) and its checkpoint root."""
    if plan.cfg is None:
        demo_out = Path(v["demo_out"]).absolute()
        return {"--demo-out": demo_out}, demo_out / "state"
    roots = {option: path for option, (path, _) in _locations(plan.cfg).items()}
    if plan.cfg.input_dir is not None:
        roots["--input-dir"] = plan.cfg.input_dir
    return roots, plan.cfg.state_dir


def _pipeline_config(v: dict[str, Any], source: str) -> PipelineConfig:
    """The pipeline's configuration from the options, warning of rotation a followed file
    misses and of the files Spark would skip without a word."""
    from logstream.pipeline import PipelineConfig
    from logstream.reference import parse_reference_options

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
    sinks = [v["sink"]] if isinstance(v["sink"], str) else list(v["sink"] or ["parquet"])
    # each option's value goes to its field (--window to traffic_window), and these as built
    fields = {o.field: v[o.name] for o in RUN_OPTIONS if o.field is not None}
    fields.update(
        source=source,
        follow=follow_paths,
        sink="console" if "console" in sinks else "parquet",
        sinks=tuple(s for s in sinks if s not in ("parquet", "console")),
        reference=parse_reference_options(_reference_values(v["reference"])),
    )
    return PipelineConfig.build(**fields)


def _run(ctx: typer.Context, values: dict[str, Any], stop: threading.Event) -> None:
    """:func:`run`'s work, with SIGINT and SIGTERM already turned into ``stop``.

    Raises
    ------
    ConfigError
        (and the other :class:`~logstream.errors.LogstreamError`) When an option, path or
        format is wrong, before the JVM starts (exit status 2).
    RunFault
        When a fault stops the run once it has started (exit status 1): one line naming the
        path or store and the fix, the trace in the run's log (:mod:`logstream.cli.faults`).
    """
    v = _with_config_file(ctx, values)
    plan = _plan(v)
    if stop.is_set():
        _console.print(f"stopped before Spark started: nothing was read ({_STOPPED})")
        return
    roots, state_dir = _roots(plan, v)
    from logstream.pipeline.lock import StateLock

    # one run per state directory: a second is refused here, before its JVM starts (the
    # demo starts from an empty --demo-out each time: nothing to share)
    lock = StateLock(state_dir)
    if not plan.demo:
        lock.acquire()
    # the JVM's standard error (Spark's log and traces) and a fault's trace go here
    log = RunLog.create(None if plan.demo else state_dir / "logs", "demo" if plan.demo else "run")
    try:
        with log.python_logging():
            _run_started(v, plan, stop, log)
    except RunFault as exc:
        raise run_fault(exc, log, roots, state_dir) from None
    except LogstreamError:
        raise  # a refused option or input (exit status 2), said as it is
    except Exception as exc:  # an I/O fault, Spark's or the store's: one line
        raise run_fault(exc, log, roots, state_dir) from None
    finally:
        lock.release()


def _spark_context_running() -> bool:
    """Whether this process already runs a SparkContext (a local session, whatever thread
    made it active)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _run_started(v: dict[str, Any], plan: _Plan, stop: threading.Event, log: RunLog) -> None:
    """Start Spark (its JVM writing to ``log``), run, and print the summary."""
    from pyspark.sql import SparkSession

    from logstream.jvm import stderr_to
    from logstream.session import get_spark

    # the JVM's active session is per thread: a process whose session runs, called from a
    # thread without it (in-process use, the tests), must not see it as absent and stop it
    owns_session = SparkSession.getActiveSession() is None and not _spark_context_running()
    ref: list[Any] = []
    printer = None if v["quiet"] else progress_printer(_console, ref)
    dashboard = None
    if plan.dashboard and plan.cfg is not None:
        # its own process (the pipeline's interpreter is the Spark driver's), started now:
        # it is up by the time Spark is
        from logstream.dashboard.process import start_dashboard_process

        dashboard = start_dashboard_process(
            plan.cfg.store_url,
            v["host"],
            v["port"],
            top=plan.cfg.top,
            allowed=tuple(v["allowed_host"] or ()),
            no_auth=v["no_auth"],
        )
    try:
        # PySpark's SparkContext would install a SIGINT handler that cancels every job
        # mid-batch; ours (StopSignals) is kept, and lets the running micro-batch finish
        # a cold JVM and SparkContext take seconds (a minute on a loaded machine): say so
        started = time.monotonic()
        if printer is not None and owns_session:
            _console.print("starting Spark…")
        with stderr_to(log.path):
            spark = get_spark(plan.settings, keep_signal_handlers=True)
        if printer is not None and owns_session:
            _console.print(
                f"Spark started in {time.monotonic() - started:.1f} s; starting the queries "
                "(the first micro-batch's line follows when it ends)"
            )
        pipeline = None
        try:
            if stop.is_set():
                pass  # a stop while Spark started: no query is started
            elif plan.demo:
                pipeline, outputs = _run_demo(spark, v, plan, printer, stop, ref)
            else:
                pipeline, outputs = _run_pipeline(spark, v, plan, printer, stop, ref, dashboard)
        finally:
            if owns_session:  # drain Spark's listener bus before Python goes away
                if sys.exc_info()[1] is None:
                    spark.stop()
                else:
                    with contextlib.suppress(Exception):  # a fault is already on its way up
                        spark.stop()
    finally:
        if dashboard is not None:
            dashboard.stop()
    if pipeline is None or not pipeline.queries:  # stopped while it started: none ran
        _console.print(f"stopped before the queries started: nothing was read ({_STOPPED})")
        return
    print_summary(_console, pipeline, outputs)


def _run_demo(
    spark: SparkSession,
    v: dict[str, Any],
    plan: _Plan,
    printer: Any,
    stop: threading.Event,
    ref: list[Any],
) -> tuple[Pipeline, str]:
    """Run the demo (:func:`logstream.demo.run_demo`); its pipeline and where its outputs are."""
    from logstream.demo import LINES_WRITTEN, DemoSettings, run_demo, unread_note

    demo_settings = DemoSettings(
        logs=list(v["replay"] or []),
        speedup=v["speedup"],
        rotate_every_s=plan.rotate_every_s,
        duration_s=plan.duration_s,
        out_dir=v["demo_out"],
        dashboard=plan.dashboard,
        host=v["host"],
        port=v["port"],
        allowed_hosts=tuple(v["allowed_host"] or ()),
        no_auth=v["no_auth"],
    )
    pipeline = run_demo(spark, demo_settings, _console, printer, stop, ref.append)
    written, t = pipeline.store.get_state(LINES_WRITTEN), pipeline.totals
    unread = unread_note(
        None if written is None else int(written),
        t.events + t.late_events + t.quarantined,
        Path(v["demo_out"]) / "landing",
    )
    label = pipeline.store.get_state("source_label")
    return pipeline, "; ".join(p for p in (label, unread, f"outputs in {v['demo_out']}") if p)


def _run_pipeline(
    spark: SparkSession,
    v: dict[str, Any],
    plan: _Plan,
    printer: Any,
    stop: threading.Event,
    ref: list[Any],
    dashboard: DashboardProcess | None = None,
) -> tuple[Pipeline, str]:
    """Run the pipeline of ``plan.cfg`` until it ends or ``stop`` is set, with the
    ``--duration`` timer beside it (and ``dashboard``, started by the caller, announced);
    the pipeline and where its outputs are."""
    from logstream.pipeline import Pipeline
    from logstream.pipeline.ingest import FAULT_ENV, fault_hook

    cfg = plan.cfg
    assert cfg is not None
    # the CLI's stop event is the pipeline's: a stop requested while the pipeline is being
    # built starts no query, one while the query starts stops it
    pipeline = Pipeline(spark, cfg, on_progress=printer, stop_requested=stop)
    ref.append(pipeline)
    if stop.is_set():  # stopped while the pipeline was built: nothing more starts
        return pipeline, ""
    if fault := os.environ.get(FAULT_ENV):  # the crash drills
        pipeline.ingest.step_hook = fault_hook(fault)
    if dashboard is not None:
        _console.print(f"dashboard: {dashboard.wait_ready()}")
    if plan.duration_s is not None:

        def duration_reached() -> None:
            _console.print(pipeline.stop_for_duration(str(v["duration"])))

        timer = threading.Timer(plan.duration_s, duration_reached)
        timer.daemon = True
        timer.start()
    try:
        # a first start over a large backlog: a bar until its first micro-batch has ended
        finished = lambda: pipeline.totals.batches > 0  # noqa: E731
        with backlog_progress(spark, cfg, _console, v["quiet"], finished):
            pipeline.run()
    finally:
        pipeline.stop()
    return pipeline, f"outputs in {cfg.output_dir}, store {pipeline.store.url}"  # no password
