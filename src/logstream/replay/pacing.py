"""When each line is due: by its own event time divided by a speed-up, or at a fixed rate.

A :class:`Pacer` turns the stream of lines into wall-clock deadlines on a :class:`Clock`.
Deadlines are absolute (anchored at the first line), so a late wake-up or a slow sink is caught
up on the next lines instead of accumulating drift.
"""

from __future__ import annotations

from logstream.errors import ConfigError
from logstream.replay.clock import Clock

__all__ = ["Pacer"]


class Pacer:
    """Wall-clock deadlines for a stream of lines.

    Exactly one of ``speedup`` and ``rate_per_s`` is given.

    Parameters
    ----------
    clock : Clock
        The clock deadlines refer to.
    speedup : float, optional
        Event seconds per wall second (600 = ten minutes of log per second). A line is due
        ``(event time reached − first event time) / speedup`` seconds after the first line.
        Event time never goes backwards for pacing: an out-of-order line is due at once.
    rate_per_s : float, optional
        Lines per wall second: line ``n`` (0-based) is due ``n / rate_per_s`` seconds after
        the first.

    Raises
    ------
    ConfigError
        When both or neither are given, or a value is not a positive finite number.
    """

    def __init__(
        self, clock: Clock, *, speedup: float | None = None, rate_per_s: float | None = None
    ) -> None:
        if (speedup is None) == (rate_per_s is None):
            raise ConfigError("pace by --speedup or by --rate, not both (and not neither)")
        for name, value in (("speedup", speedup), ("rate", rate_per_s)):
            if value is not None and not (0 < value < float("inf")):
                raise ConfigError(f"--{name} must be a positive number, got {value!r}")
        self.clock = clock
        self.speedup = speedup
        self.rate_per_s = rate_per_s
        self._anchor_wall: float | None = None
        self._anchor_event: float | None = None
        self._reached: float | None = None
        self._count = 0

    @property
    def event_time_reached(self) -> float | None:
        """The largest event time paced so far, seconds since the Unix epoch (None before any)."""
        return self._reached

    @property
    def lines_paced(self) -> int:
        """How many lines :meth:`deadline` has been asked about."""
        return self._count

    def deadline(self, event_s: float | None) -> float:
        """Return when the next line is due, on the pacer's clock.

        Parameters
        ----------
        event_s : float or None
            The line's event time, seconds since the Unix epoch; None when unknown (the line
            is then due with the previous one).

        Returns
        -------
        float
            A :meth:`Clock.monotonic` reading, in seconds; it may lie in the past.
        """
        if self._anchor_wall is None:
            self._anchor_wall = self.clock.monotonic()
        n = self._count
        self._count += 1
        if event_s is not None and (self._reached is None or event_s > self._reached):
            self._reached = event_s
        if self.rate_per_s is not None:
            return self._anchor_wall + n / self.rate_per_s
        if self._reached is None:  # no event time seen yet: due at once
            return self._anchor_wall
        if self._anchor_event is None:
            self._anchor_event = self._reached
        assert self.speedup is not None
        return self._anchor_wall + (self._reached - self._anchor_event) / self.speedup

    def pause(self, seconds: float) -> None:
        """Push every later deadline back by ``seconds`` (time spent waiting for a consumer)."""
        if self._anchor_wall is not None and seconds > 0:
            self._anchor_wall += seconds
