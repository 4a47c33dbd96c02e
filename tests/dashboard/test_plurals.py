"""Counts agree with their nouns in the terminal and on the dashboard: "1 micro-batch", not
"1 micro-batches" (issue 37, item 5)."""

from __future__ import annotations

import re
from pathlib import Path

from logstream.dashboard.app import refresh_outputs
from logstream.units import plural
from tests.dashboard.helpers import client_rows, commit, new_store, traffic_row
from tests.dashboard.test_panels import output, text
from tests.dashboard.test_tiles import kpi, progress

SRC = Path(__file__).resolve().parents[2] / "src" / "logstream"
#: A placeholder of an f-string followed by a plural noun: "{n} micro-batches". A decimal
#: ("{x:.1f} pages per session") is plural whatever its value, and plural() says its noun.
COUNT_THEN_PLURAL = re.compile(
    r"\{(?!plural\()(?![^{}]*:[^{}]*\.\d+f\})[^{}]*\}\)?\s+(?:micro-batch|batch|row|line|"
    r"request|client|window|page|session|file|reading|duplicate|event|byte|alert|truncation|"
    r"cluster|word)e?s\b(?!/)"
)
#: Lines allowed a count before a plural noun, each with its reason (none today).
ALLOWED: set[str] = set()


def test_plural():
    assert plural(1, "micro-batch") == "1 micro-batch"
    assert plural(25, "micro-batch") == "25 micro-batches"
    assert plural(0, "line") == "0 lines" and plural(1_234, "row") == "1,234 rows"


def test_no_count_in_the_cli_or_the_dashboard_is_followed_by_a_plural_noun():
    found = []
    for folder in ("cli", "dashboard"):
        for path in sorted((SRC / folder).glob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.strip()
                if ('f"' in code or "f'" in code) and COUNT_THEN_PLURAL.search(code):
                    if code not in ALLOWED:
                        found.append(f"{path.relative_to(SRC)}:{number}: {code}")
    assert found == []


def test_one_of_each_reads_in_the_singular_on_the_page(tmp_path):
    store = new_store(tmp_path / "s.db")
    commit(
        store,
        0,
        traffic=[traffic_row(0, 0, s4=1)],
        clients=client_rows(5, {"10.0.0.1": (1, 1)}),
    )
    store.record_progress([progress(0, num_input_rows=1)])
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "error-rate")[1] == "1 request ≥ 400"
    assert kpi(out, "batch-duration")[1] == "1 row in batch #0"
    clients = text(output(out, "top-clients"))
    assert "1 client, 1 request," in clients and "1 clients" not in clients
