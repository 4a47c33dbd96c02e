"""The serving store: live views of the stream in one SQLite file, for the dashboard.

Delivery guarantee: **exactly-once per micro-batch**. The ingest stage writes each micro-batch
in one SQLite transaction that (1) checks the ledger for the batch id, (2) adds the batch's
counts to the per-window tables (an upsert that increments; trending-page windows older than
the retention are pruned first), (3) replaces the merged
unique-visitor sketches, (4) bumps the counters and keeps the latest examples, (5) records the
new maximum event time, and (6) inserts the batch id into ``ledger``. A micro-batch that Spark
replays after a crash either finds its id in the ledger and changes nothing, or finds the
previous attempt rolled back and applies it once. This is the idempotent-writer pattern of
``foreachBatch`` (Spark docs, "Using foreachBatch"; book Ch. 11).

All times are UTC instants written as ISO 8601 text (``1995-07-09T04:00:00Z``), which sorts
in time order. The file is in WAL mode so the dashboard reads while the pipeline writes.

Tables
------
``ledger(query, batch_id, committed_at, events, late_events, quarantined)``
``pipeline_state(key, value)``: ``max_event_time_ms``, ``watermark_delay_ms``, settings
``traffic_per_minute(window_start, window_end, requests, bytes, status_1xx … status_5xx, errors)``
``trending_pages(window_start, window_end, url_path, requests)``
``unique_visitors(window_start, window_end, visitors, sketch)``: ``sketch`` (HLL) only while
the window is open, null once final
``counters(name, value)``: ``events``, ``late_events``, ``quarantined``
``late_examples(seq, batch_id, event_time, watermark, client_host, url_path, source_file)``
``quarantine_examples(seq, batch_id, raw_line, source_file, reason)``
``progress(seq, query, batch_id, timestamp, input_rows_per_s, processed_rows_per_s,
batch_duration_ms, num_input_rows, watermark, max_event_time, state_rows,
state_memory_bytes, dropped_by_watermark)``
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLES_KEPT", "IngestBatchWrite", "ServingStore"]

#: Latest late events and quarantined lines kept as examples.
EXAMPLES_KEPT = 20

_SCHEMA = """
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
    reason TEXT);
CREATE TABLE IF NOT EXISTS progress (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, query TEXT, batch_id INTEGER, timestamp TEXT,
    input_rows_per_s REAL, processed_rows_per_s REAL, batch_duration_ms INTEGER,
    num_input_rows INTEGER, watermark TEXT, max_event_time TEXT, state_rows INTEGER,
    state_memory_bytes INTEGER, dropped_by_watermark INTEGER);
"""

_TRAFFIC_COLS = (
    "window_start", "window_end", "requests", "bytes",
    "status_1xx", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "errors",
)  # fmt: skip


@dataclass
class IngestBatchWrite:
    """What one ingest micro-batch adds to the store (all counts for that batch only).

    Times are ISO 8601 UTC text; ``max_event_time_ms`` is epoch milliseconds or None when
    the batch had no event.
    """

    batch_id: int
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    max_event_time_ms: int | None = None
    traffic: list[tuple[Any, ...]] = field(default_factory=list)  # in _TRAFFIC_COLS order
    pages: list[tuple[str, str, str, int]] = field(default_factory=list)
    visitors: list[tuple[str, str, int, bytes | None]] = field(default_factory=list)  # merged
    late_examples: list[tuple[Any, ...]] = field(default_factory=list)
    quarantine_examples: list[tuple[Any, ...]] = field(default_factory=list)
    prune_trending_before: str | None = None  # drop trending windows ending at or before
    final_before: str | None = None  # windows ending at or before are final: drop sketches


class ServingStore:
    """A SQLite serving store at ``path``.

    Parameters
    ----------
    path : Path
        The database file; its directory is created when writable.
    read_only : bool
        Open with ``mode=ro`` (the dashboard); the file must exist.

    Raises
    ------
    sqlite3.OperationalError
        When a read-only store does not exist or cannot be opened.
    """

    def __init__(self, path: Path | str, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)
        else:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection that is closed on exit (commit is the caller's business)."""
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    # -- pipeline side ---------------------------------------------------------------------

    def is_committed(self, query: str, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` of ``query`` is already in the ledger."""
        with self.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM ledger WHERE query = ? AND batch_id = ?", (query, batch_id)
            ).fetchone()
        return row is not None

    def get_state(self, key: str) -> str | None:
        """A value of ``pipeline_state``, or None."""
        with self.connection() as conn:
            row = conn.execute("SELECT value FROM pipeline_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_state(self, values: dict[str, str]) -> None:
        """Upsert ``pipeline_state`` values in one transaction."""
        with self.connection() as conn, conn:
            conn.executemany(
                "INSERT INTO pipeline_state(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                list(values.items()),
            )

    def max_event_time_ms(self) -> int | None:
        """Largest event time of every committed ingest micro-batch, epoch milliseconds."""
        value = self.get_state("max_event_time_ms")
        return None if value is None else int(value)

    def open_sketches(self) -> dict[str, tuple[str, bytes]]:
        """Sketches of windows still open (not yet final): ``{start: (end, sketch)}``."""
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT window_start, window_end, sketch FROM unique_visitors "
                "WHERE sketch IS NOT NULL"
            ).fetchall()
        return {r[0]: (r[1], bytes(r[2])) for r in rows}

    def commit_ingest_batch(self, query: str, write: IngestBatchWrite) -> bool:
        """Apply one ingest micro-batch exactly once (see the module docstring for the steps).

        Returns
        -------
        bool
            True when applied, False when the ledger already held the batch id.
        """
        conn = self._connect()
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                seen = conn.execute(
                    "SELECT 1 FROM ledger WHERE query = ? AND batch_id = ?", (query, write.batch_id)
                ).fetchone()
                if seen:
                    return False
                cols = ", ".join(_TRAFFIC_COLS)
                adds = ", ".join(f"{c} = {c} + excluded.{c}" for c in _TRAFFIC_COLS[2:])
                conn.executemany(
                    f"INSERT INTO traffic_per_minute({cols}) VALUES ({', '.join('?' * 10)}) "
                    f"ON CONFLICT(window_start) DO UPDATE SET {adds}",
                    write.traffic,
                )
                if write.prune_trending_before is not None:
                    conn.execute(
                        "DELETE FROM trending_pages WHERE window_end <= ?",
                        (write.prune_trending_before,),
                    )
                conn.executemany(
                    "INSERT INTO trending_pages(window_start, window_end, url_path, requests) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(window_start, window_end, url_path) "
                    "DO UPDATE SET requests = requests + excluded.requests",
                    write.pages,
                )
                conn.executemany(
                    "INSERT INTO unique_visitors(window_start, window_end, visitors, sketch) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(window_start) DO UPDATE SET "
                    "visitors = excluded.visitors, sketch = excluded.sketch",
                    write.visitors,
                )
                if write.final_before is not None:
                    conn.execute(
                        "UPDATE unique_visitors SET sketch = NULL "
                        "WHERE sketch IS NOT NULL AND window_end <= ?",
                        (write.final_before,),
                    )
                conn.executemany(
                    "INSERT INTO counters(name, value) VALUES (?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                    [
                        ("events", write.events),
                        ("late_events", write.late_events),
                        ("quarantined", write.quarantined),
                    ],
                )
                _keep_latest(
                    conn,
                    "late_examples",
                    "batch_id, event_time, watermark, client_host, url_path, source_file",
                    write.late_examples,
                )
                _keep_latest(
                    conn,
                    "quarantine_examples",
                    "batch_id, raw_line, source_file, reason",
                    write.quarantine_examples,
                )
                if write.max_event_time_ms is not None:
                    conn.execute(
                        "INSERT INTO pipeline_state(key, value) VALUES ('max_event_time_ms', ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = CAST(MAX(CAST(value AS INTEGER), "
                        "CAST(excluded.value AS INTEGER)) AS TEXT)",
                        (str(write.max_event_time_ms),),
                    )
                conn.execute(
                    "INSERT INTO ledger(query, batch_id, committed_at, events, late_events, "
                    "quarantined) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        query,
                        write.batch_id,
                        _now(),
                        write.events,
                        write.late_events,
                        write.quarantined,
                    ),
                )
            return True
        finally:
            conn.close()

    def record_progress(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append streaming-query progress rows (from the listener)."""
        cols = (
            "query", "batch_id", "timestamp", "input_rows_per_s", "processed_rows_per_s",
            "batch_duration_ms", "num_input_rows", "watermark", "max_event_time", "state_rows",
            "state_memory_bytes", "dropped_by_watermark",
        )  # fmt: skip
        with self.connection() as conn, conn:
            conn.executemany(
                f"INSERT INTO progress({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r.get(c) for c in cols) for r in rows],
            )

    # -- reading side ------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """``events``, ``late_events``, ``quarantined`` totals (0 when absent)."""
        base = {"events": 0, "late_events": 0, "quarantined": 0}
        with self.connection() as conn:
            base.update({r[0]: r[1] for r in conn.execute("SELECT name, value FROM counters")})
        return base

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a read query and return rows as dictionaries."""
        with self.connection() as conn:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]


def _keep_latest(
    conn: sqlite3.Connection, table: str, cols: str, rows: list[tuple[Any, ...]]
) -> None:
    if not rows:
        return
    marks = ", ".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO {table}({cols}) VALUES ({marks})", rows)
    conn.execute(
        f"DELETE FROM {table} WHERE seq <= (SELECT MAX(seq) FROM {table}) - {EXAMPLES_KEPT}"
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
