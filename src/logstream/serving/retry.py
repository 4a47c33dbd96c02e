"""Store operations retried with backoff while the store cannot be reached.

A PostgreSQL server that restarts (a service restart, a failover) cuts every connection and
refuses new ones for a few seconds. The pool replaces a broken idle connection by itself
(:class:`~logstream.serving.postgres.PostgresStore`); an operation that fails mid-way, or
finds no server, is run again here, whole, with backoff, for at most the store's ``retry_s``
(``logstream run --store-retry``, default 60 s), and then stops the run with one line
(:class:`~logstream.errors.StoreUnavailableError`).

Why a retry stays exactly-once: every store method the pipeline calls is one operation in one
transaction. A transaction the failure cut was rolled back by the server; one whose commit
went through before the connection broke is found in the ledger by the retry (which then
writes nothing), or, for the windows written ahead of the ledger, writes the same values
again (:meth:`~logstream.serving.ServingStore.commit_ingest_views` replaces values). A
progress row written twice is shown twice, never counted.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from logstream.errors import StoreUnavailableError

__all__ = ["RETRY_FIRST_DELAY_S", "RETRY_MAX_DELAY_S", "retried", "retry"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Seconds before the first retry, doubled after each to at most :data:`RETRY_MAX_DELAY_S`.
RETRY_FIRST_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 8.0


class _Store(Protocol):
    url: str
    retry_s: float

    def transient(self, error: BaseException) -> bool: ...


def retry(store: _Store, what: str, call: Callable[[], _T]) -> _T:
    """``call()``, retried with backoff while ``store`` cannot be reached, for at most
    ``store.retry_s`` seconds.

    Parameters
    ----------
    store : ServingStore
        Its ``transient(error)`` tells an unreachable store from any other error; its
        ``retry_s`` is the budget in seconds (0: no retry), its ``url`` names it.
    what : str
        The operation (a store method's name), for the messages.
    call : callable
        The whole operation, with its own transaction.

    Returns
    -------
    object
        What ``call`` returns.

    Raises
    ------
    StoreUnavailableError
        When the store still cannot be reached after ``retry_s`` seconds: the message names
        the store, the last error and the fix, on one line.
    Exception
        Whatever ``call`` raises that is not transient, at once.

    Notes
    -----
    The first failure and the recovery are logged as warnings (``logstream.serving.retry``),
    once each; the waits start at :data:`RETRY_FIRST_DELAY_S` and double to
    :data:`RETRY_MAX_DELAY_S`.
    """
    deadline: float | None = None
    delay = RETRY_FIRST_DELAY_S
    while True:
        try:
            result = call()
        except Exception as exc:
            if not store.transient(exc):
                raise
            now = time.monotonic()
            reason = _first_line(exc)
            if deadline is None:
                deadline = now + store.retry_s
                if store.retry_s > 0:
                    log.warning(
                        "warning: store %s cannot be reached (%s): retrying %s for up to %g s",
                        store.url, reason, what, store.retry_s,
                    )  # fmt: skip
            if now >= deadline:
                raise StoreUnavailableError(
                    f"store {store.url!r} could not be reached for {store.retry_s:g} s "
                    f"({reason}): start the database server (or repair the network to it), "
                    "then run the same command again, which resumes from the checkpoint; "
                    "--store-retry sets how long a write waits"
                ) from exc
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(delay * 2, RETRY_MAX_DELAY_S)
            continue
        if deadline is not None and store.retry_s > 0:
            log.warning("store %s reached again: %s went through", store.url, what)
        return result


def retried(method: Callable[..., _T]) -> Callable[..., _T]:
    """A store method run through the store's ``retry`` (each call is one whole operation
    with its own transaction)."""

    @functools.wraps(method)
    def retried_method(self: Any, *args: Any, **kwargs: Any) -> _T:
        return self.retry(method.__name__, lambda: method(self, *args, **kwargs))

    return retried_method


def _first_line(error: BaseException) -> str:
    """The first non-empty line of an error's text, its type when the text is empty."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__
