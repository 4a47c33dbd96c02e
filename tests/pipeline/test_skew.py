"""The skewed-clock rule (logstream.pipeline.ingest.skew) on the real NASA day: a minority far
ahead and written between the lines is held apart; a real backfill is not, by the same rule —
31 days in one micro-batch, a server down two days that comes back (wherever a micro-batch is
cut), a replay at 600x. The driver's rule (numpy) and the Spark steps' decide alike."""

from __future__ import annotations

import random
import re
from datetime import datetime

import numpy as np
import pytest
from tests.pipeline.helpers import nasa_lines

from logstream.parsing import compile_format, parse
from logstream.pipeline.ingest.skew import arrow_skew, spark_skew

DELAY_MS = 10 * 60 * 1000  # the default watermark delay
DAY_MS = 86_400_000
FILE = "file:/logs/access.log"
_TIME = re.compile(r"\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [-+]\d{4})\]")


def epoch_ms(line: str) -> int:
    stamp = _TIME.search(line)
    assert stamp is not None
    return int(datetime.strptime(stamp.group(1), "%d/%b/%Y:%H:%M:%S %z").timestamp() * 1000)


@pytest.fixture(scope="module")
def day(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)


@pytest.fixture(scope="module")
def day_ms(day) -> np.ndarray:
    return np.array([epoch_ms(line) for line in day], dtype=np.int64)


def skewed_file(day: list[str], n: int = 300, seed: int = 7) -> list[str]:
    """The day's 5th twelfth with ``n`` of its lines copied 3 days ahead, mixed in."""
    per = -(-len(day) // 12)
    lines = day[4 * per : 5 * per]
    rnd = random.Random(seed)
    for _ in range(n):
        copy = rnd.choice(lines).replace("09/Jul/1995", "12/Jul/1995")
        lines.insert(rnd.randrange(len(lines) + 1), copy)
    return lines


def judge(times: np.ndarray, sources: np.ndarray | None = None):
    src = np.array([FILE] * len(times), dtype=object) if sources is None else sources
    return arrow_skew(times, src, DELAY_MS)


def test_a_clock_three_days_ahead_among_the_lines_of_a_file_is_held_apart(day):
    lines = skewed_file(day)
    skew = judge(np.array([epoch_ms(line) for line in lines]))
    assert skew is not None and skew.events == 300 and skew.sources == ((FILE, 300),)
    assert skew.cut_ms - skew.rest_max_ms > 2 * DAY_MS
    assert "between its lines" in skew.detail()


def test_31_days_in_one_micro_batch_are_not_skewed(day_ms):
    days = np.concatenate([day_ms + d * DAY_MS for d in range(31)])
    sources = np.array([f"day-{d}" for d in range(31) for _ in day_ms], dtype=object)
    assert judge(days, sources) is None


@pytest.mark.parametrize("returned_with", [1, 20, 3000])
def test_a_server_down_two_days_that_comes_back_is_not_skewed(day_ms, returned_with):
    # its log goes on two days later; a micro-batch holds the lines before the outage and the
    # first `returned_with` after it, wherever it is cut
    half = len(day_ms) // 2
    after = day_ms[half : half + returned_with] + 2 * DAY_MS
    for start in (0, half - 3000, half - 100):
        assert judge(np.concatenate([day_ms[start:half], after])) is None


def test_a_replay_at_600x_is_not_skewed(day_ms):
    # a 5 s trigger at 600x: 50 minutes of event time a micro-batch
    edges = np.searchsorted(day_ms, np.arange(day_ms[0], day_ms[-1] + 1, 50 * 60 * 1000))
    batches = np.split(day_ms, edges[1:])
    assert len(batches) > 20 and all(judge(b) is None for b in batches if len(b))


def test_the_spark_steps_decide_as_the_driver(spark, day):
    lines = skewed_file(day, n=60)[:1500]
    frame = spark.createDataFrame([(v, FILE) for v in lines], "value string, source_file string")
    parsed = parse(frame, compile_format("common")).persist()
    try:
        is_event = parsed["quarantine_reason"].isNull()
        times = [epoch_ms(line) for line in lines]
        span = max(times) - min(times)
        got = spark_skew(parsed, is_event, len(lines), span, DELAY_MS)
    finally:
        parsed.unpersist()
    want = judge(np.array(times))
    assert got is not None and got == want and got.events == want.events > 0
