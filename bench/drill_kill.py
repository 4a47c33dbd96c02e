"""The kill drill: SIGKILL the whole pipeline N times at seeded random moments, restart it each
time, and compare every output with an uninterrupted run.

Input: the real NASA day (1995-07-09, 35,272 lines) cut into 1,500-line chunk files (24
files), streamed with ``logstream run --trigger available-now --max-files-per-trigger 1`` so
that each file is one ingest micro-batch. The drill

1. runs the pipeline once without interruption (the reference);
2. starts it again on fresh state and output directories, and ``N`` times: waits until this
   start has committed a micro-batch, then a random moment (``random.Random(seed)``, uniform
   over two micro-batches of the reference run), then kills the process group with SIGKILL
   (the Python driver and its JVM: no clean-up of any kind) and starts it again on the same
   state. Each kill lands while a micro-batch is being delivered or between two, and each
   start moves the run on by at least one micro-batch;
3. lets the last start run to the end, then compares every Parquet output (as a multiset of
   rows) and every table of the serving store with the reference.

Usage::

    python bench/drill_kill.py --kills 20 --seed 7      # writes bench/results/drill-kill.json

The test suite runs :func:`drill` with one kill on the day's first 9,000 lines in three
micro-batches (``tests/pipeline/test_recovery.py``), on the chunk files and the uninterrupted
run that module's kills at each write of a micro-batch compare with (``chunks``,
``reference``), its last start in the test's own Spark session (``run_rest``: one JVM start
fewer). Run the long form after changing the micro-batch step.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

CHUNK_LINES = 1500

#: Store tables compared with the reference, as (name, query). Quantiles of KLL sketches are
#: left out: they depend on the order of merges, which a restart may change.
STORE_TABLES = {
    "traffic_per_minute": "SELECT * FROM traffic_per_minute",
    "trending_pages": "SELECT * FROM trending_pages",
    "unique_visitors": "SELECT window_start, window_end, visitors FROM unique_visitors",
    "top_clients": "SELECT * FROM top_clients",
    "session_stats": "SELECT window_start, window_end, sessions, bounces, pages FROM session_stats",
    "alerts": "SELECT series, metric, window_start, value, mean, std FROM alerts",
    "counters": "SELECT * FROM counters",
    # totals, not per micro-batch: after a kill between the file source's log write and the
    # offset log write, Spark plans the next micro-batch with two files (its documented
    # recovery), so batch boundaries may differ while every line still counts once
    "ingest_ledger": "SELECT SUM(events), SUM(late_events), SUM(quarantined) FROM ledger "
    "WHERE query = 'ingest'",
    "max_event": "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'",
}


@dataclass
class DrillResult:
    """What a drill did and found."""

    kills: int
    seed: int
    lines: int
    reference_seconds: float
    kill_moments_s: list[float] = field(default_factory=list)  # after each start's first commit
    committed_at_kill: list[int] = field(default_factory=list)
    total_seconds: float = 0.0
    differences: dict[str, str] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        """True when every output and store table equals the reference."""
        return not self.differences


def write_chunks(directory: Path, max_lines: int | None = None) -> int:
    """The NASA day (its first ``max_lines`` lines when given) as :data:`CHUNK_LINES`-line
    chunk files in ``directory`` (:func:`bench.harness.write_chunks`); returns the lines."""
    lines = harness.nasa_day_lines()[:max_lines]
    harness.write_chunks(lines, directory, CHUNK_LINES)
    return len(lines)


def command(root: Path, chunks: Path) -> list[str]:
    """The ``logstream run`` command line of one start on ``root``'s state: each chunk file
    one micro-batch."""
    return harness.run_argv(
        root,
        *("--input-dir", str(chunks), "--store", f"sqlite:///{root / 'store.db'}"),
        *("--trigger", "available-now", "--max-files-per-trigger", "1"),
    )


def run_to_end(root: Path, chunks: Path, timeout_s: float = 600) -> float:
    """One uninterrupted start; returns its wall time in seconds."""
    t0 = time.monotonic()
    done = subprocess.run(
        command(root, chunks),
        env=harness.bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        causes = [ln for ln in done.stderr.splitlines() if "Exception" in ln or "Error" in ln]
        raise RuntimeError("\n".join(causes[:20])[:4000] or done.stderr[-3000:])
    return time.monotonic() - t0


def committed_batches(root: Path) -> int:
    """Micro-batches of every query in the store's ledger (0 before the store exists)."""
    return harness.store_value(root / "store.db", "SELECT COUNT(*) FROM ledger", 1.0) or 0


def start_and_kill(root: Path, chunks: Path, extra_s: float) -> int:
    """Start the pipeline; once this start has committed a micro-batch, wait ``extra_s``
    more seconds, then SIGKILL its process group.

    Returns
    -------
    int
        The micro-batches in the ledger when the kill landed; -1 when the run ended by itself
        first (nothing left to do).
    """
    before = committed_batches(root)
    proc = subprocess.Popen(
        command(root, chunks),
        env=harness.bench_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while committed_batches(root) <= before:  # the JVM starts, a micro-batch commits
            if proc.poll() is not None:
                return -1
            time.sleep(0.05)
        proc.wait(timeout=extra_s)
        return -1
    except subprocess.TimeoutExpired:
        committed = committed_batches(root)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no clean-up
        return committed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def batch_seconds(root: Path) -> float:
    """Mean seconds between the ledger commits of a finished run (one micro-batch)."""
    with sqlite3.connect(root / "store.db") as conn:
        stamps = [r[0] for r in conn.execute("SELECT committed_at FROM ledger ORDER BY rowid")]
    if len(stamps) < 2:
        return 1.0
    first = datetime.fromisoformat(stamps[0].replace("Z", "+00:00"))
    last = datetime.fromisoformat(stamps[-1].replace("Z", "+00:00"))
    return max(0.5, (last - first).total_seconds() / (len(stamps) - 1))


def parquet_rows(spark: Any, root: Path, name: str) -> Counter:
    """An output's rows as a multiset (``batch_id`` and sketches left out: a restart may cut
    the micro-batches elsewhere, see :data:`STORE_TABLES`)."""
    path = root / "out" / name
    if not path.exists():
        return Counter()
    spark.catalog.refreshByPath(str(path))
    df = spark.read.parquet(str(path))
    drop = ["sketch", "batch_id"]
    df = df.drop(*[c for c in drop if c in df.columns])
    return Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())


def store_rows(root: Path) -> dict[str, Counter]:
    """Every compared store table as a multiset of rows."""
    with sqlite3.connect(root / "store.db") as conn:
        return {name: Counter(conn.execute(sql).fetchall()) for name, sql in STORE_TABLES.items()}


def compare(spark: Any, got: Path, want: Path) -> dict[str, str]:
    """Differences between two runs' outputs and stores; empty when identical."""
    diffs = {}
    outputs = sorted(
        {
            p.name
            for root in (got, want)
            for p in (root / "out").iterdir()
            if p.is_dir() and not p.name.startswith((".", "_"))
        }
    )
    for name in outputs:
        g, w = parquet_rows(spark, got, name), parquet_rows(spark, want, name)
        if g != w:
            diffs[f"out/{name}"] = (
                f"{sum((g - w).values())} extra, {sum((w - g).values())} missing rows"
            )
    g_store, w_store = store_rows(got), store_rows(want)
    for name in STORE_TABLES:
        if g_store[name] != w_store[name]:
            diffs[f"store/{name}"] = (
                f"{sum((g_store[name] - w_store[name]).values())} extra, "
                f"{sum((w_store[name] - g_store[name]).values())} missing rows"
            )
    return diffs


def drill(
    spark: Any,
    kills: int,
    seed: int,
    work: Path | None = None,
    max_lines: int | None = None,
    run_reference: Callable[[Path, Path], float] | None = None,
    *,
    chunks: Path | None = None,
    reference: Path | None = None,
    run_rest: Callable[[Path, Path], float] | None = None,
) -> DrillResult:
    """Run the drill (see the module docstring) and return what it found.

    Parameters
    ----------
    spark : SparkSession
        Used only to read the Parquet outputs back.
    kills : int
        SIGKILLs before the last start runs to the end.
    seed : int
        Seed of the kill moments.
    work : Path, optional
        Working directory (a temporary one by default).
    max_lines : int, optional
        Stream only the first lines of the day (the suite's short drill); default: all.
    run_reference : callable, optional
        ``run_reference(root, chunks)`` makes the uninterrupted reference run on ``root``'s
        state and outputs and returns its seconds; default :func:`run_to_end` (a ``logstream
        run`` process). The suite runs it in its own Spark session, whose JVM is already up.
    chunks, reference : Path, optional
        Chunk files already written (one micro-batch each; ``max_lines`` is then ignored),
        and a finished uninterrupted run of them (``reference/out``, ``reference/state``,
        ``reference/store.db``; ``run_reference`` is then not called): the suite shares
        them with ``tests/pipeline/test_recovery.py``.
    run_rest : callable, optional
        ``run_rest(root, chunks)`` runs the last start to the end; default
        :func:`run_to_end`. The suite runs it in its own Spark session, as its restarts
        after a kill at each write do.
    """
    work = work or Path(tempfile.mkdtemp(prefix="drill-kill-"))
    if chunks is None:
        chunks = work / "chunks"
        lines = write_chunks(chunks, max_lines)
    else:
        lines = sum(len(p.read_bytes().splitlines()) for p in chunks.iterdir() if p.is_file())
    reference_s = 0.0
    if reference is None:
        reference = work / "reference"
        reference_s = (run_reference or run_to_end)(reference, chunks)
    result = DrillResult(kills=kills, seed=seed, lines=lines, reference_seconds=reference_s)
    rng = random.Random(seed)
    per_batch = batch_seconds(reference)
    drilled = work / "drilled"
    t0 = time.monotonic()
    for _ in range(kills):
        # anywhere in the next two micro-batches after this start's first commit: every kill
        # lands while the pipeline delivers, and the run moves on between kills
        moment = rng.uniform(0.0, 2.0 * per_batch)
        result.kill_moments_s.append(round(moment, 2))
        result.committed_at_kill.append(start_and_kill(drilled, chunks, moment))
    (run_rest or run_to_end)(drilled, chunks)
    result.total_seconds = time.monotonic() - t0
    result.differences = compare(spark, drilled, reference)
    return result


def main() -> int:
    parser = harness.parser(__doc__, "drill-kill")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lines", type=int, default=None, help="first lines of the day only")
    args = parser.parse_args()
    spark = harness.spark_session(master="local[2]", app_name="drill-kill")
    result = drill(spark, args.kills, args.seed, max_lines=args.lines)
    report = {**asdict(result), "identical": result.identical, "machine": harness.machine()}
    harness.write_result(report, args.out)
    return 0 if result.identical else 1


if __name__ == "__main__":
    harness.run(main)
