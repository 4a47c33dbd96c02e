"""What a failed read of the serving store means, for either database.

A reader (:class:`~logstream.serving.reader.StoreReader`) raises its driver's error: SQLite's
:class:`sqlite3.DatabaseError` or psycopg's :class:`psycopg.Error`. :data:`READ_ERRORS` catches
both and :func:`read_failure` says what the reader should tell its user, so that neither the
dashboard nor the Prometheus collector imports a driver.
"""

from __future__ import annotations

import sqlite3
from typing import Literal

import psycopg

from logstream.serving.schema import missing_schema

__all__ = ["READ_ERRORS", "ReadFailure", "read_failure"]

#: The errors a read of the store raises (SQLite's and PostgreSQL's drivers).
READ_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, psycopg.Error)

#: ``no_tables``: the store has no tables yet (being created); ``retry``: it may be readable
#: at the next try (locked, a column an older store lacks, the server unreachable …);
#: ``not_a_store``: the file is not a database.
ReadFailure = Literal["no_tables", "retry", "not_a_store"]


def read_failure(exc: Exception) -> ReadFailure:
    """What an error of :data:`READ_ERRORS` means for a reader of the whole store.

    Examples
    --------
    >>> read_failure(sqlite3.OperationalError("no such table: counters"))
    'no_tables'
    >>> read_failure(sqlite3.OperationalError("database is locked"))
    'retry'
    >>> read_failure(sqlite3.DatabaseError("file is not a database"))
    'not_a_store'
    """
    if isinstance(exc, sqlite3.OperationalError):
        return "no_tables" if "no such table" in str(exc) else "retry"
    if isinstance(exc, sqlite3.DatabaseError):
        return "not_a_store"
    return "no_tables" if missing_schema(exc) else "retry"
