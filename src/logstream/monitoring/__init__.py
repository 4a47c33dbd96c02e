"""Monitoring: a non-blocking StreamingQueryListener feeding the terminal and the store, and the
Prometheus metrics the dashboard serves from the store (:mod:`logstream.monitoring.prometheus`).

The listener needs PySpark; it is imported on first use, so the dashboard's web process can
serve the metrics without loading Spark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProgressListener", "progress_row"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from logstream.monitoring import listener

        return getattr(listener, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
