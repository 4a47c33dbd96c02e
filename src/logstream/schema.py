"""The canonical event schema: the one shape every parser produces and every analytics
function reads.

This module is the single place the schema is defined and documented (the README and
``docs/schema.md`` point here).

Events (:data:`EVENT_SCHEMA`)
=============================

================  ==========  =============================================================
column            type        meaning
================  ==========  =============================================================
client_host       string      ``%h``: client IP address (v4 or v6) or resolved host name
ident             string      ``%l``: RFC 1413 identity; null for ``-``
user              string      ``%u``: authenticated user; null for ``-``
event_time        timestamp   ``%t``: when the request was received, a UTC instant computed
                              from the line's own offset (``-0400`` → +4 h); the session time
                              zone is UTC, so it displays in UTC
method            string      request method (``GET``); null when the request line has none
url_path          string      request target before ``?`` (``/shuttle/countdown/``)
query_string      string      request target after ``?``, without it; null when absent
protocol          string      ``HTTP/1.0`` …; null when the request line has none
status            int         final status code (``%>s``), 100–599
bytes_sent        bigint      response size in bytes (``%b``); ``-`` means 0
referrer          string      ``Referer`` header; null for ``-`` or when the format has none
user_agent        string      ``User-Agent`` header; null for ``-`` or when the format has none
response_time_us  bigint      time to serve, microseconds (``%D``, or ``%T`` × 10⁶); else null
source_file       string      URI of the file the line came from; null for socket sources
================  ==========  =============================================================

Quarantine (:data:`QUARANTINE_SCHEMA`)
======================================

A line that cannot be parsed is never dropped: it keeps its raw text, its source file and a
reason (one of :data:`QUARANTINE_REASONS`), and counts as a *failed* request (GoAccess's
valid/failed split).
"""

from __future__ import annotations

from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["EVENT_COLUMNS", "EVENT_SCHEMA", "QUARANTINE_REASONS", "QUARANTINE_SCHEMA"]

EVENT_SCHEMA = StructType(
    [
        StructField("client_host", StringType(), False),
        StructField("ident", StringType(), True),
        StructField("user", StringType(), True),
        StructField("event_time", TimestampType(), False),
        StructField("method", StringType(), True),
        StructField("url_path", StringType(), True),
        StructField("query_string", StringType(), True),
        StructField("protocol", StringType(), True),
        StructField("status", IntegerType(), False),
        StructField("bytes_sent", LongType(), False),
        StructField("referrer", StringType(), True),
        StructField("user_agent", StringType(), True),
        StructField("response_time_us", LongType(), True),
        StructField("virtual_host", StringType(), True),
        StructField("source_file", StringType(), True),
    ]
)

#: Column names of :data:`EVENT_SCHEMA`, in order.
EVENT_COLUMNS: tuple[str, ...] = tuple(EVENT_SCHEMA.fieldNames())

QUARANTINE_SCHEMA = StructType(
    [
        StructField("raw_line", StringType(), True),
        StructField("source_file", StringType(), True),
        StructField("reason", StringType(), False),
        StructField("detail", StringType(), True),
    ]
)

#: Why a line is quarantined. The parser picks the first that applies, in this order.
QUARANTINE_REASONS: dict[str, str] = {
    "line_too_long": "the line is longer than --max-line-bytes (default 64 KiB): its first "
    "1,024 characters are kept, and the format never reads it",
    "empty_line": "the line is empty or blank",
    "control_character": "the line holds a NUL or U+0001 control character, which no log "
    "format emits (and PostgreSQL's text cannot hold NUL)",
    "format_mismatch": "the line does not match the log format",
    "bad_timestamp": "the time field is not a valid date and time for the format",
    "bad_status": "the status is not a number from 100 to 599",
    "bad_bytes": "the size field is neither '-' nor a non-negative whole number",
    "missing_host": "the client host field is empty",
    "future_event_time": "the time is further ahead than --max-future (default a day) of the "
    "clock, or, in a micro-batch of a stream, further ahead of the rest of its micro-batch "
    "than the watermark delay: counted, never a window, never the watermark",
    "corrupt_file": "the file could not be read to its end (a truncated or corrupt .gz); its "
    "readable lines count, the row names the file and the error in detail",
}
