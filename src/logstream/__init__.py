"""logstream: event-time web-log analytics on Apache Spark Structured Streaming.

The data path is the package layout: :mod:`logstream.sources` → :mod:`logstream.parsing` →
:mod:`logstream.analytics` → sinks → serving, plus :mod:`logstream.cli`. The canonical event
schema is documented in :mod:`logstream.schema`.
"""

from logstream.errors import ConfigError, InputPathError, LogFormatError, LogstreamError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "InputPathError",
    "LogFormatError",
    "LogstreamError",
    "__version__",
]
