"""The Spark Streaming guide's quick example: words counted per batch of a DStream."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from logstream.errors import ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.streaming import DStream, StreamingContext

__all__ = ["DEPRECATION_NOTICE", "parse_socket", "streaming_context", "word_counts"]

#: What logstream says when a DStream job starts (PySpark's own warning, caught).
DEPRECATION_NOTICE = (
    "DStreams (Spark Streaming) are deprecated since Spark 3.4; this is logstream's DStream "
    "edition, for DStream jobs and for learning. `logstream run` is the Structured Streaming "
    "pipeline."
)


def streaming_context(
    sc: SparkContext,
    batch_seconds: float,
    notice: Callable[[str], Any] | None = None,
) -> StreamingContext:
    """Create a ``StreamingContext`` with ``batch_seconds`` per batch.

    PySpark's ``StreamingContext`` warns (``FutureWarning``: "DStream is deprecated as of Spark
    3.4.0") on every creation. That warning alone is caught here, where it arises, and
    :data:`DEPRECATION_NOTICE` is given to ``notice`` instead (the CLI prints it); other
    warnings pass through.

    Parameters
    ----------
    sc : SparkContext
    batch_seconds : float
        Batch interval, seconds (> 0; the guide's examples use 1).
    notice : callable, optional
        Called with :data:`DEPRECATION_NOTICE` when PySpark warned.

    Returns
    -------
    StreamingContext

    Raises
    ------
    ConfigError
        When ``batch_seconds`` is not positive.
    """
    from pyspark.streaming import StreamingContext

    if batch_seconds <= 0:
        raise ConfigError(f"--batch must be longer than zero, got {batch_seconds!r} s")
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message="DStream is deprecated", category=FutureWarning)
        ssc = StreamingContext(sc, batch_seconds)
    for w in caught:
        if issubclass(w.category, FutureWarning) and "DStream is deprecated" in str(w.message):
            if notice is not None:
                notice(DEPRECATION_NOTICE)
        else:  # not ours to handle: pass it on
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return ssc


def word_counts(lines: DStream) -> DStream:
    """Count the words of each batch (the guide's ``NetworkWordCount``).

    Parameters
    ----------
    lines : DStream of str
        One element per line (``socketTextStream``, ``textFileStream``, ``queueStream``).

    Returns
    -------
    DStream of (str, int)
        ``(word, count)`` per batch; words are split on runs of whitespace
        (``str.split()``), so empty lines count nothing.
    """
    return (
        lines.flatMap(lambda line: line.split())
        .map(lambda word: (word, 1))
        .reduceByKey(lambda a, b: a + b)
    )


def parse_socket(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → ``(host, port)``, as :func:`logstream.replay.parse_host_port` reads it
    (``[::1]:9999`` for IPv6; a missing host is ``localhost``), the port from 1: a receiver
    connects to a server, it cannot pick a free port.

    Raises
    ------
    ConfigError
        When ``text`` has no port or the port is not 1–65535.
    """
    from logstream.replay import parse_host_port

    try:
        host, port = parse_host_port(text, default_host="localhost")
    except ConfigError as exc:
        raise ConfigError(f"--socket: {exc}") from exc
    if port == 0:
        raise ConfigError(f"--socket {text!r}: write HOST:PORT with a port from 1 to 65535")
    return host, port
