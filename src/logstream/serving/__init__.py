"""Serving: the store the dashboard reads (SQLite by default, or PostgreSQL).

:func:`open_store` opens the store of a ``--store`` URL: ``sqlite:///PATH`` gives a
:class:`ServingStore`, ``postgresql://…`` a :class:`~logstream.serving.postgres.PostgresStore`
(imported on first use). See ``docs/serving.md``.

The store's parts: :mod:`~logstream.serving.schema` (tables, dialects),
:mod:`~logstream.serving.store` (the exactly-once writer), :mod:`~logstream.serving.reader`
(:class:`StoreReader`: the typed reads every reader goes through, with
:meth:`ServingStore.reader`), :mod:`~logstream.serving.postgres` (the PostgreSQL store).
"""

from __future__ import annotations

import threading
from pathlib import Path

from logstream.errors import ConfigError
from logstream.serving.reader import StoreReader
from logstream.serving.store import EXAMPLES_KEPT, IngestBatchWrite, ServingStore

__all__ = [
    "EXAMPLES_KEPT",
    "IngestBatchWrite",
    "ServingStore",
    "StoreReader",
    "is_postgres_url",
    "open_store",
    "shared_reader",
    "store_file",
    "store_location",
]

_URL_FORMS = (
    "use sqlite:///PATH (e.g. sqlite:///out/logstream.db) or "
    "postgresql://USER@HOST:PORT/DBNAME (e.g. postgresql://logstream@127.0.0.1:5432/logstream)"
)


def is_postgres_url(store: Path | str) -> bool:
    """Whether a store reference (a path, ``sqlite:///PATH`` or a URL) names PostgreSQL.

    Examples
    --------
    >>> is_postgres_url("postgresql://me@db/logs"), is_postgres_url(Path("out/logstream.db"))
    (True, False)
    """
    return str(store).startswith(("postgresql://", "postgres://"))


def store_file(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL; None for a PostgreSQL URL.

    Raises
    ------
    ConfigError
        When ``url`` is neither form.

    Examples
    --------
    >>> store_file("sqlite:///out/logstream.db"), store_file("postgresql://me@db/logs")
    (PosixPath('out/logstream.db'), None)
    """
    if is_postgres_url(url):
        return None
    if not url.startswith("sqlite:///") or url == "sqlite:///":
        raise ConfigError(f"store {url!r} is not supported: {_URL_FORMS}")
    return Path(url.removeprefix("sqlite:///"))


def store_location(store: Path | str) -> Path | str:
    """What a store reference names: the SQLite file (a :class:`~pathlib.Path`) or the
    PostgreSQL URL (a ``str``), for every form the pipeline and the dashboard use.

    Parameters
    ----------
    store : Path or str
        ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, a plain path (a
        ``str`` or a ``Path``), or ``postgresql://…`` / ``postgres://…``.

    Raises
    ------
    ConfigError
        When ``store`` starts like a SQLite URL but is not ``sqlite:///PATH`` — for example
        a URL turned into a ``Path``, whose ``//`` collapsed (``sqlite:/abs/x.db``).

    Examples
    --------
    >>> store_location("sqlite:///out/x.db"), store_location("sqlite:////srv/x.db")
    (PosixPath('out/x.db'), PosixPath('/srv/x.db'))
    >>> store_location(Path("out/x.db")), store_location("postgresql://me@db/logs")
    (PosixPath('out/x.db'), 'postgresql://me@db/logs')
    """
    text = str(store)
    if is_postgres_url(text):
        return text
    if text.startswith("sqlite:"):
        path = store_file(text)
        assert path is not None
        return path
    return Path(store)


def open_store(url: Path | str, read_only: bool = False, retry_s: float = 0.0) -> ServingStore:
    """The serving store of ``url`` (``sqlite:///PATH`` or ``postgresql://…``).

    Parameters
    ----------
    url : Path or str
        The store URL, as given to ``--store``, or the path of a SQLite store.
    read_only : bool
        For readers (the dashboard): a SQLite file must exist, PostgreSQL transactions are
        read-only, and no schema is created.
    retry_s : float
        Seconds an operation waits for a store that cannot be reached, retried with backoff
        (:meth:`ServingStore.retry`; the pipeline's ``--store-retry``); 0: no retry.

    Returns
    -------
    ServingStore
        A :class:`ServingStore` or a :class:`~logstream.serving.postgres.PostgresStore`;
        both have the same methods.

    Raises
    ------
    ConfigError
        When ``url`` is neither form, or a writable PostgreSQL server cannot be reached.
    sqlite3.OperationalError
        When a read-only SQLite store does not exist.
    """
    where = store_location(url)
    if isinstance(where, str):
        from logstream.serving.postgres import PostgresStore

        return PostgresStore(where, read_only=read_only, retry_s=retry_s)
    return ServingStore(where.expanduser(), read_only=read_only, retry_s=retry_s)


#: The process's PostgreSQL readers, one connection pool per URL (:func:`shared_reader`).
_READERS: dict[str, ServingStore] = {}
_READERS_LOCK = threading.Lock()


def shared_reader(url: str) -> ServingStore:
    """The process's read-only store of a PostgreSQL ``url``: one connection pool per URL,
    opened at the first call and shared by every later reader (the dashboard's page
    refreshes, its Prometheus scrapes). Do not close it.

    Raises
    ------
    ConfigError
        When ``url`` is not a PostgreSQL URL (a SQLite reader is a file opened per call:
        use :func:`open_store`).
    """
    if not is_postgres_url(url):
        raise ConfigError(f"store {url!r}: shared readers are for PostgreSQL URLs")
    with _READERS_LOCK:
        if url not in _READERS:
            _READERS[url] = open_store(url, read_only=True)
        return _READERS[url]
