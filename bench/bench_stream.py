"""Throughput, per-batch latency and state size of the streaming pipeline.

Input: the 31-day NASA input (bench/build_july.py: the real 1995-07-09 day replicated across
July, 1,093,432 lines). Three measurements in one run:

1. ``throughput``: ``logstream run``'s pipeline in this process, ``--trigger available-now``
   over all 31 files with every output, ``--max-files-per-trigger`` files per micro-batch:
   events/s = lines / wall time of the pipeline (session start excluded), and the seconds
   each streaming query spent in micro-batches;
2. ``state``: the state rows and state memory each streaming query reports after each
   micro-batch (its progress);
3. ``latency``: a processing-time trigger while a feeder drops chunk files into the input
   directory at a fixed rate; per-batch durations of every query, and the deduplication
   state after each ingest micro-batch (bounded by arrival rate × ``--dedup-window``, which
   a backfill never reaches: its whole input arrives within one window).

Writes bench/results/stream.json. Usage: python bench/bench_stream.py [--days 31]
[--files-per-trigger 1] [--rate 20000] [--latency-seconds 60] [--dedup-window "10 minutes"]
[--skip-latency] [--skip-throughput] [--out FILE]
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def pipeline_config(tmp: Path, input_dir: Path, **extra):
    from logstream.pipeline import PipelineConfig

    return PipelineConfig.build(
        input_dir=input_dir,
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        store=f"sqlite:///{tmp / 'store.db'}",
        log_format="common",
        **extra,
    )


def throughput(
    spark, files: list[Path], per_trigger: int, dedup_window: str, queries: str = "all"
) -> dict:
    """A backfill over ``files`` in this process: events/s, busy seconds and state per query."""
    with harness.scratch("bench-stream-") as tmp:
        return _throughput(spark, tmp, files, per_trigger, dedup_window, queries)


def _throughput(
    spark, tmp: Path, files: list[Path], per_trigger: int, dedup_window: str, queries: str
) -> dict:
    from logstream.pipeline import Pipeline

    cfg = pipeline_config(
        tmp,
        harness.landing_dir(files, tmp / "landing"),  # exactly the files measured
        trigger="available-now",
        max_files_per_trigger=per_trigger,
        dedup_window=dedup_window,
        queries=queries,
    )
    pipeline = Pipeline(spark, cfg)
    t0 = time.perf_counter()
    pipeline.run()
    seconds = time.perf_counter() - t0
    pipeline.stop()
    history = pipeline.listener.history
    totals = pipeline.totals
    duplicates = pipeline.store.counters()["duplicates"]
    # what was read: on-time + late + quarantined + dropped as duplicates (the 10 lines the
    # NASA day holds twice, in each of the copies)
    lines = totals.events + totals.late_events + totals.quarantined + duplicates
    assert lines == harness.NASA_DAY_LINES * len(files), lines
    state = {}
    for row in history:
        if row["state_rows"] is not None:
            state.setdefault(row["query"], []).append(
                {
                    "batch": row["batch_id"],
                    "state_rows": row["state_rows"],
                    "state_memory_bytes": row["state_memory_bytes"],
                    "watermark": row["watermark"],
                }
            )
    ingest = [r["batch_duration_ms"] for r in history if r["query"] == "ingest"]
    busy: dict[str, int] = {}  # seconds each query spent in micro-batches
    for row in history:
        busy[row["query"]] = busy.get(row["query"], 0) + row["batch_duration_ms"]
    return {
        "queries": queries,
        "lines": lines,
        "files_per_trigger": per_trigger,
        "seconds": round(seconds, 1),
        "events_per_s": round(lines / seconds),
        "ingest_batches": len(ingest),
        "ingest_batch_ms_median": statistics.median(ingest) if ingest else None,
        "on_time_events": totals.events,
        "duplicates_dropped": duplicates,
        "query_busy_s": {q: round(ms / 1000, 1) for q, ms in busy.items()},
        "state_final": {q: curve[-1] for q, curve in state.items()},
        "state_max_rows": {q: max(c["state_rows"] for c in curve) for q, curve in state.items()},
        "state_curve": state,
    }


def latency(spark, day_files: list[Path], rate: int, seconds: int, dedup_window: str) -> dict:
    """A 2-second trigger while chunk files land at ``rate`` lines/s for ``seconds``."""
    with harness.scratch("bench-latency-") as tmp:
        return _latency(spark, tmp, day_files, rate, seconds, dedup_window)


def _latency(
    spark, tmp: Path, day_files: list[Path], rate: int, seconds: int, dedup_window: str
) -> dict:
    from logstream.pipeline import Pipeline

    landing = tmp / "landing"
    landing.mkdir()
    lines = [line for f in day_files for line in f.read_text().splitlines(keepends=True)]
    first = "".join(lines[:1000])
    (landing / "seed.log").write_text(first)  # for nothing to wait on at start
    cfg = pipeline_config(tmp, landing, trigger="2 seconds", dedup_window=dedup_window)
    pipeline = Pipeline(spark, cfg)
    stop = threading.Event()

    fed = [1000]

    def feed() -> None:
        pos, n = 1000, 0
        per_tick = rate // 2
        while not stop.is_set() and pos < len(lines):
            chunk = "".join(lines[pos : pos + per_tick])
            pos += per_tick
            part = tmp / f".part-{n}"
            part.write_text(chunk)
            part.rename(landing / f"feed-{n:05d}.log")
            fed[0] = min(pos, len(lines))
            n += 1
            stop.wait(0.5)

    runner = threading.Thread(target=pipeline.run, daemon=True)
    runner.start()
    time.sleep(5)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    time.sleep(seconds)
    stop.set()
    pipeline.request_stop()
    runner.join(60)
    pipeline.stop()
    by_query: dict[str, list[int]] = {}
    ingest_rows = []
    dedup_state = []
    for row in pipeline.listener.history:
        if row["num_input_rows"]:
            by_query.setdefault(row["query"], []).append(row["batch_duration_ms"])
            if row["query"] == "ingest":
                ingest_rows.append(row["num_input_rows"])
        if row["query"] == "ingest" and row["state_rows"] is not None:
            dedup_state.append((row["state_rows"], row["state_memory_bytes"]))
    return {
        "input_rate_lines_per_s": rate,
        "trigger": "2 seconds",
        "lines_fed": fed[0],
        "lines_ingested": pipeline.totals.events
        + pipeline.totals.quarantined
        + pipeline.totals.late_events,
        "ingest_rows_per_batch_median": statistics.median(ingest_rows) if ingest_rows else 0,
        "dedup_window": dedup_window,
        "dedup_state_rows": [r for r, _ in dedup_state],
        "dedup_state_memory_bytes": [m for _, m in dedup_state],
        "dedup_state_max_rows": max((r for r, _ in dedup_state), default=0),
        "batch_ms": {
            q: {
                "n": len(v),
                "median": statistics.median(v),
                "p95": harness.p95(v),
                "max": max(v),
            }
            for q, v in by_query.items()
        },
    }


def main() -> None:
    parser = harness.parser(__doc__, "stream", days=True)
    parser.add_argument("--files-per-trigger", type=int, default=1)
    parser.add_argument("--rate", type=int, default=20000)
    parser.add_argument("--latency-seconds", type=int, default=60)
    parser.add_argument("--dedup-window", default="10 minutes")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    files = harness.july_files(args.days)
    spark = harness.spark_session()
    result = {
        "input": f"NASA 1995-07-09 replicated over {len(files)} days (bench/build_july.py)",
        "machine": harness.machine(),
    }
    if not args.skip_throughput:
        result["throughput"] = throughput(spark, files, args.files_per_trigger, args.dedup_window)
    if not args.skip_latency:
        result["latency"] = latency(
            spark, files, args.rate, args.latency_seconds, args.dedup_window
        )
    harness.write_result(result, args.out, show=False)
    through = result.get("throughput", {})
    summary = {k: v for k, v in through.items() if k != "state_curve"}
    print(json.dumps({"throughput": summary, "latency": result.get("latency")}, indent=2))
    for query, curve in through.get("state_curve", {}).items():
        print(query, "rows", [c["state_rows"] for c in curve])
        print(query, "memory bytes", [c["state_memory_bytes"] for c in curve])


if __name__ == "__main__":
    harness.run(main)
