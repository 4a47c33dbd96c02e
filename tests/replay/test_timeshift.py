"""Reading and rewriting CLF times in plain Python, checked against ``datetime.strptime``."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstream.errors import ConfigError
from logstream.replay import find_clf_time, format_clf_time, iter_lines, shift_line
from logstream.replay.units import parse_duration
from tests import oracle

LINE = 'ppp44.crim.ca - - [09/Jul/1995:00:00:00 -0400] "GET /a.html HTTP/1.0" 200 85465'


def test_every_nasa_day_time_matches_strptime(nasa_day):
    checked = 0
    for line in iter_lines(nasa_day):
        found = find_clf_time(line)
        ref = oracle.parse_line(line)
        assert found is not None and ref is not None
        assert found.epoch_s == ref.epoch
        assert found.offset_minutes == -240
        assert line[found.start - 1] == "[" and line[found.end] == "]"
        checked += 1
    assert checked == 35272


def test_invalid_times_are_not_read():
    for bad in (
        "h - - [31/Jun/1995:00:00:00 -0400] x",  # no 31 June
        "h - - [09/Jux/1995:00:00:00 -0400] x",  # month name
        "h - - [09/Jul/1995:24:00:00 -0400] x",  # hour 24
        "h - - [09/Jul/1_95:00:00:00 -0400] x",  # int() would accept 1_95
        "h - - [09/Jul/1995:00:00:00 0400] x",  # no sign
        "h - - [09/Jul/1995:00:00:00 -0400 x",  # no closing bracket
        "h - - 09/Jul/1995:00:00:00 -0400 x",
        "",
    ):
        assert find_clf_time(bad) is None, bad


def test_a_bracket_before_the_time_is_skipped():
    line = 'h [x] u [01/Jan/2000:00:00:00 +0000] "GET / HTTP/1.0" 200 1'
    found = find_clf_time(line)
    assert found is not None and found.epoch_s == 946684800


@settings(max_examples=300, deadline=None)
@given(
    epoch=st.integers(0, 4_102_444_799),  # 1970 … 2099
    offset=st.integers(-14 * 60, 14 * 60),
)
def test_format_then_find_round_trips(epoch, offset):
    text = format_clf_time(epoch, offset)
    found = find_clf_time(f"h - - [{text}] x")
    assert found is not None
    assert (found.epoch_s, found.offset_minutes) == (epoch, offset)
    assert datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp() == epoch


def test_shift_rewrites_only_the_time_and_keeps_the_offset():
    found = find_clf_time(LINE)
    shifted = shift_line(LINE, found, 86400 * 366 + 3600)  # 1996 is a leap year
    assert shifted == LINE.replace("09/Jul/1995:00:00:00 -0400", "09/Jul/1996:01:00:00 -0400")
    assert shift_line(LINE, found, 0) is LINE


def test_shift_across_a_year_end_in_a_positive_offset():
    line = 'h - - [31/Dec/2023:23:59:30 +0530] "GET / HTTP/1.1" 200 1'
    shifted = shift_line(line, find_clf_time(line), 45)
    assert "[01/Jan/2024:00:00:15 +0530]" in shifted


def test_durations():
    assert parse_duration("10m") == 600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("250ms") == 0.25
    assert parse_duration("2d") == 172800
    assert parse_duration("90") == 90


def test_bad_durations_name_the_option():
    for bad in ("ten minutes", "10x", "-5", "m10", ""):
        with pytest.raises(ConfigError, match="--late-by"):
            parse_duration(bad, option="--late-by")
