"""Web-log analytics on DStreams: with ``queueStream`` and one RDD per event-minute of the real
NASA day, the DStream counts equal the batch report, and every window of trending pages equals
an independent count over its minutes."""

from __future__ import annotations

import gzip
import sqlite3
from collections import Counter
from itertools import groupby

import pytest

from logstream.analytics.pages import is_content_path
from logstream.dstream import DStreamSettings, build_weblog_streams, streaming_context
from logstream.dstream.weblog import (
    DSTREAM_QUERY,
    TRENDING_QUERY,
    _update_host,
    parse_line,
    read_listed_hosts,
)
from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.sources import read_lines

#: 8 minutes (221 lines) in windows of 3: the first two windows fill up, the last five slide a
#: minute out (the inverse function's case)
MINUTES = 8
WINDOW = 3  # batches (= event-minutes here)
TOP = 10


def ledger_count(db, query: str) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            if query == DSTREAM_QUERY:  # status classes: keyed by batch time and fingerprint
                return conn.execute("SELECT COUNT(*) FROM dstream_batches").fetchone()[0]
            sql = "SELECT COUNT(*) FROM ledger WHERE query = ?"
            return conn.execute(sql, (query,)).fetchone()[0]
    except sqlite3.Error:
        return 0


def test_dstream_counts_equal_the_batch_report_and_independent_windows(spark, nasa_day, tmp_path):
    with gzip.open(nasa_day, "rt", encoding="utf-8", errors="replace") as fh:
        lines = [line.rstrip("\n") for line in fh]
    minute = lambda line: line[line.index("[") + 1 : line.index("[") + 18]  # noqa: E731
    by_minute = [list(g) for _, g in groupby(lines, key=minute)][:MINUTES]
    assert len(by_minute) == MINUTES and all(by_minute)
    # one line that does not parse: the accumulator must count it once, however many streams
    # read the batch
    by_minute[0].append("this is not an access-log line")
    day_part = tmp_path / "first-minutes.log"
    day_part.write_text("".join(line + "\n" for m in by_minute for line in m))

    sc = spark.sparkContext
    batch_s = 0.25
    fmt = compile_format("common")
    rx = fmt.python_regex
    parsed = (parse_line(x, rx, fmt.fields) for m in by_minute for x in m)
    requests = [r for r in parsed if r is not None]
    hosts_seen = Counter(r[0] for r in requests)
    listed = (*[h for h, _ in hosts_seen.most_common(3)], "not-in-the-log.example")
    settings = DStreamSettings(
        batch_s=batch_s, window_s=WINDOW * batch_s, slide_s=batch_s, top=TOP, listed_hosts=listed
    )
    db = tmp_path / "store.db"
    ssc = streaming_context(sc, batch_s)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    queue = [sc.parallelize(m, 2) for m in by_minute]
    build_weblog_streams(ssc.queueStream(queue), settings, db)
    ssc.start()
    try:
        for _ in range(1200):  # up to 10 minutes
            if ledger_count(db, DSTREAM_QUERY) >= MINUTES + 1:
                break
            ssc.awaitTerminationOrTimeout(0.5)
        else:
            pytest.fail("the DStream batches did not all complete")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)

    parsed = parse(read_lines(spark, [day_part]), compile_format("common"))
    report = build_report(parsed, panels=())  # the totals, status classes and hosts
    with sqlite3.connect(db) as conn:
        batches = conn.execute("SELECT batch_time FROM dstream_batches ORDER BY batch_time")
        times = [r[0] for r in batches.fetchall()][:MINUTES]
        status = dict(
            conn.execute(
                "SELECT status_class, SUM(requests) FROM dstream_status GROUP BY status_class"
            ).fetchall()
        )
        hosts = dict(conn.execute("SELECT client_host, requests FROM dstream_hosts").fetchall())
        trending = {
            t: [(p, n) for _, p, n in rows]
            for t, rows in groupby(
                conn.execute(
                    "SELECT batch_time, url_path, requests FROM dstream_trending "
                    "ORDER BY batch_time, requests DESC, url_path"
                ).fetchall(),
                key=lambda r: r[0],
            )
        }
        unparseable, in_list = conn.execute(
            "SELECT MAX(unparseable_total), SUM(listed_requests) FROM dstream_batches"
        ).fetchone()
        reasons = conn.execute(
            "SELECT reason, MAX(lines_total) FROM dstream_quarantine GROUP BY reason"
        ).fetchall()
        examples = conn.execute("SELECT raw_line, reason FROM quarantine_examples").fetchall()

    # per-batch status classes summed = the batch report; every line parsed in both
    assert sum(status.values()) == report["general"]["valid_requests"] > 200
    assert status == report["status_classes"]
    assert unparseable == report["general"]["failed_requests"] == 1
    # issue 54 item 28: with its reason, as the batch report keeps it, and the line itself
    assert reasons == list(report["quarantine"]["reasons"].items()) == [("format_mismatch", 1)]
    assert examples == [("this is not an access-log line", "format_mismatch")]
    # updateStateByKey's running totals = the report's top hosts
    assert report["top_hosts"] and all(
        hosts[row["client_host"]] == row["requests"] for row in report["top_hosts"]
    )
    assert sum(hosts.values()) == report["general"]["valid_requests"]
    # the transform() join with the static list of hosts counts exactly their requests
    assert in_list == sum(hosts_seen[h] for h in listed) > 0
    # reduceByKeyAndWindow with the inverse function: each batch's window of WINDOW minutes
    # equals a count over those minutes' lines (the first windows hold fewer minutes)
    paths = [[r[1] for x in m if (r := parse_line(x, rx, fmt.fields))] for m in by_minute]
    pages = [Counter(p for p in m if is_content_path(p)) for m in paths]
    for i, t in enumerate(times):
        window = sum(pages[max(0, i - WINDOW + 1) : i + 1], Counter())
        expected = sorted(window.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
        assert trending[t] == expected, (i, t)
    assert ledger_count(db, TRENDING_QUERY) >= MINUTES


def test_a_host_list_skips_comments_and_blank_lines_and_must_not_be_empty(tmp_path):
    listed = tmp_path / "hosts.txt"
    listed.write_text("# crawlers\nbot.example  # seen daily\n\nbot.example\n10.0.0.1\n")
    assert read_listed_hosts(listed) == ("bot.example", "10.0.0.1")
    listed.write_text("# nothing\n")
    with pytest.raises(ValueError, match="has no host"):
        read_listed_hosts(listed)
    with pytest.raises(ValueError, match="cannot read"):
        read_listed_hosts(tmp_path / "missing.txt")


def test_an_idle_host_leaves_the_state_after_the_set_number_of_batches():
    state = _update_host([(1, 100), (1, 50)], None, idle=2)
    assert state == (2, 150, 0)
    state = _update_host([], state, idle=2)
    assert state == (2, 150, 1)
    assert _update_host([], state, idle=2) is None  # evicted: the state stays bounded
    assert _update_host([(1, 7)], (2, 150, 1), idle=2) == (3, 157, 0)


def test_parse_line_matches_the_batch_parser_on_real_lines(spark, nasa_day):
    fmt = compile_format("common")
    rx = fmt.python_regex
    with gzip.open(nasa_day, "rt", encoding="utf-8", errors="replace") as fh:
        sample = [next(fh).rstrip("\n") for _ in range(3000)]
    ours = [parse_line(x, rx, fmt.fields) for x in sample]
    frame = spark.createDataFrame([(x, "t") for x in sample], "value string, source_file string")
    theirs = [
        (r.client_host, r.url_path, r.status, r.bytes_sent or 0)
        for r in parse(frame, fmt).collect()
        if r.quarantine_reason is None
    ]
    assert sorted(o for o in ours if o is not None) == sorted(theirs)
    with pytest.raises(ValueError, match="multiple of the batch interval"):
        DStreamSettings(batch_s=1, window_s=2.5)


T = "09/Jul/1995:00:00:01 -0400"
#: Good and bad lines of every quarantine reason, and the time, status and size edges where a
#: hand-written parser could differ from Spark's (strict widths, case, ranges, casts).
EDGE_TIMES = [
    T, "bad date", "9/Jul/1995:00:00:01 -0400", "09/jul/1995:00:00:01 -0400",
    "09/JUL/1995:00:00:01 -0400", "31/Feb/1995:00:00:01 -0400", "29/Feb/1996:00:00:01 +0000",
    "29/Feb/1995:00:00:01 +0000", "09/Jul/19950:00:00:01 -0400", "09/Jul/995:00:00:01 -0400",
    "09/Jul/0000:00:00:01 +0000", "09/Jul/1995:24:00:01 -0400", "09/Jul/1995:00:00:60 -0400",
    "09/Jul/1995:00:00:01 -04", "09/Jul/1995:00:00:01 -04:00", "09/Jul/1995:00:00:01 +1900",
    "09/Jul/1995:00:00:01 +1800", "09/Jul/1995:00:00:01 -0460", "09/Jul/1995:00:00:01 Z",
    "09/Jul/1995:00:00:01  -0400", "09/July/1995:00:00:01 -0400", "09/Jul/1995:00:00:01",
    " 09/Jul/1995:00:00:01 -0400", "09/Jul/1995:00:00:01 -0400 ", "09/Jly/1995:00:00:01 -0400",
]  # fmt: skip
EDGE_STATUS = ["200", "+200", "0200", "200.0", "099", "100", "599", "600", "abc", "2_00",
               "99999999999"]  # fmt: skip
EDGE_BYTES = ["-", "+5", "0005", "5.0", "-5", "abc", "1e3", "5_0", "9223372036854775807",
              "99999999999999999999"]  # fmt: skip
EDGE_OTHER = [
    "", "   ", "\t", "garbage", "a\x01b", '1.2.3.4 - - [bad date] "GET / HTTP/1.0" 999 x',
    '1.2.3.4 - - [bad date] "GET / HTTP/1.0" 200 5',  # the line
    "a\x00b", '1.2.3.4 - - [09/Jul/1995:00:00:01 -0400] "GET /a\x00b HTTP/1.0" 200 5',
]  # fmt: skip


def edge_lines() -> list[str]:
    line = '1.2.3.4 - - [{t}] "GET /a.html?q=1 HTTP/1.0" {s} {b}'
    return [
        *(line.format(t=t, s=200, b=5) for t in EDGE_TIMES),
        *(line.format(t=T, s=s, b=5) for s in EDGE_STATUS),
        *(line.format(t=T, s=200, b=b) for b in EDGE_BYTES),
        *EDGE_OTHER,
    ]


@pytest.mark.parametrize(
    ("log_format", "extra"),
    [
        ("common", []),
        # a strftime time: 12-hour clock, two-digit year, day without leading zero
        ('%h [%{%e.%m.%y %I:%M:%S %p}t] "%r" %>s %b', [
            f'1.2.3.4 [{t}] "GET / HTTP/1.0" 200 5' for t in (
                " 9.07.95 01:02:03 PM", "19.07.95 12:02:03 am", "19.07.95 13:02:03 PM",
                "19.07.95 00:02:03 AM", "30.02.24 01:02:03 PM", "29.02.24 01:02:03 PM",
                "19.13.95 01:02:03 PM", "19.07.95 01:02:03 XM",
            )
        ]),
        # epoch seconds (the NASA TSV files: its header line is skipped, not quarantined)
        ("nasa-tsv", [
            "host\tlogname\ttime\tmethod\turl\tresponse\tbytes",
            "h\t-\t804571201\tGET\t/a.html\t200\t5", "h\t-\t804571201.5\tGET\t/\t200\t5",
            "h\t-\t99999999999999999999\tGET\t/\t200\t5", "h\t-\tsoon\tGET\t/\t200\t5",
            "h\t-\t804571201\tGET\t/\t700\t5", "h\t-\t804571201\tGET\t/\t200\t-1",
        ]),
    ],
)  # fmt: skip
def test_the_dstream_parser_quarantines_the_lines_the_batch_parser_does(
    spark, nasa_day, log_format, extra
):
    from logstream.dstream.quarantine import drain_examples, quarantine_accumulator
    from logstream.dstream.weblog import (
        classify_line,
        parse_rdd_of,
        time_checker,
        unparseable_accumulator,
    )

    fmt = compile_format(log_format)
    with gzip.open(nasa_day, "rt", encoding="utf-8", errors="replace") as fh:
        real = [next(fh).rstrip("\n") for _ in range(200)]
    lines = [*(real + edge_lines() if log_format == "common" else []), *extra]
    frame = spark.createDataFrame([(x, "t") for x in lines], "value string, source_file string")
    columns = ["raw_line", "quarantine_reason", "client_host", "url_path", "status", "bytes_sent"]
    batch = parse(frame, fmt).select(*columns).collect()  # year 0 has no Python datetime
    theirs = {r.raw_line: r.quarantine_reason for r in batch}  # None: an event
    # the line is quarantined as bad_timestamp by both editions
    assert log_format != "common" or theirs['1.2.3.4 - - [bad date] "GET / HTTP/1.0" 200 5'] == (
        "bad_timestamp"
    )
    assert len(set(theirs.values()) - {None}) >= (5 if log_format == "common" else 2)
    rx, ok = fmt.python_regex, time_checker(fmt)
    ours = {
        x: (r if isinstance(r := classify_line(x, rx, fmt.fields, ok), str) else None)
        for x in lines
        if x in theirs  # a header line: skipped by both
    }
    assert ours == theirs
    # the DStream edition's batch function keeps exactly the batch parser's events, and
    # counts the quarantined lines
    counter = unparseable_accumulator(spark.sparkContext)
    before = counter.value
    why = quarantine_accumulator(spark.sparkContext)
    before_reasons, _ = drain_examples(why)
    kept = parse_rdd_of(fmt)(spark.sparkContext.parallelize(lines, 2)).collect()
    events = [(r.client_host, r.url_path, r.status, r.bytes_sent) for r in batch if not r[1]]
    assert sorted(kept) == sorted(events)
    assert counter.value - before == sum(reason is not None for reason in theirs.values())
    # issue 54 item 28: the reasons are kept, as the other paths keep them, with the lines
    reasons, examples = drain_examples(why)
    added = {k: n - before_reasons.get(k, 0) for k, n in reasons.items()}
    assert {k: n for k, n in added.items() if n} == dict(
        Counter(reason for reason in theirs.values() if reason is not None)
    )
    assert examples and all(theirs[line] == reason for reason, line in examples)
    assert drain_examples(why)[1] == []  # each example is taken once
