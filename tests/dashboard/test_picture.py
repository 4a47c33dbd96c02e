"""The README's picture of the dashboard is the current page, made by a script kept in the
repository from the demo's store (issue 54 item 20: it showed a pytest store path, seven
queries and tiles that no longer exist, and nothing said how to make it again)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from logstream.dashboard.app import refresh_outputs
from logstream.dashboard.layout import build_layout
from tests.dashboard.helpers import filled_store
from tests.dashboard.test_panels import output

REPO = Path(__file__).resolve().parents[2]
PICTURE = REPO / "docs" / "dashboard.png"


def png_text(path: Path) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    found, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return found


def ids(node: Any) -> set[str]:
    """The element ids of a tree of Dash components."""
    if isinstance(node, list | tuple):
        return set().union(*(ids(c) for c in node)) if node else set()
    found = {node.id} if isinstance(getattr(node, "id", None), str) else set()
    return found | ids(getattr(node, "children", None) or [])


def test_the_readme_picture_is_the_current_page_made_by_its_script(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/dashboard.png)" in readme
    text = png_text(PICTURE)
    assert text.get("Software") == "scripts/dashboard_picture.py", text
    assert (REPO / text["Software"]).is_file()
    assert "out/demo/logstream.db" in text["Source"] and "pytest" not in str(text)
    pictured = set(text["Panels"].split(","))
    skeleton = ids(build_layout(2000, "http://127.0.0.1:4040", "out/demo/logstream.db"))
    store = filled_store(tmp_path / "s.db")  # a followed log's store, as the demo's
    store.record_follow_losses(
        {"truncations": 0, "lost_bytes": 0, "lost_lines": 0, "lost_files": 0}
    )
    tiles = ids(output(refresh_outputs(tmp_path / "s.db", "all", "", None), "kpis"))
    shown = {i for i in pictured if i in skeleton or i.startswith("kpi-")}
    # nothing pictured is gone from the page, and every chart and tile of the page is there
    assert {i for i in pictured if i.startswith("kpi-")} <= tiles
    assert {i for i in skeleton if i.startswith("graph-")} <= shown
    assert {i for i in tiles if i.startswith("kpi-")} <= shown
