"""``--help`` reads well at 80 columns: option names whole, flags shown as flags, argument
metavars on the usage line, one-line command descriptions, and ``run --help`` short enough
to read (its options in groups; every option in detail: docs/options.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from logstream.cli import app

COMMAND = typer.main.get_command(app)
RUN = COMMAND.commands["run"]  # type: ignore[attr-defined]
#: ``run --help`` at 80 columns was 418 lines; grouped, with one-line help, it is about 160
RUN_LINE_BUDGET = 165


def render(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    return result.output


def long_options(command) -> list[str]:
    return [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]


@pytest.mark.parametrize("args", [(), ("run",), ("batch",), ("sql",), ("replay",)])
def test_no_option_name_is_cut_and_no_flag_shows_a_type(args):
    text = render(*args)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert not re.search(r"--[\w-]*…", text), re.findall(r"--[\w-]*…", text)
    assert "<bool>" not in text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert not re.search(r"\{\w+\}", usage), usage  # such as `{paths}...`
    command = COMMAND
    for name in args:
        command = command.commands[name]  # type: ignore[attr-defined]
    for option in long_options(command):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option


def test_run_help_is_grouped_and_short():
    text = render("run")
    assert len(text.splitlines()) <= RUN_LINE_BUDGET, len(text.splitlines())
    for panel in ("Input", "Output", "Windows and analytics", "Triggers and state", "Spark"):
        assert f"─ {panel} ─" in text, panel
    assert "Every option in detail: docs/options.md" in text  # not streaming.md (issue 54, 17)


@pytest.mark.parametrize("command", ["batch", "sql", "replay"])
def test_the_usage_line_names_the_paths_argument(command):
    assert f"logstream {command} [OPTIONS] PATH..." in render(command)


def test_every_command_is_described_in_one_line():
    text = render()
    commands = text[text.index("Commands") :].splitlines()[1:]
    rows = [line for line in commands if line.startswith("│")]
    names = [line.split()[1] for line in rows if line[2] != " "]
    assert set(names) == set(COMMAND.commands), names  # type: ignore[attr-defined]
    assert len(rows) == len(names), "a command's description takes more than one line"


def all_commands(command=COMMAND, path=()):
    """Every leaf command of the CLI, with its path (``("model", "train", "bots")``)."""
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield path, command
        return
    for name, sub in subcommands.items():
        yield from all_commands(sub, (*path, name))


LEAVES = dict(all_commands())


@pytest.mark.parametrize("path", list(LEAVES), ids=" ".join)
def test_no_help_paragraph_breaks_a_line_of_its_own(path):
    """Issue 54 item 16: Typer keeps a docstring's line breaks, so ``dashboard --help`` broke
    "It reads⏎only the serving store" mid-sentence (and examples mid-command). Each paragraph
    after the first (which Typer joins) is one line of the docstring; the terminal wraps it."""
    paragraphs = (LEAVES[path].help or "").split("\n\n")[1:]
    assert not [p for p in paragraphs if "\n" in p.strip()], paragraphs


def test_every_docs_page_named_in_a_help_text_exists():
    """A help text points only at pages of docs/ that exist (issue 54 item 17)."""
    repo = Path(__file__).resolve().parents[2]
    for path in [(), *LEAVES]:
        text = render(*path)
        for page in re.findall(r"docs/([\w-]+\.md)", text):
            assert (repo / "docs" / page).is_file(), (path, page)


#: A cell cut short by the terminal's width: a word ending in "…" at the edge of its column.
CUT = re.compile(r"\S…\s*│")
#: Python's type names where the help should name the value (FILE, N, SPAN …).
TYPE_NAME = re.compile(r"<(str|int|float|path|list\[\w+\]|int range|float range|bool)>")


@pytest.mark.parametrize("path", [(), *LEAVES], ids=lambda p: " ".join(p) or "logstream")
def test_every_help_reads_whole_at_80_columns(path):
    """Issue 54 item 15: ``batch --help`` and ``sql --help`` cut their text with "…", and
    ``<str>``, ``<path>``, ``<list[str]>``, ``<int range> [x>=1]`` squeezed the text column to
    about 26 characters; ``generate`` cut two option names. Every command's help names its
    values in words, as ``run --help`` does, and nothing in it is cut."""
    text = render(*path)
    assert not CUT.findall(text), CUT.findall(text)
    assert not TYPE_NAME.findall(text), TYPE_NAME.findall(text)
    assert not re.search(r"\[x>=|<=x<=", text)  # a range is said in the help's words
