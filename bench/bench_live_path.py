"""The live path against Spark's own micro-batch: issue #52's targets from one run.

Target 1, **warm micro-batch**: the same chunk files of real NASA lines go through

* ``logstream run --input-dir CHUNKS --max-files-per-trigger 1 --trigger available-now``
  with every default output, as a process of its own; its figure is the
  ``batch_duration_ms`` of the ``ingest`` query's micro-batches in its store;
* the two reference queries of ``bench/microbatch_reference.py`` (Spark's own streaming
  query: parse + write, parse + window + state), in one warm session of a process of their
  own; their figure is each micro-batch's ``triggerExecution``.

Each figure is the median and the p95 of the micro-batches after the first two (the JVM's
warm-up). The chunks: 3,000 lines of the NASA day (1995-07-09) a file, and 50,000 lines of
the 31-day input (``bench/build_july.py``: the NASA day replicated over July) a file.

Usage::

    python bench/bench_live_path.py                       # every target
    python bench/bench_live_path.py --targets microbatch  # target 1 only

One run, 2 cores; ``bench/results/live-path.json``.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness
from bench.microbatch_reference import COLD_BATCHES

HERE = Path(__file__).resolve().parent
#: (chunk lines, chunks) of target 1's two sizes.
CHUNK_SIZES = ((3_000, 10), (50_000, 8))


def chunk_lines(per_file: int, files: int) -> list[str]:
    """``per_file × files`` real lines: the NASA day's, or the 31-day input's when the day is
    too short."""
    wanted = per_file * files
    lines = harness.nasa_day_lines()
    if len(lines) < wanted:
        lines = []
        for path in harness.july_files(31):
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
            if len(lines) >= wanted:
                break
    return lines[:wanted]


def warm(durations_ms: list[float]) -> dict:
    """Median and p95 of the micro-batches after the first :data:`COLD_BATCHES`."""
    rest = sorted(durations_ms[COLD_BATCHES:] or durations_ms)
    return {
        "warm_median_ms": statistics.median(rest),
        "warm_p95_ms": rest[min(len(rest) - 1, round(0.95 * (len(rest) - 1)))],
    }


def logstream_batches(chunks: Path, root: Path, *options: str) -> dict:
    """``logstream run`` over ``chunks``, one file a micro-batch; its micro-batches' durations."""
    store = root / "store.db"
    cmd = harness.run_argv(
        root,
        "--input-dir",
        str(chunks),
        "--max-files-per-trigger",
        "1",
        "--trigger",
        "available-now",
        "--store",
        f"sqlite:///{store}",
        *options,
    )
    wall = harness.timed(cmd)
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT batch_id, batch_duration_ms, num_input_rows FROM progress "
            "WHERE query = 'ingest' AND num_input_rows > 0 ORDER BY batch_id"
        ).fetchall()
    durations = [r[1] for r in rows]
    return {
        "wall_s": round(wall, 2),
        "micro_batches": len(rows),
        **warm(durations),
        "batch_duration_ms": durations,
    }


def reference_batches(chunks: Path, root: Path) -> dict:
    """The reference queries over ``chunks`` (``bench/microbatch_reference.py``)."""
    out = root / "reference.json"
    subprocess.run(
        [sys.executable, str(HERE / "microbatch_reference.py"), str(chunks), str(out)],
        env=harness.bench_env(),
        check=True,
        capture_output=True,
    )
    return json.loads(out.read_text())


def microbatch(sizes=CHUNK_SIZES, options: tuple[str, ...] = ()) -> dict:
    """Target 1: logstream's warm micro-batch against the references, per chunk size."""
    result = {}
    for per_file, files in sizes:
        with harness.scratch("live-path-") as tmp:
            chunks = tmp / "chunks"
            harness.write_chunks(chunk_lines(per_file, files), chunks, per_file)
            t0 = time.perf_counter()
            ours = logstream_batches(chunks, tmp / "logstream", *options)
            ref = reference_batches(chunks, tmp)
            state = ref["parse_window_state"]
            result[f"{per_file}_lines"] = {
                "chunks": files,
                "logstream": ours,
                "reference": ref,
                "ratio_median": round(ours["warm_median_ms"] / state["warm_median_ms"], 2),
                "ratio_p95": round(ours["warm_p95_ms"] / state["warm_p95_ms"], 2),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(
                f"{per_file:,} lines a micro-batch: logstream {ours['warm_median_ms']:.0f} / "
                f"{ours['warm_p95_ms']:.0f} ms, parse + window + state "
                f"{state['warm_median_ms']:.0f} / {state['warm_p95_ms']:.0f} ms: "
                f"{result[f'{per_file}_lines']['ratio_median']}× / "
                f"{result[f'{per_file}_lines']['ratio_p95']}×",
                file=sys.stderr,
            )
    return result


def main() -> None:
    parser = harness.parser(__doc__, "live-path")
    parser.add_argument("--targets", default="microbatch")
    parser.add_argument("--sizes", default=",".join(f"{a}x{b}" for a, b in CHUNK_SIZES))
    parser.add_argument("--option", action="append", default=[], help="a logstream run option")
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    result: dict = {"machine": harness.machine()}
    if "microbatch" in args.targets:
        result["microbatch"] = microbatch(sizes, tuple(args.option))
    harness.write_result(result, args.out, show=False)


if __name__ == "__main__":
    harness.run(main)
