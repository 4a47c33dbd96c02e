"""The README's performance table is written from ``bench/results/`` by ``bench/figures.py``,
and every row was measured on the code it exercises: no figure outlives the code under it."""

from __future__ import annotations

import subprocess

import pytest
from bench import figures

from tests.conftest import REPO


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


def test_the_readme_table_is_the_one_the_results_make():
    assert figures.readme_block(), "README.md has no figures block"
    assert figures.readme_block() == figures.render(), "run: python bench/figures.py --render"


@pytest.mark.parametrize("row", figures.ROWS, ids=[f"{r.result}:{r.step}" for r in figures.ROWS])
def test_each_row_was_measured_on_the_code_it_exercises(row):
    stamp = figures.measured(row)
    commit = stamp.get("commit")
    assert commit, f"{row.result} names no commit: run {row.reproduce}"
    assert not stamp.get("dirty"), f"{row.result} was measured on uncommitted code"
    last = _git("log", "-1", "--format=%H", "--", *row.paths).stdout.strip()
    assert last, f"git knows no commit of {row.paths}"
    newer = _git("merge-base", "--is-ancestor", last, commit).returncode != 0
    assert not newer, (
        f"{row.result} ({row.step}) was measured on {commit[:7]}, but {last[:7]} changed the "
        f"code it exercises since: run {row.reproduce}, then python bench/figures.py --render"
    )
