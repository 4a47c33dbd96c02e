"""Helpers shared by the streaming tests: chunked inputs and reading outputs back."""

from __future__ import annotations

import gzip
import importlib.util
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from logstream.pipeline import Pipeline, PipelineConfig

#: The Parquet outputs of a full run that must not change with a retry or a restart
#: (``late_events`` and ``quarantine`` stay empty on the NASA day; ``alerts`` has none).
PARQUET_OUTPUTS = (
    "events",
    "traffic_per_minute",
    "trending_pages",
    "unique_visitors",
    "sessions",
    "top_clients",
)


def write_chunks(
    lines: list[str], directory: Path, per_file: int, start_mtime: int = 1_000_000
) -> list[Path]:
    """Split ``lines`` into files whose modification times increase in order.

    Spark's file source takes files in modification-time order, so micro-batch contents are
    deterministic with ``maxFilesPerTrigger``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(0, len(lines), per_file):
        path = directory / f"chunk-{i // per_file:04d}.log"
        path.write_text("".join(line + "\n" for line in lines[i : i + per_file]))
        os.utime(path, (start_mtime + i, start_mtime + i))
        paths.append(path)
    return paths


def nasa_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\n") for line in fh]


def config(tmp: Path, input_dir: Path, **overrides) -> PipelineConfig:
    values = dict(
        input_dir=input_dir,
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        store=f"sqlite:///{tmp / 'store.db'}",
        trigger="available-now",
        log_format="common",
        max_files_per_trigger=1,
    )
    values.update(overrides)
    return PipelineConfig.build(**values)


def pipeline_for(spark, cfg: PipelineConfig, spark_steps: bool = False) -> Pipeline:
    """A pipeline of ``cfg`` in the test's own Spark session, not yet run; with
    ``spark_steps`` every micro-batch takes the Spark steps (``driver_rows=0``), not the
    driver's live path."""
    pipeline = Pipeline(spark, cfg)
    if spark_steps:
        pipeline.ingest.settings = replace(pipeline.ingest.settings, driver_rows=0)
    return pipeline


def run_to_end(pipeline: Pipeline) -> Pipeline:
    """Run ``pipeline`` (available-now: until its input is read) and stop it, also when the
    run raises. Returns the stopped pipeline."""
    try:
        pipeline.run()
    finally:
        pipeline.stop()
    return pipeline


def run_pipeline(
    spark, root: Path, input_dir: Path, spark_steps: bool = False, **overrides
) -> Pipeline:
    """An available-now run of ``input_dir`` (one file a micro-batch, :func:`config` with
    ``overrides``) in the test's own Spark session, its state and outputs under ``root`` as
    ``logstream run`` lays them out (``root/out``, ``root/state``, ``root/store.db``), with
    the Spark steps when ``spark_steps`` (:func:`pipeline_for`). Returns the stopped
    pipeline."""
    return run_to_end(pipeline_for(spark, config(root, input_dir, **overrides), spark_steps))


def run_in_process(spark, root: Path, input_dir: Path) -> float:
    """An uninterrupted :func:`run_pipeline` of ``input_dir``; returns its seconds. A
    reference run here needs no JVM start of its own."""
    start = time.monotonic()
    run_pipeline(spark, root, input_dir)
    return time.monotonic() - start


def load_bench(name: str) -> ModuleType:
    """The benchmark script ``bench/NAME.py`` as a module (the drills' short forms call it)."""
    path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
