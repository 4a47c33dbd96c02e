"""The alert series, the columns in and out, and the two frame mappings both forms share.

A series is the whole site (:data:`SITE_SERIES`) or one content page, named by its URL path.
:func:`_series_events` turns events into one row per series an event counts in (the input of
both :func:`~logstream.analytics.alerts.anomaly_alerts` and
:func:`~logstream.analytics.alerts.series_minutes`); :func:`_alert_rows` turns the detector's
alert rows (epoch-ms minute bounds) into :data:`ALERT_COLUMNS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from logstream.analytics.pages import is_content_page

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ALERT_COLUMNS",
    "ALERT_STATE_SCHEMA",
    "SERIES_MINUTE_COLUMNS",
    "SERVER_ERROR_STATUS_MIN",
    "SITE_SERIES",
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

#: Input of :func:`score_minutes`: requests and server errors of one series in one minute.
SERIES_MINUTE_COLUMNS = StructType(
    [
        StructField("series", StringType()),  # "site", or a content page's url_path
        StructField("minute_ms", LongType()),  # start of the minute, ms since the epoch (UTC)
        StructField("requests", LongType()),
        StructField("errors", LongType()),  # server errors: status >= SERVER_ERROR_STATUS_MIN
    ]
)
#: The state :func:`score_minutes` carries from call to call: one row per series.
ALERT_STATE_SCHEMA = StructType(
    [
        StructField("series", StringType()),
        # the six numbers of EwmaState
        StructField("n", LongType()),
        StructField("req_mean", DoubleType()),
        StructField("req_var", DoubleType()),
        StructField("rate_n", LongType()),
        StructField("rate_mean", DoubleType()),
        StructField("rate_var", DoubleType()),
        StructField("scored_until_ms", LongType()),  # end of the last scored minute, ms
        StructField("last_data_end_ms", LongType()),  # end of the newest minute with requests
    ]
)

_MINUTE_MS = 60_000
#: Columns of the alert rows ``_SeriesSteps`` builds; Spark matches them by name.
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


def _series_events(events: DataFrame) -> DataFrame:
    """Each event once per series it counts in, with its ``minute_ms`` and ``is_error``."""
    series = F.when(is_content_page(), F.array(F.lit(SITE_SERIES), F.col("url_path"))).otherwise(
        F.array(F.lit(SITE_SERIES))
    )
    return events.select(
        F.explode(series).alias("series"),
        "event_time",
        (F.floor(F.unix_millis("event_time") / _MINUTE_MS) * _MINUTE_MS).alias("minute_ms"),
        (F.col("status") >= SERVER_ERROR_STATUS_MIN).cast("int").alias("is_error"),
    )


def _alert_rows(frame: DataFrame) -> DataFrame:
    """The :data:`ALERT_COLUMNS` of the detector's output rows (epoch-ms minute bounds)."""
    return frame.select(
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
