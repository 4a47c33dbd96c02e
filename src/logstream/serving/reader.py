"""Reading the serving store: typed reads for the dashboard, the Prometheus collector and tools.

A :class:`StoreReader` wraps one connection of a read transaction
(:meth:`ServingStore.reader <logstream.serving.ServingStore.reader>`: a consistent snapshot
of the committed store, SQLite's WAL or PostgreSQL's MVCC, while the pipeline keeps writing)
and has one method per thing a panel or a metric reads: the counters, the ledger and the
progress rows, the bucketed time series of each view, the latest window of the top-k views,
sessions, alerts, bot verdicts, the follow source's losses and the pipeline's state. Each
returns plain values (:mod:`logstream.serving.rows`); what to show of them is the caller's
business. The SQL is the same for both databases (PostgreSQL's schema has SQLite's
``unixepoch`` and the ledger's ``rowid``: :mod:`logstream.serving.postgres`).

Errors
------
A method raises the database driver's error, one of
:data:`~logstream.serving.read_errors.READ_ERRORS`;
:func:`~logstream.serving.schema.missing_schema` tells a table an older store lacks, and
:func:`~logstream.serving.read_errors.read_failure` what a failed read means.

Cost
----
Every query is bounded: primary-key or indexed ranges (``traffic_per_minute``,
``unique_visitors``, ``session_stats`` by ``window_start``; ``trending_pages`` and
``top_clients`` by their ``window_end`` index), tables the store caps (``alerts``,
``sessions``, ``bot_scores``: 500 rows), or ``LIMIT`` on ``seq``.

Examples
--------
>>> import tempfile, pathlib
>>> from logstream.serving import ServingStore
>>> store = ServingStore(pathlib.Path(tempfile.mkdtemp()) / "s.db")
>>> with store.reader() as read:
...     read.counters()["events"], read.last_committed(), read.follow_losses()
(0, None, {})
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from logstream.serving.rows import (
    Alert,
    BotScore,
    BotTotals,
    ClientRow,
    ClientTotals,
    DimensionBucket,
    LedgerRow,
    Session,
    SessionWindow,
    TrafficBucket,
    VisitorBucket,
)
from logstream.serving.schema import FOLLOW_LOSS_KEYS

__all__ = [
    "FOLLOW_LOSS_KEYS",
    "INGEST_QUERY",
    "StoreReader",
    "follow_losses",
    "ingest_batch_id",
]

#: Name of the ingest query in ``ledger`` and ``progress`` (``logstream.pipeline``'s, not
#: imported: the pipeline imports Spark).
INGEST_QUERY = "ingest"


_COUNTERS = ("events", "late_events", "quarantined", "filtered", "corrupt_files")


def ingest_batch_id(last: LedgerRow | None) -> int | None:
    """The micro-batch a dashboard section shows: the id of ``last``
    (:meth:`StoreReader.last_committed`) when it is the ingest query's, else None."""
    return last.batch_id if last is not None and last.query == INGEST_QUERY else None


def follow_losses(state: dict[str, Any]) -> dict[str, int]:
    """The follow source's loss totals of a ``pipeline_state`` mapping, each key of
    :data:`FOLLOW_LOSS_KEYS` (0 when absent or not a number); empty when the store records
    none of them (another source, or an older run).

    Examples
    --------
    >>> follow_losses({"follow_lost_bytes": "120", "follow_lost_lines": "3"})["follow_lost_files"]
    0
    >>> follow_losses({"top": "10"})
    {}
    """
    if not any(k in state for k in FOLLOW_LOSS_KEYS):
        return {}
    out = {}
    for key in FOLLOW_LOSS_KEYS:
        try:
            out[key] = int(float(state.get(key) or 0))
        except ValueError:  # never a reason to lose a page or a scrape
            out[key] = 0
    return out


def _since(range_start: str | None, word: str = "WHERE") -> tuple[str, tuple[Any, ...]]:
    """``window_start >= range_start`` as a clause and its parameters (none for None)."""
    if range_start is None:
        return "", ()
    return f"{word} window_start >= ?", (range_start,)


class StoreReader:
    """Typed reads of the serving store through one connection.

    Parameters
    ----------
    conn : connection
        A connection of the store (:meth:`ServingStore.reader
        <logstream.serving.ServingStore.reader>` opens one in a read transaction): DB-API
        ``execute`` with ``?`` placeholders, rows indexable by position and by name.

    Notes
    -----
    Window bounds are ISO 8601 UTC text as in the store; bucket starts are epoch seconds,
    ``(unixepoch(window_start) / bucket_s) * bucket_s``. A method raises the driver's
    error for a table the store lacks (an older store): the caller decides what that means.
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _one(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self._conn.execute(sql, tuple(params)).fetchone()

    def _all(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return self._conn.execute(sql, tuple(params)).fetchall()

    # -- state, counters, ledger, progress ---------------------------------------------

    def state(self) -> dict[str, str]:
        """Every ``pipeline_state`` value by key (settings, newest event times, losses …)."""
        return {r[0]: r[1] for r in self._all("SELECT key, value FROM pipeline_state")}

    def state_value(self, key: str) -> str | None:
        """One ``pipeline_state`` value, or None."""
        row = self._one("SELECT value FROM pipeline_state WHERE key = ?", (key,))
        return None if row is None else row[0]

    def counter_totals(self) -> dict[str, int]:
        """The ``counters`` table: ``events``, ``late_events``, ``quarantined``, ``filtered``,
        ``corrupt_files`` (0 when absent), committed with their ingest micro-batch."""
        out = dict.fromkeys(_COUNTERS, 0)
        out.update({r[0]: int(r[1]) for r in self._all("SELECT name, value FROM counters")})
        return out

    def duplicates(self) -> int:
        """Lines the deduplication operator dropped, summed over the micro-batches."""
        return int(self._one("SELECT SUM(dropped) FROM dedup_batches")[0] or 0)

    def counters(self) -> dict[str, int]:
        """:meth:`counter_totals` and ``duplicates`` (:meth:`duplicates`)."""
        return {**self.counter_totals(), "duplicates": self.duplicates()}

    def follow_losses(self) -> dict[str, int]:
        """:func:`follow_losses` of the stored state: empty when none is recorded."""
        marks = ", ".join("?" * len(FOLLOW_LOSS_KEYS))
        rows = self._all(
            f"SELECT key, value FROM pipeline_state WHERE key IN ({marks})", FOLLOW_LOSS_KEYS
        )
        return follow_losses({r[0]: r[1] for r in rows})

    def last_committed(self) -> LedgerRow | None:
        """The ledger row of the newest committed ingest micro-batch, else the newest row of
        any query (a store filled by other writers); None when the ledger is empty."""
        sql = "SELECT rowid, query, batch_id, committed_at FROM ledger {} ORDER BY rowid DESC "
        sql += "LIMIT 1"
        row = self._one(sql.format("WHERE query = ?"), (INGEST_QUERY,))
        row = row if row is not None else self._one(sql.format(""))
        return None if row is None else LedgerRow(*row)

    def ledger_rows(self) -> int | None:
        """The newest ``rowid`` of the ledger (it grows with every committed micro-batch)."""
        return self._one("SELECT MAX(rowid) FROM ledger")[0]

    def batches_committed(self) -> int:
        """Micro-batches in the ledger, of every query."""
        return int(self._one("SELECT COUNT(*) FROM ledger")[0])

    def is_committed(self, query: str, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` of ``query`` is in the ledger."""
        sql = "SELECT 1 FROM ledger WHERE query = ? AND batch_id = ?"
        return self._one(sql, (query, batch_id)) is not None

    def progress_seq(self) -> int | None:
        """The newest ``seq`` of ``progress`` (it grows with every progress row)."""
        return self._one("SELECT MAX(seq) FROM progress")[0]

    def progress_rows(self, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` progress rows of every query, newest first, as mappings of
        the ``progress`` columns."""
        sql = f"SELECT * FROM progress ORDER BY seq DESC LIMIT {int(limit)}"
        return [dict(r) for r in self._conn.execute(sql)]

    def latest_progress(self) -> list[dict[str, Any]]:
        """The newest progress row of each query, by query name: ``query``, ``batch_id``,
        ``input_rows_per_s``, ``processed_rows_per_s``, ``batch_duration_ms``,
        ``num_input_rows``, ``state_rows``."""
        return [
            dict(r)
            for r in self._conn.execute(
                "SELECT p.query, p.batch_id, p.input_rows_per_s, p.processed_rows_per_s, "
                "p.batch_duration_ms, p.num_input_rows, p.state_rows FROM progress p "
                "JOIN (SELECT query, MAX(seq) AS seq FROM progress GROUP BY query) m "
                "ON p.query = m.query AND p.seq = m.seq ORDER BY p.query"
            )
        ]

    def latest_examples(self, table: str, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` rows of ``late_examples`` or ``quarantine_examples``,
        newest first, as mappings of their columns."""
        if table not in ("late_examples", "quarantine_examples"):
            raise ValueError(f"{table!r} is not a table of examples")
        sql = f"SELECT * FROM {table} ORDER BY seq DESC LIMIT {int(limit)}"
        return [dict(r) for r in self._conn.execute(sql)]

    def dstream_totals(self) -> tuple[int, int, int]:
        """``(batches, requests, unparseable lines)`` of the DStream edition's tables
        (``dstream_batches``; the unparseable lines are the accumulator's running total as
        of the newest batch)."""
        batches, requests = self._one(
            "SELECT COUNT(*), COALESCE(SUM(requests), 0) FROM dstream_batches"
        )
        newest = self._one(
            "SELECT unparseable_total FROM dstream_batches ORDER BY batch_time DESC LIMIT 1"
        )
        return int(batches), int(requests), int(newest[0]) if newest else 0

    # -- windows and time series -------------------------------------------------------

    def newest_window(self, table: str) -> tuple[str, str] | None:
        """``(window_start, window_end)`` of the window of ``table`` that starts last."""
        row = self._one(
            f"SELECT window_start, window_end FROM {_table(table)} "
            "ORDER BY window_start DESC LIMIT 1"
        )
        return None if row is None else (row[0], row[1])

    def traffic_first_start(self) -> str | None:
        """The first ``window_start`` of ``traffic_per_minute`` (None when empty)."""
        return self._one("SELECT MIN(window_start) FROM traffic_per_minute")[0]

    def traffic_last_end(self) -> str | None:
        """The last ``window_end`` of ``traffic_per_minute`` (None when empty)."""
        return self._one("SELECT MAX(window_end) FROM traffic_per_minute")[0]

    def traffic_buckets(self, bucket_s: int, since: str | None) -> list[TrafficBucket]:
        """``traffic_per_minute`` summed per bucket of ``bucket_s`` seconds over the windows
        starting at or after ``since`` (None: all), oldest first."""
        where, params = _since(since)
        rows = self._all(
            f"SELECT (unixepoch(window_start) / {int(bucket_s)}) * {int(bucket_s)} AS t, "
            "SUM(requests), SUM(bytes), SUM(status_1xx), SUM(status_2xx), SUM(status_3xx), "
            f"SUM(status_4xx), SUM(status_5xx), SUM(errors) FROM traffic_per_minute {where} "
            "GROUP BY t ORDER BY t",
            params,
        )
        return [TrafficBucket(*r) for r in rows]

    def visitor_buckets(self, bucket_s: int, since: str | None) -> list[VisitorBucket]:
        """Mean and peak ``unique_visitors`` per bucket (windows starting at or after
        ``since``; None: all), oldest first."""
        where, params = _since(since)
        rows = self._all(
            f"SELECT (unixepoch(window_start) / {int(bucket_s)}) * {int(bucket_s)} AS t, "
            f"AVG(visitors), MAX(visitors) FROM unique_visitors {where} GROUP BY t ORDER BY t",
            params,
        )
        return [VisitorBucket(r[0], float(r[1]), int(r[2])) for r in rows]

    def dimension_totals(self, dimension: str, since: str | None) -> list[tuple[str, int, int]]:
        """``(key, requests, errors)`` of every key of a reference-data view
        (``traffic_by_dimension``) since ``since``, most requests first."""
        where, params = _dimension_where(dimension, since)
        rows = self._all(
            f"SELECT key, SUM(requests), SUM(errors) FROM traffic_by_dimension {where} "
            "GROUP BY key ORDER BY SUM(requests) DESC, key",
            params,
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def panel_items(
        self, panels: tuple[str, ...], since: str | None, top: int
    ) -> list[tuple[str, str, int, int, int, int]]:
        """GoAccess's panels in the store's live view (``traffic_by_dimension`` rows of
        ``panels``) since ``since``: ``(panel, item, hits, bytes, panel_hits, panel_items)``
        of each panel's ``top`` items by hits (one query, a ranking window per panel)."""
        if not panels:
            return []
        where = f"WHERE dimension IN ({', '.join('?' * len(panels))})"
        params: list[Any] = list(panels)
        if since is not None:
            where += " AND window_start >= ?"
            params.append(since)
        rows = self._all(
            "SELECT dimension, key, hits, bytes, panel_hits, panel_items FROM ("
            "SELECT dimension, key, SUM(requests) AS hits, SUM(bytes) AS bytes, "
            "ROW_NUMBER() OVER (PARTITION BY dimension ORDER BY SUM(requests) DESC, key) AS n, "
            "SUM(SUM(requests)) OVER (PARTITION BY dimension) AS panel_hits, "
            "COUNT(*) OVER (PARTITION BY dimension) AS panel_items "
            f"FROM traffic_by_dimension {where} GROUP BY dimension, key) AS ranked "
            f"WHERE n <= {int(top)} ORDER BY dimension, n",
            params,
        )
        return [(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows]

    def daily_visitors(self, since: str | None) -> list[tuple[str, int, int, int]]:
        """GoAccess's visitors panel: ``(day, hits, unique visitors, bytes)`` of the UTC days
        ending after ``since``, oldest first."""
        where, params = ("", ()) if since is None else ("WHERE window_end > ?", (since,))
        rows = self._all(
            f"SELECT day, requests, visitors, bytes FROM daily_visitors {where} ORDER BY day",
            params,
        )
        return [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]

    def dimensions_first_start(self, dimensions: tuple[str, ...], since: str | None) -> str | None:
        """The first ``window_start`` of ``traffic_by_dimension`` rows of ``dimensions`` at or
        after ``since`` (None: all; None when there is none): where those views begin in a
        range (the store keeps them for ``--store-retention`` only)."""
        if not dimensions:
            return None
        where = f"WHERE dimension IN ({', '.join('?' * len(dimensions))})"
        params: list[Any] = list(dimensions)
        if since is not None:
            where += " AND window_start >= ?"
            params.append(since)
        return self._one(f"SELECT MIN(window_start) FROM traffic_by_dimension {where}", params)[0]

    def dimension_buckets(
        self, dimension: str, keys: list[str], since: str | None, bucket_s: int
    ) -> list[DimensionBucket]:
        """Requests of ``keys`` of a reference-data view per bucket, oldest first."""
        where, params = _dimension_where(dimension, since)
        rows = self._all(
            f"SELECT (unixepoch(window_start) / {int(bucket_s)}) * {int(bucket_s)} AS t, key, "
            f"SUM(requests) FROM traffic_by_dimension {where} "
            f"AND key IN ({', '.join('?' * len(keys))}) GROUP BY t, key ORDER BY t",
            [*params, *keys],
        )
        return [DimensionBucket(*r) for r in rows]

    # -- top-k windows -----------------------------------------------------------------

    def latest_window(
        self, table: Literal["trending_pages", "top_clients"], watermark: str
    ) -> tuple[str, str, bool] | None:
        """The window a top-k panel of ``table`` shows: the latest complete one
        (``window_end <= watermark``), else the newest open one.

        Returns
        -------
        tuple of (str, str, bool) or None
            Start, end, whether it is complete; None when ``table`` is empty.
        """
        order = {  # puts the latest window first, through the table's window_end index
            "trending_pages": "window_end DESC, window_start DESC",
            "top_clients": "window_end DESC",
        }[table]
        select = f"SELECT window_start, window_end FROM {table}"
        latest = f"ORDER BY {order} LIMIT 1"
        row = self._one(f"{select} WHERE window_end <= ? {latest}", (watermark,))
        if row is not None:
            return row[0], row[1], True
        row = self._one(f"{select} {latest}")  # nothing complete yet: the newest open one
        return None if row is None else (row[0], row[1], False)

    def trending_pages(
        self, start: str, end: str, prefix: str, limit: int
    ) -> tuple[list[tuple[str, int]], int]:
        """The top ``limit`` pages ``(url_path, requests)`` of a trending window whose path
        starts with ``prefix`` (case-sensitive; empty: all), and how many pages match."""
        match = "AND substr(url_path, 1, ?) = ?" if prefix else ""
        params: tuple[Any, ...] = (start, end, *((len(prefix), prefix) if prefix else ()))
        where = f"WHERE window_start = ? AND window_end = ? {match}"
        pages = self._all(
            f"SELECT url_path, requests FROM trending_pages {where} "
            "ORDER BY requests DESC, url_path LIMIT ?",
            (*params, limit),
        )
        matching = self._one(f"SELECT COUNT(*) FROM trending_pages {where}", params)[0]
        return [(p[0], int(p[1])) for p in pages], int(matching)

    def page_counts(self, after: str, until: str, paths: list[str]) -> dict[tuple[str, str], int]:
        """Requests of ``paths`` per trending window ending in ``(after, until]``, by
        ``(window_end, url_path)``."""
        if not paths:
            return {}
        marks = ",".join("?" * len(paths))
        rows = self._all(
            "SELECT window_end, url_path, SUM(requests) FROM trending_pages "
            f"WHERE window_end > ? AND window_end <= ? AND url_path IN ({marks}) "
            "GROUP BY window_end, url_path",
            (after, until, *paths),
        )
        return {(r[0], r[1]): int(r[2]) for r in rows}

    def top_clients(
        self, start: str, end: str, by: Literal["requests", "bytes"], limit: int
    ) -> list[ClientRow]:
        """The top ``limit`` clients of a ``top_clients`` window by requests or bytes."""
        # ``window_start || ''``: keep the (window_end, requests DESC) index for the ranking
        rows = self._all(
            "SELECT client_host, requests, bytes FROM top_clients WHERE window_end = ? AND "
            f"window_start || '' = ? ORDER BY {'bytes' if by == 'bytes' else 'requests'} DESC, "
            "client_host LIMIT ?",
            (end, start, limit),
        )
        return [ClientRow(r[0], int(r[1]), int(r[2])) for r in rows]

    def client_totals(self, start: str, end: str) -> ClientTotals:
        """Clients, requests and bytes of every client of a ``top_clients`` window."""
        clients, requests, size = self._one(
            "SELECT COUNT(*), SUM(requests), SUM(bytes) FROM top_clients "
            "WHERE window_end = ? AND window_start || '' = ?",
            (end, start),
        )
        return ClientTotals(int(clients), int(requests or 0), int(size or 0))

    # -- sessions, alerts, bots --------------------------------------------------------

    def session_windows(self, after: tuple[str, str] | None, limit: int) -> list[SessionWindow]:
        """The newest ``limit`` rows of ``session_stats``, oldest first; with ``after =
        (start, end)`` only windows with ``window_start > start`` and ``window_end > end``."""
        where, params = (
            ("", ())
            if after is None
            else (
                "WHERE window_start > ? AND window_end > ?",
                after,
            )
        )
        rows = self._all(
            "SELECT window_start, window_end, sessions, bounces, pages, median_duration_s, "
            f"p95_duration_s FROM session_stats {where} ORDER BY window_start DESC "
            f"LIMIT {int(limit)}",
            params,
        )
        return [
            SessionWindow(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), r[5], r[6])
            for r in reversed(rows)
        ]

    def longest_sessions(self, limit: int) -> list[Session]:
        """The ``limit`` longest of the kept closed sessions, longest first."""
        rows = self._all(
            "SELECT client_host, user_agent, session_start, session_end, duration_s, requests, "
            "pages, bytes, entry_page, exit_page, bounce FROM sessions "
            f"ORDER BY duration_s DESC, session_end DESC, seq DESC LIMIT {int(limit)}"
        )
        return [Session(*r[:10], bounce=bool(r[10])) for r in rows]

    def session_count(self) -> int:
        """Closed sessions kept in the store."""
        return int(self._one("SELECT COUNT(*) FROM sessions")[0])

    def session_stats_rows(self, window_starts: Iterable[str]) -> list[tuple[Any, ...]]:
        """Stored ``session_stats`` rows of the given windows, for merging: ``(window_start,
        window_end, sessions, bounces, pages, sketch)``."""
        starts = list(window_starts)
        if not starts:
            return []
        rows = self._all(
            "SELECT window_start, window_end, sessions, bounces, pages, sketch "
            f"FROM session_stats WHERE window_start IN ({', '.join('?' * len(starts))})",
            starts,
        )
        return [(*r[:5], bytes(r[5])) for r in rows]

    def latest_alerts(self, limit: int) -> list[Alert]:
        """The ``limit`` newest alerts, newest minute first."""
        rows = self._all(
            f"SELECT {_ALERT_COLS} FROM alerts ORDER BY window_start DESC, seq DESC "
            f"LIMIT {int(limit)}"
        )
        return [Alert(*r) for r in rows]

    def alert_count(self) -> int:
        """Alerts kept in the store."""
        return int(self._one("SELECT COUNT(*) FROM alerts")[0])

    def series_alerts(self, series: str, metric: str, since: str | None) -> list[Alert]:
        """The alerts of one series and metric since ``since`` (None: all), oldest first."""
        where, params = _since(since, "AND")
        rows = self._all(
            f"SELECT {_ALERT_COLS} FROM alerts WHERE series = ? AND metric = ? {where} "
            "ORDER BY window_start, seq",
            (series, metric, *params),
        )
        return [Alert(*r) for r in rows]

    def latest_bots(self, limit: int) -> list[BotScore]:
        """The ``limit`` newest flagged client windows, likeliest first within a window."""
        rows = self._all(
            "SELECT window_start, window_end, client_host, requests, bot_probability, "
            "distinct_pages, error_ratio, static_share, robots, model_version FROM bot_scores "
            f"ORDER BY window_start DESC, bot_probability DESC LIMIT {int(limit)}"
        )
        return [BotScore(*r) for r in rows]

    def bot_totals(self, since: str | None) -> BotTotals:
        """``bot_windows`` summed over the windows starting at or after ``since``."""
        where, params = _since(since)
        row = self._one(
            "SELECT COUNT(*), COALESCE(SUM(clients), 0), COALESCE(SUM(bots), 0), "
            f"COALESCE(SUM(bot_requests), 0), COALESCE(SUM(requests), 0) FROM bot_windows "
            f"{where}",
            params,
        )
        return BotTotals(*(int(v) for v in row))

    # -- a chosen range (the dashboard's explore section) ---------------------------------

    def range_traffic(self, start: str, end: str) -> dict[str, int]:
        """The per-minute traffic windows starting in ``[start, end)`` summed: ``requests``,
        ``bytes``, ``status_1xx`` … ``status_5xx``, ``errors`` (0 when none)."""
        columns = ("requests", "bytes", *(f"status_{c}xx" for c in "12345"), "errors")
        row = self._one(
            f"SELECT {', '.join(f'SUM({c})' for c in columns)} FROM traffic_per_minute "
            "WHERE window_start >= ? AND window_start < ?",
            (start, end),
        )
        return {c: int(v or 0) for c, v in zip(columns, row, strict=True)}

    def range_items(
        self, dimensions: tuple[str, ...], start: str, end: str, top: int
    ) -> list[tuple[str, str, int, int, int]]:
        """``(dimension, key, hits, bytes, items)`` of each dimension's ``top`` keys by hits
        over the ``traffic_by_dimension`` windows starting in ``[start, end)``; ``items`` is
        the dimension's number of keys there."""
        if not dimensions:
            return []
        rows = self._all(
            "SELECT dimension, key, hits, bytes, items FROM ("
            "SELECT dimension, key, SUM(requests) AS hits, SUM(bytes) AS bytes, "
            "ROW_NUMBER() OVER (PARTITION BY dimension ORDER BY SUM(requests) DESC, key) AS n, "
            "COUNT(*) OVER (PARTITION BY dimension) AS items FROM traffic_by_dimension "
            f"WHERE dimension IN ({', '.join('?' * len(dimensions))}) "
            "AND window_start >= ? AND window_start < ? GROUP BY dimension, key) AS ranked "
            f"WHERE n <= {int(top)} ORDER BY dimension, n",
            (*dimensions, start, end),
        )
        return [(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows]


_ALERT_COLS = "window_start, window_end, series, metric, value, mean, std, z, direction"
_WINDOW_TABLES = (
    "traffic_per_minute",
    "unique_visitors",
    "session_stats",
    "trending_pages",
    "top_clients",
    "bot_windows",
)


def _table(name: str) -> str:
    """``name`` when it is a table of windows (never interpolate anything else)."""
    if name not in _WINDOW_TABLES:
        raise ValueError(f"{name!r} is not a table of windows: one of {_WINDOW_TABLES}")
    return name


def _dimension_where(dimension: str, since: str | None) -> tuple[str, list[Any]]:
    where, params = "WHERE dimension = ?", [dimension]
    if since is not None:
        where += " AND window_start >= ?"
        params.append(since)
    return where, params
