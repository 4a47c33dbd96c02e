"""Where a streaming backfill spends its time: per query, per phase, per Spark job and stage.

Runs ``logstream run``'s pipeline in-process on the 31-day NASA input (bench/build_july.py:
the real 1995-07-09 day replicated across July, 1,093,432 lines) with ``--trigger
available-now`` and ``--max-files-per-trigger`` files per micro-batch, then reads:

* each query's progress (``StreamingQueryProgress.durationMs``: ``latestOffset``,
  ``queryPlanning``, ``addBatch`` — the ``foreachBatch`` function or the sink —, ``walCommit``,
  ``commitOffsets``, ``triggerExecution``), summed per query;
* every Spark job and stage from the Spark UI's REST API (``/api/v1/applications/<id>/jobs``
  and ``/stages``, Spark docs "Monitoring and Instrumentation"), grouped by the query whose
  micro-batch ran it (a streaming job's group is its query's run id) and by the micro-batch
  step that ran it (the job description, ``logstream ingest: STEP``): jobs, stages, wall time
  of the jobs, executor run time of the stages, and the dearest stages with their call sites.

Usage::

    python bench/profile_pipeline.py            # bench/results/profile-pipeline.json
    python bench/profile_pipeline.py --days 10 --files-per-trigger 1 --out /tmp/fpt1.json
    python bench/profile_pipeline.py --bot-model out/models/bots --out /tmp/bots.json

One run, 2 local cores (``local[2]``); the figures are for this machine.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def profile(
    days: int,
    files_per_trigger: int,
    queries: str,
    extra: dict,
    conf: dict[str, str] | None = None,
) -> dict:
    """Run the backfill once in this process and return where its time went."""
    files = harness.july_files(days)
    spark = harness.spark_session(
        master="local[2]", ui_enabled=True, app_name="profile", extra=conf or {}
    )
    with harness.scratch("profile-") as tmp:
        return _profile(spark, tmp, files, files_per_trigger, queries, extra, conf)


def _profile(spark, tmp, files, files_per_trigger, queries, extra, conf) -> dict:
    from logstream.pipeline import Pipeline, PipelineConfig

    cfg = PipelineConfig.build(
        input_dir=harness.landing_dir(files, tmp / "landing"),
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        log_format="common",
        trigger="available-now",
        max_files_per_trigger=files_per_trigger,
        queries=queries,
        **extra,
    )
    pipeline = Pipeline(spark, cfg)
    state_rows: list[tuple[int, int]] = []  # (micro-batch, rows of its analytics snapshot)

    def record(step: str, batch_id: int) -> None:
        if step == "snapshot_written":
            state_rows.append((batch_id, pipeline.ingest.state.last_rows))

    pipeline.ingest.step_hook = record
    t0 = time.perf_counter()
    pipeline.run()
    wall = time.perf_counter() - t0
    pipeline.stop()
    run_ids = {str(q.runId): q.name for q in pipeline.queries}

    per_query: dict[str, dict] = defaultdict(
        lambda: {"batches": 0, "rows": 0, "duration_ms": dict.fromkeys(PHASES, 0)}
    )
    for q in pipeline.queries:
        for p in q.recentProgress:
            row = per_query[q.name]
            row["batches"] += 1
            row["rows"] += p.numInputRows
            for phase in PHASES:
                row["duration_ms"][phase] += (p.durationMs or {}).get(phase, 0)
            row["duration_ms"].setdefault("triggerExecution", 0)
            row["duration_ms"]["triggerExecution"] += (p.durationMs or {}).get(
                "triggerExecution", 0
            )

    totals, dear = harness.spark_totals(
        spark,
        {
            "query": lambda job: run_ids.get(job.get("jobGroup") or "", "(outside a query)"),
            "step": lambda job: job.get("description") or "(no description)",
        },
    )
    by_query, by_step = totals["query"], totals["step"]
    every_stage = sorted(dear, key=lambda s: s["stage"])
    dear = sorted(dear, key=lambda s: -s["executor_run_s"])
    lines = harness.NASA_DAY_LINES * len(files)
    return {
        "input": f"NASA day x{len(files)} (bench/build_july.py), {lines:,} lines",
        "ingest_steps_s": {k: round(v, 2) for k, v in pipeline.ingest.timings.items()}
        if hasattr(pipeline.ingest, "timings")
        else None,
        "files_per_trigger": files_per_trigger,
        "queries": queries,
        "options": extra,
        "spark_conf": conf or {},
        "pipeline_wall_s": round(wall, 1),
        "snapshot_rows_per_batch": state_rows,
        "snapshot_rows_max": max((r for _, r in state_rows), default=0),
        "events_per_s": round(lines / wall),
        "per_query_progress": per_query,
        "per_query_spark": harness.rounded(by_query),
        "per_step_spark": harness.rounded(by_step),
        "dearest_stages": dear[:25],
        "stages": every_stage,
        "machine": harness.machine(),
    }


def main() -> None:
    parser = harness.parser(__doc__, "profile-pipeline", days=True)
    parser.add_argument("--files-per-trigger", type=int, default=31)
    parser.add_argument("--queries", default="all")
    parser.add_argument("--bot-model", type=Path, help="score client windows with this model")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args()
    extra = {"bot_model": str(args.bot_model)} if args.bot_model else {}
    conf = dict(item.split("=", 1) for item in args.conf)
    result = profile(args.days, args.files_per_trigger, args.queries, extra, conf)
    harness.write_result(result, args.out, show=False)
    summary = {
        k: result[k]
        for k in ("pipeline_wall_s", "events_per_s", "ingest_steps_s", "per_step_spark")
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    harness.run(main)
