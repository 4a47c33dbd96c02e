"""The EWMA detector of one series: its parameters, its state and its per-minute step.

Plain Python (no Spark), so it is unit-tested alone. The running statistics are Tony Finch's
exponentially weighted moving variance ("Incremental calculation of weighted mean and
variance", University of Cambridge, 2009): ``μ ← μ + α·d``, ``σ² ← (1 − α)(σ² + α·d²)`` with
``d = x − μ``; :class:`EwmaDetector` gives the scoring rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from logstream.errors import ConfigError

__all__ = ["AlertConfig", "EwmaDetector", "EwmaState", "MinuteScore", "ew_update"]


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

    def observe_silence(
        self, state: EwmaState | None, minutes: int
    ) -> tuple[EwmaState, list[tuple[int, MinuteScore]]]:
        """Score and fold ``minutes`` minutes without requests in a row.

        Exactly what ``minutes`` calls of :meth:`observe` with 0 requests give (the same
        floating-point operations in the same order), in one loop over local numbers: silent
        minutes are most of what a detector scores (a page's minutes between its requests),
        and this runs about 10× faster than the general step.

        Once the running mean is below ``min(k, k²)`` no silent minute can alert or be
        clipped (``|z| = mean/σ`` with ``σ ≥ max(√mean, 1)`` is then at most ``k``), and the
        mean only falls while the series is silent; the rest of the run is folded in by
        :func:`_fold_silence`, the same mean and variance updates without the score. Most
        page series (under one request a minute on average) are in that regime: on the
        31-day NASA input it made the detector about 3× faster.

        Parameters
        ----------
        state : EwmaState or None
            The series' statistics; None for a new series.
        minutes : int
            Silent minutes to fold in (0 or more).

        Returns
        -------
        tuple
            The new :class:`EwmaState`, and the alerts as ``(i, alert)`` with ``i`` the
            index of the minute in the run (from 0).
        """
        c = self.config
        s = state or EwmaState()
        n, mean, var = s.n, s.req_mean, s.req_var
        k, alpha, warmup, min_requests = c.k, c.alpha, c.warmup_minutes, c.min_requests
        sqrt, copysign = math.sqrt, math.copysign
        x = 0.0
        # below it |z| <= k for x = 0 (a margin for the rounding of sqrt and of the division)
        quiet = min(k, k * k) * (1.0 - 1e-9)
        alerts: list[tuple[int, MinuteScore]] = []
        for i in range(minutes):
            if mean < quiet:
                n, mean, var = _fold_silence(n, mean, var, alpha, minutes - i)
                break
            # max(sqrt(max(var, 0)), sqrt(max(mean, 0)), 1) without the calls of max()
            sigma = sqrt(var) if var > 0.0 else 0.0
            root = sqrt(mean) if mean > 0.0 else 0.0
            if root > sigma:
                sigma = root
            if sigma < 1.0:
                sigma = 1.0
            z = (x - mean) / sigma
            fold = x
            if n >= warmup and abs(z) > k:
                fold = mean + copysign(k * sigma, z)
                if (z > 0 and x >= min_requests) or (z < 0 and mean >= min_requests):
                    direction = "spike" if z > 0 else "drop"
                    alerts.append((i, MinuteScore("requests", x, mean, sigma, z, direction)))
            if n <= 0:  # ew_update, inlined
                mean, var = fold, 0.0
            else:
                a = 1.0 / (n + 1)
                if alpha > a:
                    a = alpha
                d = fold - mean
                mean, var = mean + a * d, (1.0 - a) * (var + a * d * d)
            n += 1
        return EwmaState(n, mean, var, s.rate_n, s.rate_mean, s.rate_var), alerts


def _fold_silence(n: int, mean: float, var: float, alpha: float, minutes: int) -> tuple:
    """Fold ``minutes`` zeros into ``(n, mean, var)``: what :func:`ew_update` gives minute
    by minute (the same operations in the same order), with the weight fixed at ``alpha``
    once ``1/(n + 1)`` is no larger. Returns the new ``(n, mean, var)``."""
    end = n + minutes
    while n < end and (n <= 0 or 1.0 / (n + 1) > alpha):
        if n <= 0:
            mean, var = 0.0, 0.0
        else:
            a = 1.0 / (n + 1)
            d = 0.0 - mean
            mean, var = mean + a * d, (1.0 - a) * (var + a * d * d)
        n += 1
    keep = 1.0 - alpha
    for _ in range(end - n):
        d = 0.0 - mean
        mean, var = mean + alpha * d, keep * (var + alpha * d * d)
    return end, mean, var
