"""``logstream data``: find and fetch real logs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import app

data_app = typer.Typer(help="Find and download real access logs.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("fetch")
def fetch_command(
    name: Annotated[str, typer.Argument(help="Data set: nasa (NASA KSC, July 1995).")] = "nasa",
    dest: Annotated[
        Path | None, typer.Option("--dest", help="Directory (default ~/.cache/logstream).")
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="Download from this mirror.")] = None,
    sha256: Annotated[
        str | None, typer.Option("--sha256", help="Expected SHA-256 of the file.")
    ] = None,
) -> None:
    """Download a public log with a progress bar; resumes an interrupted download and
    verifies the file before using it."""
    from logstream.data import DATASETS, fetch
    from logstream.errors import ConfigError

    if name not in DATASETS:
        raise ConfigError(f"unknown data set {name!r}: choose one of {', '.join(DATASETS)}")
    path = fetch(DATASETS[name], dest, url=url, sha256=sha256)
    typer.echo(str(path))


@data_app.command("where")
def where_command() -> None:
    """Print the log the demo would use, and where it came from."""
    from logstream.data import find_logs

    paths, origin = find_logs()
    if not paths:
        typer.echo("no real log found (data directory and cache are empty)")
        raise typer.Exit(1)
    for p in paths:
        typer.echo(f"{p}\t{origin}")
