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


def test_the_parse_reads_an_event_s_offset_as_the_regular_expression_does(spark, nasa_day):
    """With the Common Log Format's time, the parse keeps each event's offset (its time's
    last word): equal to the regular expression's on every event of the real NASA day and
    of lines written in other offsets; a time the pattern refuses is no event."""
    from logstream.parsing import REASON_COLUMN, compile_format, parse
    from logstream.parsing.parser import TIME_TEXT_COLUMN, WRITTEN_OFFSET_COLUMN
    from logstream.sources import read_lines

    written = [
        f'h - - [09/Jul/1995:23:59:59 {offset}] "GET / HTTP/1.0" 200 1'
        for offset in ("+0530", "-0930", "+1800", "-1800", "-0000", "+1801", "+0560", "+05:30")
    ]
    lines = read_lines(spark, [nasa_day]).unionByName(
        spark.createDataFrame([(w, "written") for w in written], "value string, source_file string")
    )
    parsed = parse(lines, compile_format("common"), time_text=True)
    parsed = parsed.where(F.col(REASON_COLUMN).isNull())  # the events
    slow = _written_offset_seconds(F.col(TIME_TEXT_COLUMN), fast=False)
    rows = parsed.select(
        TIME_TEXT_COLUMN, F.col(WRITTEN_OFFSET_COLUMN).alias("parsed"), slow.alias("slow")
    )
    assert rows.where(~F.col("parsed").eqNullSafe(F.col("slow"))).count() == 0
    assert rows.count() == 35_272 + 5  # three offsets past ±18:00 or written with a colon
    found = {
        r[0][-5:]: r.parsed for r in rows.where("time_text like '09/Jul/1995:23:59:59 %'").collect()
    }
    assert found["+0530"] == 19_800 and found["-0930"] == -34_200 and found["-0000"] == 0
    assert {r.parsed for r in rows.where("time_text like '09/Jul/1995:0%'").collect()} == {-14_400}


def test_only_the_common_log_format_s_time_gets_the_parse_s_offset(spark):
    from logstream.parsing import compile_format, parse
    from logstream.parsing.parser import WRITTEN_OFFSET_COLUMN

    lines = spark.createDataFrame([("x", "s")], "value string, source_file string")
    assert WRITTEN_OFFSET_COLUMN in parse(lines, compile_format("common"), time_text=True).columns
    assert WRITTEN_OFFSET_COLUMN not in parse(lines, compile_format("common")).columns
    iso = compile_format('%h %l %u [%{%Y-%m-%dT%H:%M:%S%z}t] "%r" %>s %b')
    assert WRITTEN_OFFSET_COLUMN not in parse(lines, iso, time_text=True).columns
