"""The Spark parser on the real logs, checked line by line against the plain-Python oracle."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F
from tests import oracle
from tests.conftest import OPENDAP, data_file

from logstream.parsing import REASON_COLUMN, compile_format, events, parse, quarantine
from logstream.parsing.parser import LONG_LINE_KEPT, MAX_LINE_BYTES
from logstream.schema import EVENT_SCHEMA, QUARANTINE_REASONS, QUARANTINE_SCHEMA
from logstream.sources import read_lines

FIELDS = (
    "client_host",
    "method",
    "url_path",
    "query_string",
    "protocol",
    "status",
    "bytes_sent",
    "referrer",
    "user_agent",
)


def spark_rows(spark, path, fmt_name):
    parsed = parse(read_lines(spark, [path]), compile_format(fmt_name))
    ev = events(parsed).select(F.unix_seconds("event_time").alias("epoch"), *FIELDS).collect()
    return parsed, ev


def oracle_rows(path):
    refs, bad = oracle.parse_file(path)
    return [(r.epoch, *(getattr(r, f) for f in FIELDS)) for r in refs], bad


@pytest.mark.parametrize(
    ("fixture", "fmt"),
    [("nasa_day", "common"), ("combined_log", "combined"), ("crlf_log", "common")],
)
def test_every_line_parses_to_the_same_fields_as_the_oracle(spark, request, fixture, fmt):
    path = request.getfixturevalue(fixture)
    parsed, ev = spark_rows(spark, path, fmt)
    expected, oracle_bad = oracle_rows(path)
    assert oracle_bad == []
    assert sorted(tuple(r) for r in ev) == sorted(expected)
    assert quarantine(parsed).count() == 0


def test_nasa_day_has_35272_events_spanning_the_whole_local_day(spark, nasa_day):
    ev = events(parse(read_lines(spark, [nasa_day]), compile_format("common")))
    row = ev.agg(
        F.count("*").alias("n"),
        F.unix_seconds(F.min("event_time")).alias("lo"),
        F.unix_seconds(F.max("event_time")).alias("hi"),
    ).first()
    assert row.n == 35272
    # -0400 local midnight is 04:00 UTC: the instant honours the line's own offset.
    assert row.lo == datetime(1995, 7, 9, 4, 0, 0, tzinfo=UTC).timestamp()
    assert row.hi == datetime(1995, 7, 10, 3, 59, 59, tzinfo=UTC).timestamp()


def test_crlf_log_with_minus_0800_offset_parses_to_utc(spark, crlf_log):
    ev = events(parse(read_lines(spark, [crlf_log]), compile_format("common")))
    first = ev.orderBy("event_time").select(F.unix_seconds("event_time").alias("s")).first()
    assert first.s == int(datetime(2004, 3, 8, 0, 5, 49, tzinfo=UTC).timestamp())
    assert ev.where(F.col("bytes_sent").isNull() | F.col("url_path").contains("\r")).count() == 0


def test_combined_sample_populates_referrer_and_user_agent(spark, combined_log):
    ev = events(parse(read_lines(spark, [combined_log]), compile_format("combined")))
    counts = ev.agg(
        F.count("*").alias("n"), F.count("referrer").alias("ref"), F.count("user_agent").alias("ua")
    ).first()
    refs, _ = oracle.parse_file(combined_log)
    assert counts.n == 10000
    assert counts.ref == sum(r.referrer is not None for r in refs) == 5927
    assert counts.ua == sum(r.user_agent is not None for r in refs) == 9810
    truncated = ev.where(F.col("user_agent").endswith("google.com/bot.html")).collect()
    assert len(truncated) == 1 and truncated[0].url_path == "/scripts/grok-py-test/configlib.py"


def test_quirky_lines_parse_and_garbage_is_quarantined_with_reasons(spark, tmp_path):
    raw = (
        b'h1.example.com - - [09/Jul/1995:00:00:00 -0400] "GET /caf\xe9.html HTTP/1.0" 200 12\r\n'
        b'10.0.0.1 - - [09/Jul/1995:00:00:01 -0400] "GET /" 200 -\n'
        b'2001:db8::1 - frank [09/Jul/1995:00:00:02 -0400] "-" 408 -\n'
        b"this is not a log line\n"
        b"\n"
        b'h2 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 2x0 12\n'
        b'h3 - - [99/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 200 12\n'
        b'h4 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 200 1.5\n'
        b'h5 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 999 1\n'
        b'h6 - - [09/Jul/1995:00:00:03 -0400] "GET /\x01 HTTP/1.0" 200 1\n'
        b'h7 - - [09/Jul/1995:00:00:03 -0400] "GET /a\x00b HTTP/1.0" 200 1\n'
    )
    path = tmp_path / "quirks.log"
    path.write_bytes(raw)
    parsed = parse(read_lines(spark, [path]), compile_format("common"))
    ev = {r.client_host: r for r in events(parsed).collect()}
    assert ev["h1.example.com"].url_path == "/caf\ufffd.html"
    assert (ev["10.0.0.1"].url_path, ev["10.0.0.1"].protocol, ev["10.0.0.1"].bytes_sent) == (
        "/",
        None,
        0,
    )
    assert (ev["2001:db8::1"].user, ev["2001:db8::1"].method, ev["2001:db8::1"].status) == (
        "frank",
        None,
        408,
    )
    bad = {r.raw_line: r.reason for r in quarantine(parsed).collect()}
    assert bad == {
        "this is not a log line": "format_mismatch",
        "": "empty_line",
        'h2 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 2x0 12': "bad_status",
        'h3 - - [99/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 200 12': "bad_timestamp",
        'h4 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 200 1.5': "bad_bytes",
        'h5 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 999 1': "bad_status",
        'h6 - - [09/Jul/1995:00:00:03 -0400] "GET /\x01 HTTP/1.0" 200 1': "control_character",
        'h7 - - [09/Jul/1995:00:00:03 -0400] "GET /a\x00b HTTP/1.0" 200 1': "control_character",
    }
    assert set(bad.values()) <= set(QUARANTINE_REASONS)
    assert all(r.source_file.endswith("quirks.log") for r in quarantine(parsed).collect())


def test_outputs_have_the_canonical_schemas(spark, tmp_path):
    path = tmp_path / "one.log"
    path.write_text('h - - [09/Jul/1995:00:00:00 -0400] "GET / HTTP/1.0" 200 1\nx\n')
    parsed = parse(read_lines(spark, [path]), compile_format("common"))
    assert [(f.name, f.dataType) for f in events(parsed).schema] == [
        (f.name, f.dataType) for f in EVENT_SCHEMA
    ]
    assert [(f.name, f.dataType) for f in quarantine(parsed).schema] == [
        (f.name, f.dataType) for f in QUARANTINE_SCHEMA
    ]


def test_custom_data_server_format_parses_its_sample(spark, tmp_path):
    src = data_file(OPENDAP)
    sample = tmp_path / "opendap.txt"
    with gzip.open(src, "rt") as fh:
        sample.write_text("".join(next(fh) for _ in range(500)))
    fmt = compile_format(
        "%{%Y-%m-%d %I:%M%p}t|&|%u|&|%{product}n|&|%{version}n|&|%{a}n|&|%{b}n|&|%U%q|&|%>s|&|%b"
    )
    parsed = parse(read_lines(spark, [sample]), fmt)
    ev = events(parsed)
    assert ev.count() + quarantine(parsed).count() == 500
    first = ev.orderBy("event_time").withColumn("s", F.unix_seconds("event_time")).first()
    # no offset in the line: the time is read as UTC (the session time zone)
    assert first.s == datetime(2015, 2, 15, 5, 11, tzinfo=UTC).timestamp()
    assert first.user == "0b3a0a4591c506cfecc8d53de6df54b52a68c9a3"
    assert first.url_path == "/opendap/hyrax/ASTGTM.002/ASTGTM.002_N60W133_dem.nc.dods"
    assert first.client_host is None


def test_huge_fields_parse_without_failing_the_job(spark):
    """Java's regex engine recurses per group iteration: a scanner's 200 KB request or user
    agent must neither overflow the stack nor fail the job."""
    long_path = "/" + "a" * 200_000
    long_agent = "Mozilla/5.0 " + 'x\\"y ' * 40_000
    lines = [
        f'h1 - - [09/Jul/1995:00:00:00 -0400] "GET {long_path} HTTP/1.0" 200 5 "-" "{long_agent}"',
        'h2 - - [09/Jul/1995:00:00:00 -0400] "GET /x '
        + "junk " * 50_000
        + 'HTTP/1.1" 200 5 "-" "-"',
        'h3 - - [09/Jul/1995:00:00:00 -0400] "' + '\\"' * 100_000 + '" 400 5 "-" "-"',
    ]
    frame = spark.createDataFrame(
        [(line, "mem") for line in lines], "value string, source_file string"
    )
    parsed = parse(frame, compile_format("combined"), max_line_bytes=None)  # no bound here
    rows = {r.client_host: r for r in events(parsed).collect()}
    assert rows["h1"].url_path == long_path and rows["h1"].user_agent.startswith("Mozilla/5.0 x")
    assert rows["h1"].protocol == "HTTP/1.0"
    assert rows["h2"].url_path == "/x" and rows["h2"].protocol is None  # too many skipped words
    assert rows["h3"].method is None and rows["h3"].status == 400


def test_a_line_longer_than_the_bound_is_quarantined_with_its_start(spark):
    line = 'h{} - - [09/Jul/1995:00:00:00 -0400] "GET /{} HTTP/1.0" 200 5'
    at_bound = line.format(1, "")
    at_bound = line.format(1, "a" * (MAX_LINE_BYTES - len(at_bound)))  # 65,536 bytes: parsed
    multibyte = line.format(2, "é" * (MAX_LINE_BYTES // 2))  # 32,768 characters, 65,580 bytes
    huge = line.format(3, "b" * 3_000_000)
    frame = spark.createDataFrame(
        [(v, "mem") for v in (at_bound, multibyte, huge)], "value string, source_file string"
    )
    rows = parse(frame, compile_format("common")).collect()
    assert len(at_bound.encode()) == MAX_LINE_BYTES
    assert [r.quarantine_reason for r in rows] == [None, "line_too_long", "line_too_long"]
    assert rows[0].url_path == "/" + "a" * (MAX_LINE_BYTES - len(line.format(1, "")))
    assert rows[1].raw_line == multibyte[:LONG_LINE_KEPT]  # characters, not bytes
    assert rows[2].raw_line == huge[:LONG_LINE_KEPT] and rows[2].event_time is None
    assert rows[2].source_file == "mem"


def _rewrites_per_line(frame) -> int:
    """How many times the executed plan evaluates the format's regular-expression rewrite:
    one node's project holds it twice (the match test and the split share it, one
    subexpression), so a plan that parses each line once has exactly 2."""
    return frame._jdf.queryExecution().executedPlan().toString().count("regexp_replace(")


def test_events_and_quarantine_parse_each_line_once_whatever_filter_follows(spark, nasa_day):
    # Spark pushes a filter below the projection it reads, copying every typed field's
    # expression (and so the regular expression) into it: events() once ran it 5 times a line
    from logstream.rules.stream import alert_stream

    lines = read_lines(spark, [nasa_day])
    parsed = parse(lines, compile_format("common"))
    assert _rewrites_per_line(parsed) == 2
    assert _rewrites_per_line(events(parsed)) == 2
    assert _rewrites_per_line(quarantine(parsed)) == 2
    assert _rewrites_per_line(events(parsed).where(F.col("status") == 404)) == 2
    assert _rewrites_per_line(alert_stream(lines.select("value"), compile_format("common"))) == 2
    # and the fence keeps every row and value: the day's 404s counted both ways
    plain = parsed.where(F.col("quarantine_reason").isNull() & (F.col("status") == 404)).count()
    assert events(parsed).where(F.col("status") == 404).count() == plain == 348


def test_the_fence_keeps_columns_whose_names_hold_dots_or_backticks(spark):
    from logstream.parsing import fenced

    frame = spark.createDataFrame([(1, "a", 2.5)], "`a.b` int, `c``d` string, e double")
    out = fenced(frame)
    assert out.schema == frame.schema
    assert out.collect() == frame.collect()


SEPARATOR_LINES = {
    "common": 'h - frank [09/Jul/1995:00:00:03 -0400] "GET /a.html?q=1 HTTP/1.0" 200 12',
    "combined": 'h - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.1" 200 1 "http://r/" "Moz 5"',
    "vcombined": 'v.example:80 h - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.1" 200 1 "-" "UA"',
    "nginx": '1.2.3.4 - - [09/Jul/1995:00:00:03 +0000] "POST /x HTTP/2.0" 201 0 "-" "curl/8"',
    "nasa-tsv": "h\t-\t804571201\tGET\t/a.gif?x\t200\t15",
    '%h [%{%Y-%m-%d %H:%M:%S}t] %>s %b "%{User-Agent}i"': 'h [1995-07-09 00:00:03] 200 1 "UA"',
}


@pytest.mark.parametrize("name", sorted(SEPARATOR_LINES))
def test_a_line_holding_the_parser_s_separator_is_never_an_event(spark, name):
    """U+0001 (the separator the parse splits a rewritten line by) at any place of a line of
    every named format, before, in and after each field: quarantined as control_character,
    never an event with shifted fields; the line without it is an event."""
    from logstream.parsing.parser import _SEP

    fmt = compile_format(name)
    line = SEPARATOR_LINES[name]
    variants = [line[:i] + _SEP + line[i:] for i in range(len(line) + 1)]
    variants += [line[:i] + _SEP + line[i + 1 :] for i in range(len(line))]
    lines = spark.createDataFrame(
        [(v, "s") for v in [line, *variants]], "value string, source_file string"
    )
    parsed = parse(lines, fmt).select("raw_line", REASON_COLUMN).collect()
    reasons = {r.raw_line: r[REASON_COLUMN] for r in parsed}
    assert reasons.pop(line) is None
    assert set(reasons.values()) == {"control_character"}, name
    assert len(reasons) == len(set(variants))
