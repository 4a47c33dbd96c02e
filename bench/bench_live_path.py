"""The live path against Spark's own micro-batch: issue #52's targets from one run.

Each target is a ratio measured in this one run, on this machine (2 cores); ``--targets``
runs some of them (default: all five, about an hour).

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
Targets: median ≤ 2.0× ``parse_window_state`` (3.0× at least), p95 ≤ 3.0×.

Target 2, **live**: ``logstream run`` with its default trigger and every default output,
fed NASA lines stamped with the second they land (``bench_vs_goaccess.py``'s wall-clock
feed) at 10,000 and at 50,000 lines/s for ``--live-seconds`` each (1,200); line-to-store
p95 ≤ 2 s and ≤ 3 s; the state rows and the resident memory over the last 5 minutes (their
first and last minute's medians) flat. The open state fills for longer than the issue's 10
minutes: a pane stays open until the watermark, 10 minutes behind the newest event by
default, passes its end, and a page's panes 4 minutes more (the trending window's other
panes); a run of 10 minutes ends while they still fill, whatever the code. From 15 minutes on
nothing new is kept that is not also dropped, so the last 5 minutes of 20 are the steady
state.

Target 3, **first data**: ``make run``'s first data on the dashboard (``bench_make_run.py``)
against a cold process that parses the lines of ``make run``'s first micro-batch and makes
one aggregation (``bench_floor.py``'s ``parse_agg``): ≤ 1.3×.

Target 4, **backfill**: the 31-day input in one micro-batch, every default output, against
a process that only parses and writes the events (``bench_floor.py``'s ``parse_write``):
≤ 2.0×.

Target 5, **no regression on large input**: ``logstream batch`` on 284 days (10,017,248
lines) against GoAccess: ≥ 1.0×.

Usage::

    python bench/bench_live_path.py                            # every target
    python bench/bench_live_path.py --targets microbatch,live  # some
    python bench/bench_live_path.py --targets microbatch --sizes 3000x10 --out /tmp/x.json

One run, 2 cores; ``bench/results/live-path.json``. Run ``make setup`` first (target 3 runs
``make run`` from the repository root).
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


def live(rates: list[int], seconds: int) -> dict:
    """Target 2: the wall-clock feed at each rate, logstream's default trigger."""
    from bench import bench_vs_goaccess

    files = harness.july_files(31)[:1]
    result = {}
    for rate in rates:
        row = bench_vs_goaccess.live(files, rate, seconds, wall_clock=True, trigger=None)
        row["flat_last_5_min"] = flatness(row.get("every_30_s", []), seconds)
        result[f"{rate}_lines_per_s"] = row
        print(
            f"live {rate:,} lines/s: p50 {row['latency_s_p50']} s, p95 {row['latency_s_p95']} s,"
            f" last 5 min {row['flat_last_5_min']}",
            file=sys.stderr,
        )
    return result


def flatness(samples: list[dict], seconds: int) -> dict:
    """The state rows and resident memory over the last 5 minutes: the medians of their
    first and last minute, and the change in percent."""
    start = seconds - 300
    late = [s for s in samples if s["s"] >= start]
    out: dict = {}

    def value(sample: dict, name: str) -> float | None:
        v = sample[name]  # the resident memory by process kind: its total
        return v.get("total") if isinstance(v, dict) else v

    for name in ("state_rows", "rss_mb"):
        first = [v for s in late if s["s"] < start + 60 and (v := value(s, name)) is not None]
        last = [v for s in late if s["s"] >= seconds - 60 and (v := value(s, name)) is not None]
        if first and last:
            a, b = statistics.median(first), statistics.median(last)
            out[name] = {"first_min": a, "last_min": b, "change_pct": round(100 * (b - a) / a, 1)}
    return out


def first_data(seconds: int) -> dict:
    """Target 3: ``make run``'s first data against a cold parse + one aggregation of the
    lines its first micro-batch read."""
    from bench import bench_floor, bench_make_run

    made = bench_make_run.run(seconds)
    first_rows = made["batches"][0][1] if made["batches"] else 0
    with harness.scratch("live-path-floor-") as tmp:
        chunk = tmp / "first"
        chunk.mkdir()
        (chunk / "first.log").write_text(
            "".join(line + "\n" for line in harness.nasa_day_lines()[:first_rows])
        )
        floor = bench_floor.timed_step("parse_agg", chunk)
    ratio = made["first_data_s"] / floor if made["first_data_s"] else None
    print(f"first data {made['first_data_s']} s, parse_agg {floor:.1f} s: {ratio}", file=sys.stderr)
    return {
        "make_run": {k: v for k, v in made.items() if k != "batches"},
        "first_batch_rows": first_rows,
        "parse_agg_s": round(floor, 2),
        "ratio": round(ratio, 2) if ratio else None,
    }


def backfill() -> dict:
    """Target 4: the 31-day backfill, every default output, against ``parse_write``."""
    from bench import bench_floor

    files = harness.july_files(31)
    goaccess = harness.goaccess_seconds(files)
    floor = bench_floor.timed_step("parse_write", files[0].parent)
    full = harness.backfill_seconds(files, len(files), "all")
    print(f"backfill {full:.1f} s, parse_write {floor:.1f} s", file=sys.stderr)
    return {
        "goaccess_s": round(goaccess, 2),
        "parse_write_s": round(floor, 2),
        "backfill_full_s": round(full, 2),
        "ratio": round(full / floor, 2),
    }


def large_batch(days: int = 284) -> dict:
    """Target 5: ``logstream batch`` on ``days`` days against GoAccess."""
    files = harness.july_files(days)
    goaccess = harness.goaccess_seconds(files)
    batch = harness.batch_seconds(files)
    print(f"batch {batch:.1f} s, GoAccess {goaccess:.1f} s", file=sys.stderr)
    return {
        "days": days,
        "lines": harness.NASA_DAY_LINES * days,
        "goaccess_s": round(goaccess, 2),
        "batch_s": round(batch, 2),
        "vs_goaccess": round(goaccess / batch, 3),
    }


TARGETS = ("microbatch", "live", "first_data", "backfill", "large_batch")


def main() -> None:
    parser = harness.parser(__doc__, "live-path")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--sizes", default=",".join(f"{a}x{b}" for a, b in CHUNK_SIZES))
    parser.add_argument("--option", action="append", default=[], help="a logstream run option")
    parser.add_argument("--live-rates", default="10000,50000")
    parser.add_argument("--live-seconds", type=int, default=1200)
    parser.add_argument("--make-run-seconds", type=int, default=60)
    args = parser.parse_args()
    chosen = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(chosen) - set(TARGETS)
    if unknown:
        raise SystemExit(f"unknown targets {sorted(unknown)}: choose from {', '.join(TARGETS)}")
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    result: dict = {"machine": harness.machine()}
    if "microbatch" in chosen:
        result["microbatch"] = microbatch(sizes, tuple(args.option))
    if "live" in chosen:
        rates = [int(r) for r in args.live_rates.split(",")]
        result["live"] = live(rates, args.live_seconds)
    if "first_data" in chosen:
        result["first_data"] = first_data(args.make_run_seconds)
    if "backfill" in chosen:
        result["backfill"] = backfill()
    if "large_batch" in chosen:
        result["large_batch"] = large_batch()
    result["machine_after"] = harness.machine()
    harness.write_result(result, args.out, show=False)


if __name__ == "__main__":
    harness.run(main)
