"""The replay loop on a manual clock: order, pacing totals, shifts, loops and late lines."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import threading
import tracemalloc
from datetime import UTC, datetime

import pytest

from logstream.errors import ConfigError
from logstream.replay import (
    FileSink,
    LineSink,
    ListSink,
    ManualClock,
    Record,
    Replayer,
    ReplayOptions,
    find_clf_time,
    iter_file_records,
    iter_lines,
    replay_files,
)
from tests.conftest import NASA_JUL_2000, data_file

DAY_SPAN_S = 86399  # 09/Jul/1995 00:00:00 … 23:59:59


def write_lines(path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def clf(second: int, host: str = "h") -> str:
    minute, sec = divmod(second, 60)
    return f'{host} - - [01/Jan/2000:00:{minute:02d}:{sec:02d} +0000] "GET /{host} HTTP/1.0" 200 1'


class CountingSink(LineSink):
    def __init__(self) -> None:
        self.count = 0

    def write(self, line: str) -> None:
        self.count += 1


@pytest.fixture(scope="module")
def jul_2000():
    return data_file(NASA_JUL_2000)


def test_nasa_day_at_speedup_1440_takes_one_minute_of_clock_time(nasa_day):
    clock, sink = ManualClock(), ListSink()
    summary = replay_files([nasa_day], sink, ReplayOptions(speedup=1440), clock=clock)
    assert sink.lines == list(iter_lines(nasa_day))
    assert clock.monotonic() == pytest.approx(DAY_SPAN_S / 1440, abs=0.002)
    assert summary.lines_sent == summary.lines_read == 35272
    assert summary.first_event_s is not None
    assert datetime.fromtimestamp(summary.first_event_s, UTC) == datetime(1995, 7, 9, 4, tzinfo=UTC)
    assert summary.event_time_reached == datetime(1995, 7, 10, 3, 59, 59, tzinfo=UTC)
    assert summary.completed and summary.stopped_by == "end of input"


def test_fixed_rate_ignores_event_times(jul_2000):
    clock, sink = ManualClock(), ListSink()
    replay_files([jul_2000], sink, ReplayOptions(rate_per_s=500), clock=clock)
    assert len(sink.lines) == 2000
    assert clock.monotonic() == pytest.approx(1999 / 500, abs=0.002)


def test_replay_memory_stays_flat_on_a_whole_day(nasa_day):
    tracemalloc.start()
    try:
        sink = CountingSink()
        replay_files([nasa_day], sink, ReplayOptions(speedup=1e9), clock=ManualClock())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.count == 35272
    assert peak < 1_000_000  # the decompressed day is 3.9 MB


def test_an_endless_source_is_streamed_not_collected():
    def source():
        return (Record(f"line {i}", None, "gen", i) for i in itertools.count(1))

    sink = ListSink()
    summary = Replayer(
        source, sink, ReplayOptions(rate_per_s=1e6, limit_lines=5000), clock=ManualClock()
    ).run()
    assert summary.stopped_by == "limit" and not summary.completed
    assert sink.lines[-1] == "line 5000" and len(sink.lines) == 5000


def test_lines_without_a_readable_time_are_sent_with_the_previous_time(tmp_path):
    lines = [
        "garbage first",
        clf(0, "a"),
        "garbage",
        clf(10, "b"),
        "x [99/Zzz/2000] y",
        clf(20, "c"),
    ]
    clock, sink = ManualClock(), ListSink()
    summary = replay_files(
        [write_lines(tmp_path / "l.log", lines)], sink, ReplayOptions(speedup=2), clock=clock
    )
    assert sink.lines == lines
    assert summary.lines_without_time == 3
    assert clock.monotonic() == pytest.approx(10.0, abs=0.002)


def test_crlf_and_gzip_by_content_and_undecodable_bytes_round_trip(tmp_path, crlf_log):
    renamed = tmp_path / "no-gz-extension.log"
    shutil.copy(crlf_log, renamed)
    lines = list(iter_lines(renamed))
    assert len(lines) == 1546 and not any("\r" in line for line in lines)

    raw = b'h - - [01/Jan/2000:00:00:00 +0000] "GET /caf\xe9\xff HTTP/1.0" 200 1\n'
    src = tmp_path / "latin1.log.gz"
    with gzip.open(src, "wb") as fh:
        fh.write(raw * 3)
    out = tmp_path / "out.log"
    replay_files([src], FileSink(out), ReplayOptions(rate_per_s=1e6), clock=ManualClock())
    assert out.read_bytes() == raw * 3


def test_shift_to_now_rebases_times_in_the_lines_own_offset(jul_2000):
    now = datetime(2030, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
    sink = ListSink()
    summary = Replayer(
        lambda: iter_file_records([jul_2000]),
        sink,
        ReplayOptions(speedup=1e6, shift_to_now=True),
        clock=ManualClock(),
        now=lambda: now,
    ).run()
    original = list(iter_lines(jul_2000))
    assert sink.lines[0].startswith("199.72.81.55 - - [01/Jan/2030:23:04:05 -0400] ")
    shift = summary.shift_seconds
    assert shift == int(now.timestamp()) - 804571201  # 01/Jul/1995:00:00:01 -0400
    for before, after in zip(original, sink.lines, strict=True):
        old, new = find_clf_time(before), find_clf_time(after)
        assert new.epoch_s - old.epoch_s == shift
        assert new.offset_minutes == old.offset_minutes == -240
        assert after[: new.start] == before[: old.start] and after[new.end :] == before[old.end :]


def test_loop_shifts_each_pass_past_the_previous_one(tmp_path):
    lines = [clf(0, "a"), clf(10, "b"), clf(20, "c")]
    clock, sink = ManualClock(), ListSink()
    summary = replay_files(
        [write_lines(tmp_path / "l.log", lines)],
        sink,
        ReplayOptions(speedup=1, loop=True, max_passes=3),
        clock=clock,
    )
    seconds = [find_clf_time(line).epoch_s - 946684800 for line in sink.lines]
    assert seconds == [0, 10, 20, 21, 31, 41, 42, 52, 62]
    assert [line.rsplit('"', 1)[0][-12:] for line in sink.lines[3:6]] == [
        line.rsplit('"', 1)[0][-12:] for line in lines
    ]
    assert summary.passes == 3 and summary.shift_seconds == 42
    assert clock.monotonic() == pytest.approx(62.0, abs=0.002)


def test_loop_runs_until_the_limit(tmp_path):
    src = write_lines(tmp_path / "l.log", [clf(0), clf(1)])
    sink = ListSink()
    summary = replay_files(
        [src], sink, ReplayOptions(rate_per_s=1e6, loop=True, limit_lines=7), clock=ManualClock()
    )
    assert len(sink.lines) == 7 and summary.passes == 4 and summary.stopped_by == "limit"


def late_run(path, seed: int):
    sink = ListSink()
    options = ReplayOptions(speedup=1e6, late_fraction=0.05, late_by_seconds=120, seed=seed)
    summary = replay_files([path], sink, options, clock=ManualClock())
    return sink.lines, summary


def test_late_lines_are_held_back_by_event_time_and_listed_in_the_summary(jul_2000):
    original = list(iter_lines(jul_2000))
    sent, summary = late_run(jul_2000, seed=7)
    times = [find_clf_time(line).epoch_s for line in original]
    assert times == sorted(times)  # the oracle below assumes a sorted input

    assert 60 < summary.late_lines < 140  # 5 % of 2000, binomial
    assert summary.late_lines == len(summary.late)
    assert sorted(sent) == sorted(original)
    late_numbers = {late.line_number for late in summary.late}
    late_positions = {late.sent_index for late in summary.late}
    for late in summary.late:
        assert sent[late.sent_index - 1] == original[late.line_number - 1]
        assert late.event_time.timestamp() == times[late.line_number - 1]
    # Without the late lines, the order is exactly the input order.
    assert [s for i, s in enumerate(sent, 1) if i not in late_positions] == [
        o for i, o in enumerate(original, 1) if i not in late_numbers
    ]
    # A late line goes out once the replay's event time reaches its time + late_by: after
    # every on-time line older than that, right before the first on-time line that is not.
    on_time = [
        (i, find_clf_time(s).epoch_s) for i, s in enumerate(sent, 1) if i not in late_positions
    ]
    released_mid_stream = 0
    for late in summary.late:
        release = late.event_time.timestamp() + 120
        before = [t for i, t in on_time if i < late.sent_index]
        after = [t for i, t in on_time if i > late.sent_index]
        assert all(t < release for t in before)
        if after:
            assert after[0] >= release
            assert late.released_at.timestamp() >= release
            released_mid_stream += 1
    assert released_mid_stream > 0.9 * summary.late_lines


def test_late_lines_are_reproducible_by_seed(jul_2000):
    first = late_run(jul_2000, seed=7)[1]
    again = late_run(jul_2000, seed=7)[1]
    other = late_run(jul_2000, seed=8)[1]
    numbers = [late.line_number for late in first.late]
    assert numbers == [late.line_number for late in again.late]
    assert numbers != [late.line_number for late in other.late]


def test_summary_json_lists_late_lines(jul_2000, tmp_path):
    _, summary = late_run(jul_2000, seed=1)
    path = tmp_path / "summary.json"
    summary.write_json(path)
    data = json.loads(path.read_text())
    assert data["late_lines"] == len(data["late"]) == summary.late_lines
    first = data["late"][0]
    assert set(first) >= {"line_number", "event_time", "released_at", "sent_index", "source"}
    assert datetime.fromisoformat(first["event_time"]).tzinfo is not None
    assert data["options"]["late_by_seconds"] == 120


def test_progress_is_reported_and_a_stop_request_ends_the_replay(jul_2000):
    stop = threading.Event()
    seen: list[int] = []

    def progress(summary):
        seen.append(summary.lines_sent)
        if summary.lines_sent >= 500:
            stop.set()

    clock = ManualClock()
    replayer = Replayer(
        lambda: iter_file_records([jul_2000]),
        ListSink(),
        ReplayOptions(rate_per_s=100),
        clock=clock,
        progress=progress,
        progress_interval_s=1.0,
        stop_event=stop,
    )
    summary = replayer.run()
    assert summary.stopped_by == "stop"
    assert 500 <= summary.lines_sent < 2000
    assert seen == sorted(seen) and len(seen) >= 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"speedup": 10, "rate_per_s": 5}, "not both"),
        ({"late_fraction": 0.1}, "needs --late-by"),
        ({"late_fraction": 1.5, "late_by_seconds": 1}, "between 0 and 1"),
        ({"speedup": -1}, "positive"),
        ({"limit_lines": 0}, "at least 1"),
    ],
)
def test_bad_options_are_rejected(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ReplayOptions(**kwargs)
