"""Sources: where raw log lines come from (files now; directory watch, socket, Kafka later)."""

from logstream.sources.files import expand_inputs, read_lines, sample_lines

__all__ = ["expand_inputs", "read_lines", "sample_lines"]
