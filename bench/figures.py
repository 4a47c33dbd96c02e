"""Every figure of the README's performance table, measured on the current code in one run,
and the table written from the results.

The README's table is the block between ``<!-- figures:begin -->`` and ``<!-- figures:end
-->``; nobody writes it by hand. This command runs the benchmarks the table quotes, one after
the other on this machine (each writes its file in ``bench/results/``, stamped by
:func:`bench.harness.measured_on` with the commit it ran on), then rewrites the block from
those files (:func:`render`). ``tests/test_figures.py`` fails when the block differs from what
the files say, or when a row was measured on a commit older than the last change to the code
its benchmark exercises (:data:`ROWS`' ``paths``), or on uncommitted code.

Steps, about 25 minutes on 2 cores (``--only`` runs some; ``--render`` only rewrites):

1. ``284d``: ``bench_vs_goaccess.py --days 284 --skip-live --rows batch`` (GoAccess and
   ``logstream batch`` on 10,017,248 lines);
2. ``31d``: ``bench_floor.py --logstream-rows batch,backfill_ingest,backfill_full``
   (GoAccess, the floor's steps and logstream's batch and backfills on 1,093,432 lines);
3. ``1d``: ``bench_floor.py --days 1 --repeat 3 --logstream-rows batch`` (the NASA day);
4. ``live``: ``bench_live_path.py --targets microbatch,live --live-seconds 300`` (a warm
   micro-batch against Spark's own query; 10,000 and 50,000 lines/s for 5 minutes each);
5. ``make-run``: ``bench_make_run.py --seconds 60`` (quiet, then with one busy process a core);
6. ``kafka``: ``bench_kafka.py`` (the NASA day through a 3-partition topic).

Usage::

    python bench/figures.py                 # every step, then the README
    python bench/figures.py --only 284d,1d  # some steps, then the README
    python bench/figures.py --render        # the README from the results as they are
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

README = harness.REPO / "README.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"

#: The code every figure exercises: a change to any of it makes every figure old.
_COMMON = (
    "src/logstream/parsing",
    "src/logstream/sources",
    "src/logstream/session.py",
    "src/logstream/jvm.py",
    "src/logstream/config.py",
)
_ANALYTICS = (*_COMMON, "src/logstream/analytics", "src/logstream/reference")
_BATCH = (*_ANALYTICS, "src/logstream/report", "src/logstream/cli/batch.py")
_PIPELINE = (
    *_ANALYTICS,
    "src/logstream/pipeline",
    "src/logstream/sinks",
    "src/logstream/serving",
    "src/logstream/cli/run.py",
)


#: The steps of :func:`main`: a name and a benchmark's command line (after ``python``).
STEPS = {
    "284d": "bench/bench_vs_goaccess.py --days 284 --skip-live --rows batch",
    "31d": "bench/bench_floor.py --logstream-rows batch,backfill_ingest,backfill_full",
    "1d": "bench/bench_floor.py --days 1 --repeat 3 --logstream-rows batch",
    "live": "bench/bench_live_path.py --targets microbatch,live --live-seconds 300",
    "make-run": "bench/bench_make_run.py --seconds 60",
    "kafka": "bench/bench_kafka.py",
}


def _result(name: str, run: str | None = None) -> dict[str, Any]:
    """A result file of ``bench/results/`` (its run ``run``)."""
    document = json.loads((harness.RESULTS / name).read_text(encoding="utf-8"))
    return document["runs"][run] if run else document


def _s(seconds: float) -> str:
    return f"{seconds:,.1f} s"


def _x(ratio: float) -> str:
    return f"{ratio:.2f}×"


def _batch_284d(r: dict[str, Any]) -> tuple[str, str]:
    w = r["wall_s"]
    return (
        f"`logstream batch`, 284 days (10,017,248 lines): {_s(w['batch'])}, "
        f"**{_x(w['goaccess'] / w['batch'])}** GoAccess's speed",
        f"GoAccess: {_s(w['goaccess'])}",
    )


def _batch_31d(r: dict[str, Any]) -> tuple[str, str]:
    w = {k: v["wall_s"] for k, v in r["rows"].items()}
    return (
        f"`logstream batch`, 31 days (1,093,432 lines): {_s(w['batch'])}, "
        f"{_x(w['goaccess'] / w['batch'])} GoAccess's speed; {_x(w['batch'] / w['parse_agg'])} "
        f"a process that only parses and aggregates the lines ({_s(w['parse_agg'])})",
        f"GoAccess: {_s(w['goaccess'])}",
    )


def _backfill(r: dict[str, Any]) -> tuple[str, str]:
    w = {k: v["wall_s"] for k, v in r["rows"].items()}
    floor = w["parse_write"]
    return (
        f"`logstream run`, the 31 days as a backfill in one micro-batch, every output: "
        f"{_s(w['backfill_full'])}, **{_x(w['backfill_full'] / floor)}** a process that only "
        f"parses and writes the events ({_s(floor)}); ingest only (`--queries none`): "
        f"{_s(w['backfill_ingest'])}, {_x(w['backfill_ingest'] / floor)}",
        f"GoAccess: {_s(w['goaccess'])}",
    )


def _one_day(r: dict[str, Any]) -> tuple[str, str]:
    w = {k: v["wall_s"] for k, v in r["rows"].items()}
    return (
        f"`logstream batch`, the NASA day (35,272 lines), median of 3: {_s(w['batch'])}, "
        f"{_x(w['batch'] / w['parse'])} a new process that only parses the day with the same "
        f"settings ({_s(w['parse'])}); a Spark session's start and stop alone: "
        f"{_s(w['session'])}",
        f"GoAccess: {_s(w['goaccess'])}",
    )


def _live(r: dict[str, Any]) -> tuple[str, str]:
    m = r["microbatch"]
    small, large = m["3000_lines"], m["50000_lines"]
    live = r["live"]
    p95 = [live[f"{rate}_lines_per_s"]["latency_s_p95"] for rate in (10000, 50000)]
    minutes = live["10000_lines_per_s"]["seconds"] // 60
    return (
        f"`logstream run`, a warm micro-batch of 3,000 lines: "
        f"{small['logstream']['warm_median_ms']:,.0f} ms, {_x(small['ratio_median'])} Spark's "
        f"own streaming query (parse, window, RocksDB state) on the same files; of 50,000 "
        f"lines: {_x(large['ratio_median'])}; fed 10,000 lines/s with event time on the wall "
        f"clock, line to store p95 **{p95[0]:.2f} s**, at 50,000 lines/s **{p95[1]:.2f} s** "
        f"({minutes} minutes each)",
        "—",
    )


def _make_run(r: dict[str, Any]) -> tuple[str, str]:
    text = f"`make run`: {_first_data(r)}"
    if (busy := r.get("loaded")) is not None:
        text += (
            f"; on a loaded machine ({busy['busy_processes']} other processes spinning the "
            f"cores): {_first_data(busy)}"
        )
    return text, "—"


def _first_data(r: dict[str, Any]) -> str:
    """A ``make run`` result's first data and later micro-batches, or that it showed none."""
    if r["first_data_s"] is None:
        return (
            f"no data on the dashboard within the run ({r['command']}, exit code "
            f"{r['exit_code']}, {r['micro_batches']} micro-batches)"
        )
    return (
        f"first data on the dashboard {r['first_data_s']} s after start, later micro-batches "
        f"{r['later_batch_s_median']} s (median)"
    )


def _kafka(r: dict[str, Any]) -> tuple[str, str]:
    median = r["median"]
    return (
        f"`logstream run --kafka`: the NASA day from a 3-partition topic in one micro-batch, "
        f"{median['kafka']['lines_per_s']:,.0f} lines/s, "
        f"{_x(r['kafka_over_directory']['lines_per_s'])} the same lines through a directory",
        "—",
    )


@dataclass(frozen=True)
class Row:
    """A row of the README's table: its result (file and run), the code it exercises, the
    step of :data:`STEPS` that measures it, and how it reads."""

    result: str
    run: str | None
    paths: tuple[str, ...]
    step: str
    text: Callable[[dict[str, Any]], tuple[str, str]]

    @property
    def reproduce(self) -> str:
        """The command that measures the row."""
        return f"python {STEPS[self.step]}"


ROWS = (
    Row("vs-goaccess.json", "284d", _BATCH, "284d", _batch_284d),
    Row("floor.json", "31d", _BATCH, "31d", _batch_31d),
    Row("floor.json", "31d", _PIPELINE, "31d", _backfill),
    Row("floor.json", "1d", _BATCH, "1d", _one_day),
    Row("live-path.json", None, _PIPELINE, "live", _live),
    Row("make-run.json", None, (*_PIPELINE, "src/logstream/demo.py", "src/logstream/dashboard"),
        "make-run", _make_run),
    Row("kafka.json", None, (*_PIPELINE, "src/logstream/kafka"), "kafka", _kafka),
)  # fmt: skip


def measured(row: Row) -> dict[str, Any]:
    """The ``measured`` stamp of ``row``'s result (empty for a result without one)."""
    return _result(row.result, row.run).get("measured") or {}


def render() -> str:
    """The README's table from the results as they are (between the markers, markers
    excluded)."""
    lines = [
        "| figure | same run | measured on | reproduce |",
        "|---|---|---|---|",
    ]
    for row in ROWS:
        figure, reference = row.text(_result(row.result, row.run))
        stamp = measured(row)
        commit = (stamp.get("commit") or "?")[:7] + (" (uncommitted)" if stamp.get("dirty") else "")
        day = (stamp.get("at") or "?")[:10]
        lines.append(f"| {figure} | {reference} | {commit}, {day} | `{row.reproduce}` |")
    return "\n".join(lines) + "\n"


def write_readme(text: str | None = None) -> None:
    """Rewrite the README's block with :func:`render` (or ``text``)."""
    readme = README.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{text if text is not None else render()}{END}"
    new, n = re.subn(re.escape(BEGIN) + r".*?" + re.escape(END), block, readme, flags=re.S)
    if n != 1:
        raise SystemExit(f"README.md has no {BEGIN} … {END} block")
    README.write_text(new, encoding="utf-8")


def readme_block() -> str:
    """The README's block as written (markers excluded)."""
    readme = README.read_text(encoding="utf-8")
    found = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), readme, flags=re.S)
    return found.group(1) if found else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="steps to run, comma-separated (default: all)")
    ap.add_argument("--render", action="store_true", help="only rewrite the README's block")
    args = ap.parse_args()
    if not args.render:
        chosen = [s.strip() for s in args.only.split(",") if s.strip()] or list(STEPS)
        unknown = set(chosen) - set(STEPS)
        if unknown:
            raise SystemExit(f"unknown steps {sorted(unknown)}: {', '.join(STEPS)}")
        if harness.measured_on()["dirty"]:
            print("warning: src/ or bench/ differ from HEAD: the rows will say uncommitted")
        for name, command in STEPS.items():
            if name in chosen:
                print(f"== {name}: python {command}", file=sys.stderr, flush=True)
                argv = [sys.executable, *shlex.split(command)]
                subprocess.run(argv, cwd=harness.REPO, check=True)
    write_readme()
    print(render())


if __name__ == "__main__":
    main()
