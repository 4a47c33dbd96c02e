"""The per-series steps both forms of the detector share: silences, idle timeout, new minutes.

:class:`_SeriesSteps` is what makes the streaming processor
(:class:`~logstream.analytics.alerts.AlertProcessor`) and the batch form
(:func:`~logstream.analytics.alerts.score_minutes`) raise the same alerts, whatever the cut of
the minutes into micro-batches.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from logstream.analytics.alerts.columns import _MINUTE_MS
from logstream.analytics.alerts.detector import AlertConfig, EwmaDetector, EwmaState

__all__: list[str] = []


class _Track(NamedTuple):
    """Where one series stands: its statistics and how far its minutes are scored."""

    detector: EwmaState
    scored_until_ms: int  # end of the last scored minute, ms; -1: no state (a new series)
    last_data_end_ms: int  # end of the newest scored minute with requests, ms; -1 before any


_NEW_TRACK = _Track(EwmaState(), -1, -1)


class _SeriesSteps:
    """The per-series steps shared by :class:`AlertProcessor` and :func:`score_minutes`.

    A minute without requests counts as 0 requests. A series silent for the idle timeout
    (``idle_timeout_minutes`` minutes from the end of its newest minute with requests: its
    *idle deadline*) has its silent minutes up to the deadline scored as 0, then is forgotten;
    a later minute starts a new detector, which warms up again. The rule is the same whether
    the deadline is passed by the watermark (:meth:`expire`) or found when the series' next
    minute is scored (:meth:`minute`), so the alerts do not depend on how the minutes are cut
    into micro-batches.
    """

    def __init__(self, config: AlertConfig) -> None:
        self.detector = EwmaDetector(config)
        self.idle_ms = config.idle_timeout_minutes * _MINUTE_MS

    def _observe(
        self,
        series: str,
        det: EwmaState,
        start_ms: int,
        requests: int,
        errors: int,
        out: list[tuple[Any, ...]],
    ) -> EwmaState:
        det, alerts = self.detector.observe(det, requests, errors)
        if alerts:
            out.extend((series, start_ms, start_ms + _MINUTE_MS, *a) for a in alerts)
        return det

    def _silence(
        self,
        series: str,
        det: EwmaState,
        start_ms: int,
        end_ms: int,
        out: list[tuple[Any, ...]],
    ) -> EwmaState:
        """Score the silent minutes from ``start_ms`` up to ``end_ms`` (exclusive)."""
        minutes = max(0, -(-(end_ms - start_ms) // _MINUTE_MS))  # as range(start, end, minute)
        det, alerts = self.detector.observe_silence(det, minutes)
        for i, a in alerts:
            at = start_ms + i * _MINUTE_MS
            out.append((series, at, at + _MINUTE_MS, *a))
        return det

    def expire(self, series: str, track: _Track, out: list[tuple[Any, ...]]) -> None:
        """Score the silent minutes of ``track`` up to its idle deadline (then forget it)."""
        if track.scored_until_ms < 0:
            return
        deadline_ms = track.last_data_end_ms + self.idle_ms
        self._silence(series, track.detector, track.scored_until_ms, deadline_ms, out)

    def minute(
        self,
        series: str,
        track: _Track,
        minute_ms: int,
        requests: int,
        errors: int,
        out: list[tuple[Any, ...]],
    ) -> _Track:
        """Score the silent minutes before ``minute_ms``, then the minute itself.

        ``requests`` is at least 1 (a minute without requests is a silent minute, scored as
        such when a later minute is, or at the idle deadline). A minute already scored is
        ignored. Alert rows (:data:`_ROW_COLUMNS`) go to ``out``.
        """
        if minute_ms < track.scored_until_ms:
            return track
        if track.scored_until_ms >= 0:
            if minute_ms >= track.last_data_end_ms + self.idle_ms:
                self.expire(series, track, out)  # idle before this minute: start over
                track = _NEW_TRACK
            else:
                det = self._silence(series, track.detector, track.scored_until_ms, minute_ms, out)
                track = track._replace(detector=det)
        det = self._observe(series, track.detector, minute_ms, requests, errors, out)
        return _Track(det, minute_ms + _MINUTE_MS, minute_ms + _MINUTE_MS)
