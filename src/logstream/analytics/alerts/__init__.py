"""Anomaly alerts: a minute whose traffic is more than ``k`` standard deviations from normal.

Every series (the whole site, and each content page) keeps an exponentially weighted moving
average (EWMA) and variance of its requests per minute and of its server-error rate per minute
— a few numbers of state per series. When the watermark passes the end of a minute, the minute
is scored against the running mean and deviation *before* it is folded in, and a minute more
than ``k`` deviations away raises an alert (k = 5 by default, the book's example). The running
statistics are Tony Finch's exponentially weighted moving variance ("Incremental calculation
of weighted mean and variance", University of Cambridge, 2009):
``μ ← μ + α·d``, ``σ² ← (1 − α)(σ² + α·d²)`` with ``d = x − μ``.

The detector (:class:`EwmaDetector`) is plain Python, so it is unit-tested without Spark. It
runs per series in one of two ways, with the same per-series steps and so the same alerts:

* :func:`score_minutes` scores the per-minute counts that became final in a micro-batch
  (inside ``foreachBatch``, batch DataFrames), with a ``cogroup().applyInArrow`` of the new
  minutes and the detectors' state, which the caller keeps from one micro-batch to the next
  (:data:`ALERT_STATE_SCHEMA`, one row per series);
* :func:`anomaly_alerts` is a streaming query of its own: ``transformWithStateInPandas``
  (Spark guide, "Arbitrary stateful operations: transformWithState") with event-time timers.

Modules, in the order a minute goes through them:

* :mod:`~logstream.analytics.alerts.columns`: the series, the input, state and output columns;
* :mod:`~logstream.analytics.alerts.detector`: :class:`AlertConfig`, :class:`EwmaState` and
  :class:`EwmaDetector`, the scoring and folding of one minute;
* :mod:`~logstream.analytics.alerts.steps`: the per-series steps both forms share (silent
  minutes, the idle timeout);
* :mod:`~logstream.analytics.alerts.batch`: :func:`score_minutes`, the batch form;
* :mod:`~logstream.analytics.alerts.stream`: :func:`anomaly_alerts` and
  :class:`AlertProcessor`, the streaming form.

Every public name is importable from this package.
"""

# ``_score_group`` and ``_SeriesSteps`` are private; re-exported (``as``) for the tests, which
# drive them directly.
from logstream.analytics.alerts.batch import _score_group as _score_group
from logstream.analytics.alerts.batch import (
    score_minutes,
    scored_minutes,
    series_minutes,
    split_scored,
)
from logstream.analytics.alerts.columns import (
    ALERT_COLUMNS,
    ALERT_STATE_SCHEMA,
    SERIES_MINUTE_COLUMNS,
    SERVER_ERROR_STATUS_MIN,
    SITE_SERIES,
)
from logstream.analytics.alerts.detector import (
    AlertConfig,
    EwmaDetector,
    EwmaState,
    MinuteScore,
    ew_update,
)
from logstream.analytics.alerts.steps import _SeriesSteps as _SeriesSteps
from logstream.analytics.alerts.stream import AlertProcessor, anomaly_alerts

__all__ = [
    "ALERT_COLUMNS",
    "ALERT_STATE_SCHEMA",
    "SERIES_MINUTE_COLUMNS",
    "SERVER_ERROR_STATUS_MIN",
    "SITE_SERIES",
    "AlertConfig",
    "AlertProcessor",
    "EwmaDetector",
    "EwmaState",
    "MinuteScore",
    "anomaly_alerts",
    "ew_update",
    "score_minutes",
    "scored_minutes",
    "series_minutes",
    "split_scored",
]
