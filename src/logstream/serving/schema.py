"""The serving store's schema: its tables, their SQLite DDL, the rows it keeps and the SQL
that differs between its databases.

:data:`SCHEMA` is written in SQLite's dialect; :func:`logstream.serving.postgres.
postgres_schema` derives PostgreSQL's from it. :class:`Dialect` holds the few expressions that
differ; :func:`missing_schema` tells a table, column or function that is not there (a store not
created yet, or written by an older logstream) for either database. The writer is
:mod:`logstream.serving.store`, the reader :mod:`logstream.serving.reader`.

All times are UTC instants written as ISO 8601 text (``1995-07-09T04:00:00Z``), which sorts
in time order.

Tables
------
``ledger(query, batch_id, committed_at, events, late_events, quarantined)``
``pipeline_state(key, value)``: ``max_event_time_ms`` (of the windows written, ahead of the
ledger), ``ledger_max_event_time_ms`` (of the ledgered micro-batches), ``watermark_delay_ms``,
settings, the follow source's running loss counts (``follow_lost_bytes`` …,
:meth:`~logstream.serving.ServingStore.follow_losses`)
``traffic_per_minute(window_start, window_end, requests, bytes, status_1xx … status_5xx, errors)``
``trending_pages(window_start, window_end, url_path, requests)``
``unique_visitors(window_start, window_end, visitors, sketch)``: the estimate of the merged
HLL sketch (the sketch itself stays in the pipeline's state; the column is kept null)
``counters(name, value)``: ``events``, ``late_events``, ``quarantined``, ``filtered`` (lines
a run's filter left out), ``corrupt_files``, committed with their ingest micro-batch
``dedup_batches(batch_id, dropped)``: lines the deduplication operator dropped per micro-batch,
from the query's progress (``duplicates`` in :meth:`~logstream.serving.ServingStore.counters`
is their sum)
``late_examples(seq, batch_id, event_time, watermark, client_host, url_path, source_file)``
``quarantine_examples(seq, batch_id, raw_line, source_file, reason, detail)``
``progress(seq, query, batch_id, timestamp, input_rows_per_s, processed_rows_per_s,
batch_duration_ms, num_input_rows, watermark, max_event_time, state_rows,
state_memory_bytes, dropped_by_watermark, duplicates_dropped)``
``top_clients(window_start, window_end, client_host, requests, bytes)``: every client of the
clients windows within the retention, fed by the ingest stage like ``trending_pages``
``sessions(seq, batch_id, client_host, user_agent, session_start, session_end, duration_s,
requests, pages, bytes, entry_page, exit_page, bounce)``: the latest :data:`SESSIONS_KEPT`
closed sessions (the ``sessions`` Parquet output has all of them)
``session_stats(window_start, window_end, sessions, bounces, pages, median_duration_s,
p95_duration_s, sketch)``: per window of session start, merged across micro-batches through
the KLL sketch of durations
``alerts(seq, batch_id, series, metric, window_start, window_end, value, mean, std, z,
direction)``: the latest :data:`ALERTS_KEPT` anomaly alerts
``traffic_by_dimension(dimension, key, window_start, window_end, requests, bytes, status_1xx
… status_5xx, errors)``: traffic per window of the reference-data views (``sections``,
``agents``, ``networks``; :mod:`logstream.reference`), upserted like ``traffic_per_minute``,
kept for the retention like ``trending_pages`` (the Parquet outputs keep every window);
also GoAccess's panels per minute (``dimension`` ``requests``, ``hosts``, ``os``,
``browsers``, ``geolocation``, ``static_requests``, ``not_found``, ``referrers``,
``referring_sites``, ``remote_user``: the
``traffic_by_panel`` output's live view)
``daily_visitors(day, window_start, window_end, requests, visitors, bytes)``: GoAccess's
visitors panel, a row per UTC day (exact unique visitors: host, day and user agent), upserted
while the day is open and kept whole
``pipeline_state.reference_versions`` holds the table versions (SHA-256) of the newest
micro-batch.
``bot_scores(seq, batch_id, window_start, window_end, client_host, requests, bot_probability,
distinct_pages, error_ratio, static_share, robots, model_version)``: the client windows a
bot model flagged (at most :data:`BOTS_PER_BATCH` per micro-batch, most likely first; the
latest :data:`BOTS_KEPT`; the ``bot_scores`` Parquet output has every client window)
``bot_windows(window_start, window_end, clients, bots, bot_requests, requests)``: per final
client window, the clients scored and those flagged as bots, with their requests

Sessions and alerts are committed with the ingest micro-batch that closed or raised them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = [
    "ALERTS_KEPT",
    "BOTS_KEPT",
    "BOTS_PER_BATCH",
    "EXAMPLES_KEPT",
    "FOLLOW_LOSSES",
    "FOLLOW_LOSS_KEYS",
    "SCHEMA",
    "SESSIONS_KEPT",
    "SQLITE",
    "TRAFFIC_COLS",
    "Dialect",
    "missing_schema",
]

#: The follow source's running loss counts, as its offset names them (``docs/follow.md``),
#: and what each counts (the help of its Prometheus gauge).
FOLLOW_LOSSES = {
    "truncations": "Truncations of followed files seen.",
    "lost_bytes": "Bytes of followed files lost.",
    "lost_lines": "Lines lost to rotation (an estimate).",
    "lost_files": "Followed files gone before read whole.",
}
#: Their keys in ``pipeline_state`` (``follow_lost_bytes`` …), in the same order: the one
#: definition the writer, the readers and the Prometheus gauges use.
FOLLOW_LOSS_KEYS = tuple(f"follow_{name}" for name in FOLLOW_LOSSES)

#: Latest late events and quarantined lines kept as examples.
EXAMPLES_KEPT = 20
#: Latest closed sessions kept in the store.
SESSIONS_KEPT = 500
#: Latest anomaly alerts kept in the store.
ALERTS_KEPT = 500
#: Latest bot scores kept in the store, and the most likely bots a micro-batch adds.
BOTS_KEPT = 500
BOTS_PER_BATCH = 50

#: The store's tables in SQLite's dialect (PostgreSQL's is derived from it:
#: :func:`logstream.serving.postgres.postgres_schema`).
SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    query TEXT NOT NULL, batch_id INTEGER NOT NULL, committed_at TEXT NOT NULL,
    events INTEGER NOT NULL, late_events INTEGER NOT NULL, quarantined INTEGER NOT NULL,
    PRIMARY KEY (query, batch_id));
CREATE TABLE IF NOT EXISTS pipeline_state (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS traffic_per_minute (
    window_start TEXT PRIMARY KEY, window_end TEXT NOT NULL,
    requests INTEGER NOT NULL, bytes INTEGER NOT NULL,
    status_1xx INTEGER NOT NULL, status_2xx INTEGER NOT NULL, status_3xx INTEGER NOT NULL,
    status_4xx INTEGER NOT NULL, status_5xx INTEGER NOT NULL, errors INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS trending_pages (
    window_start TEXT NOT NULL, window_end TEXT NOT NULL, url_path TEXT NOT NULL,
    requests INTEGER NOT NULL, PRIMARY KEY (window_start, window_end, url_path));
CREATE INDEX IF NOT EXISTS trending_by_end ON trending_pages (window_end, requests DESC);
CREATE TABLE IF NOT EXISTS unique_visitors (
    window_start TEXT PRIMARY KEY, window_end TEXT NOT NULL,
    visitors INTEGER NOT NULL, sketch BLOB);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS late_examples (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id INTEGER, event_time TEXT, watermark TEXT,
    client_host TEXT, url_path TEXT, source_file TEXT);
CREATE TABLE IF NOT EXISTS quarantine_examples (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id INTEGER, raw_line TEXT, source_file TEXT,
    reason TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS dedup_batches (batch_id INTEGER PRIMARY KEY, dropped INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS progress (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, query TEXT, batch_id INTEGER, timestamp TEXT,
    input_rows_per_s REAL, processed_rows_per_s REAL, batch_duration_ms INTEGER,
    num_input_rows INTEGER, watermark TEXT, max_event_time TEXT, state_rows INTEGER,
    state_memory_bytes INTEGER, dropped_by_watermark INTEGER, duplicates_dropped INTEGER);
CREATE TABLE IF NOT EXISTS top_clients (
    window_start TEXT NOT NULL, window_end TEXT NOT NULL, client_host TEXT NOT NULL,
    requests INTEGER NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY (window_start, client_host));
CREATE INDEX IF NOT EXISTS top_clients_by_end ON top_clients (window_end, requests DESC);
CREATE TABLE IF NOT EXISTS sessions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id INTEGER, client_host TEXT, user_agent TEXT,
    session_start TEXT, session_end TEXT, duration_s INTEGER, requests INTEGER, pages INTEGER,
    bytes INTEGER, entry_page TEXT, exit_page TEXT, bounce INTEGER);
CREATE TABLE IF NOT EXISTS session_stats (
    window_start TEXT PRIMARY KEY, window_end TEXT NOT NULL, sessions INTEGER NOT NULL,
    bounces INTEGER NOT NULL, pages INTEGER NOT NULL, median_duration_s INTEGER,
    p95_duration_s INTEGER, sketch BLOB);
CREATE TABLE IF NOT EXISTS traffic_by_dimension (
    dimension TEXT NOT NULL, key TEXT NOT NULL, window_start TEXT NOT NULL,
    window_end TEXT NOT NULL, requests INTEGER NOT NULL, bytes INTEGER NOT NULL,
    status_1xx INTEGER NOT NULL, status_2xx INTEGER NOT NULL, status_3xx INTEGER NOT NULL,
    status_4xx INTEGER NOT NULL, status_5xx INTEGER NOT NULL, errors INTEGER NOT NULL,
    PRIMARY KEY (dimension, window_start, key));
CREATE TABLE IF NOT EXISTS daily_visitors (
    day TEXT PRIMARY KEY, window_start TEXT NOT NULL, window_end TEXT NOT NULL,
    requests INTEGER NOT NULL, visitors INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS alerts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id INTEGER, series TEXT, metric TEXT,
    window_start TEXT, window_end TEXT, value REAL, mean REAL, std REAL, z REAL,
    direction TEXT);
CREATE TABLE IF NOT EXISTS bot_scores (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id INTEGER, window_start TEXT,
    window_end TEXT, client_host TEXT, requests INTEGER, bot_probability REAL,
    distinct_pages REAL, error_ratio REAL, static_share REAL, robots REAL,
    model_version TEXT);
CREATE TABLE IF NOT EXISTS bot_windows (
    window_start TEXT PRIMARY KEY, window_end TEXT NOT NULL, clients INTEGER NOT NULL,
    bots INTEGER NOT NULL, bot_requests INTEGER NOT NULL, requests INTEGER NOT NULL);
"""

#: The columns of a ``traffic_per_minute`` row, in order (``traffic_by_dimension`` adds
#: ``dimension`` and ``key`` before them).
TRAFFIC_COLS = (
    "window_start", "window_end", "requests", "bytes",
    "status_1xx", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "errors",
)  # fmt: skip


@dataclass(frozen=True)
class Dialect:
    """The SQL that differs between the store's databases (everything else is shared).

    Attributes
    ----------
    name : str
        ``sqlite`` or ``postgresql``.
    greatest : str
        The two-argument maximum function (SQLite's scalar ``MAX``, PostgreSQL's
        ``GREATEST``).
    """

    name: str
    greatest: str


#: SQLite's dialect.
SQLITE = Dialect(name="sqlite", greatest="MAX")


def missing_schema(exc: BaseException) -> bool:
    """Whether ``exc`` says a table, column or function of the store does not exist (a store
    not created yet, or written by an older logstream), for either database."""
    if isinstance(exc, sqlite3.OperationalError):
        return "no such" in str(exc)  # "no such table" / "no such column"
    # psycopg's classes for SQLSTATE 42P01 / 42703 / 42883, without importing psycopg here
    return getattr(exc, "sqlstate", None) in ("42P01", "42703", "42883")
