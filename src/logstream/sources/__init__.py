"""Sources: where raw log lines come from (files, a watched directory, followed logs, a socket,
Kafka, Spark's rate source)."""

from logstream.sources.dedup import (
    LINE_KEY,
    drop_duplicate_lines,
    line_key,
)
from logstream.sources.files import expand_inputs, input_files, read_lines, sample_lines
from logstream.sources.stream import (
    KAFKA_PACKAGE,
    kafka_available,
    rate_lines,
    rate_sample,
    stream_lines,
)

__all__ = [
    "KAFKA_PACKAGE",
    "LINE_KEY",
    "drop_duplicate_lines",
    "expand_inputs",
    "input_files",
    "kafka_available",
    "line_key",
    "rate_lines",
    "rate_sample",
    "read_lines",
    "sample_lines",
    "stream_lines",
]
