"""Every option of ``logstream run`` is documented: in docs/streaming.md's option table and,
as a key, in examples/logstream.toml (which ``logstream run --config`` accepts)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import typer

from logstream.cli import app

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "streaming.md").read_text(encoding="utf-8")
EXAMPLE = (REPO / "examples" / "logstream.toml").read_text(encoding="utf-8")
RUN = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
LONG_OPTIONS = sorted(
    opt for p in RUN.params for opt in p.opts if opt.startswith("--") and opt != "--help"
)


def test_the_run_command_has_the_options_these_tests_expect():
    assert {"--input-dir", "--watermark", "--dedup-window", "--alert-sigma"} <= set(LONG_OPTIONS)


@pytest.mark.parametrize("option", LONG_OPTIONS)
def test_every_option_is_in_the_option_table(option):
    table = [line for line in DOCS.splitlines() if line.startswith("| `")]
    assert any(f"`{option}`" in line or f"`{option} " in line for line in table), option


#: Each option's first long name, its key in a configuration file (``--kafka`` is another
#: spelling of ``--kafka-bootstrap``, whose key is ``kafka_bootstrap``).
FIRST_LONG_NAMES = sorted(
    next(opt for opt in p.opts if opt.startswith("--"))
    for p in RUN.params
    if any(opt.startswith("--") for opt in p.opts) and "--help" not in p.opts
)


@pytest.mark.parametrize("option", [o for o in FIRST_LONG_NAMES if o != "--config"])
def test_every_option_is_a_key_of_the_example_configuration(option):
    key = option[2:].replace("-", "_")
    assert re.search(rf"^(# )?{key} = ", EXAMPLE, flags=re.M), key


def test_the_example_configuration_with_its_comments_removed_is_valid_toml():
    uncommented = re.sub(r"^# (\w+ = )", r"\1", EXAMPLE, flags=re.M)
    run = tomllib.loads(uncommented)["run"]
    assert run["dedup_window"] == "10 minutes" and run["replay"]
