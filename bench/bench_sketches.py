"""Count-min heavy hitters against the exact top 10, and Bloom-filter returning visitors
against the exact count, on the 31-day NASA input.

The 31 days (``bench/build_july.py``: the real 1995-07-09 day replicated across July,
1,093,432 lines) are parsed once and cached; then, for the pages (``url_path``) and the
clients (``client_host``):

* ``exact``: the top 10 by an exact count of every key (one aggregation, a count per key);
* ``sketch``: :func:`logstream.analytics.heavy.heavy_hitters` with day panes: one count-min
  sketch per day (``eps`` 0.001, confidence 0.99) and each day's 40 most frequent keys as
  candidates.

For each: the wall time, the keys held (exact: every distinct key; sketch: the candidates),
whether the two top 10s are the same keys in the same order, the largest overcount
(estimate − exact) of the sketch's top 10 and the stated bound ``eps × N``.

Then each UTC day's returning visitors (host and user agent seen on an earlier day): exact
(every visitor's first day) against :func:`logstream.analytics.returning.returning_visitors`
(one Bloom filter a day, sized for 100,000 visitors at 1 %): the wall times and the visitors
the filters took for returning in excess of the exact count.

Usage::

    python bench/bench_sketches.py [--days 31] [--out bench/results/sketches.json]

One run, 2 local cores; the figures are for this machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def compare(events, column: str) -> dict:
    from pyspark.sql import functions as F

    from logstream.analytics.heavy import heavy_hitters

    start = time.monotonic()
    counts = events.where(F.col(column).isNotNull()).groupBy(column).count()
    exact_top = counts.orderBy(F.desc("count"), column).limit(10).collect()
    distinct = counts.count()
    exact_s = time.monotonic() - start
    start = time.monotonic()
    found = heavy_hitters(events, column, 10)
    sketch_s = time.monotonic() - start
    keys = [i.key for i in found.items]
    truth = {r[column]: r["count"] for r in counts.where(F.col(column).isin(keys)).collect()}
    overcount = [i.estimate - truth[i.key] for i in found.items]
    return {
        "exact_s": round(exact_s, 2),
        "sketch_s": round(sketch_s, 2),
        "exact_keys_held": distinct,
        "sketch_candidates_held": found.candidates,
        "sketch_panes": found.panes,
        "sketch_bytes_each": found.sketch_bytes,
        "events": found.total,
        "error_bound": found.error_bound,
        "max_overcount": max(overcount),
        "within_bound": all(0 <= o <= found.error_bound for o in overcount),
        "same_top10_in_order": keys == [r[column] for r in exact_top],
        "exact_top10": [[r[column], r["count"]] for r in exact_top],
        "sketch_top10": [[i.key, i.estimate, i.lower_bound] for i in found.items],
    }


def compare_returning(events) -> dict:
    """Each day's returning visitors: the exact count (every visitor's first day) against the
    Bloom filters of :func:`logstream.analytics.returning.returning_visitors`."""
    from pyspark.sql import functions as F

    from logstream.analytics.returning import returning_visitors

    start = time.monotonic()
    visitor = F.xxhash64("client_host", F.coalesce("user_agent", F.lit("-"))).alias("v")
    days = events.select(F.date_format("event_time", "yyyy-MM-dd").alias("day"), visitor)
    days = days.distinct()
    first = days.groupBy("v").agg(F.min("day").alias("first"))
    exact = {
        r["day"]: (r["visitors"], r["returning"])
        for r in days.join(first, "v")
        .groupBy("day")
        .agg(
            F.count("*").alias("visitors"),
            F.count_if(F.col("first") < F.col("day")).alias("returning"),
        )
        .collect()
    }
    exact_s = time.monotonic() - start
    start = time.monotonic()
    found = returning_visitors(events, expected=100_000, fpp=0.01)
    bloom_s = time.monotonic() - start
    excess = [d.returning - exact[d.day][1] for d in found]
    return {
        "exact_s": round(exact_s, 2),
        "bloom_s": round(bloom_s, 2),
        "expected": 100_000,
        "fpp": 0.01,
        "days": len(found),
        "visitors": sum(d.visitors for d in found),
        "exact_returning": sum(v[1] for v in exact.values()),
        "exact_new": sum(v[0] - v[1] for v in exact.values()),
        "bloom_excess": sum(excess),
        "no_false_negative": all(e >= 0 for e in excess),
    }


def main() -> None:
    parser = harness.parser(__doc__, "sketches", days=True)
    args = parser.parse_args()
    from logstream.config import SparkSettings
    from logstream.parsing import events as to_events
    from logstream.parsing import parse, resolve_format
    from logstream.session import get_spark
    from logstream.sources import read_lines

    files = harness.july_files(args.days)
    spark = get_spark(SparkSettings(master="local[2]"))
    parsed = parse(read_lines(spark, [str(f) for f in files]), resolve_format("common"))
    events = to_events(parsed).select("event_time", "url_path", "client_host", "user_agent")
    events = events.cache()
    lines = events.count()
    result = {
        "input": f"{args.days} NASA days (1995-07-09 replicated), {lines:,} events",
        "eps": 0.001,
        "confidence": 0.99,
        "pane": "1 day",
        "candidates_per_pane": 40,
        "url_path": compare(events, "url_path"),
        "client_host": compare(events, "client_host"),
        "returning_visitors": compare_returning(events),
        "machine": harness.machine(),
    }
    harness.write_result(result, args.out)


if __name__ == "__main__":
    harness.run(main)
