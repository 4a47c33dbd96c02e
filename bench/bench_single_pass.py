"""A backfill micro-batch's ingest in two passes (logstream's Spark steps) and in one (the
prototype of ``logstream.pipeline.ingest.one_pass``), in one process, on the 31 NASA days.

Issue #59's target 2 asks the ingest-only backfill for at most 1.2× a process that only parses
and writes the events. The Spark steps of an ingest micro-batch past ``driver_rows`` read the
input twice over: the parse is cached, the in-batch rules read it (their counts, the top
0.1 % of event times, the skew's buckets: small jobs), then the events are written from the
cache. This measured what one pass would save, warm, before ``one_pass.py`` was built (its
certificate differs: one percentile, the 79th, and the half-delay buckets from it on):

* ``two_pass``: those steps as ``logstream.pipeline.ingest`` runs them: the parse persisted
  (raw text only where quarantined), ``watermark._counts``, ``watermark._ahead_bound``,
  ``skew.spark_skew``, then the events written to Parquet from the cache;
* ``one_pass``: the parse written straight to Parquet, with metrics observed by the same job
  (``Observation``): events, oldest and newest event time, an approximate 99th percentile (its
  rank error, 1/10,000, keeps it below the exact 99.9th) and the set of half-delay buckets
  (``floor(t / (D / 2))``). From them, two certificates that the rules cannot fire: every
  half-delay bucket from that percentile to the newest holds an event, so no two consecutive
  newest events lie more than the delay apart (the in-batch rule needs such a gap); every
  delay-wide bucket from the oldest to the newest holds one (the skew needs an empty one). A
  batch without both certificates would take today's two passes; a set of buckets past
  :data:`MAX_HALF_BUCKETS` certifies nothing.

Each way runs ``--repeat`` times, alternating, on the same session; the fastest (warm) run of
each is kept, with the ratio. Prints the result (``--out FILE``: also writes it).

Usage::

    python bench/bench_single_pass.py [--days 31] [--repeat 3] [--out FILE]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

#: The watermark delay the rules read (logstream's default, 10 minutes), ms.
DELAY_MS = 600_000
#: The most half-delay buckets the one pass keeps (about 6 months of event time at 10 minutes).
MAX_HALF_BUCKETS = 50_000


def _two_pass(spark: Any, folder: Path, out: Path) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from logstream.parsing import REASON_COLUMN, compile_format, parse
    from logstream.pipeline.ingest.skew import spark_skew
    from logstream.pipeline.ingest.watermark import _ahead_bound, _counts
    from logstream.schema import EVENT_COLUMNS
    from logstream.sources import read_lines

    is_event = F.col(REASON_COLUMN).isNull()
    parsed = (
        parse(read_lines(spark, [folder]), compile_format("common"))
        .withColumn("raw_line", F.when(~is_event, F.col("raw_line")))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        counts = _counts(parsed, is_event, F.lit(False))
        events = counts["on_time"] + counts["late"]
        bound = _ahead_bound(parsed, is_event, events, counts, DELAY_MS)
        span = counts["max_ms"] - counts["min_ms"]
        skew = spark_skew(parsed, is_event, events, span, DELAY_MS)
        parsed.where(is_event).select(*EVENT_COLUMNS).write.mode("overwrite").parquet(str(out))
    finally:
        parsed.unpersist()
    return {"events": events, "ahead_bound": bound, "skew": skew is not None}


def _one_pass(spark: Any, folder: Path, out: Path) -> dict[str, Any]:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from logstream.parsing import REASON_COLUMN, compile_format, parse
    from logstream.schema import EVENT_COLUMNS
    from logstream.sources import read_lines

    is_event = F.col(REASON_COLUMN).isNull()
    t_ms = F.when(is_event, F.unix_millis("event_time"))  # the rules read events only
    half = F.floor(t_ms / (DELAY_MS // 2))
    seen = Observation("ingest")
    parse(read_lines(spark, [folder]), compile_format("common")).observe(
        seen,
        F.count_if(is_event).alias("events"),
        F.min(t_ms).alias("min_ms"),
        F.max(t_ms).alias("max_ms"),
        F.percentile_approx(t_ms, 0.99, 10_000).alias("q99_ms"),
        F.slice(F.collect_set(half), 1, MAX_HALF_BUCKETS + 1).alias("halves"),
    ).where(is_event).select(*EVENT_COLUMNS).write.mode("overwrite").parquet(str(out))
    m = seen.get
    halves = set(m["halves"])
    bounded = len(halves) <= MAX_HALF_BUCKETS
    top = range(m["q99_ms"] // (DELAY_MS // 2), m["max_ms"] // (DELAY_MS // 2) + 1)
    whole = {h // 2 for h in halves}
    span = range(m["min_ms"] // DELAY_MS, m["max_ms"] // DELAY_MS + 1)
    return {
        "events": m["events"],
        "in_batch_rule_certified": bounded and all(h in halves for h in top),
        "skew_certified": bounded and all(b in whole for b in span),
    }


def main() -> None:
    parser = harness.parser(__doc__, days=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the result to this file")
    args = parser.parse_args()
    folder = harness.july_files(args.days)[0].parent
    spark = harness.spark_session()
    runs: dict[str, list[float]] = {"two_pass": [], "one_pass": []}
    found: dict[str, Any] = {}
    with harness.scratch("bench-single-pass-") as tmp:
        for _ in range(args.repeat):
            for name, way in (("two_pass", _two_pass), ("one_pass", _one_pass)):
                t0 = time.perf_counter()
                found[name] = way(spark, folder, tmp / name)
                runs[name].append(round(time.perf_counter() - t0, 2))
    best = {name: min(times) for name, times in runs.items()}
    assert found["two_pass"]["events"] == found["one_pass"]["events"]
    result = {
        "input": f"NASA day x{args.days} (bench/build_july.py), "
        f"{harness.NASA_DAY_LINES * args.days:,} lines, one micro-batch",
        "runs_s": runs,
        "best_s": best,
        "two_pass_over_one_pass": round(best["two_pass"] / best["one_pass"], 2),
        "found": found,
        "machine": harness.machine(),
    }
    print(f"two passes {best['two_pass']} s, one pass {best['one_pass']} s (warm, best of "
          f"{args.repeat}): {result['two_pass_over_one_pass']}x")  # fmt: skip
    if args.out:
        harness.write_result(result, args.out, show=False)
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
