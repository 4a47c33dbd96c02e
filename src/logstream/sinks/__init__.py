"""Sinks: exactly-once writers for micro-batch outputs (Parquet, JSON, CSV), and the extra
sinks they feed: webhooks (:mod:`logstream.sinks.webhook`) and Kafka
(:mod:`logstream.sinks.kafka`), routed by :mod:`logstream.sinks.route`."""

from logstream.sinks.publish import (
    BATCH_DIR_PREFIX,
    OUTPUT_FORMATS,
    SCHEMA_BATCH_ID,
    batch_dir,
    ensure_schema,
    publish_batch,
    read_output,
    run_stateful_plan,
)

__all__ = [
    "BATCH_DIR_PREFIX",
    "OUTPUT_FORMATS",
    "SCHEMA_BATCH_ID",
    "batch_dir",
    "ensure_schema",
    "publish_batch",
    "read_output",
    "run_stateful_plan",
]
