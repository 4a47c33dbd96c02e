"""Anomaly alerts: the EWMA detector alone, its processor under ``TwsTester``, streaming
runs on generated traffic — a flash crowd alerts within 2 minutes, a steady day raises none,
and idle series leave the state store — and :func:`score_minutes`, the batch form: the same
alerts and state as the streaming query, whatever the cut into calls."""

from __future__ import annotations

import math
import random
import statistics
from datetime import timedelta

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.streaming.tws_tester import TwsTester

from logstream.analytics import anomaly_alerts
from logstream.analytics.alerts import (
    ALERT_COLUMNS,
    ALERT_STATE_SCHEMA,
    SERIES_MINUTE_COLUMNS,
    SITE_SERIES,
    AlertConfig,
    AlertProcessor,
    EwmaDetector,
    EwmaState,
    _score_group,
    _SeriesSteps,
    ew_update,
    score_minutes,
    series_minutes,
)
from logstream.errors import ConfigError
from logstream.generate import FlashCrowd, TrafficConfig, TrafficGenerator
from logstream.parsing import compile_format, events, parse, resolve_format
from logstream.sources.files import read_lines
from tests.pipeline.helpers import nasa_lines, write_chunks

MINUTE_MS = 60_000
RATE_PER_S = 1.5
IDLE = timedelta(minutes=60)
CONTENT = ("/", ".html", ".htm")


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method; small means only)."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def feed(det: EwmaDetector, minutes, state=None):
    """Observe ``(requests, errors)`` minutes; return the final state and every alert."""
    alerts = []
    for i, (requests, errors) in enumerate(minutes):
        state, found = det.observe(state, requests, errors)
        alerts.extend((i, a) for a in found)
    return state, alerts


# -- the running statistics -------------------------------------------------------------------


@given(
    xs=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=80),
    alpha=st.floats(0.01, 1.0),
)
def test_ew_update_equals_the_exponentially_weighted_mean_and_variance(xs, alpha):
    mean = var = 0.0
    for n, x in enumerate(xs):
        mean, var = ew_update(n, mean, var, x, alpha)
    # Reference: weight a_i = max(alpha, 1/i) for the i-th value, decayed by every later
    # (1 - a_j); the mean and variance are the weighted moments.
    steps = [max(alpha, 1.0 / i) for i in range(1, len(xs) + 1)]
    weights = []
    for i, a in enumerate(steps):
        w = a
        for later in steps[i + 1 :]:
            w *= 1.0 - later
        weights.append(w)
    ref_mean = sum(w * x for w, x in zip(weights, xs, strict=True))
    ref_var = sum(w * (x - ref_mean) ** 2 for w, x in zip(weights, xs, strict=True))
    assert math.isclose(sum(weights), 1.0, rel_tol=1e-9)
    assert math.isclose(mean, ref_mean, rel_tol=1e-9, abs_tol=1e-7)
    assert math.isclose(var, ref_var, rel_tol=1e-7, abs_tol=1e-6)


@given(xs=st.lists(st.integers(0, 10_000), min_size=1, max_size=20))
def test_the_first_values_get_the_exact_mean_and_population_variance(xs):
    mean = var = 0.0
    for n, x in enumerate(xs):
        mean, var = ew_update(n, mean, var, x, alpha=0.05)  # 1/alpha = 20 ≥ len(xs)
    assert math.isclose(mean, statistics.fmean(xs), rel_tol=1e-12, abs_tol=1e-9)
    assert math.isclose(var, statistics.pvariance(xs), rel_tol=1e-9, abs_tol=1e-6)


# -- the detector ---------------------------------------------------------------------------


@settings(max_examples=50)
@given(
    requests=st.integers(0, 100_000),
    error_share=st.floats(0, 1),
    minutes=st.integers(1, 200),
    k=st.floats(0.5, 10),
    alpha=st.floats(0.001, 1),
    warmup=st.integers(1, 60),
)
def test_constant_traffic_never_alerts(requests, error_share, minutes, k, alpha, warmup):
    det = EwmaDetector(AlertConfig(k=k, alpha=alpha, warmup_minutes=warmup, min_requests=0))
    errors = round(requests * error_share)
    _, alerts = feed(det, [(requests, errors)] * minutes)
    assert alerts == []


@settings(max_examples=200)
@given(
    history=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 50)), max_size=80),
    silent=st.integers(0, 300),
    k=st.floats(0.5, 10),
    alpha=st.floats(0.001, 1),
    warmup=st.integers(1, 60),
    min_requests=st.integers(0, 50),
)
def test_a_run_of_silent_minutes_equals_the_minute_by_minute_steps(
    history, silent, k, alpha, warmup, min_requests
):
    config = AlertConfig(k=k, alpha=alpha, warmup_minutes=warmup, min_requests=min_requests)
    det = EwmaDetector(config)
    state = None
    for requests, errors in history:
        state, _ = det.observe(state, requests, min(errors, requests))
    slow, expected = state, []
    for i in range(silent):
        slow, alerts = det.observe(slow, 0, 0)
        expected += [(i, a) for a in alerts]
    fast, alerts = det.observe_silence(state, silent)
    assert fast == (slow or EwmaState())  # bit for bit: the same operations in the same order
    assert alerts == expected


def test_a_spike_alerts_after_the_warm_up_and_not_during_it():
    rng = random.Random(1)
    steady = [(poisson(rng, 100 * 0.05) + 95, 0) for _ in range(40)]  # 95–105 requests
    det = EwmaDetector(AlertConfig(warmup_minutes=30))
    _, early = feed(det, [*steady[:10], (400, 0)])
    assert early == []
    _, alerts = feed(det, [*steady, (400, 0)])
    assert [(i, a.metric, a.direction) for i, a in alerts] == [(40, "requests", "spike")]
    (_, alert) = alerts[0]
    # The minute is scored before it is folded in: mean and std are those of the 40 steady
    # minutes, and the deviation is floored at the Poisson √mean (their own spread is ~2).
    assert 95 <= alert.mean <= 105
    assert alert.std == pytest.approx(math.sqrt(alert.mean))
    assert alert.z == pytest.approx((400 - alert.mean) / alert.std)


def test_a_rare_page_needs_min_requests_to_alert():
    det = EwmaDetector(AlertConfig(min_requests=20))
    quiet = [(1 if i % 5 == 0 else 0, 0) for i in range(60)]  # a hit every 5 minutes
    _, small = feed(det, [*quiet, (19, 0)])
    assert small == []  # z ≈ 19, but only 19 requests
    _, big = feed(det, [*quiet, (20, 0)])
    assert [(i, a.direction) for i, a in big] == [(60, "spike")]


def test_a_drop_alerts_only_when_the_expected_count_reaches_min_requests():
    det = EwmaDetector(AlertConfig(min_requests=20))
    _, site = feed(det, [(100, 0)] * 40 + [(0, 0)])
    assert [(i, a.metric, a.direction, a.value) for i, a in site] == [(40, "requests", "drop", 0.0)]
    _, page = feed(det, [(15, 0)] * 40 + [(0, 0)])  # z = -15/√15 ≈ -3.9 and mean < 20
    assert page == []


def test_error_rate_alerts_upward_only_and_needs_min_errors():
    det = EwmaDetector(AlertConfig(min_errors=10))
    steady = [(1000, 3)] * 40  # 0.3 % server errors
    _, spike = feed(det, [*steady, (1000, 80)])
    assert [(i, a.metric, a.direction) for i, a in spike] == [(40, "error_rate", "spike")]
    (_, alert) = spike[0]
    assert alert.value == pytest.approx(0.08)
    assert alert.std == pytest.approx(0.01)  # the absolute floor beats √(p(1-p)/n) ≈ 0.0017
    _, few = feed(det, [*steady, (100, 9)])  # 9 % of 100, but only 9 errors
    assert [a.metric for _, a in few] == ["requests"]  # a drop from 1000 to 100, no error_rate
    _, healthier = feed(det, [(1000, 300)] * 40 + [(1000, 0)])  # 30 % → 0 %: not an alert
    assert healthier == []


def test_a_long_flash_crowd_keeps_alerting_then_the_baseline_adapts():
    det = EwmaDetector()
    rng = random.Random(7)
    before = [(90 + rng.randint(-9, 9), 0) for _ in range(60)]
    crowd = [(720 + rng.randint(-20, 20), 0) for _ in range(10)]
    after = [(90 + rng.randint(-9, 9), 0) for _ in range(60)]
    _, alerts = feed(det, [*before, *crowd, *after])
    minutes = [i for i, _ in alerts]
    # Clipped folding: several consecutive minutes alert, not just the first one ...
    assert minutes[:3] == [60, 61, 62]
    assert minutes == list(range(60, 60 + len(minutes)))
    # ... yet the deviation grows, so a lasting level is learnt before the crowd ends, and
    # the return to normal is no "drop".
    assert len(minutes) < 10
    assert all(a.direction == "spike" for _, a in alerts)


@pytest.mark.parametrize(
    ("field", "value"),
    [("k", 0), ("alpha", 0), ("alpha", 1.5), ("warmup_minutes", 0), ("min_errors", -1)],
)
def test_a_bad_parameter_names_itself_and_its_value(field, value):
    with pytest.raises(ConfigError, match=f"{field}={value}"):
        AlertConfig(**{field: value})
    with pytest.raises(ConfigError, match=f"{field}={value}"):
        anomaly_alerts(None, **{field: value})  # checked before the DataFrame is touched


# -- the processor, without Spark -------------------------------------------------------------

T0 = 28_000_000 * MINUTE_MS  # a minute boundary in 2023


def minute_rows(minute: int, requests: int, errors: int = 0) -> pd.DataFrame:
    start = T0 + minute * MINUTE_MS
    return pd.DataFrame(
        {
            "event_time": [pd.Timestamp(start + 1000, unit="ms")] * requests,
            "minute_ms": [start] * requests,
            "is_error": [1] * errors + [0] * (requests - errors),
        }
    )


def make_tester(**config) -> TwsTester:
    return TwsTester(
        AlertProcessor(AlertConfig(**config)),
        timeMode="EventTime",
        eventTimeExtractor=lambda row: int(row["minute_ms"]) + 1000,
    )


def test_the_processor_scores_a_minute_once_the_watermark_passes_its_end():
    t = make_tester(warmup_minutes=3, min_requests=5)
    for m in range(5):
        assert t.testInPandas("site", minute_rows(m, 10)).empty
    assert t.testInPandas("site", minute_rows(5, 50)).empty
    assert t.setWatermark(T0 + 5 * MINUTE_MS).empty  # minutes 0–4 scored, all normal
    assert t.peekValueState("series", "site")[0] == 5
    out = t.setWatermark(T0 + 6 * MINUTE_MS - 1)
    assert out.empty  # minute 5 is not over yet
    out = t.setWatermark(T0 + 6 * MINUTE_MS)
    assert out[["series", "metric", "direction", "value"]].values.tolist() == [
        ["site", "requests", "spike", 50.0]
    ]
    assert out["window_start_ms"].tolist() == [T0 + 5 * MINUTE_MS]
    assert out["window_end_ms"].tolist() == [T0 + 6 * MINUTE_MS]
    assert out["z"].iloc[0] == pytest.approx((50 - 10) / math.sqrt(10))


def test_silent_minutes_count_as_zero_requests():
    t = make_tester()
    for m in (0, 1, 2, 6):
        t.testInPandas("/a.html", minute_rows(m, 3))
    t.setWatermark(T0 + 7 * MINUTE_MS)
    state = t.peekValueState("series", "/a.html")
    n, req_mean = state[0], state[1]
    assert n == 7  # minutes 0–6, of which 3, 4 and 5 had no requests
    assert req_mean == pytest.approx(statistics.fmean([3, 3, 3, 0, 0, 0, 3]))


def test_an_idle_series_is_forgotten_with_its_timer():
    t = make_tester(idle_timeout_minutes=60)
    t.testInPandas("/a.html", minute_rows(0, 3))
    t.testInPandas("site", minute_rows(0, 3))
    t.setWatermark(T0 + MINUTE_MS)
    t.testInPandas("site", minute_rows(30, 3))
    t.setWatermark(T0 + 61 * MINUTE_MS - 1)
    assert t.peekValueState("series", "/a.html") is not None
    t.setWatermark(T0 + 61 * MINUTE_MS)  # 60 minutes after the end of its last minute
    assert t.peekValueState("series", "/a.html") is None
    assert t.peekValueState("series", "site") is not None  # seen at minute 30
    t.handle.setGroupingKey("/a.html")
    assert list(t.handle.listTimers()) == []
    t.handle.setGroupingKey("site")
    assert list(t.handle.listTimers()) == [T0 + 91 * MINUTE_MS]
    t.setWatermark(T0 + 91 * MINUTE_MS)
    assert t.peekValueState("series", "site") is None


# -- streaming runs on generated traffic -------------------------------------------------------


def run_stream(spark, tmp, config: TrafficConfig, per_file: int, name: str):
    """Generate, write chunk files, run :func:`anomaly_alerts` to the end (availableNow)."""
    gen = TrafficGenerator(config)
    lines = list(gen)
    write_chunks([line.text for line in lines], tmp / "in", per_file=per_file)
    raw = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .text(str(tmp / "in"))
        .select("value", F.col("_metadata.file_path").alias("source_file"))
    )
    ev = events(parse(raw, resolve_format(config.log_format)))
    alerts = anomaly_alerts(ev.withWatermark("event_time", "10 minutes"))
    query = (
        alerts.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        progress = query.recentProgress
    finally:
        query.stop()
    rows = spark.table(name).orderBy("window_start", "series", "metric").collect()
    return gen, lines, rows, progress


def watermark_of(progress) -> pd.Timestamp:
    return pd.Timestamp(progress[-1]["eventTime"]["watermark"]).tz_localize(None)


@pytest.fixture(scope="module")
def flash_run(spark, tmp_path_factory):
    crowd = FlashCrowd(start_offset_s=3 * 3600 + 20, duration_s=600, multiplier=8)
    config = TrafficConfig(
        rate_per_s=RATE_PER_S,
        duration_s=4 * 3600,
        seed=3,
        flash_crowds=(crowd,),
        log_format="common",
    )
    tmp = tmp_path_factory.mktemp("alerts_flash")
    gen, _, rows, progress = run_stream(spark, tmp, config, per_file=8000, name="alerts_flash")
    start = pd.Timestamp(config.start).tz_convert(None) + pd.Timedelta(seconds=crowd.start_offset_s)
    return gen.flash_pages[0], start, rows, progress, tmp / "in"


@pytest.fixture(scope="module")
def steady_day(spark, tmp_path_factory):
    config = TrafficConfig(rate_per_s=RATE_PER_S, duration_s=24 * 3600, seed=3, log_format="common")
    tmp = tmp_path_factory.mktemp("alerts_day")
    # 129,515 lines in two files: two micro-batches of data, then the no-data one
    _, lines, rows, progress = run_stream(spark, tmp, config, per_file=65_000, name="alerts_day")
    return config, lines, rows, progress, tmp / "checkpoint"


def test_alerts_have_the_documented_columns(flash_run, spark):
    assert tuple(spark.table("alerts_flash").columns) == ALERT_COLUMNS
    assert dict(spark.table("alerts_flash").dtypes)["window_start"] == "timestamp"


def test_a_flash_crowd_raises_an_alert_within_two_minutes_naming_its_page(flash_run):
    page, start, rows = flash_run[:3]
    assert rows, "the flash crowd raised no alert"
    first = pd.Timestamp(rows[0].window_start)
    assert -pd.Timedelta(minutes=1) < first - start <= pd.Timedelta(minutes=2)
    page_alerts = [r for r in rows if r.series == page]
    assert page_alerts, f"no alert for the crowd's page {page}"
    assert pd.Timestamp(page_alerts[0].window_start) - start <= pd.Timedelta(minutes=2)
    # Nothing else alerted: only the site and the crowd's page, only spikes of requests,
    # only during the 10 minutes of the crowd.
    assert {r.series for r in rows} == {SITE_SERIES, page}
    assert {(r.metric, r.direction) for r in rows} == {("requests", "spike")}
    end = start + pd.Timedelta(minutes=10)
    assert all(start - pd.Timedelta(minutes=1) < pd.Timestamp(r.window_start) < end for r in rows)
    assert all(r.z > 5 and r.value >= 20 for r in rows)


def test_a_steady_day_raises_no_alert(steady_day):
    config, _, rows, progress = steady_day[:4]
    assert rows == []
    # ... over the whole day: the final no-data micro-batch took the watermark to the last
    # quarter hour (that the site series scored every minute is checked below).
    assert watermark_of(progress) >= pd.Timestamp(config.start).tz_convert(None) + pd.Timedelta(
        hours=23, minutes=45
    )


def test_state_holds_only_the_series_seen_within_the_idle_timeout(spark, steady_day):
    config, lines, _, progress, checkpoint = steady_day
    watermark = watermark_of(progress)
    start = pd.Timestamp(config.start).tz_convert(None)
    last_end: dict[str, pd.Timestamp] = {}
    for line in lines:
        end = pd.Timestamp(int(line.event_s) // 60 * 60 + 60, unit="s")
        last_end[SITE_SERIES] = end
        path = line.text.split('"')[1].split(" ")[1].split("?")[0]
        if path.lower().endswith(CONTENT):
            last_end[path] = end
    expected = {s for s, end in last_end.items() if end + IDLE > watermark}
    state = spark.read.format("statestore").option("stateVarName", "series").load(str(checkpoint))
    stored = {r.key.series: r.value for r in state.collect()}
    assert set(stored) == expected
    assert len(set(last_end) - expected) >= 100  # pages seen earlier in the day, forgotten
    minutes_scored = (watermark - start) // pd.Timedelta(minutes=1)
    assert stored[SITE_SERIES].n == minutes_scored
    timers = spark.read.format("statestore").option("readRegisteredTimers", "true")
    assert timers.load(str(checkpoint)).count() == len(expected)  # one timer per series


# -- score_minutes: the detector on each micro-batch's final minutes ---------------------------

#: Small settings, so that short series warm up, alert and go idle.
SMALL = AlertConfig(warmup_minutes=3, min_requests=5, min_errors=2, idle_timeout_minutes=10)
STATE_NUMBERS = ALERT_STATE_SCHEMA.fieldNames()[1:]
#: An alert as the processor and ``_score_group`` build it (times in ms).
ALERT_ROW = ("series", "window_start_ms", "window_end_ms", "metric", *ALERT_COLUMNS[4:])
_ARROW = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64()}
MINUTES_ARROW = pa.schema(
    [(f.name, _ARROW[f.dataType.simpleString()]) for f in SERIES_MINUTE_COLUMNS]
)
STATE_ARROW = pa.schema([(f.name, _ARROW[f.dataType.simpleString()]) for f in ALERT_STATE_SCHEMA])


def arrow_table(schema: pa.Schema, rows) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)


def score_in_python(minutes, state, watermark_ms, config):
    """:func:`score_minutes` without Spark: ``_score_group`` once per series of either input,
    as the cogroup calls it. ``minutes``: ``(series, minute_ms, requests, errors)`` tuples;
    ``state``: series → its state numbers. Returns the alerts as ``(series, window_start_ms,
    window_end_ms, metric, value, mean, std, z, direction)`` and the new state."""
    steps = _SeriesSteps(config)
    alerts, new_state = [], {}
    for series in sorted({m[0] for m in minutes} | set(state)):
        left = arrow_table(MINUTES_ARROW, [m for m in minutes if m[0] == series])
        right = arrow_table(STATE_ARROW, [(series, *state[series])] if series in state else [])
        for row in _score_group(steps, watermark_ms, (pa.scalar(series),), left, right).to_pylist():
            if row["kind"] == "alert":
                alerts.append(tuple(row[c] for c in ALERT_ROW))
            else:
                new_state[series] = tuple(row[c] for c in STATE_NUMBERS)
    return alerts, new_state


def score_calls_in_python(calls, config):
    """Run :func:`score_in_python` call after call, carrying the state; all alerts, last state."""
    alerts, state = [], {}
    for minutes, watermark_ms in calls:
        found, state = score_in_python(minutes, state, watermark_ms, config)
        alerts.extend(found)
    return sorted(alerts), state


def cut(minutes, watermarks):
    """Split final minutes into calls: each call gets the minutes its watermark made final."""
    calls, done = [], -math.inf
    for w in watermarks:
        calls.append(([m for m in minutes if done < m[1] + MINUTE_MS <= w], w))
        done = w
    return calls


#: Minutes of one series: blocks at a level (10 or 100 requests a minute) after silent gaps
#: around the idle timeout (10); in a block, a minute is normal, silent ("0", a row with no
#: requests: the same as no row), a spike, or an error-rate spike.
SERIES_BLOCKS = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 3, 9, 10, 11, 25]),
        st.sampled_from([10, 100]),
        st.lists(st.sampled_from(["n", "n", "n", "n", "0", "spike", "err"]), max_size=25),
    ),
    min_size=1,
    max_size=5,
)


def block_counts(level: int, kinds: list[str]) -> list[tuple[int, int]]:
    normal = [(level + i % 3 - 1, i % 2) for i in range(len(kinds))]
    special = {"0": (0, 0), "spike": (6 * level, 0), "err": (level, level // 2 + 2)}
    return [special.get(kind, n) for kind, n in zip(kinds, normal, strict=True)]


@st.composite
def minutes_and_watermarks(draw):
    """Minutes of two series, then increasing minute-aligned watermarks, the last past them."""
    minutes = []
    for series in (SITE_SERIES, "/a.html"):
        minute = 0
        for gap, level, kinds in draw(SERIES_BLOCKS):
            minute += gap
            for requests, errors in block_counts(level, ["n", *kinds]):
                minutes.append((series, T0 + minute * MINUTE_MS, requests, errors))
                minute += 1
    last = max(m[1] for m in minutes) // MINUTE_MS - T0 // MINUTE_MS + 1
    cuts = draw(st.lists(st.integers(1, last), max_size=6, unique=True))
    final = last + draw(st.sampled_from([0, 5, 10, 40]))
    return minutes, [T0 + c * MINUTE_MS for c in sorted({*cuts, final})]


@settings(max_examples=60, deadline=None)
@given(case=minutes_and_watermarks())
def test_scoring_in_one_call_or_many_gives_the_same_alerts_and_state(case):
    minutes, watermarks = case
    final = watermarks[-1]
    one = score_calls_in_python([([m for m in minutes if m[1] + MINUTE_MS <= final], final)], SMALL)
    assert score_calls_in_python(cut(minutes, watermarks), SMALL) == one
    no_zero_rows = [m for m in minutes if m[2] > 0]
    assert score_calls_in_python(cut(no_zero_rows, watermarks), SMALL) == one


@settings(max_examples=25, deadline=None)
@given(case=minutes_and_watermarks())
def test_the_streaming_processor_gives_the_same_alerts_and_state(case):
    minutes, watermarks = case
    expected_alerts, expected_state = score_calls_in_python(cut(minutes, watermarks), SMALL)
    tester = TwsTester(
        AlertProcessor(SMALL),
        timeMode="EventTime",
        eventTimeExtractor=lambda row: int(row["minute_ms"]) + 1000,
    )
    out = []
    for call, watermark_ms in cut(minutes, watermarks):  # rows arrive before their minute ends
        for series in (SITE_SERIES, "/a.html"):
            rows = [
                minute_rows((m - T0) // MINUTE_MS, r, e) for s, m, r, e in call if s == series and r
            ]
            if rows:
                out.append(tester.testInPandas(series, pd.concat(rows, ignore_index=True)))
        out.append(tester.setWatermark(watermark_ms))
    got = sorted(
        tuple(row)
        for o in out
        if isinstance(o, pd.DataFrame) and not o.empty  # no output: [] or a frame without columns
        for row in o[list(ALERT_ROW)].values.tolist()
    )
    assert got == expected_alerts
    for series in (SITE_SERIES, "/a.html"):
        stored = tester.peekValueState("series", series)
        if series not in expected_state:
            assert stored is None
        else:
            assert (*stored[:6], *stored[9:11]) == expected_state[series]
            assert stored[6] == []  # no minute pending: every row came before its watermark


def test_two_state_rows_for_one_series_are_an_error():
    state = arrow_table(STATE_ARROW, [(SITE_SERIES, 1, 1.0, 0.0, 1, 0.0, 0.0, T0, T0)] * 2)
    with pytest.raises(ValueError, match="2 rows for series 'site'"):
        _score_group(
            _SeriesSteps(SMALL), T0, (pa.scalar("site"),), MINUTES_ARROW.empty_table(), state
        )


# -- score_minutes on Spark -----------------------------------------------------------------------


def minutes_df(spark, rows):
    return spark.createDataFrame(rows, SERIES_MINUTE_COLUMNS)


def collected(df):
    return sorted(tuple(r) for r in df.collect())


def state_of(new_state) -> dict:
    return {r.series: tuple(r)[1:] for r in new_state.collect()}


def at(minute: int) -> int:
    return T0 + minute * MINUTE_MS


def test_empty_inputs_give_empty_frames_with_the_schemas(spark):
    alerts, new_state = score_minutes(
        minutes_df(spark, []), spark.createDataFrame([], ALERT_STATE_SCHEMA), T0, AlertConfig()
    )
    assert alerts.dtypes == [
        ("series", "string"),
        ("metric", "string"),
        ("window_start", "timestamp"),
        ("window_end", "timestamp"),
        ("value", "double"),
        ("mean", "double"),
        ("std", "double"),
        ("z", "double"),
        ("direction", "string"),
    ]
    assert tuple(alerts.columns) == ALERT_COLUMNS
    assert new_state.schema == ALERT_STATE_SCHEMA
    assert alerts.count() == 0
    assert new_state.count() == 0


def ts(minute: int):
    return pd.Timestamp(at(minute), unit="ms").to_pydatetime()


def test_an_idle_series_scores_its_silence_then_leaves_the_state(spark):
    def call(rows, state, watermark_ms):
        alerts, new_state = score_minutes(minutes_df(spark, rows), state, watermark_ms, SMALL)
        return collected(alerts), spark.createDataFrame(new_state.collect(), ALERT_STATE_SCHEMA)

    rows = [(SITE_SERIES, at(m), 100, 0) for m in range(6)]
    rows += [("/a.html", at(m), 100, 0) for m in range(5)] + [("/b.html", at(5), 10, 0)]
    alerts, state1 = call(rows, spark.createDataFrame([], ALERT_STATE_SCHEMA), at(6))
    assert alerts == []
    first = state_of(state1)
    assert first["/a.html"] == (5, 100.0, 0.0, 5, 0.0, 0.0, at(5), at(5))
    # Both pages are only in the state (an empty side of the cogroup). At its idle deadline
    # (minute 5 + 10) /a.html has its 10 silent minutes scored — the first a drop from 100 —
    # and its row goes; /b.html, seen a minute later, is not idle yet: its row is unchanged.
    alerts, state2 = call([(SITE_SERIES, at(m), 100, 0) for m in range(6, 15)], state1, at(15))
    assert {a[0] for a in alerts} == {"/a.html"}
    assert alerts[0][1:3] == ("requests", ts(5))
    assert all(a[-1] == "drop" and ts(5) <= a[2] < ts(15) for a in alerts)
    second = state_of(state2)
    assert set(second) == {SITE_SERIES, "/b.html"}
    assert second["/b.html"] == first["/b.html"]
    # /a.html comes back: a new detector, warming up again (no alert for 1000 requests in its
    # third minute); the site, idle since minute 15, and /b.html leave after their silences.
    back = [("/a.html", at(40), 100, 0), ("/a.html", at(41), 100, 0), ("/a.html", at(42), 1000, 0)]
    alerts, state3 = call(back, state2, at(43))
    assert {a[0] for a in alerts} == {SITE_SERIES}
    assert min(a[2] for a in alerts) == ts(15)
    third = state_of(state3)
    assert list(third) == ["/a.html"]
    assert third["/a.html"][0] == third["/a.html"][3] == 3
    assert third["/a.html"][6:] == (at(43), at(43))


def batch_minutes(spark, raw):
    return series_minutes(events(parse(raw, compile_format("common"))))


def streaming_watermark_ms(progress) -> int:
    return int(pd.Timestamp(progress[-1]["eventTime"]["watermark"]).value // 1_000_000)


def score_final(minutes, watermark_ms, spark, config=None):
    """Score every minute the watermark made final in one call; alerts and state collected."""
    final = minutes.where(F.col("minute_ms") + MINUTE_MS <= watermark_ms)
    empty = spark.createDataFrame([], ALERT_STATE_SCHEMA)
    alerts, new_state = score_minutes(final, empty, watermark_ms, config or AlertConfig())
    return collected(alerts), state_of(new_state)


def assert_same_state_as_the_stream(spark, checkpoint, state):
    """The streaming state store holds the same detector for every series ``state`` holds."""
    stored = spark.read.format("statestore").option("stateVarName", "series").load(str(checkpoint))
    stored = {r.key.series: r.value for r in stored.collect()}
    assert state and set(state) <= set(stored)
    for series, numbers in state.items():
        v = stored[series]
        assert (*v[:6], v.scored_until_ms) == numbers[:7], series
        if not v.minutes:
            assert v.last_data_end_ms == numbers[7]
    # A series the stream still holds but score_minutes dropped has a minute arrived but not
    # yet final (the stream keeps it; score_minutes never sees a minute before it is final).
    assert all(stored[s].minutes for s in set(stored) - set(state))


def test_score_minutes_gives_the_streaming_alerts_on_a_flash_crowd(spark, flash_run):
    rows, progress, input_dir = flash_run[2:]
    raw = spark.read.text(str(input_dir)).select(
        "value", F.col("_metadata.file_path").alias("source_file")
    )
    alerts, _ = score_final(batch_minutes(spark, raw), streaming_watermark_ms(progress), spark)
    assert len(alerts) >= 3
    assert alerts == sorted(tuple(r) for r in rows)


@pytest.fixture(scope="module")
def nasa_stream(spark, nasa_day, tmp_path_factory):
    """The real day through :func:`anomaly_alerts` (availableNow: a micro-batch of data, then
    one without, whose watermark scores the day)."""
    tmp = tmp_path_factory.mktemp("alerts_nasa")
    write_chunks(nasa_lines(nasa_day), tmp / "in", per_file=40_000)
    raw = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .text(str(tmp / "in"))
        .select("value", F.col("_metadata.file_path").alias("source_file"))
    )
    ev = events(parse(raw, compile_format("common")))
    query = (
        anomaly_alerts(ev.withWatermark("event_time", "10 minutes"))
        .writeStream.format("memory")
        .queryName("alerts_nasa")
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        progress = query.recentProgress
    finally:
        query.stop()
    rows = sorted(tuple(r) for r in spark.table("alerts_nasa").collect())
    return rows, streaming_watermark_ms(progress), tmp / "checkpoint"


@pytest.fixture(scope="module")
def nasa_minutes(spark, nasa_day):
    minutes = batch_minutes(spark, read_lines(spark, [nasa_day])).toPandas()
    return spark.createDataFrame(minutes, SERIES_MINUTE_COLUMNS)


def test_score_minutes_gives_the_streaming_alerts_and_state_on_the_nasa_day(
    spark, nasa_stream, nasa_minutes
):
    rows, watermark_ms, checkpoint = nasa_stream
    alerts, state = score_final(nasa_minutes, watermark_ms, spark)
    assert alerts == rows
    assert len(rows) >= 1
    assert_same_state_as_the_stream(spark, checkpoint, state)


def test_the_nasa_day_over_many_calls_gives_the_alerts_and_state_of_one(
    spark, nasa_minutes, tmp_path
):
    """Three calls, the state carried through Parquet as the pipeline carries it, against one;
    sensitive settings, so that the day has alerts on several pages (it has no server error:
    the error rate is covered by the tests without Spark)."""
    config = AlertConfig(k=3, warmup_minutes=10, min_requests=3, idle_timeout_minutes=30)
    first, last = nasa_minutes.agg(F.min("minute_ms"), F.max("minute_ms")).first()
    watermarks = [first + h * 3_600_000 + 17 * MINUTE_MS for h in (6, 14)]
    watermarks.append(last + MINUTE_MS)  # every minute final, the recent pages still live
    one_alerts, one_state = score_final(nasa_minutes, watermarks[-1], spark, config)
    assert len(one_alerts) >= 20
    assert len({a[0] for a in one_alerts}) >= 5
    assert len(one_state) >= 50

    many_alerts, state, done = [], spark.createDataFrame([], ALERT_STATE_SCHEMA), -1
    for i, w in enumerate(watermarks):
        part = nasa_minutes.where(
            (F.col("minute_ms") + MINUTE_MS > done) & (F.col("minute_ms") + MINUTE_MS <= w)
        )
        alerts, new_state = score_minutes(part, state, w, config)
        many_alerts += collected(alerts)
        new_state.write.parquet(str(tmp_path / str(i)))
        state = spark.read.schema(ALERT_STATE_SCHEMA).parquet(str(tmp_path / str(i)))
        done = w
    assert sorted(many_alerts) == one_alerts
    assert state_of(state) == one_state
