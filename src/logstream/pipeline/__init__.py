"""The streaming pipeline: one query whose micro-batch step parses, decides lateness,
aggregates every view once and delivers outputs, store and state exactly once."""

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
