"""The DStream edition: Spark Streaming (the Spark Streaming Programming Guide; book Part III).

Spark 4 still ships ``pyspark.streaming`` (``StreamingContext``, receivers, ``DStream``
transformations and output operations) but deprecates it: creating a ``StreamingContext``
emits a ``FutureWarning``. :func:`streaming_context` catches that one warning where it arises
and says so once on the console, rather than silencing warnings globally. New pipelines belong
on Structured Streaming (``logstream run``); this edition is for users who maintain DStream
jobs or learn both APIs (see ``docs/dstream.md``).

Examples
--------
>>> from logstream.dstream import streaming_context, word_counts  # doctest: +SKIP
>>> ssc = streaming_context(spark.sparkContext, batch_seconds=1)  # doctest: +SKIP
>>> word_counts(ssc.socketTextStream("localhost", 9999)).pprint()  # doctest: +SKIP
>>> ssc.start(); ssc.awaitTermination()  # doctest: +SKIP
"""

from __future__ import annotations

from logstream.dstream.weblog import (
    DSTREAM_QUERY,
    TRENDING_QUERY,
    DStreamSettings,
    build_weblog_streams,
    progress_listener,
    read_listed_hosts,
)
from logstream.dstream.wordcount import (
    DEPRECATION_NOTICE,
    parse_socket,
    streaming_context,
    word_counts,
)

__all__ = [
    "DEPRECATION_NOTICE",
    "DSTREAM_QUERY",
    "TRENDING_QUERY",
    "DStreamSettings",
    "build_weblog_streams",
    "parse_socket",
    "progress_listener",
    "read_listed_hosts",
    "streaming_context",
    "word_counts",
]
