"""Serving: the store the dashboard reads (SQLite)."""

from logstream.serving.store import EXAMPLES_KEPT, IngestBatchWrite, ServingStore

__all__ = ["EXAMPLES_KEPT", "IngestBatchWrite", "ServingStore"]
