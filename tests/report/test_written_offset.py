"""The report's calendar day reads each line's written UTC offset; its fast form (one cast of
the time text's last five characters) must agree with the regular expression it stands in for."""

from __future__ import annotations

from pyspark.sql import functions as F

from logstream.report.views import _written_offset_seconds

TEXTS = [
    "09/Jul/1995:00:00:01 -0400",
    "09/Jul/1995:00:00:01 +0000",
    "09/Jul/1995:00:00:01 -0000",
    "09/Jul/1995:23:59:59 +0530",
    "09/Jul/1995:23:59:59 -0930",
    "09/Jul/1995:23:59:59 +1800",
    "09/Jul/1995:23:59:59 -1800",
    "09/Jul/1995:23:59:59 +1801",  # past ZoneOffset's range: none
    "09/Jul/1995:23:59:59 +9900",
    "09/Jul/1995:23:59:59 +0560",  # 60 minutes: none
    "09/Jul/1995:23:59:59 +05:30",  # a colon: the regular expression's form
    "1995-07-09T12:00:00.123+02:00",
    "1995-07-09T12:00:00Z",
    "1995-07-09 12:00:00",
    "12:00:00 +05.3",
    "12:00:00 +053 ",
    "x",
    "",
]


def test_the_fast_form_reads_every_offset_as_the_regular_expression_does(spark):
    texts = spark.createDataFrame([(t,) for t in TEXTS], "t string")
    rows = texts.select(
        "t",
        _written_offset_seconds(F.col("t"), fast=True).alias("fast"),
        _written_offset_seconds(F.col("t"), fast=False).alias("slow"),
    ).collect()
    by_text = {r.t: (r.fast, r.slow) for r in rows}
    fast = {t: f for t, (f, _) in by_text.items()}
    assert fast == {t: s for t, (_, s) in by_text.items()}
    assert by_text["09/Jul/1995:00:00:01 -0400"][0] == -4 * 3600
    assert by_text["09/Jul/1995:23:59:59 +0530"][0] == 5 * 3600 + 30 * 60
    assert by_text["09/Jul/1995:23:59:59 -0930"][0] == -(9 * 3600 + 30 * 60)
    assert by_text["09/Jul/1995:23:59:59 -1800"][0] == -18 * 3600
    assert by_text["09/Jul/1995:23:59:59 +9900"][0] == 0
    assert by_text["1995-07-09T12:00:00.123+02:00"][0] == 7200
