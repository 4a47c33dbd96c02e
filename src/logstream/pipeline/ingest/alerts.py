"""Step 7 of the micro-batch, scoring: the anomaly detector's feed and the bot scores.

The final per-minute series (the site's traffic and each content page's) feed the anomaly
detector (:mod:`logstream.analytics.alerts`): its alerts go to ``alerts/`` and the store, its
state to snapshot ``N``. With a bot model, the client windows that became final are scored
(:mod:`logstream.ml.bots`): every window to ``bot_scores/``, the most likely bots and a
summary per window to the store. Both run only in a micro-batch whose watermark passes a
boundary; in the others the detector's state carries over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream.analytics.alerts import SITE_SERIES, scored_minutes, split_scored
from logstream.pipeline.ingest.settings import iso
from logstream.pipeline.state import SnapshotMeta
from logstream.serving import IngestBatchWrite
from logstream.serving.store import ALERTS_KEPT, BOTS_PER_BATCH

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["score_alerts", "score_bots"]


def score_bots(stage: StageContext, finals: DataFrame, write: IngestBatchWrite) -> None:
    """Score the client windows that became final with the bot model: every window to
    ``bot_scores/``, the most likely bots and a summary per window to the store."""
    from logstream.ml.bots import client_features, score_features

    assert stage.bot_model is not None
    complete = stage._complete("bot_scores", F.col("start_ms"))
    panes = finals.where(F.col("view").isin("clients", "client_pages") & complete)
    scored = score_features(
        stage.bot_model.model, client_features(panes), stage.bot_model.info.version
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stage.publish(scored, stage.output_dir / "bot_scores", write.batch_id)
        bots = F.col("is_bot") == 1
        summary = scored.groupBy("window_start", "window_end").agg(
            F.count("*").alias("clients"),
            F.count_if(bots).alias("bots"),
            F.sum(F.when(bots, F.col("requests")).otherwise(0)).alias("bot_requests"),
            F.sum("requests").alias("requests"),
        )
        write.bot_windows = [
            (
                r["ws"],
                r["we"],
                r["clients"],
                r["bots"],
                int(r["bot_requests"]),
                int(r["requests"]),
            )
            for r in summary.select(
                iso("window_start").alias("ws"), iso("window_end").alias("we"), "*"
            ).collect()  # a row per client window: bounded by the micro-batch's event time
        ]
        top = (
            scored.where(bots)
            .orderBy(F.col("bot_probability").desc(), "window_start", "client_host")
            .limit(BOTS_PER_BATCH)
            .select(
                iso("window_start"),
                iso("window_end"),
                "client_host",
                "requests",
                "bot_probability",
                "distinct_pages",
                "error_ratio",
                "static_share",
                "robots",
                "model_version",
            )
        )
        write.bots = [tuple(r) for r in top.collect()]
    finally:
        scored.unpersist()


def score_alerts(
    stage: StageContext,
    finals: DataFrame | None,
    prev: SnapshotMeta,
    next_watermark: int,
    write: IngestBatchWrite,
    cached: list[DataFrame],
) -> DataFrame:
    """Score the newly final minutes of the site and of each content page (``finals`` is
    None when the watermark did not move: the detectors' state carries over). Returns the
    detectors' state of the new snapshot."""
    state = stage._state(prev, "series")
    if finals is None:
        return state
    complete = stage._complete("alerts", F.col("start_ms"))
    minutes = finals.where(F.col("view").isin("traffic", "pages") & complete).select(
        F.when(F.col("view") == "traffic", F.lit(SITE_SERIES))
        .otherwise(F.col("key"))
        .alias("series"),
        F.col("start_ms").alias("minute_ms"),
        "requests",
        F.col("server_errors").alias("errors"),
    )
    scored = scored_minutes(minutes, state, next_watermark, stage.settings.alerts)
    scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(scored)
    alerts, new_state = split_scored(scored)
    rows = [
        tuple(r)
        for r in alerts.orderBy("window_start", "series", "metric")
        .select(
            "series",
            "metric",
            iso("window_start"),
            iso("window_end"),
            "value",
            "mean",
            "std",
            "z",
            "direction",
        )
        .limit(ALERTS_KEPT)
        .collect()
    ]
    if rows:
        stage.publish(alerts, stage.output_dir / "alerts", write.batch_id)
        write.alerts = rows
    return new_state
