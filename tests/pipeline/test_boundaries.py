"""A micro-batch whose watermark passes no minute publishes no final windows or sessions.

Following a log in real time, the watermark moves a few seconds a micro-batch: a window can
become final only when it passes a minute (every window and pane ends on one). Cut into
micro-batches of 8 lines (about 20 s of the NASA day each) with a 30-second watermark, only
some micro-batches pass a minute; the others skip the final windows, the detector and the
closing of sessions, and what is published is still every minute's count and every session
the watermark closed.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from pyspark.sql import functions as F
from tests.pipeline.helpers import config, nasa_lines, run_to_end, write_chunks

from logstream.pipeline import Pipeline
from logstream.sinks.publish import BATCH_DIR_PREFIX, SCHEMA_BATCH_ID

PER_BATCH = 8
LINES = 72  # 9 micro-batches, about three minutes of event time
WATERMARK_MS = 30_000
MINUTE_MS = 60_000
GAP_MS = 60_000  # the session gap


def event_ms(line: str) -> int:
    text = line[line.index("[") + 1 : line.index("]")]
    return int(datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp() * 1000)


@pytest.fixture(scope="module")
def small_batches(spark, tmp_path_factory, nasa_day):
    tmp = tmp_path_factory.mktemp("boundaries")
    lines = nasa_lines(nasa_day)[:LINES]
    write_chunks(lines, tmp / "in", per_file=PER_BATCH)
    pipeline = Pipeline(
        spark,
        config(
            tmp,
            tmp / "in",
            watermark="30 seconds",
            session_gap="1 minute",
            queries="traffic_per_minute,sessions",
        ),
    )
    run_to_end(pipeline)
    return tmp, lines


def expected(lines: list[str]) -> tuple[set[int], Counter[int], int, int, list[tuple]]:
    """By the textbook rules, independently of logstream: the micro-batches whose watermark
    passes a minute, the on-time events per minute start, the last watermark, the watermark
    of the last micro-batch passing a minute, and the on-time (host, event ms) pairs."""
    passing, per_minute, on_time = set(), Counter(), []
    newest = watermark = passed = None
    for batch, i in enumerate(range(0, len(lines), PER_BATCH)):
        chunk = lines[i : i + PER_BATCH]
        fresh = [
            (x.split(" ", 1)[0], event_ms(x))
            for x in chunk
            if watermark is None or event_ms(x) > watermark
        ]
        on_time += fresh
        per_minute.update(t - t % MINUTE_MS for _, t in fresh)
        newest = max([event_ms(x) for x in chunk] + ([newest] if newest is not None else []))
        after = newest - WATERMARK_MS
        if watermark is None or after // MINUTE_MS > watermark // MINUTE_MS:
            passing.add(batch)
            passed = after
        watermark = after
    assert watermark is not None and passed is not None
    return passing, per_minute, watermark, passed, on_time


def closed_sessions(on_time: list[tuple], watermark: int) -> set[tuple[str, int, int, int]]:
    """(host, first ms, last ms, requests) of every session (a host's requests at most the gap
    apart) that ``watermark`` closed (its last request plus the gap at or before it)."""
    by_host: dict[str, list[int]] = {}
    for host, t in on_time:
        by_host.setdefault(host, []).append(t)
    out = set()
    for host, times in by_host.items():
        times.sort()
        run = [times[0]]
        for t in [*times[1:], None]:
            if t is not None and t - run[-1] <= GAP_MS:
                run.append(t)
                continue
            if run[-1] + GAP_MS <= watermark:
                out.add((host, run[0], run[-1], len(run)))
            if t is not None:
                run = [t]
    return out


def batch_ids(root) -> set[int]:
    return {
        int(p.name.removeprefix(BATCH_DIR_PREFIX)) for p in root.glob(f"{BATCH_DIR_PREFIX}*")
    } - {SCHEMA_BATCH_ID}


def test_only_micro_batches_passing_a_minute_publish_final_windows(small_batches):
    tmp, lines = small_batches
    passing = expected(lines)[0]
    assert batch_ids(tmp / "out" / "traffic_per_minute") == passing
    assert batch_ids(tmp / "out" / "sessions") <= passing
    assert 2 < len(passing) < len(lines) // PER_BATCH  # the input has both kinds


def test_the_final_windows_are_every_minutes_count(spark, small_batches):
    tmp, lines = small_batches
    _, per_minute, watermark, _, _ = expected(lines)
    final = {m: n for m, n in per_minute.items() if m + MINUTE_MS <= watermark}
    rows = (
        spark.read.parquet(str(tmp / "out" / "traffic_per_minute"))
        .select(F.unix_millis("window_start").alias("m"), "requests")
        .collect()
    )
    assert {r["m"]: r["requests"] for r in rows} == final
    assert len(rows) == len(final) >= 2


def test_the_sessions_are_those_the_last_passing_watermark_closed(spark, small_batches):
    tmp, lines = small_batches
    _, _, _, passed, on_time = expected(lines)
    rows = (
        spark.read.parquet(str(tmp / "out" / "sessions"))
        .select(
            "client_host",
            F.unix_millis("session_start").alias("first"),
            F.unix_millis("session_end").alias("last"),
            "requests",
        )
        .collect()
    )
    published = [tuple(r) for r in rows]
    assert len(published) == len(set(published))  # each session once
    assert set(published) == closed_sessions(on_time, passed)
    assert len(published) >= 5
