"""The in-batch rule's quantile on the Spark steps (a top-``m`` of the event times) is the one
``percentile_disc`` picks, and the one the driver's steps pick (``quantile_index``)."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import functions as F

from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.watermark import (
    AHEAD_QUANTILE,
    _counts,
    _quantile_ms,
    quantile_index,
)


@pytest.mark.parametrize("n", [2, 999, 1000, 1001, 2_500, 12_345])
def test_the_top_m_quantile_is_percentile_disc(spark, n):
    rng = random.Random(n)
    # ties (many events in one second) and a few lines far ahead, as in a log
    times = [rng.randrange(0, 3_600) * 1000 for _ in range(n - n // 500)]
    times += [86_400_000 * rng.randrange(2, 400) for _ in range(n // 500)]
    rows = [(t, None) for t in times] + [(None, "format_mismatch")] * 7
    parsed = spark.createDataFrame(rows, f"t long, {REASON_COLUMN} string").select(
        F.timestamp_millis("t").alias("event_time"), REASON_COLUMN
    )
    is_event = F.col(REASON_COLUMN).isNull()
    counts = _counts(parsed, is_event, F.lit(False))
    got = _quantile_ms(parsed, is_event, n, counts, watermark_ms=1)
    want = (
        parsed.where(is_event)
        .agg(
            F.expr(
                f"percentile_disc({AHEAD_QUANTILE}) WITHIN GROUP (ORDER BY unix_millis(event_time))"
            ).alias("q")
        )
        .first()["q"]
    )
    assert got == want == sorted(times)[quantile_index(n)]


def test_no_quantile_when_no_event_can_be_far_ahead(spark):
    parsed = spark.createDataFrame([(1_000,), (2_000,)], "t long").select(
        F.timestamp_millis("t").alias("event_time"), F.lit(None).cast("string").alias(REASON_COLUMN)
    )
    is_event = F.col(REASON_COLUMN).isNull()
    counts = _counts(parsed, is_event, F.lit(False))
    assert _quantile_ms(parsed, is_event, 2, counts, watermark_ms=1_000) is None
    assert _quantile_ms(parsed, is_event, 2, counts, watermark_ms=999) == 2_000
