"""The traffic generator in plain Python: reproducibility, timing, shape, flash crowds."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest

from logstream.errors import ConfigError
from logstream.generate import (
    DEFAULT_FLASH_RANK,
    FlashCrowd,
    TrafficConfig,
    TrafficGenerator,
    build_site,
    generate_lines,
    zipf_weights,
)
from logstream.parsing import compile_format
from logstream.replay import find_clf_time
from tests import oracle

START = datetime(2024, 7, 1, tzinfo=UTC)


def lines_of(**kwargs) -> list[str]:
    return list(generate_lines(TrafficConfig(**kwargs)))


def test_same_seed_same_bytes_other_seed_other_lines():
    a = lines_of(seed=5, max_lines=20_000)
    assert a == lines_of(seed=5, max_lines=20_000)
    assert a != lines_of(seed=6, max_lines=20_000)
    assert len(a) == 20_000 and len(set(a)) > 15_000


@pytest.mark.parametrize("log_format", ["combined", "common"])
def test_every_line_parses_with_the_oracle_and_logstreams_regex(log_format):
    regex = compile_format(log_format).python_regex
    config = TrafficConfig(
        seed=3, max_lines=30_000, log_format=log_format, flash_crowds=(FlashCrowd(60, 120, 6),)
    )
    for line in generate_lines(config):
        ref = oracle.parse_line(line)
        assert ref is not None, line
        assert regex.match(line), line
        assert (ref.user_agent is None) == (log_format == "common")


def test_event_time_advances_at_the_configured_rate_within_the_duration():
    config = TrafficConfig(seed=1, rate_per_s=20, duration_s=3600, daily_amplitude=0)
    events = list(TrafficGenerator(config))
    times = [e.event_s for e in events]
    assert times == sorted(times)
    assert START.timestamp() <= times[0] and times[-1] < START.timestamp() + 3600
    assert len(events) == pytest.approx(72_000, rel=0.02)
    stamps = [find_clf_time(e.text).epoch_s for e in events[:1000]]
    assert stamps == [int(e.event_s) for e in events[:1000]]


def test_daily_curve_peaks_in_the_afternoon_of_the_start_offset():
    start = datetime(2024, 7, 1, tzinfo=timezone(timedelta(hours=-4)))
    config = TrafficConfig(
        seed=2, rate_per_s=2, duration_s=86400, start=start, daily_amplitude=0.5, peak_hour=14
    )
    per_hour = Counter()
    for line in generate_lines(config):
        found = find_clf_time(line)
        assert found.offset_minutes == -240
        per_hour[int(line[found.start + 12 : found.start + 14])] += 1  # local hour, as written
    # 1 + 0.5·cos(0) at 14:00 vs 1 + 0.5·cos(π) at 02:00: a factor of 3
    assert per_hour[14] / per_hour[2] == pytest.approx(3.0, rel=0.2)


def test_real_looking_clients_statuses_and_404_bursts():
    config = TrafficConfig(seed=4, rate_per_s=50, duration_s=3600)
    events = list(TrafficGenerator(config))
    kinds = Counter(e.kind for e in events)
    assert {"page", "asset", "crawler", "tool", "probe"} <= set(kinds)
    refs = [oracle.parse_line(e.text) for e in events]
    hosts = {r.client_host for r, e in zip(refs, events, strict=True) if e.kind == "page"}
    v6 = sum(":" in h for h in hosts) / len(hosts)
    assert v6 == pytest.approx(config.ipv6_fraction, abs=0.04)
    agents = Counter(r.user_agent for r in refs)
    assert any("Googlebot/2.1" in a for a in agents) and any("bingbot" in a for a in agents)
    assert any("Chrome/" in a for a in agents) and any("iPhone" in a for a in agents)
    assert any(r.referrer and r.referrer.startswith("https://www.google.com/") for r in refs)
    statuses = Counter(r.status for r in refs)
    assert {200, 304, 404, 500, 503} <= set(statuses)

    # Probes come in bursts: runs of one scanner address, 20 to 60 probes each.
    probes = [
        (e.event_s, r.client_host) for e, r in zip(events, refs, strict=True) if e.kind == "probe"
    ]
    bursts = [list(g) for _, g in itertools.groupby(probes, key=lambda p: p[1])]
    assert len(bursts) >= 5
    assert all(20 <= len(b) <= 60 for b in bursts)
    assert all(b[-1][0] - b[0][0] < 30 for b in bursts)  # seconds, at 50 lines/s
    assert all(r.status == 404 for e, r in zip(events, refs, strict=True) if e.kind == "probe")


def test_flash_crowd_multiplies_traffic_and_the_page_trends():
    crowd = FlashCrowd(start_offset_s=1800, duration_s=600, multiplier=8)
    config = TrafficConfig(
        seed=9, rate_per_s=20, duration_s=3600, daily_amplitude=0, flash_crowds=(crowd,)
    )
    generator = TrafficGenerator(config)
    page = generator.flash_pages[0]
    assert page == generator.site.pages[DEFAULT_FLASH_RANK - 1].path
    t0 = START.timestamp()
    before = [e for e in generator if t0 + 1200 <= e.event_s < t0 + 1800]
    during = [e for e in TrafficGenerator(config) if t0 + 1800 <= e.event_s < t0 + 2400]
    assert len(during) / len(before) == pytest.approx(8.0, rel=0.1)

    def views(events):
        return sum(1 for e in events if f"GET {page} " in e.text)

    assert views(during) > 50 * max(1, views(before))
    requests = [e for e in during if e.kind in ("page", "flash", "crawler", "tool", "post")]
    assert sum(e.kind == "flash" for e in requests) / len(requests) == pytest.approx(
        7 / 8, abs=0.03
    )


def test_a_flash_crowd_can_trend_a_page_the_site_did_not_have():
    crowd = FlashCrowd.parse("0s,1m,10,/news/2024/07/breaking.html")
    events = list(TrafficGenerator(TrafficConfig(seed=1, duration_s=60, flash_crowds=(crowd,))))
    hits = [oracle.parse_line(e.text) for e in events if e.kind == "flash"]
    found = [h for h in hits if h.status != 404]  # a 404 is a broken link, elsewhere
    assert len(found) > 0.9 * len(hits) > 100
    assert all(h.url_path == "/news/2024/07/breaking.html" for h in found)
    assert Counter(h.status for h in found).most_common(1)[0][0] == 200


def test_flash_crowd_spec():
    assert FlashCrowd.parse("30m,10m,8,/news/x.html") == FlashCrowd(1800, 600, 8, "/news/x.html")
    assert FlashCrowd.parse("1h, 5m, 2.5") == FlashCrowd(3600, 300, 2.5, None)
    for bad in ("1h,5m", "1h,5m,0.5", "x,5m,3", "1h,0,3", "1h,5m,3,news", "1h,5m,three"):
        with pytest.raises(ConfigError):
            FlashCrowd.parse(bad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"start": datetime(2024, 1, 1)},  # noqa: DTZ001 - naive on purpose
        {"log_format": "nginx"},
        {"rate_per_s": 0},
        {"daily_amplitude": 1.0},
        {"not_found_fraction": 0.6, "not_modified_fraction": 0.6},
        {"scan_fraction": 0.5},
        {"n_pages": 0},
    ],
)
def test_bad_configuration_is_rejected(kwargs):
    with pytest.raises(ConfigError):
        TrafficGenerator(TrafficConfig(**kwargs))


def test_site_is_a_seeded_tree_ranked_by_zipf():
    site = build_site(n_pages=300, seed=1)
    assert site == build_site(n_pages=300, seed=1)
    assert site != build_site(n_pages=300, seed=2)
    paths = [p.path for p in site.pages]
    assert paths[0] == "/" and len(set(paths)) == 300
    assert all(oracle.is_content(p) for p in paths)
    assert not set(site.dead_paths) & set(paths)
    assert sum(site.page_share(k) for k in range(1, 301)) == pytest.approx(1.0)
    assert site.page_share(1) / site.page_share(2) == pytest.approx(2.0)
    assert zipf_weights(3, 2.0) == [1.0, 0.25, 1 / 9]
    assert all(p.assets and p.assets[-1] == "/favicon.ico" for p in site.pages)
