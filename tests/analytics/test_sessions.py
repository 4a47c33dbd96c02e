"""Sessions on the real NASA day equal an independent plain-Python sessionization."""

from __future__ import annotations

from collections import Counter, defaultdict

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream.analytics import sessions
from logstream.parsing import compile_format, events, parse
from logstream.sources import read_lines
from tests import oracle

GAP_S = 30 * 60


def python_sessions(refs):
    by_visitor = defaultdict(list)
    for r in refs:
        by_visitor[(r.client_host, r.user_agent)].append(r)
    out = []
    for (host, _agent), hits in by_visitor.items():
        hits.sort(key=lambda r: r.epoch)
        current = [hits[0]]
        for r in hits[1:]:
            if r.epoch - current[-1].epoch <= GAP_S:  # Spark merges windows that touch
                current.append(r)
            else:
                out.append(summarise(host, current))
                current = [r]
        out.append(summarise(host, current))
    return out


def summarise(host, hits):
    pages = sorted((r.epoch, r.url_path) for r in hits if oracle.is_content(r.url_path))
    return (
        host,
        hits[0].epoch,
        hits[-1].epoch,
        len(hits),
        len(pages),
        sum(r.bytes_sent for r in hits),
        pages[0][1] if pages else None,
        pages[-1][1] if pages else None,
        len(pages) <= 1,
    )


def session_tuples(closed: DataFrame) -> Counter:
    """Sessions (the output of :func:`sessions`) as :func:`python_sessions` tuples, counted."""
    return Counter(
        tuple(r)
        for r in closed.select(
            "client_host",
            F.unix_seconds("session_start"),
            F.unix_seconds("session_end"),
            "requests",
            "pages",
            "bytes",
            "entry_page",
            "exit_page",
            "bounce",
        ).collect()
    )


def test_sessions_on_the_nasa_day_equal_a_plain_python_sessionization(spark, nasa_day):
    ev = events(parse(read_lines(spark, [nasa_day]), compile_format("common")))
    refs, _ = oracle.parse_file(nasa_day)
    expected = python_sessions(refs)
    assert len(expected) > 3000
    assert session_tuples(sessions(ev)) == Counter(expected)


def test_duration_and_bounce_follow_from_the_requests(spark, tmp_path):
    path = tmp_path / "s.log"
    path.write_text(
        'a - - [09/Jul/1995:10:00:00 +0000] "GET /x.html HTTP/1.0" 200 10\n'
        'a - - [09/Jul/1995:10:29:59 +0000] "GET /y.gif HTTP/1.0" 200 5\n'
        'a - - [09/Jul/1995:10:59:59 +0000] "GET /z.html HTTP/1.0" 200 1\n'  # exactly 30 min: same
        'a - - [09/Jul/1995:11:30:00 +0000] "GET /w.html HTTP/1.0" 200 2\n'  # 30 min 1 s: new
    )
    rows = (
        sessions(events(parse(read_lines(spark, [path]), compile_format("common"))))
        .orderBy("session_start")
        .collect()
    )
    assert [(r.duration_s, r.requests, r.pages, r.bytes, r.entry_page, r.bounce) for r in rows] == [
        (3599, 3, 2, 16, "/x.html", False),
        (0, 1, 1, 2, "/w.html", True),
    ]
