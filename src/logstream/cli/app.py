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
    "RemoteOption",
    "app",
    "err_console",
    "given_on_command_line",
    "spark_conf",
]


def _help_shows_flags_as_flags() -> None:
    """Make Typer's Rich help show a flag as a flag and a required argument as its metavar.

    Typer 0.29's Rich help prints a type after every option, flags included (``--strict
    <bool>``, ``--help <bool>``), and wraps a required argument in braces on the usage line
    (``{paths}...``). Its plain formatter already leaves a flag's type out; these two overrides
    do the same for the Rich help, and write a required argument as click does (``PATH...``).
    Only the help text changes: parsing uses neither method.
    """
    from typer import core

    try:
        display_option_type = core.TyperOption.display_type_rich
        display_argument_type = core.TyperArgument.display_type_rich
    except AttributeError:  # another Typer: its own help, unchanged (the CLI still works)
        return

    def option_type(self: core.TyperOption, ctx: typer.Context) -> str | None:
        if (self.is_flag or self.count) and self.metavar is None:
            return None  # a flag takes no value
        if self.metavar is None and (word := _value_word(self, ctx)) is not None:
            return word  # N, TEXT, PATH: not Python's <int range>, <str>, <list[str]>
        return display_option_type(self, ctx)

    def argument_type(self: core.TyperArgument, ctx: typer.Context) -> str | None:
        if self.metavar is not None:
            return None  # the metavar (PATH) already says what to give
        return _value_word(self, ctx) or display_argument_type(self, ctx)

    def argument_usage(self: core.TyperArgument) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return f"{name}..." if self.nargs != 1 else name

    # a value's range ("[x>=1]", "[0.0<=x<=1.0]") widened the value column and squeezed the
    # help's; the help text says a limit that is not obvious ("a share, 0–1"), and a value out
    # of range is still refused naming the range
    core.TyperOption._get_number_range_help_str = lambda self: None  # type: ignore[method-assign]
    core.TyperOption.display_type_rich = option_type  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign]
    core.TyperArgument._usage_display_name = argument_usage  # type: ignore[method-assign]


#: The words ``--help`` shows for a value whose option names none, by Typer's type label.
_VALUE_WORDS = {
    "<int>": "N",
    "<int range>": "N",
    "<float>": "X",
    "<float range>": "X",
    "<str>": "TEXT",
    "<list[str]>": "TEXT",
    "<path>": "PATH",
    "<list[path]>": "PATH",
}


def _value_word(option: object, ctx: typer.Context) -> str | None:
    """The word for an option's value in ``--help`` when it names none (``metavar``): ``N``
    (an integer), ``X`` (a number), ``TEXT``, ``PATH``; None for another type (choices …)."""
    try:
        label = option.display_type(ctx)  # type: ignore[attr-defined]
    except Exception:  # another Typer: its own label
        return None
    return _VALUE_WORDS.get(str(label).lower())


_help_shows_flags_as_flags()

app = typer.Typer(
    name="logstream",
    help="Event-time web-log analytics on Apache Spark: batch reports and streaming pipelines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, soft_wrap=True)


def _checked_format(value: str) -> str:
    """``--format``'s callback: a bad format is refused while the options are read, before
    any command starts Spark (:func:`logstream.parsing.check_format`)."""
    from logstream.parsing import check_format

    return check_format(value)


FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        metavar="FORMAT",
        callback=_checked_format,
        help="Log format: auto (Combined, Common, NASA TSV or the book's JSON, detected from "
        "the first lines), common, combined, nginx, nasa-tsv, json (keys host, timestamp, "
        "request, http_reply, bytes), json:FIELD=KEY,… (e.g. json:client_host=ip,status=code), "
        "or an Apache LogFormat string such as '%h %l %u %t \"%r\" %>s %b'.",
    ),
]
ReferenceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--reference",
        metavar="KIND=FILE",
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
        "logstream's own: e.g. spark.driver.memory=4g for a larger heap (docs/streaming.md).",
    ),
]
MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master URL (local[*], spark://HOST:7077). Default: what spark-submit set, "
        "else $LOGSTREAM_SPARK_MASTER, else local[*].",
    ),
]
RemoteOption = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="URL",
        help="Run on a Spark Connect server (sc://HOST:PORT; `logstream connect-server` "
        "starts one) instead of Spark in this process. Default: $SPARK_REMOTE, else none "
        "(docs/cluster.md).",
        show_default=False,
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


#: Spark settings ``--conf`` refuses, each with why and what to use instead.
PINNED_CONF = {
    "spark.master": "use --master",
    "spark.sql.session.timeZone": (
        "logstream pins UTC so that event times are instants (the batch report's calendar "
        "days: --time-zone)"
    ),
    "spark.sql.ansi.enabled": "the parser relies on ANSI mode with try_* functions",
    "spark.sql.files.ignoreCorruptFiles": (
        "corrupt files are quarantined with it on (use --strict to stop on one instead)"
    ),
    "spark.sql.streaming.stateStore.providerClass": (
        "the checkpoints are written with the RocksDB state store"
    ),
    "spark.driver.extraJavaOptions": (
        "it would replace logstream's garbage collector and class-data archive: use "
        "spark.driver.defaultJavaOptions"
    ),
}


def _flat(table: dict[str, object], prefix: str = "") -> list[str]:
    """A TOML table as ``KEY=VALUE`` texts: dotted keys written bare (``spark.driver.memory
    = "4g"`` under ``[run.conf]``) are nested tables, joined again with dots."""
    texts = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            texts.extend(_flat(value, f"{name}."))
        else:
            texts.append(f"{name}={str(value).lower() if isinstance(value, bool) else value}")
    return texts


def spark_conf(values: str | list[str] | dict[str, object] | None) -> dict[str, str]:
    """``--conf`` values (``KEY=VALUE`` texts; in a config file also one text, or a table) as
    a dict.

    Raises
    ------
    ConfigError
        When a value is not ``KEY=VALUE`` with a ``spark.`` key, or sets one of
        :data:`PINNED_CONF`; the message names it and the fix.

    Examples
    --------
    >>> spark_conf(["spark.driver.memory=4g"])
    {'spark.driver.memory': '4g'}
    >>> spark_conf({"spark": {"ui": {"enabled": False}}})
    {'spark.ui.enabled': 'false'}
    """
    from logstream.errors import ConfigError

    if isinstance(values, dict):
        texts = _flat(values)
    elif isinstance(values, str):
        texts = [values]
    else:
        texts = [str(v) for v in values or []]
    conf: dict[str, str] = {}
    for text in texts:
        key, _, value = (part.strip() for part in text.partition("="))
        if not key.startswith("spark.") or not value:
            raise ConfigError(
                f"--conf {text!r}: expected KEY=VALUE with a Spark key, e.g. "
                "--conf spark.driver.memory=4g"
            )
        if key in PINNED_CONF:
            raise ConfigError(f"--conf {text!r}: {key} is set by logstream; {PINNED_CONF[key]}")
        conf[key] = value
    return conf
