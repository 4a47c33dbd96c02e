"""The environment's own tools: the set-up upgrades pip and setuptools, whose versions that
Python 3.11's ``venv`` brings (setuptools 65.5.0) have published advisories."""

from __future__ import annotations

import re
from importlib import metadata

from tests.conftest import REPO

#: The first releases without the advisories known when this was written: setuptools'
#: path traversal in PackageIndex (CVE-2025-47273, fixed in 78.1.1; 65.5.0 also has
#: CVE-2022-40897 and CVE-2024-6345), pip's tar extraction outside its target (CVE-2025-8869,
#: fixed in 25.3).
FIXED = {"setuptools": (78, 1, 1), "pip": (25, 3)}


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", metadata.version(name))[:3])


def test_the_set_up_upgrades_pip_and_setuptools_and_the_venv_has_them():
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("$(STAMP): pyproject.toml")[1]
    first = recipe.split("\n\n")[0]
    assert "-m pip install --quiet --upgrade pip setuptools" in first
    for name, fixed in FIXED.items():
        assert _version(name) >= fixed, f"{name} {metadata.version(name)}: run make setup"
