"""Cost of scoring models on the streams: one function per part, each returning a dict.

* :func:`bench_occupancy_training`: ``logstream model train occupancy`` as a user runs it
  (default features and folds, the three candidates, JVM start included).
* :func:`bench_occupancy_scoring`: batch ``score_readings`` (``PipelineModel.transform``) on
  the three UCI files' parsed readings replicated to about a million rows, cached, in a warm
  session (the ``noop`` sink computes every row): readings per second.
* :func:`bench_device_pipeline`: ``start_device_queries`` available-now on the three files,
  wall seconds until every query ends, without and with ``--model``.
* :func:`bench_bot_scoring`: batch ``score_features`` with a bot model (``--bot-model``, or
  one trained on the real elastic sample, untimed) on the client windows of the 31-day NASA
  input (``bench/build_july.py``), cached, in a warm session: client windows per second. The
  bot model's cost inside the streaming pipeline is ``backfill_bots`` against
  ``backfill_full`` of ``bench/bench_vs_goaccess.py``.

Results go to stdout and bench/results/scoring.json (the parts given with ``--parts``
replace theirs; the others are kept, so a later part, bots, can add its own).

Usage: python bench/bench_scoring.py [--parts training,scoring,pipeline,bots] [--rows 1000000]
    [--bot-model DIR] [--out FILE]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

DATA = harness.data_dir()
FILES = ("occupancy_datatest", "occupancy_datatraining", "occupancy_datatest2")  # time order


def bench_occupancy_training(model_dir: Path) -> dict[str, Any]:
    """Train the default occupancy model with the CLI into ``model_dir``."""
    cmd = [
        *harness.LOGSTREAM,
        "model",
        "train",
        "occupancy",
        "--train",
        str(DATA / "occupancy_datatraining.txt.gz"),
        "--out",
        str(model_dir),
        "--overwrite",
        "--version",
        "bench",
        "--master",
        "local[2]",
    ]
    for name in ("occupancy_datatest", "occupancy_datatest2"):
        cmd += ["--test", str(DATA / f"{name}.txt.gz")]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    seconds = time.perf_counter() - t0
    info = json.loads((model_dir / "logstream-model.json").read_text())
    return {
        "command": " ".join(["logstream", *cmd[len(harness.LOGSTREAM) :]]),
        "cli_seconds": round(seconds, 2),
        "classifier": info["classifier"],
        "metrics": {k: round(v, 4) for k, v in info["metrics"].items()},
    }


def bench_occupancy_scoring(spark: Any, model_dir: Path, rows: int) -> dict[str, Any]:
    """Warm batch scoring throughput on the replicated readings."""
    from pyspark.sql import functions as F

    from logstream.ml.model import load_model
    from logstream.ml.occupancy import KIND, read_readings, score_readings

    model, info = load_model(model_dir, KIND)
    readings = read_readings(spark, [DATA / f"{n}.txt.gz" for n in FILES])
    base = readings.count()
    copies = max(1, round(rows / base))
    replicated = (
        readings.crossJoin(spark.range(copies).withColumnRenamed("id", "copy"))
        .withColumn("device", F.concat_ws("-", "device", F.col("copy").cast("string")))
        .drop("copy")
        .repartition(4)
        .cache()
    )
    n = replicated.count()
    scored = score_readings(model, replicated, info.version)
    scored.write.format("noop").mode("overwrite").save()  # warm-up
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        scored.write.format("noop").mode("overwrite").save()
        runs.append(time.perf_counter() - t0)
    replicated.unpersist()
    best = min(runs)
    return {
        "model": f"{info.classifier} on {', '.join(info.features)}",
        "rows": n,
        "copies_of_the_three_files": copies,
        "seconds_runs": [round(r, 3) for r in runs],
        "readings_per_s_best": round(n / best),
    }


def _pipeline_seconds(spark: Any, tmp: Path, model: Path | None) -> float:
    from logstream.devices import DeviceConfig, start_device_queries

    landing = tmp / "in"
    if not landing.is_dir():
        landing.mkdir(parents=True)
        for i, name in enumerate(FILES):
            path = landing / f"{name}.txt.gz"
            shutil.copyfile(DATA / f"{name}.txt.gz", path)
            os.utime(path, (1_000_000 + i, 1_000_000 + i))
    run = tmp / ("with-model" if model else "without-model")
    shutil.rmtree(run, ignore_errors=True)
    cfg = DeviceConfig.build(
        input=str(landing), output_dir=run / "out", state_dir=run / "state", model=model
    )
    t0 = time.perf_counter()
    queries = start_device_queries(spark, cfg)
    for q in queries:
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(f"{q.name}: {q.exception()}")
    return time.perf_counter() - t0


def bench_device_pipeline(spark: Any, model_dir: Path, tmp: Path) -> dict[str, Any]:
    """The device pipeline on the three files, available-now, without and with the model."""
    _pipeline_seconds(spark, tmp, None)  # warm-up: Python workers, code generation
    without = _pipeline_seconds(spark, tmp, None)
    with_model = _pipeline_seconds(spark, tmp, model_dir)
    return {
        "input": "the three UCI occupancy files (20,560 readings), one trigger, available-now",
        "queries_without_model": 5,
        "queries_with_model": 6,
        "seconds_without_model": round(without, 2),
        "seconds_with_model": round(with_model, 2),
        "extra_seconds_with_model": round(with_model - without, 2),
    }


def bench_bot_scoring(spark: Any, model_dir: Path | None, tmp: Path) -> dict[str, Any]:
    """Client windows scored per second by a bot model, warm, on the 31-day NASA input."""
    from logstream.analytics.panes import fold_panes
    from logstream.ml.bots import bot_pane_spec, client_features, score_features
    from logstream.ml.model import load_model
    from logstream.parsing import events, parse, resolve_format
    from logstream.sources import read_lines

    if model_dir is None:
        model_dir = tmp / "bots-model"
        subprocess.run(
            [*harness.LOGSTREAM, "model", "train", "bots", "--input",
             str(DATA / "elastic_apache_logs_combined_2015.log.gz"), "--out", str(model_dir),
             "--classifiers", "random_forest", "--version", "bench"],
            check=True, capture_output=True,
        )  # fmt: skip
    model, info = load_model(model_dir, "bots")
    files = harness.july_files(31)
    ev = events(parse(read_lines(spark, [str(f) for f in files]), resolve_format("common", None)))
    windows = client_features(fold_panes(None, ev, bot_pane_spec())).cache()
    n = windows.count()
    scored = score_features(model, windows, info.version)
    scored.write.format("noop").mode("overwrite").save()  # warm-up
    t0 = time.perf_counter()
    scored.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - t0
    windows.unpersist()
    return {
        "input": "client windows (5 min) of the NASA day replicated over July, cached",
        "model": f"{info.classifier} {info.version}",
        "windows": n,
        "seconds": round(seconds, 3),
        "windows_per_s": round(n / seconds),
    }


def main() -> None:
    parser = harness.parser(__doc__, "scoring")
    parser.add_argument("--parts", default="training,scoring,pipeline,bots")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--bot-model", type=Path, help="a bots model (default: train one)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results["machine"] = harness.machine()
    with harness.scratch("bench-scoring-") as tmp:
        model_dir = tmp / "occupancy-model"
        occupancy = parts & {"training", "scoring", "pipeline"}
        if occupancy:
            training = bench_occupancy_training(model_dir)
        if "training" in parts:
            results["occupancy_training"] = training
        spark = harness.spark_session(master="local[2]")
        if "scoring" in parts:
            results["occupancy_scoring"] = bench_occupancy_scoring(spark, model_dir, args.rows)
        if "pipeline" in parts:
            results["device_pipeline"] = bench_device_pipeline(spark, model_dir, tmp)
        if "bots" in parts:
            results["bot_scoring"] = bench_bot_scoring(spark, args.bot_model, tmp)
        spark.stop()
    harness.write_result(results, args.out)


if __name__ == "__main__":
    harness.run(main)
