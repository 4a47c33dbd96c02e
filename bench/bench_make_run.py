"""How soon ``make run`` shows data, and how long its micro-batches take (the demo's targets).

Runs ``make run DURATION=<seconds>s`` (the real NASA day replayed at 600× into a followed,
rotating log, the full pipeline and the dashboard) from the repository root as a whole
process, and measures:

* **first data**: seconds from the start of ``make run`` until the serving store
  (``out/demo/logstream.db``, what the dashboard reads) holds a row of ``traffic_per_minute``
  (the store is polled every 0.1 s; the dashboard shows it at its next refresh);
* **micro-batches**: the ``ingest`` query's batch durations from its progress lines
  (``ingest batch N: … , D ms``): the first, and the median and maximum of the others.

Then the same again on a loaded machine (``--load N``, default one per core): N other
processes spin the CPU for the whole run, as a build or a browser would, and the result's
``loaded`` holds that run's figures beside the quiet ones (issue #62 item 20: a new user on a
busy machine waited minutes where the README said seconds).

Usage::

    python bench/bench_make_run.py [--seconds 90] [--load 2]   # bench/results/make-run.json

One run each, this machine (2 cores); the target is first data ≤ 15 s and micro-batches ≤ 2 s
on a quiet machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

STORE = harness.REPO / "out" / "demo" / "logstream.db"


def run(seconds: int) -> dict:
    """Run ``make run DURATION=<seconds>s`` and measure it (see the module docstring)."""
    for stale in STORE.parent.glob(f"{STORE.name}*"):  # an earlier run's store (and WAL)
        stale.unlink()
    started = time.perf_counter()
    proc = subprocess.Popen(
        ["make", "run", f"DURATION={seconds}s"],
        cwd=harness.REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    first_data_s = None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        sql = "SELECT count(*) FROM traffic_per_minute"
        if first_data_s is None and (harness.store_value(STORE, sql, 1.0) or 0) > 0:
            first_data_s = round(time.perf_counter() - started, 1)
        time.sleep(0.1)
    reader.join(timeout=10)
    batches = [
        (int(m[1]), int(m[2].replace(",", "")), int(m[3].replace(",", "")) / 1000)
        for m in map(harness.BATCH_LINE.search, lines)
        if m
    ]
    later = [d for _, rows, d in batches[1:] if rows]
    return {
        "command": f"make run DURATION={seconds}s",
        "exit_code": proc.returncode,
        "first_data_s": first_data_s,
        "micro_batches": len(batches),
        "first_batch_s": batches[0][2] if batches else None,
        "later_batch_s_median": round(statistics.median(later), 2) if later else None,
        "later_batch_s_max": round(max(later), 2) if later else None,
        "rows_per_batch_median": int(statistics.median(r for _, r, _ in batches)) if batches else 0,
        "batches": batches,
        "machine": harness.machine(),
    }


def loaded(seconds: int, processes: int) -> dict:
    """:func:`run` while ``processes`` other processes spin the CPU (stopped after it)."""
    spin = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(spin) for _ in range(processes)]
    try:
        result = run(seconds)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    return {"busy_processes": processes, **result}


def main() -> None:
    parser = harness.parser(__doc__, "make-run")
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes")
    args = parser.parse_args()
    result = run(args.seconds)
    if args.load > 0:
        result["loaded"] = loaded(args.seconds, args.load)
    harness.write_result(result, args.out, show=False)
    for name, figures in (("quiet", result), ("loaded", result.get("loaded") or {})):
        print(name, {k: v for k, v in figures.items() if k not in ("batches", "machine")})


if __name__ == "__main__":
    harness.run(main)
