"""The Typer application and the options shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from logstream import __version__

__all__ = [
    "ConfOption",
    "FormatOption",
    "MasterOption",
    "ReferenceOption",
    "app",
    "err_console",
    "given_on_command_line",
    "spark_conf",
]

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
        help="Log format: auto (Combined, Common, NASA TSV or the book's JSON, detected from "
        "the first lines), common, combined, nginx, nasa-tsv, json (keys host, timestamp, "
        "request, http_reply, bytes), json:FIELD=KEY,… (e.g. "
        "'json:client_host=ip,event_time=ts,request=req,status=code'), or an Apache LogFormat "
        'string such as \'%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"\'.',
    ),
]
ReferenceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--reference",
        help="Reference table KIND=FILE (repeatable; CSV or Parquet): networks=FILE "
        "(network,organisation,country: CIDR → organisation), agents=FILE "
        "(pattern,agent_class: overrides the built-in crawler, tool and browser classes), "
        "sections=FILE (prefix,section: URL path prefix → site section; default: the first "
        "path segment).",
    ),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--conf",
        metavar="KEY=VALUE",
        help="A Spark setting, as spark-submit's --conf (repeatable), applied after "
        "logstream's own: e.g. spark.driver.memory=4g, or "
        "spark.driver.defaultJavaOptions=-Xms2g to size the heap up front.",
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


def spark_conf(values: list[str] | dict[str, object] | None) -> dict[str, str]:
    """``--conf`` values (``KEY=VALUE`` texts, or a config file's table) as a dict.

    Raises
    ------
    ConfigError
        When a value is not ``KEY=VALUE`` with a ``spark.`` key; the message names it.
    """
    from logstream.errors import ConfigError

    if isinstance(values, dict):
        texts = [f"{key}={value}" for key, value in values.items()]
    else:
        texts = [str(v) for v in values or []]
    conf: dict[str, str] = {}
    for text in texts:
        key, _, value = text.partition("=")
        if not key.strip().startswith("spark.") or not value.strip():
            raise ConfigError(
                f"--conf {text!r}: expected KEY=VALUE with a Spark key, e.g. "
                "--conf spark.driver.memory=4g"
            )
        conf[key.strip()] = value.strip()
    return conf
