"""Comparisons with a micro-batch's bound: exact, and the same generated code for every bound."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from logstream.analytics.bounds import above, at_most

# epoch microseconds from 1900 to 2200, and the values next to a bound
_MICROS = st.integers(min_value=-2_208_988_800_000_000, max_value=7_258_118_400_000_000)


@settings(max_examples=25, deadline=None)
@given(
    bound=_MICROS,
    offsets=st.lists(st.integers(-3, 3), min_size=1, max_size=7),
    inline=st.booleans(),
)
def test_bounds_compare_exactly_like_the_long_comparison(spark, bound, offsets, inline):
    values = [bound + d for d in offsets] + [None]
    df = spark.createDataFrame([(v,) for v in values], "v bigint")
    got = df.select(
        "v",
        at_most(F.col("v"), bound, inline).alias("le"),
        above(F.col("v"), bound, inline).alias("gt"),
    ).collect()
    assert [(r.v, r.le, r.gt) for r in got] == [
        (v, None if v is None else v <= bound, None if v is None else v > bound) for v in values
    ]


def _generated_code(frame) -> str:
    """The Java source of ``frame``'s whole-stage code generation (the plan above it, which
    names the literals, left out)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frame.explain(mode="codegen")
    source = [line for line in out.getvalue().splitlines() if line.startswith("/* ")]
    assert source, out.getvalue()
    return "\n".join(source)


def test_a_new_bound_generates_the_same_code(spark):
    """Spark caches compiled classes by their source: a bound written into the source as a
    ``long`` literal (the plain comparison) makes a new class for every micro-batch."""
    df = spark.range(1000).select((F.col("id") * 60_000 + 1_751_320_800_000).alias("end_ms"))
    first, second = 1_751_320_800_000 + 60_000 * 7, 1_751_320_800_000 + 60_000 * 8

    def code(condition):
        return _generated_code(df.where(condition))

    assert code(at_most(F.col("end_ms"), first)) == code(at_most(F.col("end_ms"), second))
    assert code(above(F.col("end_ms"), first)) == code(above(F.col("end_ms"), second))
    assert str(first) not in code(at_most(F.col("end_ms"), first))
    # the plain comparison (inline, for a large micro-batch): the bound is in the source
    assert code(F.col("end_ms") <= first) != code(F.col("end_ms") <= second)
    assert code(at_most(F.col("end_ms"), first, inline=True)) == code(F.col("end_ms") <= first)
    assert code(above(F.col("end_ms"), first, inline=True)) == code(F.col("end_ms") > first)
    assert df.where(at_most(F.col("end_ms"), first)).count() == 8
    assert df.where(above(F.col("end_ms"), second)).count() == 1000 - 9
