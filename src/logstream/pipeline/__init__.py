"""The streaming pipeline: ingest (parse, late-data channel, quarantine, live views) and the
event-time window queries."""

from logstream.pipeline.config import EVENT_QUERIES, PipelineConfig, interval_seconds
from logstream.pipeline.ingest import INGEST_QUERY, IngestStage
from logstream.pipeline.run import Pipeline

__all__ = [
    "EVENT_QUERIES",
    "INGEST_QUERY",
    "IngestStage",
    "Pipeline",
    "PipelineConfig",
    "interval_seconds",
]
