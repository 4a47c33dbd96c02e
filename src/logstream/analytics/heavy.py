"""Heavy hitters with bounded state: a count-min sketch per pane and the pane's top keys.

The top keys of a long span (the pages, clients or referrers of a day or a month) can have
millions of keys. The exact ranking holds a count per key; this one holds, per pane, one
count-min sketch of fixed size and the pane's ``candidates`` most frequent keys, whatever the
number of keys (the book's Part IV, approximation algorithms; G. Cormode and S. Muthukrishnan,
"An improved data stream summary: the count-min sketch and its applications", J. Algorithms
55(1), 2005).

* The sketch is Spark's ``count_min_sketch`` aggregate (``org.apache.spark.util.sketch``):
  ``depth = ⌈−log₂(1 − confidence)⌉`` rows of ``width = ⌈2 / eps⌉`` counters (Spark's
  sizing: 7 × 2,000 longs, 112 KB, for the defaults). Sketches of the same ``eps``,
  ``confidence`` and seed add up, so the span's sketch is the sum of its panes'.
* A key's estimate never falls below its true count, and exceeds it by at most
  ``eps × N`` (N: the events counted) with probability ``confidence``: the error bound
  reported beside the counts.
* The candidates are the union of every pane's top keys; a key of the span's top ``k`` that is
  in no pane's top ``candidates`` is missed (the price of the bounded state): with day panes
  and ``candidates = 4k`` it did not happen on the 31-day input
  (``bench/bench_sketches.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from logstream.analytics.panes import DAY_MS, pane_start

__all__ = ["HeavyHitter", "HeavyHitters", "heavy_hitters"]


@dataclass(frozen=True)
class HeavyHitter:
    """One key of :class:`HeavyHitters`."""

    key: str
    estimate: int  #: count-min estimate: at least the true count
    lower_bound: int  #: ``estimate − error_bound`` (at least 0): the true count is at least this


@dataclass(frozen=True)
class HeavyHitters:
    """The top keys by their count-min estimate, and the bound of its error."""

    column: str
    items: list[HeavyHitter]  #: most frequent first (estimate, then key)
    total: int  #: N, the events with a key
    error_bound: int  #: ⌈eps × N⌉: an estimate exceeds its true count by at most this …
    confidence: float  #: … with this probability
    eps: float
    panes: int  #: sketches merged
    candidates: int  #: distinct keys kept over every pane (the bounded state)
    sketch_bytes: int  #: size of one sketch


def heavy_hitters(
    events: DataFrame,
    column: str | Column,
    k: int = 10,
    *,
    pane_ms: int = DAY_MS,
    candidates: int | None = None,
    eps: float = 1e-3,
    confidence: float = 0.99,
    seed: int = 42,
) -> HeavyHitters:
    """The ``k`` most frequent values of ``column`` by count-min estimate, with bounded state.

    Parameters
    ----------
    events : DataFrame
        Batch DataFrame with ``event_time`` (timestamp) and ``column``.
    column : str or Column
        The key (``url_path``, ``client_host``, ``referrer``); nulls are left out.
    k : int
        Keys returned.
    pane_ms : int
        Pane length, milliseconds (default a UTC day): one sketch and one candidate list each.
    candidates : int, optional
        Top keys kept per pane (default ``4 × k``).
    eps, confidence : float
        The sketch's relative error and confidence (Spark's ``count_min_sketch``).
    seed : int
        The sketch's hash seed (the same for every pane, so that the sketches add up).

    Returns
    -------
    HeavyHitters

    Raises
    ------
    ValueError
        When ``k`` or ``candidates`` is below 1, or ``eps``/``confidence`` is outside (0, 1).
    """
    m = 4 * k if candidates is None else candidates
    if k < 1 or m < 1 or not 0 < eps < 1 or not 0 < confidence < 1:
        raise ValueError(
            f"heavy_hitters: k={k}, candidates={m} must be ≥ 1 and eps={eps}, "
            f"confidence={confidence} in (0, 1)"
        )
    key = F.col(column) if isinstance(column, str) else column
    name = column if isinstance(column, str) else "key"
    keyed = events.select(
        pane_start(F.unix_millis("event_time"), pane_ms).alias("pane"), key.alias("key")
    ).where(F.col("key").isNotNull())
    sketches = keyed.groupBy("pane").agg(
        F.count_min_sketch("key", F.lit(eps), F.lit(confidence), F.lit(seed)).alias("cms")
    )
    rank = F.row_number().over(Window.partitionBy("pane").orderBy(F.desc("n"), "key"))
    top = (
        keyed.groupBy("pane", "key")
        .agg(F.count("*").alias("n"))
        .select("key", rank.alias("r"))
        .where(F.col("r") <= m)
        .select("key")
        .distinct()
    )
    spark = events.sparkSession
    sketch_class = spark._jvm.org.apache.spark.util.sketch.CountMinSketch  # type: ignore[union-attr]
    merged = None
    size, panes = 0, 0
    for row in sketches.toLocalIterator():  # one sketch per pane, fixed size
        sketch = sketch_class.readFrom(bytearray(row["cms"]))
        merged = sketch if merged is None else merged.mergeInPlace(sketch)
        size, panes = len(row["cms"]), panes + 1
    keys = [r["key"] for r in top.collect()]  # at most candidates × panes
    if merged is None:
        return HeavyHitters(name, [], 0, 0, confidence, eps, 0, 0, 0)
    total = int(merged.totalCount())
    bound = int(-(-eps * total // 1))
    estimates = sorted(
        ((int(merged.estimateCount(k_)), k_) for k_ in keys), key=lambda e: (-e[0], e[1])
    )
    items = [HeavyHitter(k_, n, max(0, n - bound)) for n, k_ in estimates[:k]]
    return HeavyHitters(name, items, total, bound, confidence, eps, panes, len(keys), size)
