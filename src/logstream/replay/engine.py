"""The replay loop: read records, shift their times, hold back late ones, pace, send.

One pass reads the input once, in order. For each line:

1. its event time is read (a line whose time cannot be read gets the previous line's time and
   is still sent);
2. with ``shift_to_now`` or in a later ``loop`` pass, the time text inside the line is
   rewritten, keeping its format and UTC offset;
3. with ``late_fraction``, a seeded random draw decides whether the line is *late*: it is held
   back until the replay's event time reaches ``event time + late_by_seconds`` and then sent
   among newer lines, exactly what a watermark must cope with;
4. the :class:`~logstream.replay.pacing.Pacer` says when it is due, and the sink gets it.

Memory stays constant in the input size: lines are streamed, only held-back late lines wait in
a heap, and the summary keeps at most ``max_late_recorded`` late-line entries.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from logstream.errors import ConfigError
from logstream.replay.clock import Clock, SystemClock
from logstream.replay.pacing import Pacer
from logstream.replay.reader import Record
from logstream.replay.sinks import LineSink
from logstream.replay.timeshift import shift_line, to_datetime

__all__ = ["LateLine", "ReplayOptions", "ReplaySummary", "Replayer"]

#: Lines sent early by at most this much instead of sleeping for it, in seconds.
MIN_SLEEP_S = 0.001
#: Longest single sleep, in seconds: sinks get a tick and progress is shown at least this often.
MAX_SLEEP_SLICE_S = 0.1
#: Buffered lines are flushed at least this often while no sleep happens, in seconds.
FLUSH_INTERVAL_S = 0.02
FLUSH_LINES = 512


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay.

    Attributes
    ----------
    speedup : float or None
        Event seconds per wall second (1440 replays a day in a minute). The default pacing when
        ``rate_per_s`` is not given is ``speedup = 1`` (real time).
    rate_per_s : float or None
        Fixed rate in lines per wall second instead of event-time pacing.
    loop : bool
        Replay again and again; each pass's event times are shifted past the previous pass's
        (by the input's event-time span + 1 s).
    max_passes : int or None
        With ``loop``, stop after this many passes (None: until stopped or ``limit_lines``).
    shift_to_now : bool
        Rebase event times so the first line's time is the present.
    late_fraction : float
        Fraction (0 … 1) of lines sent late.
    late_by_seconds : float
        How far behind the replay's event time a late line is sent, in event seconds.
    seed : int
        Seed of the late-line draw: same seed and input, same late lines.
    limit_lines : int or None
        Stop after sending this many lines.
    max_late_recorded : int
        Cap on the late-line entries kept for the summary (the count is always exact).

    Raises
    ------
    ConfigError
        When a value is out of range or ``late_fraction`` is given without ``late_by_seconds``.
    """

    speedup: float | None = None
    rate_per_s: float | None = None
    loop: bool = False
    max_passes: int | None = None
    shift_to_now: bool = False
    late_fraction: float = 0.0
    late_by_seconds: float = 0.0
    seed: int = 0
    limit_lines: int | None = None
    max_late_recorded: int = 100_000

    def __post_init__(self) -> None:
        if self.speedup is not None and self.rate_per_s is not None:
            raise ConfigError("give --speedup or --rate, not both")
        if self.speedup is None and self.rate_per_s is None:
            object.__setattr__(self, "speedup", 1.0)
        for name, value in (("speedup", self.speedup), ("rate", self.rate_per_s)):
            if value is not None and not (0 < value < math.inf):
                raise ConfigError(f"--{name} must be a positive number, got {value!r}")
        if not 0.0 <= self.late_fraction <= 1.0:
            raise ConfigError(f"--late-fraction must be between 0 and 1, got {self.late_fraction}")
        if self.late_by_seconds < 0 or not math.isfinite(self.late_by_seconds):
            raise ConfigError(
                f"--late-by must be a non-negative duration, got {self.late_by_seconds}"
            )
        if self.late_fraction > 0 and self.late_by_seconds == 0:
            raise ConfigError("--late-fraction needs --late-by (how late, e.g. 10m)")
        if self.limit_lines is not None and self.limit_lines < 1:
            raise ConfigError(f"--limit must be at least 1, got {self.limit_lines}")
        if self.max_passes is not None and self.max_passes < 1:
            raise ConfigError(f"max_passes must be at least 1, got {self.max_passes}")


@dataclass(frozen=True)
class LateLine:
    """A line the replay sent late.

    Attributes
    ----------
    pass_number : int
        1-based replay pass.
    line_number : int
        1-based line number in the pass's input (all files one after the other).
    source : str
        File the line comes from.
    source_line_number : int
        1-based line number within ``source``.
    event_time : datetime
        The line's event time as sent (after any shift), aware UTC.
    released_at : datetime
        The replay's event time when the line was sent, aware UTC: at least
        ``event_time + late_by``, except for lines still held back when the input ends, which
        are sent at once after the last line.
    sent_index : int
        1-based position of the line in the replay's output.
    """

    pass_number: int
    line_number: int
    source: str
    source_line_number: int
    event_time: datetime
    released_at: datetime
    sent_index: int


@dataclass
class ReplaySummary:
    """What a replay did; updated live (the progress display reads it) and final at the end.

    Attributes
    ----------
    lines_read, lines_sent : int
        Lines read from the input (all passes) and lines given to the sink.
    lines_without_time : int
        Lines whose event time could not be read (sent with the previous line's time).
    late_lines : int
        Lines sent late (exact, even past ``max_late_recorded``).
    passes : int
        Passes started.
    shift_seconds : int
        Event-time shift of the current (last) pass, in seconds.
    first_event_s, event_time_reached_s : float or None
        First and largest event time sent, seconds since the Unix epoch.
    wall_seconds : float
        Wall time from start to end (including waiting for a client), in seconds.
    sending_seconds : float
        Wall time from the first to the last line sent, in seconds.
    completed : bool
        The input was replayed to its end (not stopped by ``limit_lines`` or a stop request).
    stopped_by : str
        ``end of input``, ``limit``, ``stop`` or ``interrupted``.
    late : list of LateLine
        The late lines, in the order sent (at most ``max_late_recorded``).
    late_truncated : bool
        Whether ``late`` stopped recording at ``max_late_recorded``.
    sink : dict
        The sink's own counters (clients, chunks …).
    options : dict
        The options the replay ran with.
    """

    lines_read: int = 0
    lines_sent: int = 0
    lines_without_time: int = 0
    late_lines: int = 0
    passes: int = 0
    shift_seconds: int = 0
    first_event_s: float | None = None
    event_time_reached_s: float | None = None
    started_at: datetime | None = None
    wall_seconds: float = 0.0
    sending_seconds: float = 0.0
    completed: bool = False
    stopped_by: str = ""
    late: list[LateLine] = field(default_factory=list)
    late_truncated: bool = False
    sink: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    sink_status: str = ""

    @property
    def rate_per_s(self) -> float:
        """Lines sent per wall second, between the first and the last line sent."""
        if self.lines_sent < 2 or self.sending_seconds <= 0:
            return 0.0
        return (self.lines_sent - 1) / self.sending_seconds

    @property
    def event_time_reached(self) -> datetime | None:
        """The largest event time sent, aware UTC."""
        return None if self.event_time_reached_s is None else to_datetime(self.event_time_reached_s)

    def to_dict(self) -> dict[str, Any]:
        """Return the summary as JSON-ready data (times as ISO 8601 UTC strings)."""

        def iso(value: float | datetime | None) -> str | None:
            if value is None:
                return None
            return (to_datetime(value) if isinstance(value, float | int) else value).isoformat()

        return {
            "lines_read": self.lines_read,
            "lines_sent": self.lines_sent,
            "lines_without_time": self.lines_without_time,
            "late_lines": self.late_lines,
            "passes": self.passes,
            "shift_seconds": self.shift_seconds,
            "first_event_time": iso(self.first_event_s),
            "event_time_reached": iso(self.event_time_reached_s),
            "started_at": iso(self.started_at),
            "wall_seconds": round(self.wall_seconds, 6),
            "sending_seconds": round(self.sending_seconds, 6),
            "rate_per_s": round(self.rate_per_s, 3),
            "completed": self.completed,
            "stopped_by": self.stopped_by,
            "options": self.options,
            "sink": self.sink,
            "late_truncated": self.late_truncated,
            "late": [
                {
                    **{
                        k: v
                        for k, v in asdict(late).items()
                        if k not in ("event_time", "released_at")
                    },
                    "event_time": late.event_time.isoformat(),
                    "released_at": late.released_at.isoformat(),
                }
                for late in self.late
            ],
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as indented JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


# A held-back late line: (release time, sequence, event time, text, pass, line, source, source line)
_Held = tuple[float, int, float, str, int, int, str, int]


class Replayer:
    """Replay records into a sink.

    Parameters
    ----------
    source : callable
        Called once per pass with no argument; returns the pass's records in order (e.g.
        ``lambda: iter_file_records(files)``).
    sink : LineSink
        Where lines go (TCP server, chunk directory, file, list).
    options : ReplayOptions
    clock : Clock, optional
        The pacing clock; defaults to the system clock. Unit tests pass a
        :class:`~logstream.replay.clock.ManualClock`.
    now : callable, optional
        Returns the present as an aware datetime, for ``shift_to_now``; defaults to
        ``datetime.now(UTC)``.
    progress : callable, optional
        Called with the live :class:`ReplaySummary` at most every ``progress_interval_s``
        seconds of ``clock`` time, and once at the end.
    progress_interval_s : float, default 0.25
    stop_event : threading.Event, optional
        Set it (from any thread) to end the replay after the current line.
    """

    def __init__(
        self,
        source: Callable[[], Iterable[Record]],
        sink: LineSink,
        options: ReplayOptions | None = None,
        *,
        clock: Clock | None = None,
        now: Callable[[], datetime] | None = None,
        progress: Callable[[ReplaySummary], None] | None = None,
        progress_interval_s: float = 0.25,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.source = source
        self.sink = sink
        self.options = options or ReplayOptions()
        self.clock = clock or SystemClock()
        self.now = now or (lambda: datetime.now(UTC))
        self.progress = progress
        self.progress_interval_s = progress_interval_s
        self.stop_event = stop_event or threading.Event()
        self.pacer = Pacer(
            self.clock, speedup=self.options.speedup, rate_per_s=self.options.rate_per_s
        )
        self.summary = ReplaySummary(options=self._options_dict())
        self._pending = 0
        self._last_flush = 0.0
        self._last_progress = -math.inf
        self._first_emit: float | None = None

    def _options_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "speedup": o.speedup,
            "rate_per_s": o.rate_per_s,
            "loop": o.loop,
            "shift_to_now": o.shift_to_now,
            "late_fraction": o.late_fraction,
            "late_by_seconds": o.late_by_seconds,
            "seed": o.seed,
            "limit_lines": o.limit_lines,
        }

    # -- output --------------------------------------------------------------------------------
    def _flush(self) -> None:
        paused = self.sink.flush()
        if paused > 0:
            self.pacer.pause(paused)
        self._pending = 0
        self._last_flush = self.clock.monotonic()

    def _report(self, force: bool = False) -> None:
        now = self.clock.monotonic()
        if self.progress is not None and (
            force or now - self._last_progress >= self.progress_interval_s
        ):
            self._last_progress = now
            self.summary.event_time_reached_s = self.pacer.event_time_reached
            self.summary.sink_status = self.sink.status()
            self.progress(self.summary)

    def _wait_until(self, deadline: float) -> None:
        while True:
            remaining = deadline - self.clock.monotonic()
            if remaining <= MIN_SLEEP_S:
                return
            if self._pending:
                paused = self.sink.flush()
                self._pending = 0
                self._last_flush = self.clock.monotonic()
                if paused > 0:
                    self.pacer.pause(paused)
                    deadline += paused
                    continue
            self.sink.tick()
            self._report()
            if self.stop_event.is_set():
                raise _Stop("stop")
            self.clock.sleep(min(remaining, MAX_SLEEP_SLICE_S))

    def _emit(self, text: str, event_s: float | None) -> None:
        deadline = self.pacer.deadline(event_s)
        self._wait_until(deadline)
        self.sink.write_at(text, event_s)
        s = self.summary
        s.lines_sent += 1
        if s.first_event_s is None and event_s is not None:
            s.first_event_s = event_s
        now = self.clock.monotonic()
        if self._first_emit is None:
            self._first_emit = now
        s.sending_seconds = now - self._first_emit
        self._pending += 1
        if self._pending >= FLUSH_LINES or now - self._last_flush >= FLUSH_INTERVAL_S:
            self._flush()
        if now - self._last_progress >= self.progress_interval_s:
            self._report()

    def _check_stop(self) -> None:
        """Raise :class:`_Stop` after a line when a stop was asked for or the limit is reached."""
        if self.stop_event.is_set():
            raise _Stop("stop")
        limit = self.options.limit_lines
        if limit is not None and self.summary.lines_sent >= limit:
            raise _Stop("limit")

    def _release(self, held: list[_Held], up_to: float | None) -> None:
        """Send held-back late lines whose release time is ≤ ``up_to``."""
        while held and (up_to is None or held[0][0] <= up_to):
            release, _, event_s, text, pass_no, line_no, source, source_line = heapq.heappop(held)
            # At the end of the input (up_to None) held lines go at once, not release time.
            self._emit(text, release if up_to is not None else None)
            s = self.summary
            s.late_lines += 1
            if len(s.late) < self.options.max_late_recorded:
                s.late.append(
                    LateLine(
                        pass_number=pass_no,
                        line_number=line_no,
                        source=source,
                        source_line_number=source_line,
                        event_time=to_datetime(event_s),
                        released_at=to_datetime(self.pacer.event_time_reached or release),
                        sent_index=s.lines_sent,
                    )
                )
            else:
                s.late_truncated = True
            self._check_stop()

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> ReplaySummary:
        """Replay until the input ends (all passes), ``limit_lines``, or a stop request.

        Returns
        -------
        ReplaySummary
            Final counts. The sink is closed when this returns or raises.

        Raises
        ------
        KeyboardInterrupt
            Passed on after the sink is closed and the summary completed
            (``stopped_by = "interrupted"``).
        """
        o = self.options
        s = self.summary
        s.started_at = self.now()
        started = self.clock.monotonic()
        rng = random.Random(o.seed)
        held: list[_Held] = []
        sequence = 0
        base_shift: int | None = None
        span_min = span_max = None
        previous: float | None = None
        try:
            self.sink.start()
            self._last_flush = self.clock.monotonic()
            pass_no = 0
            while True:
                if pass_no > 0 and not o.loop:
                    break
                if o.max_passes is not None and pass_no >= o.max_passes:
                    break
                if pass_no > 0 and span_min is not None and span_max is not None:
                    s.shift_seconds = (base_shift or 0) + pass_no * int(span_max - span_min + 1)
                s.passes += 1
                line_in_pass = 0
                for record in self.source():
                    line_in_pass += 1
                    s.lines_read += 1
                    raw = record.event_s
                    if raw is not None:
                        if pass_no == 0:
                            span_min = raw if span_min is None else min(span_min, raw)
                            span_max = raw if span_max is None else max(span_max, raw)
                        if base_shift is None:
                            base_shift = (
                                math.floor(self.now().timestamp() - raw) if o.shift_to_now else 0
                            )
                            s.shift_seconds = base_shift
                        shift = s.shift_seconds
                        event_s: float | None = raw + shift
                        text = record.text
                        if shift and record.clf_time is not None:
                            text = shift_line(text, record.clf_time, shift)
                        previous = event_s
                    else:
                        s.lines_without_time += 1
                        event_s, text = previous, record.text
                    if (
                        o.late_fraction > 0
                        and rng.random() < o.late_fraction
                        and event_s is not None
                    ):
                        heapq.heappush(
                            held,
                            (
                                event_s + o.late_by_seconds,
                                sequence,
                                event_s,
                                text,
                                pass_no + 1,
                                line_in_pass,
                                record.source,
                                record.line_number,
                            ),
                        )
                        sequence += 1
                        continue
                    if held:
                        candidates = [
                            t for t in (self.pacer.event_time_reached, event_s) if t is not None
                        ]
                        if candidates:
                            self._release(held, max(candidates))
                    self._emit(text, event_s)
                    self._check_stop()
                if line_in_pass == 0:
                    break
                pass_no += 1
            self._release(held, None)
            s.completed = True
            s.stopped_by = "end of input"
        except _Stop as stop:
            s.stopped_by = stop.reason
        except KeyboardInterrupt:
            s.stopped_by = "interrupted"
            self.sink.stop()  # so closing does not wait for a client again
            raise
        finally:
            try:
                self.sink.close()
            finally:
                s.wall_seconds = self.clock.monotonic() - started
                s.event_time_reached_s = self.pacer.event_time_reached
                s.sink = self.sink.info()
                s.sink_status = self.sink.status()
                if self.progress is not None:
                    self.progress(s)
        return s
