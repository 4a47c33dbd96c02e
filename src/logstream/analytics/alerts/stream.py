"""The streaming form of the detector: ``transformWithStateInPandas`` with event-time timers.

:func:`anomaly_alerts` is a streaming query of its own (Spark guide, "Arbitrary stateful
operations: transformWithState"); :class:`AlertProcessor` keeps one detector per series in
the state store.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from logstream.analytics.alerts.columns import (
    _MINUTE_MS,
    _ROW_COLUMNS,
    _alert_rows,
    _series_events,
)
from logstream.analytics.alerts.detector import AlertConfig, EwmaState
from logstream.analytics.alerts.steps import _SeriesSteps, _Track

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

__all__ = ["AlertProcessor", "anomaly_alerts"]


class _SeriesState(NamedTuple):
    """The stored state of one series: its :class:`EwmaState`, pending minutes, one timer."""

    detector: EwmaState
    minutes: list[int]  # starts of the minutes the watermark has not passed, ms, ascending
    requests: list[int]  # requests of each pending minute
    errors: list[int]  # server errors of each pending minute
    scored_until_ms: int  # end of the last minute folded into the detector; -1 before any
    last_data_end_ms: int  # end of the newest minute with requests
    timer_ms: int  # the registered event-time timer; -1 for none

    @classmethod
    def new(cls) -> _SeriesState:
        return cls(EwmaState(), [], [], [], -1, -1, -1)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> _SeriesState:
        return cls(EwmaState(*row[:6]), *(list(v) for v in row[6:9]), *row[9:])

    def to_row(self) -> tuple[Any, ...]:
        return (*self.detector, *self[1:])


_STATE_SCHEMA = (
    "n BIGINT, req_mean DOUBLE, req_var DOUBLE, rate_n BIGINT, rate_mean DOUBLE, "
    "rate_var DOUBLE, minutes ARRAY<BIGINT>, requests ARRAY<BIGINT>, errors ARRAY<BIGINT>, "
    "scored_until_ms BIGINT, last_data_end_ms BIGINT, timer_ms BIGINT"
)
_OUTPUT_SCHEMA = (
    "series STRING, metric STRING, window_start_ms BIGINT, window_end_ms BIGINT, "
    "value DOUBLE, mean DOUBLE, std DOUBLE, z DOUBLE, direction STRING"
)


class AlertProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` processor: one :class:`EwmaDetector` per series.

    Input rows, grouped by ``series``: ``minute_ms`` (bigint, start of the event's minute, ms
    since the epoch) and ``is_error`` (int, 1 for a server error). Output: the alert rows of
    :func:`anomaly_alerts` with ``window_start_ms`` and ``window_end_ms`` (bigint, ms).

    One value state per series, ``series``: the detector's :class:`EwmaState` (six numbers),
    the request and error counts of the minutes the watermark has not passed yet, the end of
    the last scored minute, and the one registered event-time timer. The timer is at the end
    of the earliest pending minute, or, with no minute pending, ``idle_timeout_minutes`` after
    the newest minute with requests. Whenever the processor runs (new rows, or the timer):

    1. every pending minute ending at or before the watermark is scored, in order; minutes
       without requests between two scored minutes are scored as 0 requests first — but after
       ``idle_timeout_minutes`` silent minutes or more, only those up to the idle timeout are,
       and the detector starts over (as if step 2 had run in between: ``_SeriesSteps``);
    2. if no minute is pending and the series has been silent for the idle timeout, the
       silent minutes up to the timeout are scored as 0 and the state is deleted — state
       holds only series seen within the idle timeout;
    3. otherwise the timer is moved where it belongs.

    One state variable and one timer keep the calls to the state server (each a round trip
    from the Python worker to the JVM) to about three per series and micro-batch.
    """

    def __init__(self, config: AlertConfig) -> None:
        self.config = config
        self.steps = _SeriesSteps(config)
        self.idle_ms = config.idle_timeout_minutes * _MINUTE_MS

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state variable."""
        self.handle = handle
        self.state = handle.getValueState("series", _STATE_SCHEMA)

    def _run(self, series: str, st: _SeriesState, watermark_ms: int) -> Iterator[pd.DataFrame]:
        """Steps 1–3 of the class docstring; store or delete the state; yield the alerts."""
        out: list[tuple[Any, ...]] = []
        # Every minute of a stream has requests, so the end of the last scored minute is also
        # the end of the newest scored minute with requests.
        track = _Track(st.detector, st.scored_until_ms, st.scored_until_ms)
        done = 0
        for minute_ms, requests, errors in zip(st.minutes, st.requests, st.errors, strict=True):
            if minute_ms + _MINUTE_MS > watermark_ms:
                break
            track = self.steps.minute(series, track, minute_ms, requests, errors, out)
            done += 1
        if done:
            st = st._replace(
                detector=track.detector,
                minutes=st.minutes[done:],
                requests=st.requests[done:],
                errors=st.errors[done:],
                scored_until_ms=track.scored_until_ms,
            )
        idle_deadline_ms = st.last_data_end_ms + self.idle_ms
        # A timer at or before the watermark has fired, or fires later in this micro-batch.
        timer_pending = st.timer_ms > watermark_ms
        if not st.minutes and idle_deadline_ms <= watermark_ms:
            self.steps.expire(
                series, _Track(st.detector, st.scored_until_ms, st.last_data_end_ms), out
            )
            if timer_pending:
                self.handle.deleteTimer(st.timer_ms)
            self.state.clear()
        else:
            wanted = st.minutes[0] + _MINUTE_MS if st.minutes else idle_deadline_ms
            if not timer_pending or st.timer_ms > wanted:
                if timer_pending:
                    self.handle.deleteTimer(st.timer_ms)
                self.handle.registerTimer(wanted)
                st = st._replace(timer_ms=wanted)
            self.state.update(st.to_row())
        if out:
            import pandas as pd

            yield pd.DataFrame(out, columns=_ROW_COLUMNS)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        """Add the rows to their minutes' counts, then run the steps of the class docstring."""
        import numpy as np
        import pandas as pd

        row = self.state.get()
        st = _SeriesState.from_row(row) if row is not None else _SeriesState.new()
        frame = pd.concat(list(rows), ignore_index=True)
        minutes, index = np.unique(frame["minute_ms"].to_numpy(), return_inverse=True)
        requests = np.bincount(index)
        errors = np.bincount(index, weights=frame["is_error"].to_numpy())
        counts = {m: [r, e] for m, r, e in zip(st.minutes, st.requests, st.errors, strict=True)}
        for m, r, e in zip(minutes.tolist(), requests.tolist(), errors.tolist(), strict=True):
            if m + _MINUTE_MS <= st.scored_until_ms:
                continue  # a late row for a minute already scored
            c = counts.setdefault(m, [0, 0])
            c[0] += r
            c[1] += int(e)
        ordered = sorted(counts)
        st = st._replace(
            minutes=ordered,
            requests=[counts[m][0] for m in ordered],
            errors=[counts[m][1] for m in ordered],
            last_data_end_ms=max(st.last_data_end_ms, ordered[-1] + _MINUTE_MS)
            if ordered
            else st.last_data_end_ms,
        )
        yield from self._run(key[0], st, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        """Run the steps of the class docstring when the watermark passes the timer."""
        row = self.state.get()
        if row is None:
            return  # a timer of a series already forgotten
        yield from self._run(
            key[0], _SeriesState.from_row(row), timerValues.getCurrentWatermarkInMs()
        )

    def close(self) -> None:
        """Nothing to release."""


def anomaly_alerts(
    events: DataFrame,
    k: float = 5.0,
    alpha: float = 0.05,
    warmup_minutes: int = 30,
    min_requests: int = 20,
    min_errors: int = 10,
    idle_timeout_minutes: int = 60,
) -> DataFrame:
    """Alerts on minutes whose requests or server-error rate are far from the series' normal.

    Series: ``"site"`` (every event) and each content page
    (:func:`~logstream.analytics.is_content_page`) by its ``url_path``. Per series and minute
    the requests and the server-error rate (status ≥ 500 over requests) are scored against an
    exponentially weighted mean and deviation by :class:`EwmaDetector` (see it for the exact
    rules: Poisson and binomial floors on the deviation, warm-up, minimum counts, clipped
    folding). A minute is scored in the micro-batch whose watermark passes its end, so an
    alert comes about one watermark delay after its minute, in append mode; minutes without
    requests count as 0 (they are scored when the series' next minute is, or when it goes
    idle).

    Parameters
    ----------
    events : DataFrame
        Streaming DataFrame with ``event_time`` (timestamp), ``url_path`` (string) and
        ``status`` (int), with a watermark set on ``event_time`` by the caller. Spark drops
        rows older than the previous micro-batch's watermark; a row that gets through for a
        minute already scored is ignored by the processor.
    k : float
        Alert when a minute is more than ``k`` standard deviations away (the book's 5).
    alpha : float
        Weight of the newest minute in the running statistics (0.05 ≈ a 39-minute average).
    warmup_minutes : int
        Minutes a series is observed before it may alert.
    min_requests : int
        Requests a spike needs in its minute (and expected requests a drop needs).
    min_errors : int
        Server errors an error-rate spike needs in its minute.
    idle_timeout_minutes : int
        A series without requests this long is forgotten (state deleted; warm-up again).

    Returns
    -------
    DataFrame
        Streaming, append mode, one row per alert: ``series`` (string: ``"site"`` or the page
        path), ``metric`` (string: ``"requests"`` or ``"error_rate"``), ``window_start``,
        ``window_end`` (timestamp, UTC: the minute), ``value`` (double: requests, or errors /
        requests), ``mean`` (double: the running mean before this minute), ``std`` (double: the
        deviation used, after the floors), ``z`` (double: ``(value − mean) / std``),
        ``direction`` (string: ``"spike"`` or ``"drop"``).

    Raises
    ------
    ConfigError
        When a parameter is out of range (see :class:`AlertConfig`).

    Notes
    -----
    Runs ``groupBy("series").transformWithStateInPandas`` in event-time mode with
    :class:`AlertProcessor`; it needs the RocksDB state store provider (logstream's session
    sets it). State is bounded by event-time idle timers rather than state TTL, which needs
    processing-time mode (under ``availableNow`` a processing-time query does not finish).
    The output has no event-time column for a downstream watermark: its rows are by
    construction older than the watermark.
    """
    config = AlertConfig(
        k=k,
        alpha=alpha,
        warmup_minutes=warmup_minutes,
        min_requests=min_requests,
        min_errors=min_errors,
        idle_timeout_minutes=idle_timeout_minutes,
    )
    exploded = _series_events(events)
    alerts = exploded.groupBy("series").transformWithStateInPandas(
        statefulProcessor=AlertProcessor(config),
        outputStructType=_OUTPUT_SCHEMA,
        outputMode="append",
        timeMode="EventTime",
    )
    return _alert_rows(alerts)
