"""New and returning visitors per day with Bloom filters: bounded state, no false negative.

A visitor (client host and user agent) is *returning* on a day when it was seen on an earlier
day, else *new*. The exact count keeps every visitor's first day: state that grows with the
visitors. This one keeps one Bloom filter per day, of fixed size (``expected`` visitors at
the false-positive rate ``fpp``; ``rbloom``, a kept Rust library), whatever the number of
visitors (the book's Part IV, approximation algorithms; B. H. Bloom, "Space/time trade-offs in
hash coding with allowable errors", CACM 13(7), 1970):

1. one job builds each day's filter of its distinct visitors (a 64-bit ``xxhash64`` of host
   and user agent per visitor, ``groupBy(day).applyInPandas``);
2. the driver ORs them, in day order, into the filter of every day before each day;
3. one job tests each day's visitors against the filter of the days before it.

A Bloom filter has no false negative: a returning visitor is always counted as returning.
A new visitor is counted as returning with probability about ``fpp`` while the filters hold
at most ``expected`` visitors, so ``returning`` may exceed the exact count, never fall below
it; the expected excess is ``fpp × new``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

if TYPE_CHECKING:
    import pandas as pd
    from rbloom import Bloom

__all__ = ["DayVisitors", "returning_visitors"]


@dataclass(frozen=True)
class DayVisitors:
    """One UTC day's distinct visitors, new and returning."""

    day: str  #: ``yyyy-MM-dd``
    visitors: int
    returning: int  #: seen on an earlier day (Bloom filter: may exceed the exact count)
    new: int  #: ``visitors − returning``


def _identity(value: int) -> int:
    """The Bloom filters' hash: the visitor's ``xxhash64``, already a hash."""
    return value


def _filter(expected: int, fpp: float) -> Bloom:
    from rbloom import Bloom

    return Bloom(expected, fpp, hash_func=_identity)


def returning_visitors(
    events: DataFrame, expected: int = 1_000_000, fpp: float = 0.01
) -> list[DayVisitors]:
    """New and returning visitors per UTC day, from one Bloom filter per day.

    Parameters
    ----------
    events : DataFrame
        Batch DataFrame with ``event_time`` (timestamp), ``client_host`` and ``user_agent``
        (strings; a null user agent is ``-``).
    expected : int
        Distinct visitors the filters are sized for (over the whole span): each is
        ``−expected × ln(fpp) / ln(2)²`` bits (1.2 MB for the defaults).
    fpp : float
        The false-positive rate at ``expected`` visitors, in (0, 1).

    Returns
    -------
    list of DayVisitors
        One per day with events, oldest first.

    Raises
    ------
    ValueError
        When ``expected`` is below 1 or ``fpp`` outside (0, 1).
    """
    if expected < 1 or not 0 < fpp < 1:
        raise ValueError(
            f"returning_visitors: expected={expected} must be ≥ 1, fpp={fpp} in (0, 1)"
        )
    visitor = F.xxhash64(F.col("client_host"), F.coalesce(F.col("user_agent"), F.lit("-")))
    days = events.select(
        F.date_format("event_time", "yyyy-MM-dd").alias("day"), visitor.alias("v")
    ).distinct()

    def build(frame: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        bloom = _filter(expected, fpp)
        bloom.update(int(v) for v in frame["v"])
        return pd.DataFrame({"day": [frame["day"].iloc[0]], "filter": [bloom.save_bytes()]})

    built = days.groupBy("day").applyInPandas(build, "day string, filter binary")
    filters = {r["day"]: bytes(r["filter"]) for r in built.toLocalIterator()}  # one per day
    before: dict[str, bytes] = {}
    seen = _filter(expected, fpp)
    for day in sorted(filters):
        before[day] = seen.save_bytes()
        seen |= _load(filters[day])
    shared = events.sparkSession.sparkContext.broadcast(before)

    def test(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd

        loaded: dict[str, Bloom] = {}
        for frame in frames:
            counts: dict[str, list[int]] = {}
            for day, v in zip(frame["day"], frame["v"], strict=True):
                bloom = loaded.get(day)
                if bloom is None:
                    bloom = loaded[day] = _load(shared.value[day])
                sums = counts.setdefault(day, [0, 0])
                sums[0] += 1
                sums[1] += int(v) in bloom
            yield pd.DataFrame(
                {
                    "day": list(counts),
                    "visitors": [c[0] for c in counts.values()],
                    "returning": [c[1] for c in counts.values()],
                }
            )

    tested = (
        days.mapInPandas(test, "day string, visitors long, returning long")
        .groupBy("day")
        .agg(F.sum("visitors").alias("visitors"), F.sum("returning").alias("returning"))
        .orderBy("day")
        .collect()
    )
    shared.unpersist()
    return [
        DayVisitors(r["day"], int(r["visitors"]), int(r["returning"]),
                    int(r["visitors"]) - int(r["returning"]))
        for r in tested
    ]  # fmt: skip


def _load(data: bytes) -> Bloom:
    from rbloom import Bloom

    return Bloom.load_bytes(data, _identity)
