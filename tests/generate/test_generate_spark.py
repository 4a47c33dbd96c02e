"""Generated traffic through logstream's Spark parser: 100 % parsed, statistics as configured."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from logstream.generate import FlashCrowd, TrafficConfig, TrafficGenerator
from logstream.parsing import compile_format, events, parse, quarantine
from logstream.replay import FileSink
from logstream.sources import read_lines

START = datetime(2024, 7, 1, tzinfo=UTC)
# Crawlers and tools off, so browser page views follow the site's Zipf law exactly.
ZIPF_CONFIG = TrafficConfig(
    seed=11, rate_per_s=20, duration_s=3600, daily_amplitude=0, crawler_fraction=0, tool_fraction=0
)


def write(generator: TrafficGenerator, path) -> int:
    sink = FileSink(path)
    count = 0
    for line in generator.lines():
        sink.write(line)
        count += 1
    sink.close()
    return count


@pytest.fixture(scope="module")
def combined(spark, tmp_path_factory):
    generator = TrafficGenerator(ZIPF_CONFIG)
    path = tmp_path_factory.mktemp("generated") / "combined.log"
    count = write(generator, path)
    parsed = parse(read_lines(spark, [path]), compile_format("combined")).cache()
    yield generator, count, parsed
    parsed.unpersist()


def test_every_generated_combined_line_parses(combined):
    _, count, parsed = combined
    assert count > 60_000
    assert quarantine(parsed).count() == 0
    row = (
        events(parsed)
        .agg(
            F.count("*").alias("n"),
            F.min("event_time").alias("first"),
            F.max("event_time").alias("last"),
            F.count("user_agent").alias("with_agent"),
            F.sum(F.col("client_host").contains(":").cast("int")).alias("ipv6"),
        )
        .first()
    )
    assert row.n == row.with_agent == count
    assert START <= row.first.replace(tzinfo=UTC) and row.last.replace(
        tzinfo=UTC
    ) < START + timedelta(hours=1)
    assert row.ipv6 > 0


def test_every_generated_common_line_parses_including_a_flash_crowd(spark, tmp_path):
    config = TrafficConfig(
        seed=12,
        rate_per_s=10,
        duration_s=1800,
        log_format="common",
        start=datetime.fromisoformat("2024-03-10T01:30:00-05:00"),
        flash_crowds=(FlashCrowd(600, 300, 5),),
    )
    path = tmp_path / "common.log.gz"
    count = write(TrafficGenerator(config), path)
    parsed = parse(read_lines(spark, [path]), compile_format("common"))
    counts = {
        r.ok: r.n
        for r in parsed.groupBy(F.col("quarantine_reason").isNull().alias("ok"))
        .agg(F.count("*").alias("n"))
        .collect()
    }
    assert counts == {True: count}


def test_top_pages_follow_the_configured_zipf_law(combined):
    generator, _, parsed = combined
    views = events(parsed).where(
        (F.col("method") == "GET")
        & (F.col("status") != 404)
        & F.col("url_path").rlike(r"(/|\.html)$")
    )
    total = views.count()
    top = views.groupBy("url_path").count().orderBy(F.desc("count"), "url_path").limit(3).collect()
    site = generator.site
    assert [r.url_path for r in top] == [p.path for p in site.pages[:3]]
    for rank, row in enumerate(top, start=1):
        expected = site.page_share(rank)
        sigma = math.sqrt(expected * (1 - expected) / total)
        assert row["count"] / total == pytest.approx(expected, abs=4 * sigma)


def test_status_mix_matches_the_configured_fractions(combined):
    _, count, parsed = combined
    rows = (
        events(parsed)
        .groupBy(
            F.when(F.col("status") >= 500, "5xx")
            .otherwise(F.col("status").cast("string"))
            .alias("s")
        )
        .count()
        .collect()
    )
    share = {r.s: r["count"] / count for r in rows}
    expected = ZIPF_CONFIG.expected_status_shares()
    assert share["404"] == pytest.approx(expected["404"], abs=0.006)  # bursts make it lumpy
    assert share["304"] == pytest.approx(expected["304"], abs=0.004)
    assert share["5xx"] == pytest.approx(expected["5xx"], abs=0.001)
    assert share["200"] == pytest.approx(1 - sum(expected.values()), abs=0.008)
    assert set(share) == {"200", "304", "404", "5xx"}
