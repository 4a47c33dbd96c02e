"""The options of ``logstream run``: one table, each default and help defined once.

Every option is one :class:`RunOption` row of :data:`RUN_OPTIONS`: its flags, type, help
panel and metavar. An option that sets a field of the pipeline's configuration model
(:class:`~logstream.pipeline.config.PipelineConfig`) takes that field's default and its
description as help; a demo option takes its default from
:class:`~logstream.demo.DemoSettings`; the options of neither (``--config``, ``--reference``,
``--dashboard``, ``--duration``, ``--replay``, ``--quiet``, Spark's) carry theirs in their row.
:func:`run_signature` turns the table into the Typer parameters of ``logstream run``;
:func:`options_markdown` into ``docs/options.md``.

The CLI does not import the models when it starts: importing :mod:`logstream.pipeline` loads
PySpark, seconds that every ``logstream --help`` would pay. The models' defaults and
descriptions are read from :mod:`logstream.cli._run_model`, a snapshot generated from the
models with ``docs/options.md`` by one command::

    python -m logstream.cli.regenerate          # rewrite both
    python -m logstream.cli.regenerate --check  # exit 1 when either is stale

``tests/cli/test_options.py`` fails when either is stale, and when ``--help``,
``examples/logstream.toml`` or the README disagree with the models.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from logstream.cli._run_model import DEMO_FIELDS, PIPELINE_FIELDS

__all__ = [
    "RUN_OPTIONS",
    "RunOption",
    "config_key",
    "option_default",
    "options_markdown",
    "run_signature",
]

#: The panels of ``run --help``, in order (every option in detail: docs/options.md).
INPUT = "Input"
OUTPUT = "Output"
STATE = "Triggers and state"
WINDOWS = "Windows and analytics"
DASHBOARD = "Dashboard and demo"
SPARK = "Spark"
PANELS = (INPUT, OUTPUT, STATE, WINDOWS, DASHBOARD, SPARK)

#: ``default`` of a row whose default is its model field's.
FROM_MODEL: Any = object()

#: The files :mod:`logstream.cli.regenerate` writes.
REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = Path(__file__).with_name("_run_model.py")
DOCS = REPO / "docs" / "options.md"


def _span_text(seconds: float) -> str:
    """Seconds as the shortest interval text with a whole number (``43200.0`` → ``12h``)."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class RunOption:
    """One option of ``logstream run``.

    Parameters
    ----------
    name : str
        The parameter's name in :func:`logstream.cli.run.run`'s values.
    type : type
        The type Typer converts the option's text to.
    flags : tuple of str
        The option's names (``"--dedup/--keep-duplicates"`` for a flag pair); the first
        long name without dashes is its key in a ``--config`` file.
    panel : str
        The panel of ``run --help`` it is shown in (one of :data:`PANELS`).
    metavar : str, optional
        What the help writes for its value.
    field : str, optional
        The :class:`~logstream.pipeline.config.PipelineConfig` field its value goes to: its
        help is the field's description, and its default the field's unless ``default`` is
        given (``--sink``: ``None``, turned into the field's default when the run starts).
    demo : str, optional
        The :class:`~logstream.demo.DemoSettings` field whose default is the option's,
        converted by ``convert`` when the option's value is written otherwise.
    help : str, optional
        The help, when not the field's description.
    default : object
        The default, when not the field's.
    default_text : str, optional
        What a ``None`` default means (``on for the demo``), said in the help and
        docs/options.md.
    min : int, optional
        The smallest value Typer accepts.
    convert : callable, optional
        From the demo field's default to the option's.
    """

    name: str
    type: Any
    flags: tuple[str, ...]
    panel: str
    metavar: str | None = None
    field: str | None = None
    demo: str | None = None
    help: str | None = None
    default: Any = FROM_MODEL
    default_text: str | None = None
    min: int | None = None
    convert: Callable[[Any], Any] | None = None

    def help_text(self) -> str:
        """The one-line help, with what a ``None`` default means before its final period."""
        text = self.help if self.help is not None else PIPELINE_FIELDS[str(self.field)][1]
        if self.default_text is None:
            return text
        said = f" \\[default: {self.default_text}]"
        return f"{text[:-1]}{said}." if text.endswith(".") else f"{text}{said}"


def option_default(option: RunOption) -> Any:
    """The default of ``option`` on the command line (from its model field or its row)."""
    if option.default is not FROM_MODEL:
        return option.default
    if option.field is not None:
        return PIPELINE_FIELDS[option.field][0]
    if option.demo is None:
        raise ValueError(f"option {option.name!r} has no default: give field, demo or default")
    value = DEMO_FIELDS[option.demo]
    return option.convert(value) if option.convert else value


def config_key(option: RunOption) -> str:
    """The option's key in a ``--config`` file: its long name without dashes."""
    return option.flags[0].split("/")[0][2:].replace("-", "_")


def _option(name: str, type_: Any, flags: str, panel: str, **row: Any) -> RunOption:
    return RunOption(name, type_, tuple(flags.split()), panel, **row)


#: The options of ``logstream run``, in the order of ``run --help``'s panels.
RUN_OPTIONS: tuple[RunOption, ...] = (
    _option(
        "config",
        Path | None,
        "--config",
        INPUT,
        metavar="FILE",
        help="TOML file with a \\[run] table of these options; flags win.",
        default=None,
    ),
    _option("input_dir", Path | None, "--input-dir", INPUT, metavar="DIR", field="input_dir"),
    _option("follow", list[str] | None, "--follow", INPUT, metavar="FILE", field="follow"),
    _option(
        "max_bytes_per_trigger",
        int | None,
        "--max-bytes-per-trigger",
        INPUT,
        metavar="BYTES",
        field="max_bytes_per_trigger",
        min=1,
    ),
    _option(
        "vhost_from_path",
        str | None,
        "--vhost-from-path",
        INPUT,
        metavar="REGEX",
        field="vhost_from_path",
    ),
    _option("since", str | None, "--since", INPUT, metavar="TIME", field="since"),
    _option("until", str | None, "--until", INPUT, metavar="TIME", field="until"),
    _option(
        "filter",
        list[str] | None,
        "--filter",
        INPUT,
        metavar="EXPR",
        field="filter",
        default=None,
    ),
    _option(
        "grep",
        list[str] | None,
        "--grep",
        INPUT,
        metavar="REGEX",
        field="grep",
        default=None,
    ),
    _option("socket", str | None, "--socket", INPUT, metavar="HOST:PORT", field="socket"),
    _option(
        "kafka_bootstrap",
        str | None,
        "--kafka-bootstrap --kafka",
        INPUT,
        metavar="SERVERS",
        field="kafka_bootstrap",
    ),
    _option(
        "kafka_topic",
        str | None,
        "--kafka-topic --topic",
        INPUT,
        metavar="TOPIC",
        field="kafka_topic",
    ),
    _option(
        "kafka_max_offsets_per_trigger",
        int | None,
        "--max-offsets-per-trigger",
        INPUT,
        metavar="N",
        field="kafka_max_offsets_per_trigger",
        min=1,
    ),
    _option(
        "kafka_allow_data_loss",
        bool,
        "--allow-data-loss",
        INPUT,
        field="kafka_allow_data_loss",
    ),
    _option("kafka_retry", str, "--kafka-retry", INPUT, metavar="SPAN", field="kafka_retry"),
    _option("rate", int | None, "--rate", INPUT, metavar="N", field="rate", min=1),
    _option(
        "rate_sample", Path | None, "--rate-sample", INPUT, metavar="FILE", field="rate_sample"
    ),
    _option("log_format", str, "--format -f", INPUT, metavar="FORMAT", field="log_format"),
    _option("output_dir", Path, "--output-dir", OUTPUT, metavar="DIR", field="output_dir"),
    _option("state_dir", Path, "--state-dir", STATE, metavar="DIR", field="state_dir"),
    _option(
        "store",
        str | None,
        "--store",
        OUTPUT,
        metavar="URL",
        field="store",
        default_text="OUTPUT_DIR/logstream.db",
    ),
    _option("watermark", str, "--watermark", WINDOWS, metavar="SPAN", field="watermark"),
    _option("max_future", str, "--max-future", WINDOWS, metavar="SPAN", field="max_future"),
    _option(
        "max_line_bytes",
        int,
        "--max-line-bytes",
        INPUT,
        metavar="BYTES",
        field="max_line_bytes",
        min=1024,
    ),
    _option("window", str, "--window", WINDOWS, metavar="SPAN", field="traffic_window"),
    _option(
        "trending_window",
        str,
        "--trending-window",
        WINDOWS,
        metavar="SPAN",
        field="trending_window",
    ),
    _option(
        "trending_slide", str, "--trending-slide", WINDOWS, metavar="SPAN", field="trending_slide"
    ),
    _option("top", int, "--top", WINDOWS, metavar="N", field="top"),
    _option(
        "store_retention",
        str,
        "--store-retention",
        OUTPUT,
        metavar="SPAN",
        field="store_retention",
    ),
    _option("store_retry", str, "--store-retry", OUTPUT, metavar="SPAN", field="store_retry"),
    _option("trigger", str, "--trigger", STATE, metavar="WHEN", field="trigger"),
    _option(
        "max_files_per_trigger",
        int | None,
        "--max-files-per-trigger",
        INPUT,
        metavar="N",
        field="max_files_per_trigger",
    ),
    _option("driver_rows", int | None, "--driver-rows", STATE, metavar="N", field="driver_rows"),
    _option(
        "sink",
        list[str] | None,
        "--sink",
        OUTPUT,
        metavar="SINK",
        field="sink",  # the model's default; None here: ["parquet"] (cli/run.py)
        help="parquet, console, or a kafka:// or http(s):// URL (repeatable).",
        default=None,
    ),
    _option("sink_outputs", str, "--sink-outputs", OUTPUT, metavar="LIST", field="sink_outputs"),
    _option(
        "output_format", str, "--output-format", OUTPUT, metavar="FORMAT", field="output_format"
    ),
    _option("dedup", bool, "--dedup/--keep-duplicates", STATE, field="dedup"),
    _option("strict", bool, "--strict", INPUT, field="strict"),
    _option("dedup_window", str, "--dedup-window", STATE, metavar="SPAN", field="dedup_window"),
    _option("session_gap", str, "--session-gap", WINDOWS, metavar="SPAN", field="session_gap"),
    _option(
        "session_stats_window",
        str,
        "--session-stats-window",
        WINDOWS,
        metavar="SPAN",
        field="session_stats_window",
    ),
    _option(
        "clients_window", str, "--clients-window", WINDOWS, metavar="SPAN", field="clients_window"
    ),
    _option("alert_sigma", float, "--alert-sigma", WINDOWS, metavar="X", field="alert_sigma"),
    _option("alert_warmup", str, "--alert-warmup", WINDOWS, metavar="SPAN", field="alert_warmup"),
    _option(
        "reference",
        list[str] | None,
        "--reference",
        INPUT,
        metavar="KIND=FILE",
        help="Reference table: networks, agents or sections (repeatable).",
        default=None,
    ),
    _option("queries", str, "--queries", OUTPUT, metavar="LIST", field="queries"),
    _option(
        "no_panel",
        list[str] | None,
        "--no-panel",
        OUTPUT,
        metavar="PANEL",
        field="no_panel",
        help="Leave out one of GoAccess's panels of traffic_by_panel (repeatable): visitors, "
        "requests, static_requests, not_found, os, browsers, virtual_hosts, referrers, "
        "referring_sites, remote_user, geolocation.",
        default=None,
        default_text="every panel the log format can fill",
    ),
    _option(
        "static_ext",
        list[str] | None,
        "--static-ext",
        WINDOWS,
        metavar="EXT",
        field="static_ext",
        help="Count this extension as a static file too (repeatable, e.g. .webp).",
        default=None,
        default_text="GoAccess's list",
    ),
    _option(
        "site_host",
        str | None,
        "--site-host",
        WINDOWS,
        metavar="HOST",
        field="site_host",
    ),
    _option("bot_model", Path | None, "--bot-model", OUTPUT, metavar="DIR", field="bot_model"),
    _option(
        "dashboard",
        bool | None,
        "--dashboard/--no-dashboard",
        DASHBOARD,
        help="Serve the live dashboard.",
        default=None,
        default_text="on for the demo",
    ),
    _option(
        "host", str, "--host", DASHBOARD, metavar="HOST", help="Dashboard address.", demo="host"
    ),
    _option("port", int, "--port", DASHBOARD, metavar="PORT", help="Dashboard port.", demo="port"),
    _option(
        "allowed_host",
        list[str] | None,
        "--allowed-host",
        DASHBOARD,
        metavar="NAME",
        help="Dashboard: answer this Host too.",
        default=None,
    ),
    _option(
        "no_auth",
        bool,
        "--no-auth",
        DASHBOARD,
        help="Dashboard: exposed, no password.",
        default=False,
    ),
    _option(
        "duration",
        str | None,
        "--duration",
        STATE,
        metavar="SPAN",
        help="Stop after this long.",
        default=None,
        default_text="until Ctrl-C",
    ),
    _option(
        "replay",
        list[Path] | None,
        "--replay",
        DASHBOARD,
        metavar="FILE",
        help="Demo: a log to replay (repeat).",
        default=None,
    ),
    _option(
        "speedup",
        float,
        "--speedup",
        DASHBOARD,
        metavar="X",
        help="Demo: event seconds replayed per second.",
        demo="speedup",
    ),
    _option(
        "rotate_every",
        str,
        "--rotate-every",
        DASHBOARD,
        metavar="SPAN",
        help="Demo: event time between log rotations.",
        demo="rotate_every_s",
        convert=_span_text,
    ),
    _option(
        "demo_out",
        Path,
        "--demo-out",
        DASHBOARD,
        metavar="DIR",
        help="Demo: output root (emptied).",
        demo="out_dir",
    ),
    _option("quiet", bool, "--quiet -q", STATE, help="No progress lines.", default=False),
    _option(
        "master",
        str | None,
        "--master",
        SPARK,
        metavar="URL",
        help="Spark master URL.",
        default=None,
    ),
    _option(
        "remote",
        str | None,
        "--remote",
        SPARK,
        metavar="URL",
        help="A Spark Connect server (docs/cluster.md).",
        default=None,
    ),
    _option(
        "conf",
        list[str] | None,
        "--conf",
        SPARK,
        metavar="KEY=VALUE",
        help="A Spark setting, as spark-submit's (repeatable).",
        default=None,
    ),
)


def run_signature() -> inspect.Signature:
    """``logstream run``'s signature as Typer reads it: ``ctx``, then every option of
    :data:`RUN_OPTIONS` as ``Annotated[type, typer.Option(...)]`` with its default."""
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    for option in RUN_OPTIONS:
        info = typer.Option(
            *option.flags,
            metavar=option.metavar,
            min=option.min,
            rich_help_panel=option.panel,
            help=option.help_text(),
        )
        params.append(
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=option_default(option),
                annotation=Annotated[option.type, info],
            )
        )
    return inspect.Signature(params, return_annotation=None)


def _doc_default(option: RunOption) -> str:
    """The default as docs/options.md writes it."""
    if option.default_text is not None:
        return option.default_text
    value = option_default(option)
    if option.type is bool:
        on, _, off = option.flags[0].partition("/")
        return f"`{on if value else off}`" if off else ("on" if value else "off")
    if value is None and option.field is not None:
        value = PIPELINE_FIELDS[option.field][0] or None
    return "—" if value is None else f"`{value}`"


def options_markdown() -> str:
    """docs/options.md: a table per panel of ``run --help``, option | default | meaning."""
    lines = [
        "# `logstream run`'s options",
        "",
        "<!-- Generated from the configuration models by `python -m logstream.cli.regenerate`;",
        "     do not edit: tests/cli/test_options.py fails when this file is stale. -->",
        "",
        "Regenerate this page with `python -m logstream.cli.regenerate` (it also rewrites",
        "`src/logstream/cli/_run_model.py`). Each default is defined once: in the pipeline's",
        "configuration model (`PipelineConfig`, src/logstream/pipeline/config.py), the demo's",
        "(`DemoSettings`, src/logstream/demo.py), or for the options of neither in",
        "src/logstream/cli/run_options.py. In a `--config` file",
        "([example](../examples/logstream.toml)) the keys are the long option names without",
        "dashes; flags given on the command line win.",
        "What each option does in detail: [streaming.md](streaming.md).",
    ]
    for panel in PANELS:
        lines += ["", f"## {panel}", "", "| option | default | meaning |", "|---|---|---|"]
        for option in (o for o in RUN_OPTIONS if o.panel == panel):
            long, *short = option.flags
            name = " / ".join(f"`{flag}`" for flag in long.split("/"))
            if option.metavar:
                name = f"`{long} {option.metavar}`"
            name = ", ".join([name, *(f"`{flag}`" for flag in short)])
            meaning = option.help or PIPELINE_FIELDS[str(option.field)][1]
            meaning = meaning.replace("\\[", "[").replace("|", "\\|")
            lines.append(f"| {name} | {_doc_default(option)} | {meaning} |")
    return "\n".join(lines) + "\n"


def _literal(value: object) -> str:
    """``value`` as Python source (strings in double quotes, as ruff formats them)."""
    if isinstance(value, Path):
        return f"Path({json.dumps(str(value))})"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def model_snapshot() -> str:
    """The text of :mod:`logstream.cli._run_model`, read from the models (imports them)."""
    import dataclasses

    from logstream.demo import DemoSettings
    from logstream.pipeline.config import PipelineConfig

    fields = PipelineConfig.model_fields
    demo = {f.name: f.default for f in dataclasses.fields(DemoSettings)}
    lines = [
        '"""Defaults and descriptions of the configuration models behind ``logstream run``\'s',
        "options, read without importing them (:mod:`logstream.pipeline` loads PySpark).",
        "",
        "Generated from :class:`~logstream.pipeline.config.PipelineConfig` and",
        ":class:`~logstream.demo.DemoSettings` by ``python -m logstream.cli.regenerate``: do not",
        'edit (tests/cli/test_options.py fails when this file is stale)."""',
        "",
        "from pathlib import Path",
        "",
        "#: PipelineConfig field → (default, description), for the fields options set.",
        "PIPELINE_FIELDS: dict[str, tuple[object, str]] = {",
    ]
    for name in sorted({o.field for o in RUN_OPTIONS if o.field is not None}):
        info = fields[name]
        lines += [
            f'    "{name}": (',
            f"        {_literal(info.get_default(call_default_factory=True))},",
            f"        {_literal(info.description or '')},",
            "    ),",
        ]
    lines += [
        "}",
        "#: DemoSettings field → default, for the fields options set.",
        "DEMO_FIELDS = {",
    ]
    for name in sorted({o.demo for o in RUN_OPTIONS if o.demo is not None}):
        lines.append(f'    "{name}": {_literal(demo[name])},')
    return "\n".join([*lines, "}"]) + "\n"
