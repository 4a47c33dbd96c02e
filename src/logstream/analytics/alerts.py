"""Anomaly alerts: a minute whose traffic is more than ``k`` standard deviations from normal.

Every series (the whole site, and each content page) keeps an exponentially weighted moving
average (EWMA) and variance of its requests per minute and of its server-error rate per minute
— a few numbers of state per series. When the watermark passes the end of a minute, the minute
is scored against the running mean and deviation *before* it is folded in, and a minute more
than ``k`` deviations away raises an alert (k = 5 by default, the book's example). The running
statistics are Tony Finch's exponentially weighted moving variance ("Incremental calculation
of weighted mean and variance", University of Cambridge, 2009):
``μ ← μ + α·d``, ``σ² ← (1 − α)(σ² + α·d²)`` with ``d = x − μ``.

The detector (:class:`EwmaDetector`) is plain Python, so it is unit-tested without Spark;
:func:`anomaly_alerts` runs it per series inside ``transformWithStateInPandas`` (Spark guide,
"Arbitrary stateful operations: transformWithState") with event-time timers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from logstream.analytics.pages import is_content_page
from logstream.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

__all__ = [
    "ALERT_COLUMNS",
    "SERVER_ERROR_STATUS_MIN",
    "SITE_SERIES",
    "AlertConfig",
    "AlertProcessor",
    "EwmaDetector",
    "EwmaState",
    "MinuteScore",
    "anomaly_alerts",
    "ew_update",
]

#: Series name of the whole site (page series are named by their URL path, which starts "/").
SITE_SERIES = "site"
#: The error-rate metric counts responses from this status on: server errors (5xx) only.
#: Client errors (4xx) are left out on purpose: scanners probing ``/wp-login.php`` produce
#: bursts of 404s that say nothing about the site's health.
SERVER_ERROR_STATUS_MIN = 500
#: Output columns of :func:`anomaly_alerts`, in order.
ALERT_COLUMNS = (
    "series",
    "metric",
    "window_start",
    "window_end",
    "value",
    "mean",
    "std",
    "z",
    "direction",
)

_MINUTE_MS = 60_000


@dataclass(frozen=True)
class AlertConfig:
    """Parameters of the anomaly detector.

    Attributes
    ----------
    k : float
        Alert when a minute is more than ``k`` standard deviations from the running mean (> 0).
    alpha : float
        Weight of the newest minute in the running mean and variance, 0 < alpha ≤ 1. The
        default 0.05 averages over about ``2/alpha − 1 = 39`` minutes: slow enough for a
        stable deviation, fast enough to follow the daily curve (its lag, about
        ``(1 − alpha)/alpha = 19`` minutes, is a few percent of the mean).
    warmup_minutes : int
        Minutes a series is observed before it may alert (≥ 1).
    min_requests : int
        A requests spike needs at least this many requests in the minute, a drop at least
        this many expected (the running mean), so a rare page cannot alert on a handful of hits.
    min_errors : int
        An error-rate alert needs at least this many server errors in the minute.
    rate_floor : float
        Smallest standard deviation of the error rate (an absolute rate, 0.01 = 1 point).
    idle_timeout_minutes : int
        A series without requests for this long is forgotten (its state deleted); when it
        comes back it warms up again.

    Raises
    ------
    ConfigError
        When a value is out of range.
    """

    k: float = 5.0
    alpha: float = 0.05
    warmup_minutes: int = 30
    min_requests: int = 20
    min_errors: int = 10
    rate_floor: float = 0.01
    idle_timeout_minutes: int = 60

    def __post_init__(self) -> None:
        if not (0 < self.k < math.inf):
            raise ConfigError(f"alert threshold k={self.k} must be a positive number, e.g. 5")
        if not (0 < self.alpha <= 1):
            raise ConfigError(f"alpha={self.alpha} must be in (0, 1], e.g. 0.05")
        for name in ("warmup_minutes", "idle_timeout_minutes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("min_requests", "min_errors"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be ≥ 0")
        if not (0 < self.rate_floor <= 1):
            raise ConfigError(f"rate_floor={self.rate_floor} must be in (0, 1], e.g. 0.01")


class EwmaState(NamedTuple):
    """The running statistics of one series: a few numbers.

    Attributes
    ----------
    n : int
        Minutes folded into the requests statistics (minutes without requests count).
    req_mean, req_var : float
        EW mean and variance of requests per minute.
    rate_n : int
        Minutes with at least one request, folded into the error-rate statistics.
    rate_mean, rate_var : float
        EW mean and variance of the server-error rate (errors / requests) per minute.
    """

    n: int = 0
    req_mean: float = 0.0
    req_var: float = 0.0
    rate_n: int = 0
    rate_mean: float = 0.0
    rate_var: float = 0.0


class MinuteScore(NamedTuple):
    """An alert on one minute of one metric (see :func:`anomaly_alerts` for the columns)."""

    metric: str
    value: float
    mean: float
    std: float
    z: float
    direction: str


def ew_update(n: int, mean: float, var: float, x: float, alpha: float) -> tuple[float, float]:
    """Fold ``x`` into an exponentially weighted mean and variance.

    The weight of the new value is ``max(alpha, 1/(n + 1))``: the first ``1/alpha`` values
    get the exact running mean and population variance (no bias toward the first value), the
    rest an exponential decay (Finch 2009).

    Parameters
    ----------
    n : int
        Values folded in so far.
    mean, var : float
        Current mean and variance (ignored when ``n`` is 0).
    x : float
        The new value.
    alpha : float
        Weight of the new value once ``n + 1 ≥ 1/alpha``.

    Returns
    -------
    tuple of float
        The new mean and variance.

    Examples
    --------
    >>> ew_update(0, 0.0, 0.0, 10.0, 0.1)
    (10.0, 0.0)
    >>> ew_update(1, 10.0, 0.0, 20.0, 0.1)
    (15.0, 25.0)
    """
    if n <= 0:
        return float(x), 0.0
    a = max(alpha, 1.0 / (n + 1))
    d = x - mean
    return mean + a * d, (1.0 - a) * (var + a * d * d)


class EwmaDetector:
    """Score minutes of one series against its running statistics, then fold them in.

    Rules (each keeps steady traffic quiet while a real spike stands out):

    * **requests**: ``z = (x − mean) / σ`` with ``σ = max(std, √mean, 1)``; the ``√mean`` term
      is the Poisson deviation of a count, so a series whose EW variance happens to be small
      does not alert on ordinary noise. An alert needs ``|z| > k``, the warm-up done, and for
      a spike ``x ≥ min_requests``, for a drop ``mean ≥ min_requests``.
    * **error_rate**: ``x = errors / requests`` of minutes with requests; only spikes alert;
      ``σ = max(std, √(p(1 − p)/requests), rate_floor)`` with ``p`` the running mean (the
      binomial deviation of a rate over ``requests`` trials); an alert needs ``z > k``, the
      warm-up done and ``errors ≥ min_errors``.
    * A minute is scored **before** it is folded in. After the warm-up, a minute more than
      ``k`` deviations away is folded in **clipped** to ``mean ± k·σ`` (a winsorized, Huber-type
      EWMA): a flash crowd then keeps alerting for a few minutes instead of inflating the
      deviation at once, and a lasting change of level is still learnt within minutes because
      the deviation grows by ``√((1 − α)(1 + α·k²))`` per clipped minute.

    Parameters
    ----------
    config : AlertConfig

    Examples
    --------
    >>> det = EwmaDetector(AlertConfig(warmup_minutes=3))
    >>> state = None
    >>> for requests in (100, 104, 96, 100):
    ...     state, alerts = det.observe(state, requests, 0)
    >>> state, alerts = det.observe(state, 400, 0)
    >>> [(a.metric, a.direction, round(a.z, 1)) for a in alerts]
    [('requests', 'spike', 30.0)]
    """

    def __init__(self, config: AlertConfig | None = None) -> None:
        self.config = config or AlertConfig()

    def observe(
        self, state: EwmaState | None, requests: int, errors: int
    ) -> tuple[EwmaState, list[MinuteScore]]:
        """Score one finished minute, then fold it into the state.

        Parameters
        ----------
        state : EwmaState or None
            The series' statistics; None for a new series.
        requests, errors : int
            Requests and server errors of the minute (0 and 0 for a minute without requests).

        Returns
        -------
        tuple
            The new :class:`EwmaState` and the alerts of the minute (0, 1 or 2).
        """
        c = self.config
        s = state or EwmaState()
        alerts: list[MinuteScore] = []
        warm = s.n >= c.warmup_minutes

        x = float(requests)
        sigma = max(math.sqrt(max(s.req_var, 0.0)), math.sqrt(max(s.req_mean, 0.0)), 1.0)
        z = (x - s.req_mean) / sigma
        fold = x
        if warm and abs(z) > c.k:
            fold = s.req_mean + math.copysign(c.k * sigma, z)
            if (z > 0 and x >= c.min_requests) or (z < 0 and s.req_mean >= c.min_requests):
                direction = "spike" if z > 0 else "drop"
                alerts.append(MinuteScore("requests", x, s.req_mean, sigma, z, direction))
        req_mean, req_var = ew_update(s.n, s.req_mean, s.req_var, fold, c.alpha)

        rate_n, rate_mean, rate_var = s.rate_n, s.rate_mean, s.rate_var
        if requests > 0:
            rate = errors / requests
            p = min(max(s.rate_mean, 0.0), 1.0)
            sigma = max(
                math.sqrt(max(s.rate_var, 0.0)), math.sqrt(p * (1.0 - p) / requests), c.rate_floor
            )
            z = (rate - s.rate_mean) / sigma
            fold = rate
            if s.rate_n >= c.warmup_minutes and abs(z) > c.k:
                fold = s.rate_mean + math.copysign(c.k * sigma, z)
                if z > 0 and errors >= c.min_errors:
                    alerts.append(MinuteScore("error_rate", rate, s.rate_mean, sigma, z, "spike"))
            rate_mean, rate_var = ew_update(s.rate_n, s.rate_mean, s.rate_var, fold, c.alpha)
            rate_n += 1

        return EwmaState(s.n + 1, req_mean, req_var, rate_n, rate_mean, rate_var), alerts


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
#: Columns of the rows the processor builds (see ``_score``); Spark matches them by name.
_ROW_COLUMNS = [
    "series",
    "window_start_ms",
    "window_end_ms",
    "metric",
    "value",
    "mean",
    "std",
    "z",
    "direction",
]


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
       without requests between two scored minutes are scored as 0 requests first (at most
       ``idle_timeout_minutes`` of them: after a longer gap the detector starts over);
    2. if no minute is pending and the series has been silent for the idle timeout, the
       silent minutes up to the timeout are scored as 0 and the state is deleted — state
       holds only series seen within the idle timeout;
    3. otherwise the timer is moved where it belongs.

    One state variable and one timer keep the calls to the state server (each a round trip
    from the Python worker to the JVM) to about three per series and micro-batch.
    """

    def __init__(self, config: AlertConfig) -> None:
        self.config = config
        self.detector = EwmaDetector(config)
        self.idle_ms = config.idle_timeout_minutes * _MINUTE_MS

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state variable."""
        self.handle = handle
        self.state = handle.getValueState("series", _STATE_SCHEMA)

    def _score(
        self,
        series: str,
        st: _SeriesState,
        minute_ms: int,
        requests: int,
        errors: int,
        out: list[tuple[Any, ...]],
    ) -> _SeriesState:
        """Score the silent minutes before ``minute_ms``, then the minute itself."""
        det = st.detector
        if st.scored_until_ms >= 0:
            if (minute_ms - st.scored_until_ms) // _MINUTE_MS > self.config.idle_timeout_minutes:
                det = EwmaState()  # silent for longer than the idle timeout: start over
            else:
                for start in range(st.scored_until_ms, minute_ms, _MINUTE_MS):
                    det, alerts = self.detector.observe(det, 0, 0)
                    out.extend((series, start, start + _MINUTE_MS, *a) for a in alerts)
        det, alerts = self.detector.observe(det, requests, errors)
        out.extend((series, minute_ms, minute_ms + _MINUTE_MS, *a) for a in alerts)
        return st._replace(detector=det, scored_until_ms=minute_ms + _MINUTE_MS)

    def _run(self, series: str, st: _SeriesState, watermark_ms: int) -> Iterator[pd.DataFrame]:
        """Steps 1–3 of the class docstring; store or delete the state; yield the alerts."""
        out: list[tuple[Any, ...]] = []
        done = 0
        for minute_ms, requests, errors in zip(st.minutes, st.requests, st.errors, strict=True):
            if minute_ms + _MINUTE_MS > watermark_ms:
                break
            st = self._score(series, st, minute_ms, requests, errors, out)
            done += 1
        if done:
            st = st._replace(
                minutes=st.minutes[done:], requests=st.requests[done:], errors=st.errors[done:]
            )
        idle_deadline_ms = st.last_data_end_ms + self.idle_ms
        # A timer at or before the watermark has fired, or fires later in this micro-batch.
        timer_pending = st.timer_ms > watermark_ms
        if not st.minutes and idle_deadline_ms <= watermark_ms:
            if 0 <= st.scored_until_ms < idle_deadline_ms:
                self._score(series, st, idle_deadline_ms - _MINUTE_MS, 0, 0, out)
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
    series = F.when(is_content_page(), F.array(F.lit(SITE_SERIES), F.col("url_path"))).otherwise(
        F.array(F.lit(SITE_SERIES))
    )
    exploded = events.select(
        F.explode(series).alias("series"),
        "event_time",
        (F.floor(F.unix_millis("event_time") / _MINUTE_MS) * _MINUTE_MS).alias("minute_ms"),
        (F.col("status") >= SERVER_ERROR_STATUS_MIN).cast("int").alias("is_error"),
    )
    alerts = exploded.groupBy("series").transformWithStateInPandas(
        statefulProcessor=AlertProcessor(config),
        outputStructType=_OUTPUT_SCHEMA,
        outputMode="append",
        timeMode="EventTime",
    )
    return alerts.select(
        "series",
        "metric",
        F.timestamp_millis("window_start_ms").alias("window_start"),
        F.timestamp_millis("window_end_ms").alias("window_end"),
        "value",
        "mean",
        "std",
        "z",
        "direction",
    )
