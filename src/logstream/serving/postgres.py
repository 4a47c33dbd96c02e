"""The serving store on PostgreSQL: the tables and SQL of :mod:`logstream.serving.store`.

:class:`PostgresStore` is a :class:`~logstream.serving.store.ServingStore` whose connections
come from a :class:`psycopg_pool.ConnectionPool` (psycopg 3). Every write and read method is
the SQLite store's: the same upserts, the same ledger, the same exactly-once transaction per
micro-batch. What differs is isolated here:

* the schema is derived from :data:`~logstream.serving.store.SCHEMA` (``BIGINT`` for
  ``INTEGER``, ``DOUBLE PRECISION`` for ``REAL``, ``BYTEA`` for ``BLOB``, identity columns for
  ``AUTOINCREMENT``; ``ledger`` gets the explicit ``rowid`` SQLite has implicitly) plus a
  ``unixepoch(text)`` function like SQLite's, so the dashboard's SQL runs unchanged;
* :class:`_Connection` gives psycopg the :mod:`sqlite3` calls the store makes
  (``execute``/``executemany`` with ``?`` placeholders, rows indexable by position and name);
* sums come back as ``int`` (``numeric`` results of ``SUM(bigint)`` are loaded as ``int``
  when whole, else ``float``), booleans are written as 0/1 like SQLite does.

Exactly-once across writers: the ledger's primary key ``(query, batch_id)`` is claimed first
in each transaction (``INSERT … ON CONFLICT DO NOTHING RETURNING``, READ COMMITTED); a second
writer of the same batch waits on that key and claims nothing once the first commits.
Readers (the dashboard) run each refresh in one ``REPEATABLE READ READ ONLY`` transaction:
they never see half a transaction (the windows of a micro-batch, written ahead by
:meth:`~logstream.serving.ServingStore.commit_ingest_views`, can be one micro-batch ahead of
the counters).

URL: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?PARAM=VALUE…]`` (``postgres://`` is
accepted too). libpq parameters pass through (``sslmode``, ``connect_timeout`` …);
``pool_max_size`` (default :data:`WRITER_POOL_SIZE` for the pipeline,
:data:`READER_POOL_SIZE` for a dashboard) and ``pool_timeout`` (seconds to wait for a free
connection, default :data:`POOL_TIMEOUT_S`) are logstream's and are removed before libpq
sees the URL. Source: psycopg 3 documentation, "Connection pools" and "Transactions
management"; PostgreSQL documentation, "INSERT … ON CONFLICT".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Iterable, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import IsolationLevel
from psycopg.adapt import Dumper, Loader
from psycopg.rows import RowMaker
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from logstream.errors import ConfigError
from logstream.serving.safe_text import safe_row, safe_rows
from logstream.serving.store import SCHEMA, Dialect, ServingStore

__all__ = [
    "POOL_TIMEOUT_S",
    "POSTGRES",
    "READER_POOL_SIZE",
    "WRITER_POOL_SIZE",
    "PostgresStore",
    "check_server",
    "is_postgres_url",
    "postgres_schema",
    "redact_url",
]

#: PostgreSQL's dialect.
POSTGRES = Dialect(name="postgresql", greatest="GREATEST")
# the pool logs a warning at each failed reconnection attempt (several a second while a
# server restarts); the store's retry says it once (ServingStore.retry)
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
#: Connections of the pipeline's pool: the ingest commit and the progress listener write
#: concurrently, the run's start reads.
WRITER_POOL_SIZE = 4
#: Connections of a dashboard process's pool, shared by its concurrent page refreshes.
READER_POOL_SIZE = 8
#: Seconds to wait for a free pooled connection (and for the server at start).
POOL_TIMEOUT_S = 10.0
#: URL parameters that are logstream's, not libpq's.
_POOL_PARAMS = ("pool_max_size", "pool_timeout")
_URL_FIX = (
    "use postgresql://USER@HOST:PORT/DBNAME of a running server the user may connect to "
    "(e.g. --store postgresql://logstream@127.0.0.1:5432/logstream), or leave --store out "
    "for the embedded SQLite store"
)


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL store (``postgresql://`` or ``postgres://``).

    Examples
    --------
    >>> is_postgres_url("postgresql://me@127.0.0.1:5432/logs"), is_postgres_url("sqlite:///x")
    (True, False)
    """
    return url.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for messages and the page).

    Examples
    --------
    >>> redact_url("postgresql://me:secret@db:5432/logs")
    'postgresql://me:***@db:5432/logs'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def postgres_schema() -> str:
    """The store's schema in PostgreSQL's dialect, derived from the SQLite one.

    Examples
    --------
    >>> "rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE" in postgres_schema()
    True
    """
    sql = SCHEMA.replace(
        "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    )
    sql = re.sub(r"\bINTEGER\b", "BIGINT", sql)
    sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql)
    sql = re.sub(r"\bBLOB\b", "BYTEA", sql)
    sql = sql.replace(
        "CREATE TABLE IF NOT EXISTS ledger (",
        "CREATE TABLE IF NOT EXISTS ledger (\n"
        "    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,",
    )
    # SQLite's unixepoch(text): epoch seconds of ISO 8601 text, for the dashboard's buckets
    return sql + (
        "CREATE OR REPLACE FUNCTION unixepoch(t TEXT) RETURNS BIGINT LANGUAGE SQL STABLE "
        "AS $$ SELECT CAST(FLOOR(EXTRACT(EPOCH FROM CAST(t AS TIMESTAMPTZ))) AS BIGINT) $$;\n"
    )


class _Row(tuple):  # type: ignore[type-arg]
    """A result row indexable by position and by column name, like :class:`sqlite3.Row`."""

    names: tuple[str, ...] = ()

    def keys(self) -> tuple[str, ...]:
        return self.names

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names.index(key))
        return tuple.__getitem__(self, key)


def _row_factory(cursor: Any) -> RowMaker[_Row]:
    names = tuple(c.name for c in cursor.description or ())

    class Row(_Row):
        pass

    Row.names = names
    return Row


class _WholeNumberLoader(Loader):
    """``numeric`` (what ``SUM`` of ``bigint`` returns) as ``int`` when whole, else ``float``
    (SQLite returns integers and floats, never decimals)."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class _BoolAsIntDumper(Dumper):
    """Booleans as 0/1 into the ``BIGINT`` columns, as :mod:`sqlite3` stores them."""

    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def _sql(sql: str) -> str:
    """``?`` placeholders (the store's SQL) as psycopg's ``%s`` (no literal holds a ``?``)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Connection:
    """The subset of :class:`sqlite3.Connection` the store and the dashboard call; every text
    parameter made safe for PostgreSQL (:func:`~logstream.serving.safe_text.safe_text`: its
    ``text`` cannot hold NUL)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        cursor.execute(_sql(sql), safe_row(params))
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = safe_rows(rows)
        if rows:
            with self.raw.cursor() as cursor:
                cursor.executemany(_sql(sql), rows)


class PostgresStore(ServingStore):
    """A serving store in the PostgreSQL database of ``url``, through a connection pool.

    Parameters
    ----------
    url : str
        ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?…]`` (see the module docstring for
        the pool parameters).
    read_only : bool
        A reader (the dashboard): every transaction is ``READ ONLY``, the schema is not
        created, and the server is not contacted until the first read.
    retry_s : float
        Seconds each write (and each read of the pipeline's) is retried with backoff while
        the server cannot be reached (:meth:`~logstream.serving.ServingStore.retry`): a
        restart of the server costs the pipeline a wait, not its run.

    Raises
    ------
    ConfigError
        When ``url`` is malformed, or (writer) the server cannot be reached or refuses the
        connection: the message names the URL (password masked), libpq's reason and the fix.

    Notes
    -----
    The writer creates the tables, indexes and the ``unixepoch`` function if they do not
    exist, under a transaction-level advisory lock (two pipelines starting at once do not
    race). Call :meth:`close` to close the pool (the pipeline's stays open for its process).

    The pool checks a connection before lending it (``ConnectionPool.check_connection``: an
    empty query) and replaces one the server closed meanwhile — a restart of the server, an
    idle timeout — so a restart while the pipeline waits costs nothing; a connection that
    breaks inside a transaction is dropped by the pool and the operation retried
    (``retry_s``).
    """

    dialect = POSTGRES

    def __init__(self, url: str, read_only: bool = False, retry_s: float = 0.0) -> None:
        self.path = None
        self.read_only = read_only
        self.retry_s = retry_s
        self._url = redact_url(url)
        conninfo, max_size, timeout = _parse(url)
        if not read_only:
            self._create_schema(conninfo, timeout)
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size or (READER_POOL_SIZE if read_only else WRITER_POOL_SIZE),
            timeout=timeout,
            configure=self._configure,
            check=ConnectionPool.check_connection,
            name=f"logstream-store{'-read' if read_only else ''}",
            open=False,
        )
        self._pool.open(wait=False)

    @property
    def url(self) -> str:
        """The store's URL, its password masked."""
        return self._url

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()

    def transient(self, error: BaseException) -> bool:
        """Whether ``error`` says the server cannot be reached for now: a connection refused
        or broken, the server shutting down or starting (``OperationalError``, SQLSTATE
        classes 08, 53, 57), no pooled connection in time (``PoolTimeout``). A closed pool,
        bad SQL or data are not."""
        if isinstance(error, PoolClosed):
            return False
        return isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout))

    def _create_schema(self, conninfo: str, timeout: float) -> None:
        with _connect(conninfo, self._url, timeout) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('logstream.serving.schema'))")
            conn.execute(postgres_schema())

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.adapters.register_loader("numeric", _WholeNumberLoader)
        conn.adapters.register_dumper(bool, _BoolAsIntDumper)
        conn.row_factory = _row_factory
        if self.read_only:
            conn.read_only = True
            conn.isolation_level = IsolationLevel.REPEATABLE_READ

    @contextmanager
    def connection(self) -> Generator[Any, None, None]:
        """A pooled connection for reads; its transaction ends (commit) on exit."""
        with self._pool.connection() as conn:
            yield _Connection(conn)

    @contextmanager
    def transaction(self) -> Generator[Any, None, None]:
        """A pooled connection in a write transaction (READ COMMITTED): committed on exit,
        rolled back on an error."""
        with self._pool.connection() as conn, conn.transaction():
            yield _Connection(conn)

    @contextmanager
    def read_transaction(self) -> Generator[Any, None, None]:
        """A pooled connection in one transaction; a reader's is ``REPEATABLE READ READ
        ONLY``: one snapshot of the committed store.

        Raises
        ------
        psycopg.Error
            When the server cannot be reached or a query fails.
        """
        with self._pool.connection() as conn, conn.transaction():
            yield _Connection(conn)


def check_server(url: str) -> None:
    """Connect to the server of ``url`` once (the dashboard's check at start).

    Raises
    ------
    ConfigError
        When ``url`` is malformed or the server cannot be reached or refuses the connection;
        the message names the URL (password masked), libpq's reason and the fix.
    """
    conninfo, _, timeout = _parse(url)
    _connect(conninfo, redact_url(url), timeout).close()


def _connect(conninfo: str, shown: str, timeout: float) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(conninfo, connect_timeout=max(2, round(timeout)))
    except psycopg.Error as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        reason = " ".join(lines) or type(exc).__name__
        raise ConfigError(
            f"store {shown!r}: cannot connect to PostgreSQL ({reason}): {_URL_FIX}"
        ) from None


def _parse(url: str) -> tuple[str, int | None, float]:
    """libpq's URL without logstream's pool parameters, the pool size and timeout."""
    shown = redact_url(url)
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.netloc:
        raise ConfigError(f"store {shown!r} is not a PostgreSQL URL: {_URL_FIX}")
    params = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in params if k in _POOL_PARAMS}
    kept = [(k, v) for k, v in params if k not in _POOL_PARAMS]
    conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(kept)))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise ConfigError(
            f"store {shown!r} is not a valid PostgreSQL URL ({exc}): {_URL_FIX}"
        ) from None
    try:
        max_size = int(ours["pool_max_size"]) if "pool_max_size" in ours else None
        timeout = float(ours.get("pool_timeout", POOL_TIMEOUT_S))
    except ValueError:
        max_size, timeout = 0, 0.0
    if (max_size is not None and max_size < 1) or timeout <= 0:
        raise ConfigError(
            f"store {shown!r}: pool_max_size must be a whole number ≥ 1 and pool_timeout a "
            "number of seconds > 0 (e.g. ?pool_max_size=8&pool_timeout=10)"
        )
    return conninfo, max_size, timeout
