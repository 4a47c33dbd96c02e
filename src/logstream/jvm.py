"""A class-data archive for the JVM of a local master: Spark starts in about half the time.

A ``local[*]`` session starts one JVM that loads some twenty thousand classes (Spark, Hadoop,
Parquet, Jackson, Netty) before its first job; parsing and verifying them is most of the
JVM's start. Java's application class-data sharing (JEP 350, "Dynamic CDS Archiving", in
every JDK since 13) writes the classes one run loaded into an archive, and later JVMs map it
instead of loading them again. Measured here (2 cores, Java 17, Spark 4): a session in 3.6 s
instead of 6.1 s, and its first job in 1.4 s instead of 2.6 s — every ``logstream`` command
and every test that starts a JVM.

:func:`build_archive` writes the archive once per machine (``make setup`` runs it: about
30 s, a file of about 180 MB); :func:`archive_options` gives the JVM options that use it, and
:func:`logstream.session.get_spark` adds them for a local master. The archive is keyed by the
Java binary and the Spark jars, so a new JDK or Spark version gets a new one; a JVM that
cannot use an archive (another class path, say) starts as it would without, silently.

Settings
--------
``LOGSTREAM_JVM_ARCHIVE``
    The archive's directory (default ``$XDG_CACHE_HOME/logstream/jvm``, else
    ``~/.cache/logstream/jvm``), or ``off`` for none.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["ARCHIVE_ENV", "archive_options", "archive_path", "build_archive", "java_binary"]

#: Environment variable: the archive's directory, or ``off``.
ARCHIVE_ENV = "LOGSTREAM_JVM_ARCHIVE"
#: The JVM logs nothing about the archive (a JVM that cannot use it would warn on stdout).
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
#: The version of what :func:`build_archive`'s run loads, part of the archive's name: a new
#: value (2: the followed-log source of ``make run`` too) makes every machine write a new one.
_RUN_VERSION = 2


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on PATH
    (resolved, so a new JDK behind the same link is another binary); None without one."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        return None
    return Path(found).resolve()


def archive_path() -> Path | None:
    """Where this machine's archive is (or would be): None when turned off or without Java.

    The name is a digest of the Java binary (path, size, modification time) and of Spark's
    jars (names and sizes), the two things a dynamic archive depends on, and of the version
    of the run that writes it.
    """
    setting = os.environ.get(ARCHIVE_ENV, "")
    if setting.lower() == "off":
        return None
    java = java_binary()
    if java is None:
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{pyspark.__version__}".encode())
    digest.update(f"\0run {_RUN_VERSION}".encode())
    if jars.is_dir():
        for jar in sorted(jars.iterdir()):
            digest.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    if setting:
        root = Path(setting).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(cache) / "logstream" / "jvm"
    return root / f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jsa"


def archive_options() -> list[str]:
    """JVM options that map this machine's archive; empty when there is none (yet)."""
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *_QUIET]


def build_archive(force: bool = False) -> Path | None:
    """Write this machine's archive, unless it exists: run a small pipeline in a JVM that
    archives the classes it loaded when it exits.

    The run is a ``logstream run``-style backfill of 2,000 generated lines (parse, every
    output, the serving store), the same lines through the followed-log source of ``make
    run``, and a read of the Parquet outputs, in a temporary directory.

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
    options = " ".join([LOCAL_JAVA_OPTIONS, f"-XX:ArchiveClassesAtExit={staging}", *_QUIET])
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


def main(argv: list[str] | None = None) -> int:
    """``python -m logstream.jvm [--force]``: build the archive (``make setup`` runs it)."""
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
