"""``logstream devices``: the device and sensor pipeline (book Ch. 8–9 and 13)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from logstream.cli.app import MasterOption, app, err_console
from logstream.cli.faults import RunLog
from logstream.cli.run import StopSignals
from logstream.config import SparkSettings
from logstream.errors import ConfigError, RunFault
from logstream.jvm import stderr_to

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from logstream.devices import DeviceConfig

devices_app = typer.Typer(
    help="Device and sensor events: windows, alerts, device state.\n\n"
    "Per-device windows, threshold alerts and device state (docs/devices.md).",
    no_args_is_help=True,
)
app.add_typer(devices_app, name="devices")


@devices_app.command("run")
def run(
    input: Annotated[
        str,
        typer.Option(
            "--input",
            help="A reading file, a directory of them, or a quoted glob such as "
            "'../shared/data/occupancy_*.txt.gz' (each file is a device unless its lines name "
            "one).",
        ),
    ],
    registry: Annotated[
        Path | None,
        typer.Option(
            "--registry",
            help="Device registry, CSV or Parquet: device, room, type and optional thresholds "
            "temperature_max, humidity_max, light_max, co2_max, humidity_ratio_max.",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Reading lines: csv or json.")] = "csv",
    output_dir: Annotated[Path, typer.Option("--output-dir", help="Parquet outputs.")] = Path(
        "out/devices"
    ),
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Checkpoints, one per query.")
    ] = Path("out/devices-state"),
    window: Annotated[
        str, typer.Option("--window", help="Tumbling window of the per-device statistics.")
    ] = "5 minutes",
    watermark: Annotated[
        str, typer.Option("--watermark", help="Event-time delay: later readings are late.")
    ] = "2 minutes",
    silent_after: Annotated[
        str, typer.Option("--silent-after", help="No reading this long: the device is silent.")
    ] = "3 minutes",
    offline_after: Annotated[
        str, typer.Option("--offline-after", help="No reading this long: the device is offline.")
    ] = "10 minutes",
    trigger: Annotated[
        str,
        typer.Option("--trigger", help="'available-now' (process what exists) or an interval."),
    ] = "available-now",
    join_within: Annotated[
        str,
        typer.Option(
            "--join-within",
            help="Join a threshold alert with the occupancy changes this close to it.",
        ),
    ] = "10 minutes",
    max_files_per_trigger: Annotated[
        int | None,
        typer.Option("--max-files-per-trigger", min=1, help="Input files per micro-batch."),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="An occupancy model directory (logstream model train occupancy): score every "
            "reading (predictions/) and add the confusion matrix to device_windows.",
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option("--duration", help="With an interval trigger: stop after this long."),
    ] = None,
    master: MasterOption = None,
) -> None:
    """Run the device pipeline: registry join, per-device windows (mean, min, max), threshold
    alerts, and device state (online, silent, offline; room occupied or free).

    Example: logstream devices run --input 'data/occupancy_*.txt.gz' --output-dir out/devices
    """
    from logstream.devices import DeviceConfig, run_device_queries
    from logstream.session import get_spark

    cfg = DeviceConfig.build(
        input=input,
        format=fmt,
        registry=registry,
        output_dir=output_dir,
        state_dir=state_dir,
        window=window,
        watermark=watermark,
        silent_after=silent_after,
        offline_after=offline_after,
        trigger=trigger,
        max_files_per_trigger=max_files_per_trigger,
        join_within=join_within,
        model=model,
    )
    duration_s = _checked(cfg, duration)
    stop = threading.Event()  # Ctrl-C or SIGTERM, to the process or its group: a clean stop
    # the JVM's standard error (Spark's log, the traces of a query restarted when its Python
    # worker did not connect back) and Python's log records go to a log file, not the terminal
    log = RunLog.create(cfg.state_dir / "logs", "devices")
    with StopSignals(stop), log.python_logging():
        if stop.is_set():
            return
        with stderr_to(log.path):
            spark = get_spark(SparkSettings.build(master=master), keep_signal_handlers=True)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        queries: list[StreamingQuery] = []
        if not stop.is_set():
            notice = err_console.print
            queries = run_device_queries(spark, cfg, stop=stop, deadline=deadline, notice=notice)
        for q in queries:
            q.stop()  # the Parquet sinks commit a micro-batch whole or not at all
    for q in queries:
        if (error := q.exception()) is not None:
            raise RunFault(
                f"device query {q.name} failed: {_first_line(error)} ({_trace(log, error)})"
            )
    err_console.print(f"device outputs in {cfg.output_dir}: " + ", ".join(q.name for q in queries))


def _checked(cfg: DeviceConfig, duration: str | None) -> float | None:
    """Check, before the JVM starts, the registry, the model (its kind and input columns) and
    ``--duration`` (which needs an interval trigger); ``--duration`` in seconds."""
    from logstream.devices import check_device_model, load_registry
    from logstream.pipeline.config import interval_seconds

    if cfg.registry is not None:
        load_registry(cfg.registry)
    check_device_model(cfg)
    if duration and cfg.trigger == "available-now":
        raise ConfigError("--duration needs an interval --trigger (available-now stops by itself)")
    return interval_seconds(duration) if duration else None


def _first_line(error: BaseException) -> str:
    """The first line of a query's error (Spark's message; its Java trace follows it)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:400]


def _trace(log: RunLog, error: BaseException) -> str:
    """Where the whole trace of ``error`` is: ``log`` (written now), said as a clause."""
    where = log.write_trace(error)
    return "its trace could not be written" if where is None else f"its trace is in {where}"
