"""The follow source's loss counts are named once (issue 54 item 26).

The four ``follow_*`` keys of ``pipeline_state`` were written out in the store's writer, its
reader and the Prometheus gauges, and the offset's names in the progress listener: a renamed
or added count had to be changed in each. They are defined in
:mod:`logstream.serving.schema` (``FOLLOW_LOSSES``, ``FOLLOW_LOSS_KEYS``); only the follow
source itself, whose offset they come from, spells them out as well."""

from __future__ import annotations

import ast
from pathlib import Path

from logstream.serving.schema import FOLLOW_LOSS_KEYS, FOLLOW_LOSSES

SRC = Path(__file__).resolve().parents[2] / "src" / "logstream"
NAMES = {"truncations", "lost_bytes", "lost_lines", "lost_files"}
NAMES |= {f"follow_{n}" for n in NAMES}
#: Where the names may be listed: their definition, and the source's offset.
DEFINED_IN = {"serving/schema.py", "sources/follow/offsets.py"}


def listed_names(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """Literal tuples, lists, sets and dictionary keys that hold two or more of the names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        names = {i.value for i in items if isinstance(i, ast.Constant)} & NAMES
        if len(names) >= 2:
            found.append((node.lineno, names))
    return found


def test_the_follow_loss_names_are_listed_only_where_they_are_defined():
    listed = {}
    for path in SRC.rglob("*.py"):
        where = path.relative_to(SRC).as_posix()
        if found := listed_names(ast.parse(path.read_text(encoding="utf-8"))):
            listed[where] = found
    assert set(listed) <= DEFINED_IN, {k: v for k, v in listed.items() if k not in DEFINED_IN}


def test_the_state_keys_are_the_offset_names_with_their_prefix():
    assert list(FOLLOW_LOSSES) == ["truncations", "lost_bytes", "lost_lines", "lost_files"]
    assert FOLLOW_LOSS_KEYS == tuple(f"follow_{n}" for n in FOLLOW_LOSSES)
