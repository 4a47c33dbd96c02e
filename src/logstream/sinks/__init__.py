"""Sinks: exactly-once writers for micro-batch outputs."""

from logstream.sinks.publish import (
    BATCH_DIR_PREFIX,
    SCHEMA_BATCH_ID,
    batch_dir,
    ensure_schema,
    publish_batch,
    run_stateful_plan,
)

__all__ = [
    "BATCH_DIR_PREFIX",
    "SCHEMA_BATCH_ID",
    "batch_dir",
    "ensure_schema",
    "publish_batch",
    "run_stateful_plan",
]
