"""The ingest-only micro-batch in one pass (logstream.pipeline.ingest.one_pass): the same
outputs as the Spark steps, certified or not, and a certificate that holds only when neither
in-batch rule can fire."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.pipeline.helpers import (
    config,
    nasa_lines,
    pipeline_for,
    run_pipeline,
    run_to_end,
    write_chunks,
)
from tests.pipeline.test_skew import epoch_ms, skewed_file

import logstream.pipeline.ingest.stage as stage_module
from logstream.pipeline import Pipeline
from logstream.pipeline.ingest.one_pass import certified, gap_floor_ms
from logstream.pipeline.ingest.skew import skew_cut
from logstream.pipeline.ingest.watermark import ahead_bound_ms, quantile_index
from logstream.sinks.route import OutputPublisher

DELAY_MS = 600_000


# -- the certificate --------------------------------------------------------------------------


def _exact_rules_fire(t_ms: np.ndarray, delay_ms: int) -> bool:
    """Whether the in-batch rule or the skew's gap test fires on these event times (sorted):
    :func:`ahead_bound_ms` over the newest 0.1 % and :func:`skew_cut` over the delay-wide
    buckets, as the Spark steps compute them."""
    n = len(t_ms)
    if n < 2 or t_ms[-1] - t_ms[0] <= delay_ms:
        return False
    top = t_ms[quantile_index(n) :]
    buckets, counts = np.unique(t_ms // delay_ms, return_counts=True)
    return ahead_bound_ms(top, delay_ms) is not None or skew_cut(buckets, counts, n) is not None


@st.composite
def event_times(draw) -> tuple[np.ndarray, int]:
    """A watermark delay, and sorted event times around it: runs of events up to 1.6 delays
    apart, with gaps of up to 3 delays between runs, some of them near the newest events."""
    delay_ms = draw(st.sampled_from([600_000, 60_000, 7_001]))
    runs = draw(st.lists(st.tuples(st.integers(1, 300), st.integers(1, delay_ms * 8 // 5))))
    gaps = draw(st.lists(st.integers(0, 3 * delay_ms), min_size=len(runs), max_size=len(runs)))
    t, out = 0, [0]
    for (count, step), gap in zip(runs, gaps, strict=True):
        t += gap
        for _ in range(count):
            t += draw(st.integers(0, step))
            out.append(t)
    return np.array(out, dtype=np.int64), delay_ms


def _seconds(times: np.ndarray) -> int:
    """The observed sum: each event time in whole seconds, rounded down."""
    return int(np.floor_divide(times, 1000).sum())


@settings(max_examples=400, deadline=None)
@given(event_times(), st.integers(-(10**12), 10**12))
def test_a_certified_batch_is_one_no_rule_quarantines(drawn, shift):
    times, delay_ms = drawn
    times = times + shift  # before and after 1970: the seconds are rounded down either way
    n = len(times)
    halves = set((times // (delay_ms // 2)).tolist())
    if certified(n, int(times[0]), int(times[-1]), _seconds(times), halves, delay_ms):
        assert not _exact_rules_fire(times, delay_ms)


@settings(max_examples=200, deadline=None)
@given(event_times())
def test_no_event_before_a_gap_the_rules_read_is_below_the_gap_floor(drawn):
    """Markov's bound (one_pass module docstring), directly: the event before every gap of
    more than the delay with at most a fifth of the events after it is at or above
    :func:`gap_floor_ms`."""
    times, delay_ms = drawn
    n = len(times)
    floor = gap_floor_ms(n, _seconds(times), int(times[-1]))
    for i in np.flatnonzero(np.diff(times) > delay_ms):
        if 5 * (n - 1 - i) <= n:
            assert times[i] >= floor


def test_the_31_nasa_days_are_certified_and_a_gap_in_their_newest_fifth_is_not(nasa_day):
    day = np.sort(np.array([epoch_ms(line) for line in nasa_lines(nasa_day)], dtype=np.int64))
    days = np.concatenate([day + d * 86_400_000 for d in range(31)])
    halves = set((days // (DELAY_MS // 2)).tolist())
    assert certified(len(days), int(days[0]), int(days[-1]), _seconds(days), halves, DELAY_MS)
    # an hour without requests on the last evening: no certificate (the Spark steps decide)
    last = days[-1] - 3 * 3_600_000
    quiet = days[(days < last) | (days > last + 3_600_000)]
    halves = set((quiet // (DELAY_MS // 2)).tolist())
    args = (int(quiet[0]), int(quiet[-1]), _seconds(quiet), halves, DELAY_MS)
    assert not certified(len(quiet), *args)
    # Markov's floor: below two fifths of the events (three eighths of an even span)
    assert gap_floor_ms(len(days), _seconds(days), int(days[-1])) < days[len(days) * 2 // 5]


# -- the pipeline ---------------------------------------------------------------------------


def _bad(n: int) -> list[str]:
    return [f"not a log line {i} \x7f" for i in range(n)]


@pytest.fixture(scope="module")
def day(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)


def _inputs(day: list[str], root: Path) -> dict[str, Path]:
    """Three inputs: two micro-batches with quarantined lines, then late events; a file with
    a minority three days ahead between its lines (the skew fires); the day's evening with a
    quiet hour in its newest fifth (not certified, and no rule fires)."""
    rnd = random.Random(11)
    first, second = day[:12_000], day[12_000:24_000]
    for line in _bad(3):
        first.insert(rnd.randrange(len(first)), line)
    second += day[100:150]  # older than the first micro-batch's watermark: late
    plain = root / "plain"
    for i, lines in enumerate((first, second)):
        write_chunks(lines, plain / f"{i}", per_file=len(lines), start_mtime=1_000_000 + i)
        (plain / f"{i}" / "chunk-0000.log").rename(plain / f"chunk-{i}.log")
        (plain / f"{i}").rmdir()
    skewed = root / "skewed"
    write_chunks(skewed_file(day), skewed, per_file=10**9)
    evening = day[-12_000:]
    times = [epoch_ms(line) for line in evening]
    cut = times[-1] - 2 * 3_600_000
    quiet_lines = [v for v, t in zip(evening, times, strict=True) if not cut <= t < cut + 3_600_000]
    quiet = root / "quiet"
    write_chunks(quiet_lines, quiet, per_file=10**9)
    return {"plain": plain, "skewed": skewed, "quiet": quiet}


def _run(spark, root: Path, input_dir: Path, one_pass: bool, monkeypatch) -> Pipeline:
    with monkeypatch.context() as m:
        if not one_pass:
            m.setattr(stage_module, "one_pass_eligible", lambda stage, batch_id: False)
        return run_pipeline(spark, root, input_dir, spark_steps=True, queries="none")


def _rows(spark, root: Path, output: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(str(root / "out" / output)).collect())


@pytest.fixture(scope="module")
def runs(spark, day, tmp_path_factory):
    root = tmp_path_factory.mktemp("one-pass")
    inputs = _inputs(day, root / "in")
    prepared: list[int] = []
    publish_prepared = OutputPublisher.publish_prepared
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(
            OutputPublisher,
            "publish_prepared",
            lambda self, out, batch_id: (
                prepared.append(batch_id) or publish_prepared(self, out, batch_id)
            ),
        )
        found = {}
        for name, input_dir in inputs.items():
            calls = len(prepared)
            one = _run(spark, root / name / "one", input_dir, True, monkeypatch)
            published = len(prepared) - calls
            steps = _run(spark, root / name / "steps", input_dir, False, monkeypatch)
            found[name] = (root / name, one, steps, published)
    return found


@pytest.mark.parametrize("name", ["plain", "skewed", "quiet"])
def test_the_outputs_equal_the_spark_steps(spark, runs, name):
    root, one, steps, _ = runs[name]
    for output in ("events", "late_events", "quarantine"):
        assert _rows(spark, root / "one", output) == _rows(spark, root / "steps", output), output
    for count in ("batches", "events", "late_events", "quarantined", "filtered"):
        assert getattr(one.ingest.totals, count) == getattr(steps.ingest.totals, count), count
    assert steps.ingest.paths["one_pass"] == 0
    hidden = [p.name for p in (root / "one" / "out").rglob(".[ps][rt]*") if p.is_dir()]
    assert hidden == []  # no prepared or staging directory left


def test_certified_micro_batches_write_quarantine_and_late_events_in_a_second_pass(runs):
    _, one, _, published = runs["plain"]
    assert one.ingest.paths == {"driver": 0, "one_pass": 2, "spark": 0}
    assert published == 2
    totals = one.ingest.totals
    assert (totals.events, totals.quarantined, totals.late_events) == (24_000, 3, 50)


def test_a_skewed_clock_takes_the_spark_steps_and_drops_the_prepared_events(runs):
    _, one, _, published = runs["skewed"]
    assert one.ingest.paths["spark"] == 1 and published == 0
    assert one.ingest.totals.quarantined == 300  # the skew's, as future_event_time


def test_a_quiet_hour_is_judged_exactly_and_the_prepared_events_kept(runs, day):
    _, one, _, published = runs["quiet"]
    assert one.ingest.paths["spark"] == 1 and published == 1
    assert one.ingest.totals.quarantined == 0


class _Crash(RuntimeError):
    pass


@pytest.mark.parametrize("moment", ["before_publish", "after_publish"])
def test_a_crash_in_the_one_pass_then_a_restart_delivers_each_line_once(
    spark, runs, tmp_path, monkeypatch, moment
):
    root, *_ = runs["plain"]
    input_dir = root.parent / "in" / "plain"
    crashed: list[int] = []
    publish_prepared = OutputPublisher.publish_prepared

    def crash_before(self, out, batch_id):
        if not crashed:
            crashed.append(batch_id)
            raise _Crash("killed before the prepared events were published")
        return publish_prepared(self, out, batch_id)

    def crash_after(step, batch_id):
        if step == "published_events" and not crashed:
            crashed.append(batch_id)
            raise _Crash("killed after the events were published")

    with monkeypatch.context() as m:
        if moment == "before_publish":
            m.setattr(OutputPublisher, "publish_prepared", crash_before)
        pipeline = pipeline_for(spark, config(tmp_path, input_dir, queries="none"), True)
        if moment == "after_publish":
            pipeline.ingest.step_hook = crash_after
        with pytest.raises(Exception, match="killed"):
            run_to_end(pipeline)
    assert crashed == [0]
    restarted = _run(spark, tmp_path, input_dir, True, monkeypatch)
    # replayed: published before the crash, the Spark steps (nothing twice); or prepared anew
    assert restarted.ingest.paths["one_pass"] == (1 if moment == "after_publish" else 2)
    for output in ("events", "late_events", "quarantine"):
        assert _rows(spark, tmp_path, output) == _rows(spark, root / "one", output), output
    ledger = "SELECT batch_id, events, late_events, quarantined FROM ledger ORDER BY 1"
    with sqlite3.connect(tmp_path / "store.db") as db:
        got = db.execute(ledger).fetchall()
    with sqlite3.connect(root / "one" / "store.db") as db:
        assert got == db.execute(ledger).fetchall() and len(got) == 2
