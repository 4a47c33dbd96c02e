"""The serving store: live views of the stream, in one SQLite file or a PostgreSQL database.

:class:`ServingStore` is the SQLite store, the embedded default; :class:`~logstream.serving.
postgres.PostgresStore` (``postgresql://`` URLs, :func:`~logstream.serving.open_store`) runs
the same SQL with the same tables on PostgreSQL. The business logic below (upserts, ledger,
the latest rows kept) is written once; the few SQL dialect differences live in
:class:`Dialect`. See ``docs/serving.md`` for which store to use when.

Delivery guarantee: **exactly-once per micro-batch**. The ingest stage writes each micro-batch
in one transaction that (1) claims the batch id in the ledger (``INSERT … ON CONFLICT DO
NOTHING RETURNING``: a batch id already there, or being committed by a concurrent writer,
claims nothing and the transaction writes nothing), (2) sets the merged values of every
window the batch changed (traffic, visitors, trending pages, clients, the reference-data
views: an upsert that *replaces*, so it is idempotent by itself; trending, client and
reference-data windows older than the retention are pruned first), (3) bumps the counters
and keeps the latest examples, closed sessions and alerts, merges the session statistics,
and (4) records the new maximum event time. A micro-batch that Spark replays after a crash
either finds its id in the ledger and changes nothing, or finds the previous attempt rolled
back and applies it once. This is the idempotent-writer pattern of ``foreachBatch`` (Spark
docs, "Using foreachBatch"; book Ch. 11). Steps (2) and (4), idempotent by themselves, run
ahead in a transaction of their own as soon as a batch with on-time events has merged its
panes (:meth:`ServingStore.commit_ingest_views`, guarded by ``pipeline_state.views_batch``
against an older batch's writer), so the dashboard shows a window while its micro-batch still
publishes outputs and merges sessions; the counters, and everything that adds up, wait for
the ledger.

All times are UTC instants written as ISO 8601 text (``1995-07-09T04:00:00Z``), which sorts
in time order. The SQLite file is in WAL mode so the dashboard reads while the pipeline writes;
PostgreSQL readers see the last committed transaction (MVCC).

The tables are described in :mod:`logstream.serving.schema`; the reads are
:class:`~logstream.serving.reader.StoreReader`'s.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from logstream.serving.reader import StoreReader
from logstream.serving.retry import retried, retry
from logstream.serving.safe_text import SafeConnection
from logstream.serving.schema import (
    ALERTS_KEPT,
    BOTS_KEPT,
    BOTS_PER_BATCH,
    EXAMPLES_KEPT,
    FOLLOW_LOSS_KEYS,
    FOLLOW_LOSSES,
    SCHEMA,
    SESSIONS_KEPT,
    SQLITE,
    TRAFFIC_COLS,
    Dialect,
    missing_schema,
)
from logstream.serving.write import IngestBatchWrite

__all__ = [
    "ALERTS_KEPT",
    "BOTS_KEPT",
    "BOTS_PER_BATCH",
    "EXAMPLES_KEPT",
    "SCHEMA",
    "SESSIONS_KEPT",
    "SQLITE",
    "Dialect",
    "IngestBatchWrite",
    "ServingStore",
    "missing_schema",
]

_T = TypeVar("_T")


class ServingStore:
    """A SQLite serving store at ``path`` (the embedded default).

    Subclasses for other databases (:class:`~logstream.serving.postgres.PostgresStore`)
    override :meth:`connection`, :meth:`transaction`, :meth:`read_transaction`,
    :attr:`url` and :attr:`dialect`; every write and read method is shared. Connections
    follow the DB-API of :mod:`sqlite3`: ``execute`` / ``executemany`` with ``?``
    placeholders, rows indexable by position and by column name.

    Parameters
    ----------
    path : Path
        The database file; its directory is created when writable.
    read_only : bool
        Open with ``mode=ro`` (the dashboard); the file must exist.
    retry_s : float
        Seconds an operation is retried while the store cannot be reached (:meth:`retry`;
        ``--store-retry``); never for a SQLite file, which has no server to wait for.

    Raises
    ------
    sqlite3.OperationalError
        When a read-only store does not exist or cannot be opened.

    Notes
    -----
    Every text a write binds is made safe for the store (:mod:`logstream.serving.safe_text`).
    """

    dialect: Dialect = SQLITE

    def __init__(self, path: Path | str, read_only: bool = False, retry_s: float = 0.0) -> None:
        self.path: Path | None = Path(path)
        self.read_only = read_only
        self.retry_s = retry_s
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a new store is its owner's alone (0600, whatever the umask): it holds client
            # addresses, user names and raw lines; SQLite gives its -wal and -shm the same mode
            with suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
                columns = {r[1] for r in conn.execute("PRAGMA table_info(progress)")}
                if "duplicates_dropped" not in columns:  # a store written by version 0.1
                    conn.execute("ALTER TABLE progress ADD COLUMN duplicates_dropped INTEGER")
                columns = {r[1] for r in conn.execute("PRAGMA table_info(quarantine_examples)")}
                if "detail" not in columns:
                    conn.execute("ALTER TABLE quarantine_examples ADD COLUMN detail TEXT")
            # a connection held open while the store is: the connection of a write is then
            # never the file's last, whose close checkpoints the whole WAL into the database
            # and deletes it (SQLite's default) — at every micro-batch when no dashboard reads
            self._keeper: sqlite3.Connection | None = sqlite3.connect(
                self.path, timeout=30, check_same_thread=False
            )

    @property
    def url(self) -> str:
        """The store's URL, ``sqlite:///PATH`` (a password of a database URL masked)."""
        return f"sqlite:///{self.path}"

    def close(self) -> None:
        """Release the store's connections (SQLite opens one per call; the one held open
        between them is closed)."""
        keeper, self._keeper = getattr(self, "_keeper", None), None
        if keeper is not None:
            keeper.close()

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        if self.read_only:
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)
        else:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection for reads that is closed on exit (commit is the caller's business)."""
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Generator[Any, None, None]:
        """A connection in a write transaction: committed on exit, rolled back on an error.

        SQLite takes the write lock at the start (``BEGIN IMMEDIATE``), so concurrent writers
        queue instead of failing on a lock upgrade.
        """
        conn = self._connect()
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                yield SafeConnection(conn)
        finally:
            conn.close()

    @contextmanager
    def read_transaction(self) -> Generator[Any, None, None]:
        """A connection in one read transaction (a consistent snapshot), rolled back on exit.

        Raises
        ------
        sqlite3.Error
            When the file cannot be read (locked for more than 2 s, not a database …).
        """
        with self.connection() as conn:
            conn.execute("PRAGMA busy_timeout = 2000")
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.rollback()

    @contextmanager
    def reader(self) -> Generator[StoreReader, None, None]:
        """The typed reads of the store (:class:`~logstream.serving.reader.StoreReader`) in
        one read transaction (:meth:`read_transaction`): every read sees the same committed
        state.

        Raises
        ------
        sqlite3.Error or psycopg.Error
            When the store cannot be read (:mod:`logstream.serving.read_errors`).
        """
        with self.read_transaction() as conn:
            yield StoreReader(conn)

    def transient(self, error: BaseException) -> bool:
        """Whether ``error`` says the store cannot be reached for now (never for SQLite)."""
        return False

    def retry(self, what: str, call: Callable[[], _T]) -> _T:
        """``call()`` retried while the store cannot be reached, :attr:`retry_s` seconds at
        most (:func:`logstream.serving.retry.retry`: why a retry stays exactly-once)."""
        return retry(self, what, call)

    # -- pipeline side ---------------------------------------------------------------------

    @retried
    def is_committed(self, query: str, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` of ``query`` is already in the ledger."""
        with self.connection() as conn:
            return StoreReader(conn).is_committed(query, batch_id)

    @retried
    def get_state(self, key: str) -> str | None:
        """A value of ``pipeline_state``, or None."""
        with self.connection() as conn:
            return StoreReader(conn).state_value(key)

    @retried
    def set_state(self, values: dict[str, str]) -> None:
        """Upsert ``pipeline_state`` values in one transaction."""
        with self.transaction() as conn:
            conn.executemany(
                "INSERT INTO pipeline_state(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                list(values.items()),
            )

    @retried
    def record_follow_losses(self, losses: dict[str, int]) -> None:
        """Keep the follow source's running loss counts (from a progress row's end offset).

        Parameters
        ----------
        losses : dict of str to int
            ``truncations``, ``lost_bytes`` (bytes), ``lost_lines`` (an estimate) and
            ``lost_files``: running totals, so each is kept at its largest value (a progress
            event lost in a crash is made good by the next one).
        """
        with self.transaction() as conn:
            conn.executemany(
                "INSERT INTO pipeline_state(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = CAST("
                f"{self.dialect.greatest}(CAST(pipeline_state.value AS BIGINT), "
                "CAST(excluded.value AS BIGINT)) AS TEXT)",
                [
                    (key, str(int(losses[name])))
                    for name, key in zip(FOLLOW_LOSSES, FOLLOW_LOSS_KEYS, strict=True)
                    if name in losses
                ],
            )

    @retried
    def follow_losses(self) -> dict[str, int]:
        """The follow source's running counts: ``follow_truncations``, ``follow_lost_bytes``
        (bytes), ``follow_lost_lines`` (an estimate) and ``follow_lost_files``; 0 when absent
        (another source, or nothing lost)."""
        counts = dict.fromkeys(FOLLOW_LOSS_KEYS, 0)
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT key, value FROM pipeline_state WHERE key LIKE 'follow_%'"
            ).fetchall()
        counts.update({k: int(v) for k, v in rows if k in counts})
        return counts

    def max_event_time_ms(self) -> int | None:
        """Largest event time of every ingest micro-batch whose windows are written (ahead of
        its ledger row: :meth:`commit_ingest_views`), epoch milliseconds."""
        value = self.get_state("max_event_time_ms")
        return None if value is None else int(value)

    @retried
    def commit_ingest_views(self, query: str, write: IngestBatchWrite) -> bool:
        """Apply the windows of one ingest micro-batch ahead of the rest of it.

        The merged value of every window the batch changed (traffic, visitors, trending pages,
        clients, the reference-data views), the retention's pruning, the reference versions
        and the newest event time, in one transaction, before the micro-batch publishes its
        outputs and merges sessions and alerts: the dashboard shows a line's window a few
        seconds sooner. Every one of these writes replaces a value (or raises a maximum), so
        it is idempotent by itself: a micro-batch replayed after a crash writes the same
        values again. :meth:`commit_ingest_batch` then skips them (``write.views_committed``).

        Returns
        -------
        bool
            True when applied, False when the ledger already held the batch id (a replay of
            a committed micro-batch: nothing is written).
        """
        with self.transaction() as conn:
            # first a lock on the newest batch whose windows were written: a writer of an
            # older batch (a zombie driver behind its replacement) writes nothing, and the
            # ledger read after it sees what its replacement committed
            if not self._claim_views(conn, write.batch_id):
                return False
            if StoreReader(conn).is_committed(query, write.batch_id):
                return False
            self._apply_views(conn, write)
        write.views_committed = True
        return True

    @staticmethod
    def _claim_views(conn: Any, batch_id: int) -> bool:
        """Record ``batch_id`` as the newest batch whose windows are written
        (``pipeline_state.views_batch``), unless a newer one is; True when recorded. The
        upsert locks the row until the transaction ends (PostgreSQL; SQLite's writers are
        serial)."""
        return bool(
            conn.execute(
                "INSERT INTO pipeline_state(key, value) VALUES ('views_batch', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value "
                "WHERE CAST(pipeline_state.value AS BIGINT) <= CAST(excluded.value AS BIGINT) "
                "RETURNING key",
                (str(batch_id),),
            ).fetchall()
        )

    def _apply_views(self, conn: Any, write: IngestBatchWrite) -> None:
        cols = ", ".join(TRAFFIC_COLS)
        sets = ", ".join(f"{c} = excluded.{c}" for c in TRAFFIC_COLS[1:])
        conn.executemany(
            f"INSERT INTO traffic_per_minute({cols}) VALUES ({', '.join('?' * 10)}) "
            f"ON CONFLICT(window_start) DO UPDATE SET {sets}",
            write.traffic,
        )
        dims = ", ".join(("dimension", "key", *TRAFFIC_COLS))
        conn.executemany(
            f"INSERT INTO traffic_by_dimension({dims}) VALUES ({', '.join('?' * 12)}) "
            f"ON CONFLICT(dimension, window_start, key) DO UPDATE SET {sets}",
            write.dimensions,
        )
        conn.executemany(
            "INSERT INTO daily_visitors(day, window_start, window_end, requests, visitors, "
            "bytes) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(day) DO UPDATE SET "
            "requests = excluded.requests, visitors = excluded.visitors, bytes = excluded.bytes",
            write.daily_visitors,
        )
        if write.prune_trending_before is not None:
            for table in ("trending_pages", "top_clients"):
                conn.execute(
                    f"DELETE FROM {table} WHERE window_end <= ?",
                    (write.prune_trending_before,),
                )
            conn.execute(  # one row per key and minute: kept for the retention only
                "DELETE FROM traffic_by_dimension WHERE window_end <= ?",
                (write.prune_trending_before,),
            )
        if write.reference_versions is not None:
            conn.execute(
                "INSERT INTO pipeline_state(key, value) VALUES ('reference_versions', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (json.dumps(write.reference_versions),),
            )
        conn.executemany(
            "INSERT INTO top_clients(window_start, window_end, client_host, requests, "
            "bytes) VALUES (?, ?, ?, ?, ?) ON CONFLICT(window_start, client_host) "
            "DO UPDATE SET requests = excluded.requests, bytes = excluded.bytes",
            write.clients,
        )
        conn.executemany(
            "INSERT INTO trending_pages(window_start, window_end, url_path, requests) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(window_start, window_end, url_path) "
            "DO UPDATE SET requests = excluded.requests",
            write.pages,
        )
        conn.executemany(
            "INSERT INTO unique_visitors(window_start, window_end, visitors, sketch) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(window_start) DO UPDATE SET "
            "visitors = excluded.visitors, sketch = excluded.sketch",
            write.visitors,
        )
        if write.max_event_time_ms is not None:
            conn.execute(
                "INSERT INTO pipeline_state(key, value) VALUES ('max_event_time_ms', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = CAST("
                f"{self.dialect.greatest}(CAST(pipeline_state.value AS BIGINT), "
                "CAST(excluded.value AS BIGINT)) AS TEXT)",
                (str(write.max_event_time_ms),),
            )

    def commit_ingest_batch(self, query: str, write: IngestBatchWrite) -> bool:
        """Apply one ingest micro-batch exactly once (see the module docstring for the steps);
        the windows too unless :meth:`commit_ingest_views` wrote them.

        Returns
        -------
        bool
            True when applied, False when the ledger already held the batch id.
        """

        def apply(conn: Any) -> None:
            if not write.views_committed:
                self._claim_views(conn, write.batch_id)
                self._apply_views(conn, write)
            if write.max_event_time_ms is not None:
                # the newest event time of the ledgered micro-batches (max_event_time_ms may
                # already hold the next batch's, written ahead): the dashboard's watermark
                conn.execute(
                    "INSERT INTO pipeline_state(key, value) VALUES ('ledger_max_event_time_ms', "
                    "?) ON CONFLICT(key) DO UPDATE SET value = CAST("
                    f"{self.dialect.greatest}(CAST(pipeline_state.value AS BIGINT), "
                    "CAST(excluded.value AS BIGINT)) AS TEXT)",
                    (str(write.max_event_time_ms),),
                )
            conn.executemany(
                "INSERT INTO counters(name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = counters.value + excluded.value",
                [
                    ("events", write.events),
                    ("late_events", write.late_events),
                    ("quarantined", write.quarantined),
                    ("filtered", write.filtered),
                    ("corrupt_files", write.corrupt_files),
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
                "batch_id, raw_line, source_file, reason, detail",
                write.quarantine_examples,
            )
            _keep_latest(
                conn,
                "sessions",
                "batch_id, client_host, user_agent, session_start, session_end, duration_s, "
                "requests, pages, bytes, entry_page, exit_page, bounce",
                [(write.batch_id, *row) for row in write.sessions],
                SESSIONS_KEPT,
            )
            _replace_session_stats(conn, write.session_stats)
            _keep_latest(
                conn,
                "alerts",
                "batch_id, series, metric, window_start, window_end, value, mean, std, z, "
                "direction",
                [(write.batch_id, *row) for row in write.alerts],
                ALERTS_KEPT,
            )
            _keep_latest(
                conn,
                "bot_scores",
                "batch_id, window_start, window_end, client_host, requests, bot_probability, "
                "distinct_pages, error_ratio, static_share, robots, model_version",
                [(write.batch_id, *row) for row in write.bots],
                BOTS_KEPT,
            )
            conn.executemany(
                "INSERT INTO bot_windows(window_start, window_end, clients, bots, "
                "bot_requests, requests) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(window_start) "
                "DO UPDATE SET window_end = excluded.window_end, clients = excluded.clients, "
                "bots = excluded.bots, bot_requests = excluded.bot_requests, "
                "requests = excluded.requests",
                write.bot_windows,
            )

        return self.commit_batch(
            query, write.batch_id, write.events, apply, write.late_events, write.quarantined
        )

    @retried
    def record_progress(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append streaming-query progress rows (from the listener; shown, never counted:
        a progress event can be lost in a crash, so counters come from the ledgered
        micro-batches)."""
        cols = (
            "query", "batch_id", "timestamp", "input_rows_per_s", "processed_rows_per_s",
            "batch_duration_ms", "num_input_rows", "watermark", "max_event_time", "state_rows",
            "state_memory_bytes", "dropped_by_watermark", "duplicates_dropped",
        )  # fmt: skip
        rows = list(rows)
        with self.transaction() as conn:
            conn.executemany(
                f"INSERT INTO progress({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r.get(c) for c in cols) for r in rows],
            )

    @retried
    def counters(self) -> dict[str, int]:
        """``events``, ``late_events``, ``quarantined``, ``corrupt_files``, ``duplicates``
        totals (0 when absent).

        All but ``duplicates`` come from the ledgered ingest micro-batches, so a replay after a
        crash counts nothing twice and nothing committed is missing. ``duplicates`` comes from
        the progress of the deduplication operator, which a crash right after a micro-batch
        can lose (see :meth:`record_duplicates`).
        """
        with self.connection() as conn:
            return StoreReader(conn).counters()

    @retried
    def record_duplicates(self, batch_id: int, dropped: int) -> None:
        """Record the lines the deduplication operator dropped in micro-batch ``batch_id``
        (from its progress; a micro-batch replayed after a crash reports the same number,
        which is kept once)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO dedup_batches(batch_id, dropped) VALUES (?, ?) "
                "ON CONFLICT(batch_id) DO NOTHING",
                (batch_id, dropped),
            )

    @retried
    def commit_batch(
        self,
        query: str,
        batch_id: int,
        rows: int,
        apply: Callable[[Any], None],
        late_events: int = 0,
        quarantined: int = 0,
    ) -> bool:
        """Run ``apply(conn)`` and record ``(query, batch_id)`` in the ledger, in one transaction.

        The exactly-once writer of every query (ingest, sessions, alerts): the transaction
        first claims ``(query, batch_id)`` with ``INSERT … ON CONFLICT DO NOTHING
        RETURNING``. A micro-batch replayed after a crash finds its id and changes nothing;
        of two concurrent writers of one batch id, the second waits on the ledger's primary
        key until the first commits (then claims nothing) or rolls back (then applies it).

        Parameters
        ----------
        query : str
            Query name, the ledger's key with ``batch_id``.
        batch_id : int
        rows : int
            Rows the micro-batch produced (the ledger's ``events`` column).
        apply : callable
            Writes the micro-batch's rows with the given connection (no commit).
        late_events, quarantined : int
            The ingest query's other ledger columns.

        Returns
        -------
        bool
            True when applied, False when the ledger already held the batch id.
        """
        with self.transaction() as conn:
            claimed = conn.execute(
                "INSERT INTO ledger(query, batch_id, committed_at, events, late_events, "
                "quarantined) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(query, batch_id) DO NOTHING "
                "RETURNING batch_id",
                (query, batch_id, _now(), rows, late_events, quarantined),
            ).fetchall()
            if not claimed:
                return False
            apply(conn)
        return True

    @retried
    def session_stats_rows(self, window_starts: Iterable[str]) -> list[tuple[Any, ...]]:
        """Stored ``session_stats`` rows of the given windows, for merging: ``(window_start,
        window_end, sessions, bounces, pages, sketch)``."""
        starts = list(window_starts)
        if not starts:
            return []
        with self.connection() as conn:
            return StoreReader(conn).session_stats_rows(starts)

    def commit_sessions(
        self,
        batch_id: int,
        closed: int,
        sessions: list[tuple[Any, ...]],
        stats: list[tuple[Any, ...]],
    ) -> bool:
        """Commit closed sessions and their statistics exactly once, under ledger key
        ``("sessions", batch_id)`` (the pipeline commits them with its ingest micro-batch;
        this serves tools and tests that fill a store by hand).

        Parameters
        ----------
        batch_id : int
        closed : int
            Sessions closed in the micro-batch (all of them, for the ledger).
        sessions : list of tuple
            The latest closed sessions to keep, in ``sessions`` column order from
            ``client_host`` to ``bounce``.
        stats : list of tuple
            Merged statistics per window, in ``session_stats`` column order; they replace
            the stored rows.
        """

        def apply(conn: Any) -> None:
            _keep_latest(
                conn,
                "sessions",
                "batch_id, client_host, user_agent, session_start, session_end, duration_s, "
                "requests, pages, bytes, entry_page, exit_page, bounce",
                [(batch_id, *s) for s in sessions],
                SESSIONS_KEPT,
            )
            _replace_session_stats(conn, stats)

        return self.commit_batch("sessions", batch_id, closed, apply)

    def commit_alerts(self, batch_id: int, alerts: list[tuple[Any, ...]]) -> bool:
        """Commit alerts exactly once, under ledger key ``("alerts", batch_id)`` (the pipeline
        commits them with its ingest micro-batch; this serves tools and tests).

        ``alerts``: rows in ``alerts`` column order from ``series`` to ``direction``.
        """

        def apply(conn: Any) -> None:
            _keep_latest(
                conn,
                "alerts",
                "batch_id, series, metric, window_start, window_end, value, mean, std, z, "
                "direction",
                [(batch_id, *a) for a in alerts],
                ALERTS_KEPT,
            )

        return self.commit_batch("alerts", batch_id, len(alerts), apply)

    @retried
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a read query and return rows as dictionaries."""
        with self.connection() as conn:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]


def _replace_session_stats(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    cols = (
        "window_start", "window_end", "sessions", "bounces", "pages", "median_duration_s",
        "p95_duration_s", "sketch",
    )  # fmt: skip
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols[1:])
    conn.executemany(
        f"INSERT INTO session_stats({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        f"ON CONFLICT(window_start) DO UPDATE SET {sets}",
        rows,
    )


def _keep_latest(
    conn: Any,
    table: str,
    cols: str,
    rows: list[tuple[Any, ...]],
    kept: int = EXAMPLES_KEPT,
) -> None:
    if not rows:
        return
    marks = ", ".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO {table}({cols}) VALUES ({marks})", rows)
    conn.execute(f"DELETE FROM {table} WHERE seq <= (SELECT MAX(seq) FROM {table}) - {kept}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
