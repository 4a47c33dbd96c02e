"""One definition per option: ``logstream run``'s options, defaults and help come from the
configuration models, and ``--help``, docs/options.md, examples/logstream.toml and the README
agree with them (``python -m logstream.cli.regenerate`` regenerates what is generated)."""

from __future__ import annotations

import dataclasses
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from logstream.cli import app
from logstream.cli import run as run_module
from logstream.cli.run_options import (
    DOCS,
    RUN_OPTIONS,
    SNAPSHOT,
    config_key,
    model_snapshot,
    option_default,
    options_markdown,
)
from logstream.demo import DemoSettings
from logstream.pipeline.config import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
COMMAND = typer.main.get_command(app)
RUN = COMMAND.commands["run"]  # type: ignore[attr-defined]
PARAMS = {p.name: p for p in RUN.params}
BY_NAME = {o.name: o for o in RUN_OPTIONS}
EXAMPLE = (REPO / "examples" / "logstream.toml").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
REGENERATE = "python -m logstream.cli.regenerate"


def model_default(option):
    """The option's default as the models define it (None: the option has its own)."""
    if option.field is not None:
        return PipelineConfig.model_fields[option.field].get_default(call_default_factory=True)
    if option.demo is not None:
        value = {f.name: f.default for f in dataclasses.fields(DemoSettings)}[option.demo]
        return option.convert(value) if option.convert else value
    return None


def test_the_snapshot_of_the_models_is_current():
    assert SNAPSHOT.read_text(encoding="utf-8") == model_snapshot(), f"run {REGENERATE}"


def test_docs_options_md_is_current():
    assert DOCS.read_text(encoding="utf-8") == options_markdown(), f"run {REGENERATE}"
    assert REGENERATE in DOCS.read_text(encoding="utf-8").split("##")[0]


def test_every_option_of_the_command_is_a_row_of_the_table_and_back():
    assert set(PARAMS) - {"ctx"} == set(BY_NAME)
    for option in RUN_OPTIONS:
        param = PARAMS[option.name]
        flags = [*param.opts, *param.secondary_opts]
        assert flags[0] == option.flags[0].split("/")[0], option.name
        assert config_key(option) == flags[0][2:].replace("-", "_")


@pytest.mark.parametrize("option", RUN_OPTIONS, ids=lambda o: o.name)
def test_the_help_default_is_the_models(option):
    param = PARAMS[option.name]
    default = param.default
    if option.field is not None and option.default is None:  # --sink: None means the model's
        assert default is None
        return
    expected = model_default(option) if (option.field or option.demo) else option.default
    if isinstance(expected, Path):
        default, expected = Path(default), Path(expected)
    assert default == expected, option.name
    if option.field is not None and option.help is None:
        description = PipelineConfig.model_fields[option.field].description
        assert param.help.startswith(description.rstrip(".…")), option.name


def test_the_options_keep_their_defaults():
    """The defaults `logstream run` has always had (a change here is a change of behaviour)."""
    defaults = {name: option_default(BY_NAME[name]) for name in BY_NAME}
    assert defaults["watermark"] == "10 minutes" and defaults["window"] == "1 minute"
    assert defaults["output_dir"] == Path("out/stream") and defaults["state_dir"] == Path(
        "out/state"
    )
    assert defaults["trigger"] == "1 second" and defaults["log_format"] == "auto"
    assert defaults["rotate_every"] == "12h" and defaults["speedup"] == 600.0
    assert defaults["host"] == "127.0.0.1" and defaults["port"] == 8050
    assert defaults["demo_out"] == Path("out/demo") and defaults["alert_sigma"] == 5.0
    assert defaults["sink"] is None and defaults["dashboard"] is None


def test_run_help_shows_the_models_defaults():
    text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200", "TERM": "dumb"}).output
    for flag, shown in (
        ("--watermark", "10 minutes"),
        ("--trending-window", "5 minutes"),
        ("--rotate-every", "12h"),
        ("--store", "OUTPUT_DIR/logstream.db"),
        ("--dashboard", "on for the demo"),
    ):
        line = next(line for line in text.splitlines() if f" {flag} " in line)
        assert f"[default: {shown}]" in line, line


def docs_rows() -> dict[str, str]:
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            name, default, _ = (cell.strip() for cell in line.strip("|").split("|", 2))
            rows[name.split("`")[1].split()[0]] = default
    return rows


@pytest.mark.parametrize("option", RUN_OPTIONS, ids=lambda o: o.name)
def test_docs_options_md_gives_each_options_default(option):
    shown = docs_rows()[option.flags[0].split("/")[0]]
    expected = model_default(option) if (option.field or option.demo) else option.default
    if option.default_text:
        assert shown == option.default_text
    elif isinstance(expected, bool) and "/" in option.flags[0]:
        assert shown == f"`{option.flags[0].split('/')[int(not expected)]}`", option.name
    elif isinstance(expected, bool):
        assert shown == ("on" if expected else "off"), option.name
    elif expected in (None, {}):
        assert shown == "—", option.name
    else:
        assert shown == f"`{expected}`", option.name


def example_lines() -> list[tuple[bool, str, str]]:
    """(in the defaults part, key, value text) of every `key = value` line, commented or not."""
    lines, defaults = [], False
    for line in EXAMPLE.splitlines():
        defaults = defaults or line.startswith("# Defaults:")
        match = re.match(r"^(?:# )?(\w+) = (.*)$", line)
        if match and "[run]" not in line:
            lines.append((defaults, match[1], match[2]))
    return lines


def test_every_key_of_the_example_is_an_option_and_every_option_a_key():
    keys = [key for _, key, _ in example_lines()]
    assert len(keys) == len(set(keys)), "a key twice"
    assert set(keys) == {config_key(o) for o in RUN_OPTIONS if o.name != "config"}


@pytest.mark.parametrize("line", example_lines(), ids=lambda line: line[1])
def test_the_example_writes_each_default_as_the_model_defines_it(line):
    in_defaults, key, text = line
    option = next(o for o in RUN_OPTIONS if config_key(o) == key)
    value = tomllib.loads(f"v = {text}")["v"]
    default = option_default(option)
    if not in_defaults or default is None:
        return  # this example's choice, or an example value of an option without default
    if option.field is not None and option.default is None:  # sink: the model's default
        default = PipelineConfig.model_fields[option.field].default
    if isinstance(default, Path):
        value = Path(value)
    assert value == default, f"examples/logstream.toml: {key} = {text}; the default is {default!r}"


def test_the_example_is_a_valid_configuration(tmp_path):
    """Its values, read as `--config` reads them, make a pipeline configuration."""
    with typer.Context(RUN) as ctx:
        values = run_module.load_config_file(REPO / "examples" / "logstream.toml", ctx)
    given = {o.name: option_default(o) for o in RUN_OPTIONS} | values
    given |= {"input_dir": tmp_path / "landing", "output_dir": tmp_path / "out"}
    given["state_dir"] = tmp_path / "state"
    (tmp_path / "landing").mkdir()
    cfg = run_module._pipeline_config(given, "dir")
    assert cfg.log_format == "common" and cfg.max_files_per_trigger == 4


def all_options(command) -> set[str]:
    found = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    for sub in getattr(command, "commands", {}).values():
        found |= all_options(sub)
    return found


def readme_commands() -> list[list[str]]:
    commands = []
    for line in README.splitlines():
        text = line.strip().removeprefix("$ ").rstrip("\\").strip()
        if text.startswith("logstream "):
            commands.append(shlex.split(text)[1:])
    return commands


def test_the_readme_has_commands_to_check():
    assert any(args[0] == "run" for args in readme_commands())


@pytest.mark.parametrize("args", readme_commands(), ids=lambda args: " ".join(args)[:40])
def test_each_option_of_a_readme_command_is_an_option_of_that_command(args):
    command = COMMAND
    while args and args[0] in getattr(command, "commands", {}):
        command, args = command.commands[args[0]], args[1:]  # type: ignore[attr-defined]
    known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for arg in args:
        if arg.startswith("--"):
            assert arg.split("=")[0] in known, f"README: {command.name} has no {arg}"


def test_each_option_the_readme_names_is_an_option_of_logstream():
    known = all_options(COMMAND) | {"--help", "--version"}
    for line in README.splitlines():
        if "bench/" in line or "spark-submit" in line:  # other programs' options
            continue
        for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line):
            assert option in known, f"README names {option}, which no command has: {line}"
