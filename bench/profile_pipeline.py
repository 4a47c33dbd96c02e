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

    python bench/profile_pipeline.py --label before   # bench/results/profile-before.json
    python bench/profile_pipeline.py --days 10 --files-per-trigger 1 --label v2-fpt1
    python bench/profile_pipeline.py --bot-model out/models/bots --label bots  # + bot_scores

One run, 2 local cores (``local[2]``); the figures are for this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bench.build_july import build_july, input_dir

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def _get(url: str) -> list[dict]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def spark_totals(
    spark: Any, keys: dict[str, Callable[[dict], str]]
) -> tuple[dict[str, dict[str, dict]], list[dict]]:
    """The Spark jobs and stages of the session so far (the Spark UI's REST API), summed per
    value of each key (``{name: function of a job}``, e.g. its description): jobs, stages,
    ``job_wall_s`` (the jobs' wall time) and ``executor_run_s`` (their stages' executor run
    time); and every stage that ran, with its job's keys, tasks, executor seconds and records."""
    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    stages = {s["stageId"]: s for s in _get(f"{base}/stages")}
    totals: dict[str, dict[str, dict]] = {
        name: defaultdict(
            lambda: {"jobs": 0, "stages": 0, "job_wall_s": 0.0, "executor_run_s": 0.0}
        )
        for name in keys
    }
    runs = []
    for job in _get(f"{base}/jobs"):
        labels = {name: key(job) for name, key in keys.items()}
        rows = [totals[name][label] for name, label in labels.items()]
        start, end = _ts(job.get("submissionTime")), _ts(job.get("completionTime"))
        for row in rows:
            row["jobs"] += 1
            row["job_wall_s"] += end - start if start and end else 0.0
        for sid in job.get("stageIds", []):
            stage = stages.get(sid)
            if stage is None or stage.get("status") == "SKIPPED":
                continue
            run_s = stage.get("executorRunTime", 0) / 1000
            for row in rows:
                row["stages"] += 1
                row["executor_run_s"] += run_s
            runs.append(
                {
                    **labels,
                    "stage": sid,
                    "name": stage.get("name", "")[:120],
                    "tasks": stage.get("numTasks"),
                    "executor_run_s": round(run_s, 2),
                    "input_records": stage.get("inputRecords"),
                    "shuffle_write_records": stage.get("shuffleWriteRecords"),
                }
            )
    return totals, runs


def profile(
    days: int,
    files_per_trigger: int,
    queries: str,
    extra: dict,
    conf: dict[str, str] | None = None,
) -> dict:
    from logstream.config import SparkSettings
    from logstream.pipeline import Pipeline, PipelineConfig
    from logstream.session import get_spark

    files = build_july(input_dir(days), days)
    spark = get_spark(
        SparkSettings(master="local[2]", ui_enabled=True, app_name="profile", extra=conf or {})
    )
    tmp = Path(tempfile.mkdtemp(prefix="profile-"))
    landing = tmp / "landing"
    landing.mkdir()
    for i, f in enumerate(files):
        link = landing / f.name
        link.symlink_to(f)
        os.utime(link, (1_000_000 + i, 1_000_000 + i), follow_symlinks=False)
    cfg = PipelineConfig.build(
        input_dir=landing,
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

    totals, dear = spark_totals(
        spark,
        {
            "query": lambda job: run_ids.get(job.get("jobGroup") or "", "(outside a query)"),
            "step": lambda job: job.get("description") or "(no description)",
        },
    )
    by_query, by_step = totals["query"], totals["step"]
    every_stage = sorted(dear, key=lambda s: s["stage"])
    dear = sorted(dear, key=lambda s: -s["executor_run_s"])
    lines = 35272 * days
    result = {
        "input": f"NASA day x{days} (bench/build_july.py), {lines:,} lines",
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
        "per_query_spark": {
            q: {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}
            for q, row in by_query.items()
        },
        "per_step_spark": {
            step: {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}
            for step, row in by_step.items()
        },
        "dearest_stages": dear[:25],
        "stages": every_stage,
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--files-per-trigger", type=int, default=31)
    parser.add_argument("--queries", default="all")
    parser.add_argument("--label", default="run")
    parser.add_argument("--bot-model", type=Path, help="score client windows with this model")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args()
    extra = {"bot_model": str(args.bot_model)} if args.bot_model else {}
    conf = dict(item.split("=", 1) for item in args.conf)
    result = profile(args.days, args.files_per_trigger, args.queries, extra, conf)
    out = RESULTS / f"profile-{args.label}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    summary = {
        k: result[k]
        for k in ("pipeline_wall_s", "events_per_s", "ingest_steps_s", "per_step_spark")
    }
    print(json.dumps(summary, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
