"""Monitoring: a non-blocking StreamingQueryListener feeding the terminal and the store."""

from logstream.monitoring.listener import ProgressListener, progress_row

__all__ = ["ProgressListener", "progress_row"]
