"""``logstream connect-server``: a Spark Connect server on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import ConfOption, app, spark_conf
from logstream.connect import DEFAULT_PORT


@app.command("connect-server")
def connect_server(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="The port clients connect to.")
    ] = DEFAULT_PORT,
    directory: Annotated[
        Path, typer.Option("--dir", metavar="DIR", help="Its log (server.log) and pid file.")
    ] = Path("out/connect"),
    master: Annotated[
        str,
        typer.Option(
            "--master", metavar="URL", help="The server's Spark master (local[*], spark://…)."
        ),
    ] = "local[*]",
    conf: ConfOption = None,
) -> None:
    """A Spark Connect server on 127.0.0.1 until Ctrl-C.

    From PySpark's jars, logstream's settings; batch and run use it by --remote (docs/cluster.md).

    Example: logstream connect-server --port 15002
    """
    from logstream.config import SparkSettings
    from logstream.connect.server import LocalConnectServer

    SparkSettings.build(master=master, remote=None)  # a bad master stops here
    server = LocalConnectServer(
        directory, port, master=master, conf=spark_conf(conf), die_with_parent=True
    )  # the server dies with this command, a kill -9 of it too
    start = time.monotonic()
    server.start()
    pid = server.process.pid if server.process is not None else "?"
    typer.echo(
        f"Spark Connect server answers on {server.url} (process {pid}, started in "
        f"{time.monotonic() - start:.1f} s; log in {server.log_file})"
    )
    typer.echo(f"clients: --remote {server.url} or SPARK_REMOTE={server.url}; Ctrl-C stops it")

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        code = server.process.poll() if server.process is not None else None
        server.stop()
    if code is not None:
        typer.echo(f"the server exited with status {code}: see {server.log_file}", err=True)
        raise typer.Exit(1)
    typer.echo("stopped")
