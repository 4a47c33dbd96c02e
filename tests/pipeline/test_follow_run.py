"""``logstream run --follow``: the pipeline follows a growing access log across a rename
rotation, a copytruncate and a gzip of an old file, over several starts on the same state, and
counts every line of the real NASA lines once, in the same per-minute windows as the batch
computation."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from pyspark.sql import functions as F
from tests.pipeline.helpers import config, nasa_lines, run_to_end

from logstream import analytics
from logstream.parsing import compile_format, parse
from logstream.parsing import events as parsed_events
from logstream.pipeline import Pipeline

LINES = 8000


def run_once(spark, tmp: Path, log: Path) -> Pipeline:
    cfg = config(
        tmp,
        None,
        source="follow",
        follow=[str(log)],
        max_files_per_trigger=None,
        max_bytes_per_trigger=256 * 1024,
    )
    pipeline = Pipeline(spark, cfg)
    run_to_end(pipeline)
    return pipeline


def append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def test_a_rotating_log_is_counted_once_across_restarts(spark, nasa_day, tmp_path):
    lines = nasa_lines(nasa_day)[:LINES]
    part = [lines[i : i + 1000] for i in range(0, LINES, 1000)]
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "access.log"
    append(log, part[0] + part[1])
    with log.open("a", encoding="utf-8") as fh:  # a line still being written
        fh.write(part[2][0][:20])
    first = run_once(spark, tmp_path, log)
    assert first.totals.events == 2000  # the partial line waits

    with log.open("a", encoding="utf-8") as fh:  # the rest of that line, then more
        fh.write(part[2][0][20:] + "\n")
    append(log, part[2][1:])
    log.rename(logs / "access.log.1")  # rename rotation: the old file ends with part 3
    append(logs / "access.log.1", part[3])
    append(log, part[4])
    second = run_once(spark, tmp_path, log)
    assert second.totals.events == 3000

    # gzip of the oldest file (never read again) and a copytruncate of the current one
    with (logs / "access.log.1").open("rb") as src, gzip.open(logs / "access.log.2.gz", "wb") as gz:
        shutil.copyfileobj(src, gz)
    (logs / "access.log.1").unlink()
    shutil.copy(log, logs / "access.log.1")
    with log.open("r+") as fh:
        fh.truncate(0)
    append(log, part[5] + part[6] + part[7])
    third = run_once(spark, tmp_path, log)
    assert third.totals.events == 3000

    events = spark.read.parquet(str(tmp_path / "out" / "events")).drop("batch_id")
    assert events.count() == LINES
    assert events.where(F.col("source_file").endswith(".gz")).count() == 0
    # the same lines, read as a batch: every parsed event once, and the same final windows
    source = spark.createDataFrame([(line,) for line in lines], "value string").select(
        "value", F.lit(None).cast("string").alias("source_file")
    )
    want = parsed_events(parse(source, compile_format("common"))).drop("source_file")
    assert events.drop("source_file").exceptAll(want).count() == 0
    assert want.exceptAll(events.drop("source_file")).count() == 0
    stream = spark.read.parquet(str(tmp_path / "out" / "traffic_per_minute")).drop("batch_id")
    watermark = F.timestamp_millis(F.lit(third.ingest.watermark_for_next_batch()))
    final = analytics.traffic_per_window(want, "1 minute").where(F.col("window_end") <= watermark)
    final = final.select(*stream.columns)
    assert stream.count() == final.count() > 0
    assert stream.exceptAll(final).count() == 0
