"""A Kafka source's offsets, lag and losses, read from a micro-batch's progress.

Spark reports every source of a micro-batch in ``StreamingQueryProgress.sources``; for its
Kafka source (``description`` ``KafkaV2[Subscribe[TOPIC]]``) ``startOffset``, ``endOffset``
and ``latestOffset`` are JSON objects ``{topic: {partition: offset}}``: where the batch began
and ended, and the newest offset of each partition when it was planned. From them
:func:`kafka_progress` gives what the dashboard, the progress line and Prometheus show of the
source, as they show a directory's rows:

* per partition, the **offset** read to (the next the pipeline reads) and the **lag**, the
  messages published but not read yet (``latestOffset − endOffset``);
* the source's rows per second in and processed;
* **lost**: the offsets the batch covered that it could not read (``end − start`` summed over
  the partitions, less the rows read). It is 0 but when unread messages were deleted and the
  run allows data loss (``--allow-data-loss``): Spark then skips to the earliest offset still
  there. (A topic written with transactions has commit markers between its records, which
  count here too; logstream's producers write none.)
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["KAFKA_LOST", "KAFKA_STATE", "kafka_progress", "kafka_source"]

#: ``pipeline_state`` keys of the Kafka source: its latest progress (JSON, with its
#: ``batch_id``), and the messages it could not read because they were deleted (a running
#: total, ``--allow-data-loss``), kept by :func:`logstream.monitoring.listener.record_kafka`.
KAFKA_STATE = "kafka_source"
KAFKA_LOST = "kafka_lost_messages"


def _offsets(text: str | None) -> dict[str, dict[str, int]]:
    try:
        value = json.loads(text or "null")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def kafka_progress(sources: list[Any]) -> dict[str, Any] | None:
    """The Kafka source of a micro-batch's progress, or None without one.

    Parameters
    ----------
    sources : list
        ``StreamingQueryProgress.sources`` (``SourceProgress`` objects).

    Returns
    -------
    dict or None
        ``topic`` (str), ``partitions`` (list of ``{"partition", "offset", "latest", "lag"}``,
        by partition; ``latest`` and ``lag`` None when Spark did not report them), ``lag``
        (messages, summed), ``input_rows_per_s`` and ``processed_rows_per_s`` (rows/s),
        ``rows`` (read in the batch) and ``lost`` (messages covered but not read; None when
        the batch's start is unknown, as in a query's first batch).
    """
    for source in sources:
        if not str(getattr(source, "description", "")).startswith("Kafka"):
            continue
        start = _offsets(source.startOffset)
        end = _offsets(source.endOffset)
        latest = _offsets(getattr(source, "latestOffset", None))
        if not end:
            continue
        partitions = []
        covered: int | None = 0
        for topic, offsets in sorted(end.items()):
            for name, offset in sorted(offsets.items(), key=lambda kv: int(kv[0])):
                newest = latest.get(topic, {}).get(name)
                partitions.append(
                    {
                        "partition": int(name),
                        "offset": int(offset),
                        "latest": None if newest is None else int(newest),
                        "lag": None if newest is None else max(0, int(newest) - int(offset)),
                    }
                )
                began = start.get(topic, {}).get(name)
                if began is None or covered is None:
                    covered = None
                else:
                    covered += int(offset) - int(began)
        rows = int(source.numInputRows or 0)
        lags = [p["lag"] for p in partitions if p["lag"] is not None]
        return {
            "topic": ",".join(sorted(end)),
            "partitions": partitions,
            "lag": sum(lags) if lags else None,
            "input_rows_per_s": _finite(source.inputRowsPerSecond),
            "processed_rows_per_s": _finite(source.processedRowsPerSecond),
            "rows": rows,
            "lost": None if covered is None else max(0, covered - rows),
        }
    return None


def _finite(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def kafka_source(state: dict[str, str]) -> dict[str, Any] | None:
    """The Kafka source as the serving store keeps it (``pipeline_state``): its latest
    :func:`kafka_progress` with ``batch_id``, and ``lost`` the running total of messages
    deleted before they were read; None without a Kafka source (or unreadable)."""
    try:
        kafka = json.loads(state.get(KAFKA_STATE) or "null")
    except ValueError:
        return None
    if not isinstance(kafka, dict):
        return None
    return {**kafka, "lost": int(state.get(KAFKA_LOST) or 0)}
