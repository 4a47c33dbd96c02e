"""Pacing logic on a manual clock: no test here sleeps."""

from __future__ import annotations

import pytest

from logstream.errors import ConfigError
from logstream.replay import ManualClock, Pacer


def deadlines(pacer: Pacer, times: list[float | None]) -> list[float]:
    return [pacer.deadline(t) for t in times]


def test_speedup_divides_event_time_and_anchors_at_the_first_line():
    clock = ManualClock(start=100.0)
    pacer = Pacer(clock, speedup=10)
    assert deadlines(pacer, [1000.0, 1010.0, 1010.0, 1030.0]) == [100.0, 101.0, 101.0, 103.0]
    assert pacer.event_time_reached == 1030.0
    assert pacer.lines_paced == 4


def test_an_out_of_order_line_is_due_at_once_and_time_never_goes_back():
    pacer = Pacer(ManualClock(), speedup=1)
    assert deadlines(pacer, [50.0, 60.0, 40.0, 61.0]) == [0.0, 10.0, 10.0, 11.0]
    assert pacer.event_time_reached == 61.0


def test_lines_without_time_are_due_with_the_previous_line():
    pacer = Pacer(ManualClock(), speedup=2)
    assert deadlines(pacer, [None, None, 10.0, None, 14.0, None]) == [0, 0, 0, 0, 2.0, 2.0]


def test_rate_spaces_lines_evenly_whatever_their_times():
    pacer = Pacer(ManualClock(start=5.0), rate_per_s=4)
    assert deadlines(pacer, [0.0, 1e9, None, 3.0, -7.0]) == [5.0, 5.25, 5.5, 5.75, 6.0]


def test_pause_pushes_later_deadlines_back():
    pacer = Pacer(ManualClock(), rate_per_s=1)
    assert pacer.deadline(None) == 0.0
    pacer.pause(2.5)
    assert pacer.deadline(None) == 3.5


def test_deadlines_are_absolute_so_a_late_wake_up_is_caught_up():
    clock = ManualClock()
    pacer = Pacer(clock, speedup=1)
    pacer.deadline(0.0)
    clock.advance(5.0)  # the process was descheduled for 5 s
    assert pacer.deadline(1.0) == 1.0  # in the past: sent at once
    assert pacer.deadline(6.0) == 6.0  # back on schedule, no drift


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"speedup": 2, "rate_per_s": 3},
        {"speedup": 0},
        {"rate_per_s": -1},
        {"speedup": float("inf")},
    ],
)
def test_bad_pacing_is_rejected(kwargs):
    with pytest.raises(ConfigError):
        Pacer(ManualClock(), **kwargs)
