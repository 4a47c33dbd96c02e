"""Web-log analytics on DStreams: with ``queueStream`` and one RDD per event-minute of the real
NASA day, the DStream counts equal the batch report, and every window of trending pages equals
an independent count over its minutes."""

from __future__ import annotations

import gzip
import re
import sqlite3
from collections import Counter
from itertools import groupby

import pytest

from logstream.analytics.pages import CONTENT_PAGE_REGEX
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

MINUTES = 12
WINDOW = 5  # batches (= event-minutes here)
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

    report = build_report(parse(read_lines(spark, [day_part]), compile_format("common")))
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

    # per-batch status classes summed = the batch report; every line parsed in both
    assert sum(status.values()) == report["general"]["valid_requests"] > 200
    assert status == report["status_classes"]
    assert unparseable == report["general"]["failed_requests"] == 1
    # updateStateByKey's running totals = the report's top hosts
    assert report["top_hosts"] and all(
        hosts[row["client_host"]] == row["requests"] for row in report["top_hosts"]
    )
    assert sum(hosts.values()) == report["general"]["valid_requests"]
    # the transform() join with the static list of hosts counts exactly their requests
    assert in_list == sum(hosts_seen[h] for h in listed) > 0
    # reduceByKeyAndWindow with the inverse function: each batch's window of 5 minutes equals
    # a count over those minutes' lines (the first windows hold fewer minutes)
    paths = [[r[1] for x in m if (r := parse_line(x, rx, fmt.fields))] for m in by_minute]
    pages = [Counter(p for p in m if re.search(CONTENT_PAGE_REGEX, p)) for m in paths]
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
