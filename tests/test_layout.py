"""The layout of ``src/logstream``: imports form no cycle, modules and functions stay small.

The import graph is drawn from every ``import`` statement of every module, including those
inside functions and under ``TYPE_CHECKING``: a lazy import still ties two modules together,
and a cycle through one means the lower module knows the higher. A package's ``__init__`` is
its own node (``logstream.sources``); importing ``logstream.sources.follow`` is an edge to that
module, not to the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: The largest module, in lines, and the largest function (signature and docstring included).
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 120


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (``logstream.pipeline.ingest.fold``)."""
    found = {}
    for path in sorted((SRC / "logstream").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The logstream modules ``name`` imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in known else base)
    edges = set()
    for target in targets:
        while target not in known and "." in target:
            target = target.rpartition(".")[0]
        if target in known and target != name:
            edges.add(target)
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_imports_form_no_cycle():
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert sum(len(e) for e in graph.values()) > 100  # the walk sees the real imports
    assert "logstream.session" in graph["logstream.pipeline.run"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_and_functions_are_small(name):
    path = modules()[name]
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(SRC)}: {lines} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{path.relative_to(SRC)}: {', '.join(long)}"
