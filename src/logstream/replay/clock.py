"""The clock the replay paces by: injectable, so pacing logic is tested without sleeping."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What pacing needs from a clock: a monotonic reading and a way to wait."""

    def monotonic(self) -> float:
        """Return a monotonic reading in seconds (only differences are meaningful)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (≥ 0) seconds."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic` and :func:`time.sleep`."""

    def monotonic(self) -> float:
        """Return :func:`time.monotonic`, in seconds."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` seconds with :func:`time.sleep`."""
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to: :meth:`sleep` advances it instantly.

    Parameters
    ----------
    start : float, default 0.0
        The first reading, in seconds.

    Attributes
    ----------
    sleeps : list of float
        Every duration passed to :meth:`sleep`, in seconds, in call order.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        """Return the current reading, in seconds."""
        return self._now

    def sleep(self, seconds: float) -> None:
        """Record ``seconds`` and advance the clock by it (negative values count as 0)."""
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` without recording a sleep (time spent working)."""
        self._now += seconds

    @property
    def slept(self) -> float:
        """Total of the recorded sleeps, in seconds."""
        return sum(max(0.0, s) for s in self.sleeps)
