"""A stream–stream join: threshold alerts near a change of their room's occupancy (Spark guide,
"Stream-stream Joins"; the book's Ch. 8 join of two streams).

Each alert (:func:`~logstream.devices.readings.threshold_alerts`) is matched with the
occupancy changes (:func:`~logstream.devices.state.device_transitions`) of the same device
within ``within`` of it, before or after: a CO2 alert minutes after people came in, a light
alert as they leave. Both sides carry a watermark (the readings' on ``event_time``, the
transitions' propagated on ``at``), and the time-range condition lets Spark drop the state of
either side once the other side's watermark has passed the range: the state holds only the
alerts and changes of the last ``within`` plus the watermark delay.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream.pipeline.config import interval_seconds

__all__ = ["alerts_near_changes"]


def alerts_near_changes(
    alerts: DataFrame, changes: DataFrame, within: str = "10 minutes"
) -> DataFrame:
    """Join alerts with occupancy changes of the same device within ``within``.

    Parameters
    ----------
    alerts : DataFrame
        :func:`~logstream.devices.readings.threshold_alerts` rows, streaming with a watermark
        on ``event_time`` (or batch).
    changes : DataFrame
        :func:`~logstream.devices.state.device_transitions` rows (only ``kind = occupancy``
        are used), streaming with the watermark on ``at`` (or batch).
    within : str
        Spark interval: the largest distance between an alert and a change (both ways).

    Returns
    -------
    DataFrame
        Append mode, one row per (alert, change) pair: ``device``, ``room``, ``alert_time``,
        ``metric``, ``value``, ``threshold``, ``occupancy`` (``occupied`` or ``free``: the
        state the room changed to), ``changed_at`` (timestamp), ``offset_s`` (double, seconds
        from the change to the alert; negative: the alert came first).

    Raises
    ------
    ValueError
        When ``within`` is not an interval.
    """
    seconds = int(interval_seconds(within))
    a = alerts.alias("a")
    c = changes.where(F.col("kind") == "occupancy").alias("c")
    bound = F.expr(f"INTERVAL {seconds} SECONDS")
    condition = (
        (F.col("a.device") == F.col("c.device"))
        & (F.col("a.event_time") >= F.col("c.at") - bound)
        & (F.col("a.event_time") <= F.col("c.at") + bound)
    )
    return a.join(c, condition, "inner").select(
        F.col("a.device").alias("device"),
        F.col("a.room").alias("room"),
        F.col("a.event_time").alias("alert_time"),
        F.col("a.metric").alias("metric"),
        F.col("a.value").alias("value"),
        F.col("a.threshold").alias("threshold"),
        F.col("c.to_state").alias("occupancy"),
        F.col("c.at").alias("changed_at"),
        (F.unix_millis(F.col("a.event_time")) - F.unix_millis(F.col("c.at")))
        .cast("double")
        .__truediv__(1000)
        .alias("offset_s"),
    )
