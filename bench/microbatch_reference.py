"""Spark's own micro-batch on the same chunk files: the reference of the live path's targets.

Two native Structured Streaming queries, one after the other in one warm session
(``local[2]``, 2 shuffle partitions), each reading a folder of chunk files one file per
trigger (``maxFilesPerTrigger=1``, ``availableNow``):

* ``parse_write``: Common Log Format parsed with one ``regexp_replace`` + ``split`` and
  ``try_*`` casts, the events appended as Parquet;
* ``parse_window_state``: the same parse, ``withWatermark("event_time", "1 minute")``,
  ``groupBy(window(event_time, "1 minute"), status)`` with the count and the sum of bytes, in
  the RocksDB state store (changelog checkpointing), appended as Parquet.

The figure of a query is the ``triggerExecution`` of its micro-batches after the first two
(ms), as Spark's progress reports it. This module is run as a process of its own by
``bench/bench_live_path.py`` (``python bench/microbatch_reference.py DIR OUT.json``), so the
reference's JVM is not the one logstream warms.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The queries, in the order they run.
QUERIES = ("parse_write", "parse_window_state")
#: The micro-batches left out of a figure: the first two warm the JVM.
COLD_BATCHES = 2


def parsed(lines):
    """Common Log Format lines (``value``) as typed events: one ``regexp_replace`` that turns
    the line into fields separated by a control character, one ``split``, ``try_*`` casts."""
    from pyspark.sql import functions as F

    pattern = r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "(\S+) (\S+)\s*(\S*)" (\d{3}) (\S+).*$'
    cut = F.regexp_replace("value", pattern, "$1\u0001$4\u0001$6\u0001$8\u0001$9")
    f = F.col("f")
    return (
        lines.select(F.split(cut, "\u0001").alias("f"))
        .select(
            F.get(f, 0).alias("client_host"),
            F.try_to_timestamp(F.get(f, 1), F.lit("dd/MMM/yyyy:HH:mm:ss Z")).alias("event_time"),
            F.get(f, 2).alias("url_path"),
            F.get(f, 3).try_cast("int").alias("status"),
            F.get(f, 4).try_cast("bigint").alias("bytes_sent"),
        )
        .where(F.col("event_time").isNotNull())
    )


def run_query(spark, kind: str, chunks: Path, work: Path) -> list[dict]:
    """Run query ``kind`` over ``chunks`` to its end; the progress of each micro-batch."""
    from pyspark.sql import functions as F

    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(chunks))
    events = parsed(lines)
    if kind == "parse_window_state":
        events = (
            events.withWatermark("event_time", "1 minute")
            .groupBy(F.window("event_time", "1 minute"), "status")
            .agg(F.count("*").alias("requests"), F.sum("bytes_sent").alias("bytes"))
        )
    query = (
        events.writeStream.format("parquet")
        .option("path", str(work / kind / "out"))
        .option("checkpointLocation", str(work / kind / "checkpoint"))
        .outputMode("append")
        .trigger(availableNow=True)
        .queryName(f"reference_{kind}")
        .start()
    )
    query.awaitTermination()
    return [
        {
            "rows": p["numInputRows"],
            "trigger_execution_ms": p["durationMs"]["triggerExecution"],
            "add_batch_ms": p["durationMs"].get("addBatch", 0),
        }
        for p in (json.loads(x.json) for x in query.recentProgress)
        if p["numInputRows"]
    ]


def figures(batches: list[dict]) -> dict:
    """Median and p95 ``triggerExecution`` (ms) of the warm micro-batches."""
    warm = [b["trigger_execution_ms"] for b in batches[COLD_BATCHES:]] or [
        b["trigger_execution_ms"] for b in batches
    ]
    ordered = sorted(warm)
    return {
        "micro_batches": len(batches),
        "rows_per_batch_median": statistics.median(b["rows"] for b in batches),
        "warm_median_ms": statistics.median(warm),
        "warm_p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "trigger_execution_ms": [b["trigger_execution_ms"] for b in batches],
    }


def main() -> None:
    from logstream.config import SparkSettings
    from logstream.session import get_spark

    chunks, out = Path(sys.argv[1]), Path(sys.argv[2])
    spark = get_spark(
        SparkSettings(master="local[2]", ui_enabled=False, shuffle_partitions=2, app_name="ref")
    )
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    result = {}
    with tempfile.TemporaryDirectory(prefix="microbatch-reference-") as work:
        for kind in QUERIES:
            result[kind] = figures(run_query(spark, kind, chunks, Path(work)))
    spark.stop()
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
