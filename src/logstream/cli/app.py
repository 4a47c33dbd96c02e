"""The Typer application and the options shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from logstream import __version__

__all__ = ["FormatOption", "MasterOption", "app", "err_console", "given_on_command_line"]

app = typer.Typer(
    name="logstream",
    help="Event-time web-log analytics on Apache Spark: batch reports and streaming pipelines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, soft_wrap=True)

FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="Log format: auto (Combined or Common, detected from the first lines), common, "
        "combined, nginx, or an Apache LogFormat string such as "
        '\'%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"\'.',
    ),
]
MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        help="Spark master URL (local[*], spark://HOST:7077). Default: what spark-submit set, "
        "else $LOGSTREAM_SPARK_MASTER, else local[*].",
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"logstream {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Event-time web-log analytics on Apache Spark."""


def given_on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was given on the command line (not a default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")
