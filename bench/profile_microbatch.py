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

    python bench/profile_microbatch.py --chunk-lines 400 --chunks 25   # make run's size:
                                                    # bench/results/profile-microbatch.json
    python bench/profile_microbatch.py --chunk-lines 20000 --out /tmp/20k.json
    python bench/profile_microbatch.py --chunk-seconds 3 --chunks 24 \
        --out /tmp/wall.json                          # 3 s of event time a chunk
    python bench/profile_microbatch.py --conf spark.sql.codegen.cache.maxEntries=100 \
        --out /tmp/cache100.json                      # try a Spark setting

One run, ``local[2]``; the figures are for this machine.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

#: The first chunk's time with ``--chunk-seconds`` (2026-01-01T00:00:00Z, on a minute).
BASE_S = 1_767_225_600


def chunked_day(chunk_lines: int, chunks: int, chunk_seconds: float) -> list[str]:
    """The NASA day's first ``chunk_lines * chunks`` lines; with ``chunk_seconds``, chunk
    ``i`` restamped over ``[i·s, (i+1)·s)`` of event time from :data:`BASE_S` (the wall
    clock of a followed log)."""
    lines = harness.nasa_day_lines()[: chunk_lines * chunks]
    if not chunk_seconds:
        return lines
    out = []
    for i in range(0, len(lines), chunk_lines):
        part = lines[i : i + chunk_lines]
        start = BASE_S + i // chunk_lines * chunk_seconds
        step = chunk_seconds / len(part)
        out += [harness.stamped(x, harness.clf_stamp(start + j * step)) for j, x in enumerate(part)]
    return out


class Recorder:
    """The ingest's step hook: at the end of each micro-batch, its step seconds, the classes
    Janino compiled so far (Spark's ``CodeGenerator`` metrics source, ``/metrics/json``; and
    the mean compile time, ms, of the histogram's sample) and the newest Spark job id."""

    def __init__(self, spark, pipeline) -> None:
        self.pipeline = pipeline
        self.metrics_url = f"{spark.sparkContext.uiWebUrl}/metrics/json"
        self.jobs_url = f"{harness.ui_base(spark)}/jobs"
        self.steps: list[dict[str, float]] = []
        self.seen: dict[str, float] = {}
        self.compile_ms: list[float] = []
        self.counted = [self.compiled()]  # before and after each micro-batch
        self.marks: list[int] = []

    def compiled(self) -> int:
        histograms = harness.ui_get(self.metrics_url)["histograms"]
        timing = next(v for k, v in histograms.items() if k.endswith("compilationTime"))
        self.compile_ms.append(timing["mean"])
        return timing["count"]

    def __call__(self, step: str, batch_id: int) -> None:
        if step == "snapshot_written":
            now = dict(self.pipeline.ingest.timings)
            self.steps.append({k: round(v - self.seen.get(k, 0.0), 3) for k, v in now.items()})
            self.seen.update(now)
            self.counted.append(self.compiled())
            jobs = harness.ui_get(self.jobs_url)
            self.marks.append(max((j["jobId"] for j in jobs), default=-1))


def profile(
    chunk_lines: int,
    chunks: int,
    conf: dict[str, str] | None = None,
    chunk_seconds: float = 0.0,
) -> dict:
    """Run the chunks through the pipeline in this process; return where the time went."""
    from logstream.pipeline import Pipeline, PipelineConfig

    spark = harness.spark_session(
        master="local[2]", ui_enabled=True, app_name="microbatch", extra=conf or {}
    )
    with harness.scratch("profile-microbatch-") as tmp:
        landing = tmp / "landing"
        harness.write_chunks(chunked_day(chunk_lines, chunks, chunk_seconds), landing, chunk_lines)
        cfg = PipelineConfig.build(
            input_dir=landing,
            output_dir=tmp / "out",
            state_dir=tmp / "state",
            log_format="common",
            trigger="available-now",
            max_files_per_trigger=1,
        )
        pipeline = Pipeline(spark, cfg)
        recorder = Recorder(spark, pipeline)
        pipeline.ingest.step_hook = recorder
        started = time.perf_counter()
        pipeline.run()
        wall = time.perf_counter() - started
        pipeline.stop()
    progress = [p for q in pipeline.queries for p in q.recentProgress if p.numInputRows]
    restamped = f", each restamped to {chunk_seconds:g} s of event time" if chunk_seconds else ""
    return {
        "input": f"the NASA day's first {chunk_lines * chunks:,} lines in {chunks} chunks of "
        f"{chunk_lines:,}, one per micro-batch{restamped}",
        "pipeline_wall_s": round(wall, 1),
        "micro_batches": len(progress),
        "add_batch_s": [round(p.durationMs["addBatch"] / 1000, 2) for p in progress],
        "warm_add_batch_s_median": warm_median(progress, "addBatch"),
        # the whole micro-batch: addBatch plus the source's offsets and the checkpoint's logs
        "warm_trigger_execution_s_median": warm_median(progress, "triggerExecution"),
        **spark_figures(spark, recorder),
        "machine": harness.machine(),
    }


def warm_median(progress: list, phase: str) -> float:
    """Median seconds of ``durationMs[phase]`` over the micro-batches after the first."""
    return round(statistics.median(p.durationMs[phase] / 1000 for p in progress[1:] or progress), 2)


def spark_figures(spark, recorder: Recorder) -> dict:
    """Per ingest step: seconds, Spark jobs and stages per micro-batch; classes compiled per
    micro-batch; and every stage of the last micro-batch."""
    prefix = "logstream ingest: "

    def step(job: dict) -> str:
        text = job.get("description") or ""
        return text.removeprefix(prefix) if text.startswith(prefix) else ""

    totals, stages = harness.spark_totals(spark, {"step": step})
    per_step = {k: row for k, row in totals["step"].items() if k}
    steps = recorder.steps
    n = max(1, len(steps))
    warm = steps[1:] or steps
    names = sorted({k for s in warm for k in s}, key=lambda k: -sum(s.get(k, 0) for s in warm))
    after = recorder.marks[-2] if len(recorder.marks) > 1 else -1  # the last batch's jobs follow
    return {
        "first_batch_step_s": {k: round(v, 3) for k, v in (steps[:1] or [{}])[0].items()},
        "warm_step_s_median": {
            k: round(statistics.median(s.get(k, 0.0) for s in warm), 3) for k in names
        },
        "spark_jobs_per_batch": round(sum(row["jobs"] for row in per_step.values()) / n, 1),
        "codegen_compiles_per_batch": [b - a for a, b in itertools.pairwise(recorder.counted)],
        "codegen_compile_ms_mean": round(recorder.compile_ms[-1], 1),
        "per_step_per_batch": {
            k: {m: round(v / n, 2) for m, v in row.items()} for k, row in per_step.items()
        },
        "last_batch_stages": [s for s in stages if s["step"] and s["job"] > after],
    }


def main() -> None:
    parser = harness.parser(__doc__, "profile-microbatch")
    parser.add_argument("--chunk-lines", type=int, default=3000)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument(
        "--chunk-seconds",
        type=float,
        default=0.0,
        help="restamp chunk i's lines over [i·S, (i+1)·S) s of event time (a log followed in "
        "real time); default: the NASA day's own timestamps",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.conf)
    result = profile(args.chunk_lines, args.chunks, conf, args.chunk_seconds)
    harness.write_result(result, args.out)


if __name__ == "__main__":
    harness.run(main)
