"""Sessions on the real NASA day equal an independent plain-Python sessionization."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream.analytics import sessions
from logstream.analytics.sessions import SESSION_PARTS_SCHEMA, merge_sessions, session_parts
from logstream.parsing import compile_format, events, parse
from logstream.sources import read_lines
from tests import oracle

GAP_S = 30 * 60


def python_sessions(refs, gap_s=GAP_S):
    by_visitor = defaultdict(list)
    for r in refs:
        by_visitor[(r.client_host, r.user_agent)].append(r)
    out = []
    for (host, _agent), hits in by_visitor.items():
        hits.sort(key=lambda r: r.epoch)
        current = [hits[0]]
        for r in hits[1:]:
            if r.epoch - current[-1].epoch <= gap_s:  # Spark merges windows that touch
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


# -- incremental sessions: session_parts + merge_sessions, one micro-batch at a time ----------

EVENT_DDL = (
    "client_host string, user_agent string, event_time timestamp, url_path string, "
    "bytes_sent bigint"
)
T0 = datetime(1995, 7, 9, 10, 0, tzinfo=UTC)
LATENESS_MS = 10 * 60 * 1000


class Hit(NamedTuple):
    """One request, as :func:`python_sessions` reads it (whole seconds)."""

    client_host: str
    user_agent: str | None
    epoch: int
    url_path: str
    bytes_sent: int


def frame(spark, rows) -> DataFrame:
    """Events (client_host, user_agent, event_time, url_path, bytes_sent) from tuples whose time
    is a datetime or whole epoch seconds."""
    typed = [
        (h, a, t if isinstance(t, datetime) else datetime.fromtimestamp(t, UTC), p, b)
        for h, a, t, p, b in rows
    ]
    return spark.createDataFrame(typed, EVENT_DDL)


def empty_open(spark) -> DataFrame:
    return spark.createDataFrame([], SESSION_PARTS_SCHEMA)


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def merge_in_batches(spark, batches, gap_s):
    """Run ``batches`` (event frames, each with the epoch ms of its earliest and latest event)
    through merge_sessions with watermark = latest event so far - 10 minutes, carrying the open
    sessions from one call to the next; close the rest at the end.

    Returns the closed sessions as session_tuples, how many were closed before the end, and
    how many open sessions were carried from one batch to the next in all."""
    closed_all, early, carried = Counter(), 0, 0
    still_open, watermark, latest = empty_open(spark), None, None
    for batch, earliest_ms, latest_ms in batches:
        # the contract of merge_sessions: every event is later than an earlier watermark
        assert watermark is None or earliest_ms > watermark
        latest = latest_ms if latest is None else max(latest, latest_ms)
        watermark = latest - LATENESS_MS
        closed, still_open = merge_sessions(session_parts(batch), still_open, gap_s, watermark)
        assert still_open.schema == SESSION_PARTS_SCHEMA
        found = session_tuples(closed)
        assert all(end_s * 1000 + gap_s * 1000 <= watermark for _, _, end_s, *_ in found)
        closed_all += found
        early += sum(found.values())
        still_open = still_open.localCheckpoint()  # a snapshot: no lineage back to the start
        carried += still_open.count()
    closed, rest = merge_sessions(empty_open(spark), still_open, gap_s, None)
    assert rest.collect() == []
    closed_all += session_tuples(closed)
    return closed_all, early, carried


def test_session_parts_summarise_each_visitor_and_minute(spark):
    t = T0
    ev = frame(
        spark,
        [
            ("a", None, t, "/b.html", 10),
            ("a", None, t, "/a.html", 20),  # same second: entry /a.html, exit /b.html
            ("a", None, t + timedelta(seconds=59, milliseconds=999), "/i.gif", 5),
            ("a", "UA", t + timedelta(seconds=1), "/", 1),  # another visitor: another agent
            ("a", None, t + timedelta(seconds=60), "/x.gif", 7),  # the next minute
        ],
    )
    parts = session_parts(ev)
    assert parts.schema == SESSION_PARTS_SCHEMA
    rows = sorted(tuple(r) for r in parts.collect())
    t_ms = ms(t)
    assert rows == [
        ("a", "", t_ms, t_ms + 59_999, 3, 2, 35, (t_ms, "/a.html"), (t_ms, "/b.html")),
        ("a", "", t_ms + 60_000, t_ms + 60_000, 1, 0, 7, None, None),
        ("a", "UA", t_ms + 1000, t_ms + 1000, 1, 1, 1, (t_ms + 1000, "/"), (t_ms + 1000, "/")),
    ]


def test_the_gap_and_the_watermark_hold_to_the_millisecond(spark, tmp_path):
    t = T0 + timedelta(milliseconds=500)
    gap = timedelta(seconds=GAP_S)
    rows = [
        ("a", "UA", t, "/x.html", 1),
        ("a", "UA", t + gap, "/y.gif", 2),  # exactly the gap: the same session
        ("a", "UA", t + 2 * gap + timedelta(milliseconds=1), "/z.html", 4),  # 1 ms more: new
    ]
    naive = [r[2].replace(tzinfo=None) for r in rows]
    ev = frame(spark, rows)
    reference = sorted(tuple(r) for r in sessions(ev).collect())
    assert reference == [
        ("a", "UA", naive[0], naive[1], GAP_S, 2, 1, 3, "/x.html", "/x.html", True),
        ("a", "UA", naive[2], naive[2], 0, 1, 1, 4, "/z.html", "/z.html", True),
    ]

    # one batch, everything closed: the rows and the column names, types and order of sessions()
    closed, still_open = merge_sessions(session_parts(ev), empty_open(spark), GAP_S, None)
    assert [(f.name, f.dataType) for f in closed.schema] == [
        (f.name, f.dataType) for f in sessions(ev).schema
    ]
    assert sorted(tuple(r) for r in closed.collect()) == reference
    assert still_open.schema == SESSION_PARTS_SCHEMA
    assert still_open.collect() == []

    # one request per micro-batch, each with the highest watermark the contract allows; the open
    # sessions go through a Parquet snapshot, as the pipeline keeps them
    still_open, closed_per_batch = empty_open(spark), []
    for i, row in enumerate(rows):
        parts = session_parts(frame(spark, [row]))
        closed, still_open = merge_sessions(parts, still_open, GAP_S, ms(row[2]) - 1)
        closed_per_batch.append([tuple(r) for r in closed.collect()])
        still_open.write.parquet(str(tmp_path / f"open-{i}"))
        still_open = spark.read.schema(SESSION_PARTS_SCHEMA).parquet(str(tmp_path / f"open-{i}"))
    # the second request joins the open session; the third batch's watermark is exactly the
    # first session's last request + gap, which closes it
    assert closed_per_batch == [[], [], reference[:1]]
    third_ms = ms(rows[2][2])
    assert [tuple(r) for r in still_open.collect()] == [
        ("a", "UA", third_ms, third_ms, 1, 1, 4, (third_ms, "/z.html"), (third_ms, "/z.html"))
    ]
    nothing = empty_open(spark)
    end_ms = third_ms + GAP_S * 1000
    assert merge_sessions(nothing, still_open, GAP_S, end_ms - 1)[0].collect() == []
    closed, _ = merge_sessions(nothing, still_open, GAP_S, end_ms)
    assert [tuple(r) for r in closed.collect()] == reference[1:]


def test_merge_sessions_needs_a_gap_of_at_least_a_minute(spark):
    with pytest.raises(ValueError, match="at least 60 seconds"):
        merge_sessions(empty_open(spark), empty_open(spark), 59, None)


def test_nasa_day_in_six_micro_batches_equals_one_batch(spark, nasa_day):
    lines = oracle.read_lines(nasa_day)
    size = -(-len(lines) // 6)
    # the chunk number rides in source_file, so the day is parsed once
    numbered = spark.createDataFrame(
        [(line, str(i // size)) for i, line in enumerate(lines)], "value string, source_file string"
    )
    ev = events(parse(numbered, compile_format("common"))).persist()
    refs = [oracle.parse_line(line) for line in lines]
    batches = []
    for k in range(6):
        times = [r.epoch * 1000 for r in refs[k * size : (k + 1) * size] if r is not None]
        batches.append((ev.where(F.col("source_file") == str(k)), min(times), max(times)))
    try:
        closed, early, carried = merge_in_batches(spark, batches, GAP_S)
        assert closed == Counter(python_sessions([r for r in refs if r is not None]))
        assert closed == session_tuples(sessions(ev))
    finally:
        ev.unpersist()
    assert early > 2000 and carried > 300  # the watermark closed most; open ones were carried


def test_out_of_order_micro_batches_equal_one_batch(spark):
    """Visitors on a 10-second grid (many requests exactly one gap apart), late requests moved
    to the next micro-batch within the lateness, every micro-batch shuffled."""
    gap_s = 120
    rng = random.Random(709)
    base = int(T0.timestamp())
    pages = ["/", "/a.html", "/b.gif", "/c.htm", "/d.png"]
    hits = sorted(
        (
            Hit(
                rng.choice("abc"),
                rng.choice([None, "UA"]),
                base + 10 * rng.randrange(0, 1080),
                rng.choice(pages),
                rng.randrange(1000),
            )
            for _ in range(400)
        ),
        key=lambda h: h.epoch,
    )
    chunks = [hits[i : i + 100] for i in range(0, 400, 100)]
    for k in range(3):  # late requests move on, still later than this batch's watermark
        latest = max(range(len(chunks[k])), key=lambda i: chunks[k][i].epoch)
        horizon = chunks[k][latest].epoch - LATENESS_MS // 1000
        moved = {
            i
            for i, h in enumerate(chunks[k])
            if i != latest and h.epoch > horizon and rng.random() < 0.5
        }
        chunks[k + 1] = chunks[k + 1] + [chunks[k][i] for i in sorted(moved)]
        chunks[k] = [h for i, h in enumerate(chunks[k]) if i not in moved]
    batches = [
        (
            frame(spark, [tuple(h) for h in rng.sample(chunk, len(chunk))]).repartition(3),
            min(h.epoch for h in chunk) * 1000,
            max(h.epoch for h in chunk) * 1000,
        )
        for chunk in chunks
    ]

    closed, early, carried = merge_in_batches(spark, batches, gap_s)

    expected = Counter(python_sessions(hits, gap_s))
    assert closed == expected
    assert closed == session_tuples(sessions(frame(spark, [tuple(h) for h in hits]), "120 seconds"))
    assert early > 0 and carried > 0
