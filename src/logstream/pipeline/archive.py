"""The JVM's class-data archive, written by a small run of the pipeline.

:mod:`logstream.jvm` finds the archive and starts JVMs that map it; this module writes it, once
per machine (``make setup`` runs ``python -m logstream.pipeline.archive``: about a minute, a
file of about 190 MB). It sits above the pipeline because the archive holds the classes a real
run loads: a backfill of generated lines through every output and the serving store, the
followed-log source of ``make run``, and the batch report with its panels (Java's JEP 350,
"Dynamic CDS Archiving").
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from logstream.jvm import QUIET_OPTIONS, archive_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["build_archive", "main"]


def build_archive(force: bool = False) -> Path | None:
    """Write this machine's archive, unless it exists: run a small pipeline in a JVM that
    archives the classes it loaded when it exits.

    The run is a ``logstream run``-style backfill of 2,000 generated lines (parse, every
    output, the serving store), the same lines through the followed-log source of ``make
    run``, a read of the Parquet outputs, and ``logstream batch``'s report of the lines,
    in a temporary directory. (The report's classes: ``logstream batch`` on the elastic
    Combined log 22.7–26.3 s against 24.8–28.3 s without them, 2 cores.)

    Parameters
    ----------
    force : bool
        Write it again even if it exists.

    Returns
    -------
    Path or None
        The archive, or None when turned off, without Java, or when the JVM wrote none (a
        JDK without a base archive: the JVM then starts as before).

    Raises
    ------
    RuntimeError
        When this process already runs a SparkSession (the archive is written by the JVM
        this function starts).
    """
    path = archive_path()
    if path is None or (path.is_file() and not force):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.unlink(missing_ok=True)
    try:
        _archive_run(staging)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    if not staging.is_file():
        return None
    staging.replace(path)  # atomic: a JVM starting meanwhile maps the old or the new one
    return path


def _archive_run(staging: Path) -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from logstream.config import SparkSettings
    from logstream.generate import TrafficConfig, generate_lines
    from logstream.pipeline import Pipeline, PipelineConfig
    from logstream.session import LOCAL_JAVA_OPTIONS, get_spark

    if SparkSession.getActiveSession() is not None:
        raise RuntimeError("build the JVM archive in a process without a SparkSession")
    options = " ".join([LOCAL_JAVA_OPTIONS, f"-XX:ArchiveClassesAtExit={staging}", *QUIET_OPTIONS])
    spark = get_spark(
        SparkSettings(
            master="local[2]",
            app_name="logstream-jvm-archive",
            ui_enabled=False,
            extra={"spark.driver.extraJavaOptions": options},
        )
    )
    with tempfile.TemporaryDirectory(prefix="logstream-jvm-") as tmp:
        root = Path(tmp)
        landing = root / "landing"
        landing.mkdir()
        lines = generate_lines(TrafficConfig(max_lines=2_000, seed=1))
        (landing / "access.log").write_text("".join(f"{line}\n" for line in lines))
        # a directory source (backfills), then the followed log of `make run` (a Python data
        # source: its planner and reader classes, and the serving store of the demo)
        configs = [
            PipelineConfig.build(
                input_dir=landing,
                output_dir=root / "out",
                state_dir=root / "state",
                log_format="common",
                trigger="available-now",
            ),
            PipelineConfig.build(
                source="follow",
                follow=(f"{landing / 'access.log'}*",),
                output_dir=root / "follow-out",
                state_dir=root / "follow-state",
                store=f"sqlite:///{root / 'follow.db'}",
                log_format="common",
                trigger="available-now",
            ),
        ]
        for cfg in configs:
            pipeline = Pipeline(spark, cfg)
            try:
                pipeline.run()
            finally:
                pipeline.stop()
        for output in sorted((root / "out").iterdir()):
            if any(output.glob("batch_id=*")):
                spark.read.parquet(str(output)).count()
        _batch_report(spark, landing / "access.log")
        # the JVM writes the archive as it exits: wait for its process (PySpark's launcher
        # keeps it on the gateway; the JVM exits at the end of its standard input)
        gateway = SparkContext._gateway
        spark.stop()
        process = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=300)


def _batch_report(spark: SparkSession, path: Path) -> None:
    """``logstream batch`` on the same lines (Combined Log Format, detected as the CLI does):
    its one aggregation, sessions and every GoAccess panel, whose user-agent and location
    lookups run in Python workers."""
    from logstream.parsing import parse, resolve_format
    from logstream.report import build_report
    from logstream.sources import read_lines, sample_lines

    lines = read_lines(spark, [path])
    build_report(parse(lines, resolve_format("auto", sample_lines(lines))))


def main(argv: list[str] | None = None) -> int:
    """``python -m logstream.pipeline.archive [--force]``: build the archive (``make setup``)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        path = build_archive(force="--force" in args)
    except Exception as error:  # an optimisation: set-up goes on without it
        print(f"JVM class-data archive not built ({error}); Spark starts without one")
        return 0
    if path is None:
        print("JVM class-data archive: none (turned off, no Java, or the JVM wrote none)")
    else:
        size = path.stat().st_size / 2**20 if path.is_file() else 0
        print(f"JVM class-data archive: {path} ({size:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
