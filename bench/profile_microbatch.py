"""Where a small (live-sized) micro-batch spends its time: per ingest step and per Spark job.

The live demo's micro-batches hold a few thousand lines, and their time is almost all fixed
cost. This runs the pipeline in-process on the real NASA day (1995-07-09) cut into chunks of
``--chunk-lines`` lines, one chunk per micro-batch (``--trigger available-now``,
``--max-files-per-trigger 1``), and reports for each micro-batch after the first (which also
pays for the JVM's warm-up):

* the query's ``durationMs`` (``addBatch`` is the ``foreachBatch`` step);
* the ingest steps' seconds (:attr:`logstream.pipeline.ingest.IngestStage.timings`: parse,
  events, windows, live_views, alerts, sessions, store, snapshot);
* Spark jobs and stages per micro-batch, and the summed wall time of the jobs and executor
  run time of the stages of each step (the Spark UI's REST API,
  ``/api/v1/applications/<id>/jobs``; the ingest names its jobs ``logstream ingest: <step>``),
  and every stage of the last micro-batch;
* the classes Janino compiled in each micro-batch (the ``CodeGenerator`` source of Spark's
  metrics, ``/metrics/json``): a warm micro-batch that compiles its code again pays for it.

The compile count and the newest job id are read over HTTP at the end of each micro-batch,
inside it: a few milliseconds of each ``addBatch``.

Usage::

    python bench/profile_microbatch.py                     # bench/results/profile-microbatch.json
    python bench/profile_microbatch.py --chunk-lines 20000 --label microbatch-20k
    python bench/profile_microbatch.py --chunk-seconds 3 --chunks 24 \
        --label microbatch-wall                          # 3 s of event time a chunk
    python bench/profile_microbatch.py --conf spark.sql.codegen.cache.maxEntries=100 \
        --label microbatch-cache100                      # try a Spark setting

One run, ``local[2]``; the figures are for this machine.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from bench.bench_vs_goaccess import clf_stamp, stamped  # a log line restamped
from bench.profile_pipeline import _get, _ts  # the Spark UI's REST API and its times

RESULTS = Path(__file__).resolve().parent / "results"
DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"


#: The first chunk's time with ``--chunk-seconds`` (2026-01-01T00:00:00Z, on a minute).
BASE_S = 1_767_225_600


def profile(
    chunk_lines: int,
    chunks: int,
    conf: dict[str, str] | None = None,
    chunk_seconds: float = 0.0,
) -> dict:
    from logstream.config import SparkSettings
    from logstream.pipeline import Pipeline, PipelineConfig
    from logstream.session import get_spark

    data = Path(os.environ.get("LOGSTREAM_DATA_DIR", "../shared/data"))
    with gzip.open(data / DAY_FILE, "rt", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    tmp = Path(tempfile.mkdtemp(prefix="profile-microbatch-"))
    landing = tmp / "landing"
    landing.mkdir()
    for i in range(chunks):
        chunk = landing / f"chunk-{i:04d}.log"
        part = lines[i * chunk_lines : (i + 1) * chunk_lines]
        if chunk_seconds:  # event time with the wall clock: chunk i spans [i·s, (i+1)·s)
            part = [
                stamped(x, clf_stamp(BASE_S + i * chunk_seconds + j * chunk_seconds / len(part)))
                for j, x in enumerate(part)
            ]
        chunk.write_text("\n".join(part) + "\n")
        os.utime(chunk, (1_000_000 + i, 1_000_000 + i))
    spark = get_spark(
        SparkSettings(master="local[2]", ui_enabled=True, app_name="microbatch", extra=conf or {})
    )
    cfg = PipelineConfig.build(
        input_dir=landing,
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        log_format="common",
        trigger="available-now",
        max_files_per_trigger=1,
    )
    pipeline = Pipeline(spark, cfg)
    steps: list[dict[str, float]] = []
    seen: dict[str, float] = {}

    metrics_url = f"{spark.sparkContext.uiWebUrl}/metrics/json"

    def compiled() -> int:
        """Sources Janino has compiled so far (Spark's ``CodeGenerator`` metrics source); also
        keeps the mean compile time (ms) of the histogram's sample."""
        with urllib.request.urlopen(metrics_url, timeout=30) as resp:
            histograms = json.loads(resp.read())["histograms"]
        timing = next(v for k, v in histograms.items() if k.endswith("compilationTime"))
        compile_ms.append(timing["mean"])
        return timing["count"]

    compile_ms: list[float] = []

    counted = [compiled()]  # classes compiled so far, before and after each micro-batch
    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    marks: list[int] = []  # the newest Spark job id at the end of each micro-batch

    def record(step: str, batch_id: int) -> None:
        if step == "snapshot_written":
            now = dict(pipeline.ingest.timings)
            steps.append({k: round(v - seen.get(k, 0.0), 3) for k, v in now.items()})
            seen.update(now)
            counted.append(compiled())
            marks.append(max((j["jobId"] for j in _get(f"{base}/jobs")), default=-1))

    pipeline.ingest.step_hook = record
    started = time.perf_counter()
    pipeline.run()
    wall = time.perf_counter() - started
    pipeline.stop()
    progress = [p for q in pipeline.queries for p in q.recentProgress if p.numInputRows]

    jobs = _get(f"{base}/jobs")
    stages = {s["stageId"]: s for s in _get(f"{base}/stages")}
    per_step: dict[str, dict[str, float]] = defaultdict(
        lambda: {"jobs": 0, "stages": 0, "job_wall_s": 0.0, "executor_run_s": 0.0}
    )
    ingest_jobs = [j for j in jobs if (j.get("description") or "").startswith("logstream ingest")]
    for job in ingest_jobs:
        step = job["description"].removeprefix("logstream ingest: ")
        row = per_step[step]
        row["jobs"] += 1
        ran = [stages[s] for s in job.get("stageIds", []) if s in stages]
        ran = [s for s in ran if s.get("status") != "SKIPPED"]
        row["stages"] += len(ran)
        row["executor_run_s"] += sum(s.get("executorRunTime", 0) for s in ran) / 1000
        start, end = _ts(job.get("submissionTime")), _ts(job.get("completionTime"))
        row["job_wall_s"] += end - start if start and end else 0.0
    after = marks[-2] if len(marks) > 1 else -1  # the jobs of the last micro-batch follow it
    last_batch = [
        {
            "job": j["jobId"],
            "step": j["description"].removeprefix("logstream ingest: "),
            "stage": sid,
            "tasks": stages[sid].get("numTasks"),
            "executor_run_s": round(stages[sid].get("executorRunTime", 0) / 1000, 3),
            "executor_cpu_s": round(stages[sid].get("executorCpuTime", 0) / 1e9, 3),
            "name": stages[sid].get("name", "")[:60],
        }
        for j in sorted(ingest_jobs, key=lambda j: j["jobId"])
        if j["jobId"] > after
        for sid in j.get("stageIds", [])
        if sid in stages and stages[sid].get("status") != "SKIPPED"
    ]
    n = max(1, len(steps))
    warm = steps[1:] or steps
    step_names = sorted({k for s in warm for k in s}, key=lambda k: -sum(s.get(k, 0) for s in warm))
    result = {
        "input": f"the NASA day's first {chunk_lines * chunks:,} lines in {chunks} chunks of "
        f"{chunk_lines:,}, one per micro-batch"
        + (f", each restamped to {chunk_seconds:g} s of event time" if chunk_seconds else ""),
        "pipeline_wall_s": round(wall, 1),
        "micro_batches": len(progress),
        "add_batch_s": [round(p.durationMs["addBatch"] / 1000, 2) for p in progress],
        "warm_add_batch_s_median": round(
            statistics.median(p.durationMs["addBatch"] / 1000 for p in progress[1:] or progress),
            2,
        ),
        # the whole micro-batch: addBatch plus the source's offsets and the checkpoint's logs
        "warm_trigger_execution_s_median": round(
            statistics.median(
                p.durationMs["triggerExecution"] / 1000 for p in progress[1:] or progress
            ),
            2,
        ),
        "first_batch_step_s": {k: round(v, 3) for k, v in (steps[:1] or [{}])[0].items()},
        "warm_step_s_median": {
            k: round(statistics.median(s.get(k, 0.0) for s in warm), 3) for k in step_names
        },
        "spark_jobs_per_batch": round(len(ingest_jobs) / n, 1),
        "codegen_compiles_per_batch": [b - a for a, b in itertools.pairwise(counted)],
        "codegen_compile_ms_mean": round(compile_ms[-1], 1) if compile_ms else None,
        "per_step_per_batch": {
            k: {m: round(v / n, 2) for m, v in row.items()} for k, row in per_step.items()
        },
        "last_batch_stages": last_batch,
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunk-lines", type=int, default=3000)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument(
        "--chunk-seconds",
        type=float,
        default=0.0,
        help="restamp chunk i's lines over [i·S, (i+1)·S) s of event time (a log followed in "
        "real time); default: the NASA day's own timestamps",
    )
    parser.add_argument("--label", default="microbatch")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.conf)
    result = profile(args.chunk_lines, args.chunks, conf, args.chunk_seconds)
    out = RESULTS / f"profile-{args.label}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
