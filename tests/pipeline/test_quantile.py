"""The in-batch rule (:func:`logstream.pipeline.ingest.watermark.ahead_bound_ms`): a gap of more
than the watermark delay above the 99.9th percentile of a micro-batch's event times, the same
on the Spark steps (a top-``m`` of the event times) as on the driver (numpy)."""

from __future__ import annotations

import random
import re
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.watermark import (
    AHEAD_QUANTILE,
    _ahead_bound,
    _counts,
    ahead_bound_ms,
    quantile_index,
)

DELAY_MS = 600_000  # the default watermark delay
_CLF_TIME = re.compile(rb"\[(\d\d/\w\w\w/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]")


def _frame(spark, times_ms):
    table = pd.DataFrame({"t": np.asarray(times_ms, dtype="int64")})
    return spark.createDataFrame(table).select(
        F.timestamp_millis("t").alias("event_time"),
        F.lit(None).cast("string").alias(REASON_COLUMN),
    )


def _spark_bound(spark, times_ms):
    parsed = _frame(spark, times_ms)
    is_event = F.col(REASON_COLUMN).isNull()
    counts = _counts(parsed, is_event, F.lit(False))
    return _ahead_bound(parsed, is_event, len(times_ms), counts, DELAY_MS)


def _driver_bound(times_ms):
    times = np.asarray(times_ms, dtype="int64")
    k = quantile_index(len(times))
    return ahead_bound_ms(np.sort(np.partition(times, k)[k:]), DELAY_MS)


@pytest.fixture(scope="module")
def nasa_times_ms(nasa_day) -> np.ndarray:
    """The event times of the real NASA day (1995-07-09), epoch ms."""
    import gzip

    opener = gzip.open if nasa_day.suffix == ".gz" else open
    with opener(nasa_day, "rb") as f:
        found = [_CLF_TIME.search(line) for line in f]
    stamps = [datetime.strptime(m[1].decode(), "%d/%b/%Y:%H:%M:%S %z") for m in found if m]
    return np.array([int(s.timestamp() * 1000) for s in stamps], dtype="int64")


def test_a_backfills_last_minutes_are_not_ahead_of_it(spark, nasa_times_ms):
    """Ten NASA days in one micro-batch: their newest 0.1 % (353 events) span more than the
    watermark delay of the last night, and none of them is ahead of the batch."""
    days = np.concatenate([nasa_times_ms + d * 86_400_000 for d in range(10)])
    top = np.sort(days)[quantile_index(len(days)) :]
    assert top[-1] - top[0] > DELAY_MS  # the quantile's distance alone would cut the night
    assert _driver_bound(days) is None
    assert _spark_bound(spark, days) is None


def test_a_line_a_year_ahead_is_bounded_below_its_gap(spark, nasa_times_ms):
    ahead = nasa_times_ms.max() + 366 * 86_400_000
    times = np.append(nasa_times_ms, ahead)
    assert _driver_bound(times) == _spark_bound(spark, times) == nasa_times_ms.max()


@pytest.mark.parametrize("n", [2, 999, 1000, 1001, 2_500, 12_345])
def test_the_spark_steps_find_the_drivers_bound(spark, n):
    rng = random.Random(n)
    # ties (many events in one second), and a few lines days ahead
    times = [rng.randrange(0, 3_600) * 1000 for _ in range(n - n // 500)]
    times += [86_400_000 * rng.randrange(2, 400) for _ in range(n // 500)]
    got = _spark_bound(spark, times)
    assert got == _driver_bound(times)
    quantile = (
        _frame(spark, times)
        .agg(
            F.expr(
                f"percentile_disc({AHEAD_QUANTILE}) WITHIN GROUP (ORDER BY unix_millis(event_time))"
            )
        )
        .first()[0]
    )
    assert quantile == sorted(times)[quantile_index(n)]  # the rule's quantile is Spark's
    assert got is None or got in times


def test_the_gap_must_be_more_than_the_delay(spark):
    bulk = list(range(0, 1_000_000, 1_000))  # 1,000 events, one a second
    for ahead, bound in ((bulk[-1] + DELAY_MS, None), (bulk[-1] + DELAY_MS + 1, bulk[-1])):
        assert _spark_bound(spark, [*bulk, ahead]) == _driver_bound([*bulk, ahead]) == bound
    assert _spark_bound(spark, bulk[:2]) is None  # the quantile is the newest: nothing above
