"""The stop gate: a stop is atomic per micro-batch across every ``foreachBatch`` writer.

A ``foreachBatch`` writer delivers micro-batch ``N`` in several steps (publish Parquet outputs,
then commit to the serving store's ledger); Spark records the batch as done only after the
function returns. Stopping a query with ``StreamingQuery.stop()`` while the function runs
interrupts it between two steps, so the outputs and the store would disagree until a restart
replays the batch. And ``isTriggerActive`` cannot be used to wait for a quiet moment: a
processing-time trigger can start a new micro-batch between the check and ``stop()``.

:class:`StopGate` closes that window. Every writer runs inside :meth:`StopGate.batch`:

1. entering, it checks the gate under a lock: if the pipeline is stopping it raises
   :class:`StopRequested` **before writing anything** — the function fails, Spark does not
   commit the micro-batch, and a restart replays it from the checkpoint;
2. otherwise it counts itself as running and delivers the whole micro-batch;
3. leaving, it wakes :meth:`StopGate.close`.

:meth:`StopGate.close` shuts the gate and waits until no micro-batch is running; only then does
the pipeline call ``stop()`` on its queries. After any stop, every output and the store hold
the same set of micro-batches: each one either delivered whole or not at all.

It also removes the two ``java.lang.StackOverflowError`` traces every ``make run`` ended with
(issue 12). Interrupting a running ``foreachBatch`` made its Python function fail with a
``Py4JJavaError`` carrying a Java stack trace; Spark's stream thread then asks whether that
failure was the stop's interruption by matching the message against
``StreamExecution.PROXY_ERROR``, ``…An error occurred while calling((.|\r\n|\r|\n)*)…``,
whose alternation group recurses once per character in ``java.util.regex``: a message of a
few thousand characters overflows the thread's stack. With the gate no running function is
interrupted, and a refused micro-batch fails with the one-line :class:`StopRequested`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

from logstream.errors import LogstreamError

__all__ = ["StopGate", "StopRequested", "is_stop_requested"]


class StopRequested(LogstreamError):
    """Raised when a micro-batch starts after its pipeline began to stop.

    Nothing of the micro-batch was written; Spark does not commit it and replays it on the
    next start. The pipeline treats a query that ended with it as stopped, not failed.
    """


def is_stop_requested(error: BaseException | None) -> bool:
    """Whether a query's exception is a :class:`StopRequested` raised in its ``foreachBatch``.

    Spark wraps the Python exception (``StreamingQueryException`` around the Python
    traceback), so the test is on the exception's text, which names the class.
    """
    return error is not None and StopRequested.__name__ in str(error)


class StopGate:
    """Counts running ``foreachBatch`` calls and refuses new ones once closed.

    Examples
    --------
    >>> gate = StopGate()
    >>> with gate.batch("ingest", 0):
    ...     pass
    >>> gate.close(timeout=1.0)
    True
    >>> with gate.batch("ingest", 1):
    ...     pass
    Traceback (most recent call last):
    ...
    logstream.sinks.gate.StopRequested: micro-batch 1 of query 'ingest' started after the stop ...
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def running(self) -> int:
        """Micro-batches being delivered now."""
        return self._running

    @contextmanager
    def batch(self, query: str, batch_id: int) -> Iterator[None]:
        """Deliver one micro-batch inside the gate.

        Raises
        ------
        StopRequested
            When the gate is closed; nothing may be written then.
        """
        with self._cond:
            if self._closed:
                raise StopRequested(
                    f"micro-batch {batch_id} of query {query!r} started after the stop request: "
                    "nothing was written, and the next start replays it"
                )
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def wrap(
        self, query: str, writer: Callable[[DataFrame, int], None]
    ) -> Callable[[DataFrame, int], None]:
        """The ``foreachBatch`` function that runs ``writer`` inside :meth:`batch`."""

        def gated(df: DataFrame, batch_id: int) -> None:
            with self.batch(query, batch_id):
                writer(df, batch_id)

        gated.__qualname__ = f"gated[{query}]"
        return gated

    def close(self, timeout: float | None = None) -> bool:
        """Refuse new micro-batches, then wait for the running ones to finish.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait; None waits as long as they take.

        Returns
        -------
        bool
            True when no micro-batch is running any more, False on timeout.
        """
        with self._cond:
            self._closed = True
            return self._cond.wait_for(lambda: self._running == 0, timeout)
