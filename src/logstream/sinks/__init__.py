"""Sinks: exactly-once writers for micro-batch outputs."""

from logstream.sinks.publish import BATCH_DIR_PREFIX, batch_dir, publish_batch

__all__ = ["BATCH_DIR_PREFIX", "batch_dir", "publish_batch"]
