"""The demo: real logs replayed live through the pipeline onto the dashboard, in one command.

``logstream run`` with no source (and ``make run``) calls :func:`run_demo`:

1. find logs (:func:`logstream.data.find_logs`: an explicit ``--replay`` path, the data
   directory, the download cache), else try ``logstream data fetch nasa``, else fall back to
   the traffic generator — labelled **synthetic** in the terminal and on the dashboard;
2. replay them at ``--speedup`` (600: ten minutes of event time per second) into a growing
   log, ``OUT/landing/access.log``, as a web server writes its access log, rotated like
   logrotate every ``--rotate-every`` of event time (``access.log.1``, then
   ``access.log.2.gz`` …), looping with shifted event times so the demo runs until stopped;
3. follow that log (``--follow "OUT/landing/access.log*"``: :mod:`logstream.sources.follow`,
   exactly once across the rotations) with the streaming pipeline (processing-time
   trigger), with the SQLite store and Parquet outputs under ``OUT``;
4. serve the dashboard on http://127.0.0.1:8050 and print a progress line per micro-batch;
5. stop on Ctrl-C / SIGTERM or after ``--duration``, and say where the outputs are.

Each demo starts afresh: ``OUT`` (default ``out/demo``) is emptied first.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from rich.console import Console

from logstream.data import DATASETS, DataFetchError, fetch, find_logs
from logstream.parsing.detect import written_offset
from logstream.pipeline import INGEST_QUERY, Pipeline, PipelineConfig
from logstream.pipeline.run import detect_file_format
from logstream.replay import (
    Record,
    Replayer,
    ReplayOptions,
    RotatingFileSink,
    iter_file_records,
)
from logstream.sources.follow import read_to_end

__all__ = [
    "LINES_WRITTEN",
    "DemoSettings",
    "DemoSource",
    "choose_source",
    "run_demo",
    "unread_note",
]

#: The ``pipeline_state`` key of the lines the demo's replay wrote into its landing log.
LINES_WRITTEN = "demo_lines_written"


@dataclass(frozen=True)
class DemoSettings:
    """Options of the demo.

    Attributes
    ----------
    logs : list of Path
        Logs to replay; empty means "find them" (see the module docstring).
    speedup : float
        Event seconds replayed per wall second.
    duration_s : float or None
        Stop after this many seconds of wall time; None runs until interrupted.
    out_dir : Path
        Root of everything the demo writes (emptied at start).
    dashboard : bool
        Serve the dashboard.
    host, port : str, int
        Where the dashboard listens.
    allowed_hosts : tuple of str
        Host names the dashboard also answers to (``--allowed-host``).
    no_auth : bool
        The dashboard may listen where other machines reach it without a password.
    fetch : bool
        Try to download the NASA log when no log is found locally.
    trigger : str
        Processing-time trigger of the pipeline.
    rotate_every_s : float
        Event seconds between two rotations of the followed ``access.log``.
    """

    logs: list[Path] = field(default_factory=list)
    speedup: float = 600.0
    duration_s: float | None = None
    out_dir: Path = Path("out/demo")
    dashboard: bool = True
    host: str = "127.0.0.1"
    port: int = 8050
    allowed_hosts: tuple[str, ...] = ()
    no_auth: bool = False
    fetch: bool = True
    trigger: str = "1 second"
    rotate_every_s: float = 43_200.0


@dataclass(frozen=True)
class DemoSource:
    """What the demo replays: a record factory (one call per pass), its log format and label."""

    records: Callable[[], Iterable[Record]]
    log_format: str
    label: str
    synthetic: bool


def choose_source(settings: DemoSettings, console: Console) -> DemoSource:
    """Find real logs, fetch them, or fall back to the generator (see the module docstring)."""
    paths, origin = find_logs(settings.logs)
    if not paths and settings.fetch:
        try:
            console.print("no local NASA log: trying `logstream data fetch nasa` …")
            paths, origin = [fetch(DATASETS["nasa"], timeout_s=5.0)], "downloaded"
        except DataFetchError as exc:
            console.print(f"[yellow]{exc}[/yellow]")
    if paths:
        fmt = detect_file_format(paths[0])
        names = ", ".join(p.name for p in paths)
        return DemoSource(
            records=lambda: iter_file_records(paths),
            log_format=fmt.name,
            label=f"real logs ({origin}): {names}",
            synthetic=False,
        )
    from logstream.generate import TrafficConfig, TrafficGenerator

    generator = TrafficGenerator(TrafficConfig(rate_per_s=20.0, duration_s=None, seed=1995))
    console.print("[bold yellow]no real log available: replaying SYNTHETIC traffic[/bold yellow]")
    return DemoSource(
        records=generator.records,
        log_format="combined",
        label="SYNTHETIC traffic (logstream generate, seed 1995)",
        synthetic=True,
    )


def run_demo(
    spark: Any,
    settings: DemoSettings,
    console: Console,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    stop_event: threading.Event | None = None,
    on_start: Callable[[Pipeline], None] | None = None,
) -> Pipeline:
    """Run the demo until ``stop_event`` is set, ``duration_s`` passes, or a query fails.

    Parameters
    ----------
    spark : SparkSession
    settings : DemoSettings
    console : rich.console.Console
        Where the demo speaks (source chosen, dashboard URL, outputs).
    on_progress : callable, optional
        Called with every streaming progress row.
    stop_event : threading.Event, optional
        Set it to stop the demo (the CLI's signal handler does).
    on_start : callable, optional
        Called with the pipeline once it is built.

    Returns
    -------
    Pipeline
        The stopped pipeline (its totals and listener history), for summaries and tests; the
        lines the replay wrote are in its store's state (:data:`LINES_WRITTEN`). A stop
        requested while the demo starts (Ctrl-C) returns it before anything more starts or is
        announced: no dashboard, no replay, no query.
    """
    stop_event = stop_event or threading.Event()
    source = choose_source(settings, console)
    out = settings.out_dir
    if out.exists():
        shutil.rmtree(out)
    landing = out / "landing"
    landing.mkdir(parents=True)
    access_log = (landing / "access.log").absolute()
    cfg = PipelineConfig.build(
        source="follow",
        # the rotated access.log.1 too: a rotation before the first micro-batch loses nothing
        follow=(f"{access_log}*",),
        output_dir=out / "stream",
        state_dir=out / "state",
        store=f"sqlite:///{out / 'logstream.db'}",
        log_format=source.log_format,
        trigger=settings.trigger,
    )
    # the caller's stop event is the pipeline's: a stop before the query starts starts none
    pipeline = Pipeline(spark, cfg, on_progress=on_progress, stop_requested=stop_event)
    if on_start is not None:
        on_start(pipeline)
    # the offset the replayed lines are written in: the dashboard's times by default
    offset = written_offset(r.text for r in islice(source.records(), 100)) or ""
    pipeline.store.set_state(
        {"source_label": source.label, "synthetic": str(source.synthetic), "log_offset": offset}
    )
    if stop_event.is_set():  # stopped while the demo started: nothing more starts
        return pipeline
    replay_stop = threading.Event()

    def before_compress(rotated: Path) -> None:
        # logrotate deletes access.log.1 when it compresses it at the next rotation: on a slow
        # machine the first micro-batch (the JVM's warm-up) can outlast a rotation period, so
        # the replay waits until the pipeline has read the file to its end
        checkpoint = cfg.state_dir / INGEST_QUERY
        while not replay_stop.is_set() and not read_to_end(checkpoint, rotated):
            replay_stop.wait(0.2)

    replayer = Replayer(
        source.records,
        RotatingFileSink(
            access_log, rotate_every_s=settings.rotate_every_s, before_compress=before_compress
        ),
        ReplayOptions(speedup=settings.speedup, loop=not source.synthetic),
        stop_event=replay_stop,
    )
    replay_thread = threading.Thread(target=replayer.run, name="logstream-replay", daemon=True)
    server = None
    if settings.dashboard:  # in a process of its own: the driver's interpreter is left alone
        from logstream.dashboard.process import start_dashboard_process

        ui = spark.sparkContext.uiWebUrl
        server = start_dashboard_process(
            cfg.store_path,
            settings.host,
            settings.port,
            top=cfg.top,
            spark_ui_url=ui,
            allowed=settings.allowed_hosts,
            no_auth=settings.no_auth,
        )
        console.print(f"dashboard: [bold]{server.wait_ready()}[/bold]")
    console.print(
        f"replaying {source.label} at ×{settings.speedup:g} into {access_log} (rotated every "
        f"{settings.rotate_every_s / 3600:g} h of event time), followed by the pipeline; "
        f"outputs in {out} (store {cfg.store_path}); Ctrl-C stops"
    )

    def watch() -> None:
        if not stop_event.wait(settings.duration_s) and settings.duration_s is not None:
            console.print(pipeline.stop_for_duration(f"{settings.duration_s:g}s"))
        else:  # Ctrl-C or the replay's end: the main thread stops the pipeline
            pipeline.request_stop()

    replay_thread.start()
    threading.Thread(target=watch, name="logstream-demo-timer", daemon=True).start()
    try:
        pipeline.run()
    finally:
        replay_stop.set()
        stop_event.set()
        pipeline.stop()
        replay_thread.join(10)
        # the replay has closed its log: what it wrote, against what the pipeline read
        pipeline.store.set_state({LINES_WRITTEN: str(replayer.summary.lines_sent)})
        if server is not None:
            server.stop()
    return pipeline


def unread_note(written: int | None, read: int, landing: Path) -> str:
    """What the demo's replay wrote and the pipeline did not read before it stopped.

    Parameters
    ----------
    written : int or None
        Lines the replay wrote into the landing log (None: unknown, an older store).
    read : int
        Lines the pipeline counted: on-time and late events, quarantined lines.
    landing : Path
        The landing directory (emptied by the next demo).

    Examples
    --------
    >>> unread_note(100, 100, Path("landing"))
    'the replay wrote 100 lines, every one read'
    """
    if written is None:
        return ""
    unread = max(written - read, 0)
    if not unread:
        return f"the replay wrote {written:,} lines, every one read"
    return (
        f"the replay wrote {written:,} lines; {unread:,} of them not read yet, left in "
        f"{landing} (the next run empties it)"
    )
