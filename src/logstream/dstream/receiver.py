"""A socket receiver that lost its server: said once, then retried quietly.

Spark Streaming restarts a receiver that stops: ``socketTextStream``'s receiver, when its
server closes the connection or refuses it, is restarted every
``spark.streaming.receiverRestartDelay`` (2 s), for as long as the context runs. Each restart
is logged by Spark's ``ReceiverTracker`` as an ERROR with the Java stack trace of the
``ConnectException``: about 30 lines a minute once the replay server has finished.

:func:`watch_receiver` turns those logs off for the receiver classes and reports through a
``StreamingListener`` instead: the first stop of a series once, in one line (what happened
and that the receiver retries), and the return of data once a batch receives records again.
Every receiver stop still reaches the listener, so nothing is lost but the repetition.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.streaming.listener import StreamingListener

if TYPE_CHECKING:
    from pyspark.streaming import StreamingContext

__all__ = ["QUIET_LOGGERS", "ReceiverWatch", "watch_receiver"]

#: The Spark loggers of a receiver's restarts, turned off by :func:`watch_receiver`
#: (the tracker's ERROR per restart, the supervisor's and the socket receiver's warnings).
QUIET_LOGGERS = (
    "org.apache.spark.streaming.scheduler.ReceiverTracker",
    "org.apache.spark.streaming.receiver.ReceiverSupervisorImpl",
    "org.apache.spark.streaming.dstream.SocketReceiver",
)

_RESTART_PREFIX = "Restarting receiver with delay"


def _one_line(message: str, error: str) -> str:
    """The receiver's stop message and the first line of its error, without Spark's
    "Restarting receiver with delay 2000ms:" prefix."""
    text = (message or "").strip()
    if text.startswith(_RESTART_PREFIX) and ":" in text:
        text = text.split(":", 1)[1].strip()
    first = next((line.strip() for line in (error or "").splitlines() if line.strip()), "")
    if first and first not in text:
        text = f"{text} ({first})" if text else first
    if text == "Socket data stream had no more data":
        text = "the server closed the connection"
    return text or "stopped"


def _receiver_text(event: Any, getter: str) -> tuple[str, str]:
    """``(lastErrorMessage, lastError)`` of a listener event's ``receiverInfo``."""
    try:
        info = event.receiverInfo()
        return str(getattr(info, getter)() or ""), str(info.lastError() or "")
    except Exception:  # a Py4J object we cannot read: say what we can
        return "", ""


class ReceiverWatch(StreamingListener):
    """The ``StreamingListener`` of :func:`watch_receiver`: one line per lost connection.

    Attributes
    ----------
    stopping : bool
        Set before the context stops: the receiver's own stop is then not a lost connection.
    lost : bool
        Whether the receiver is between a stop and the next batch with records.
    """

    def __init__(self, source: str, notice: Callable[[str], Any], delay_s: float = 2.0) -> None:
        super().__init__()
        self.source = source
        self.notice = notice
        self.delay_s = delay_s
        self.stopping = False
        self.lost = False
        self._lost_at_ms: float | None = None  # wall clock of the stop, as batch times are
        self._last_batch_ms: int | None = None
        self._interval_ms: int | None = None  # the batch interval, from successive batch times

    def onReceiverError(self, event: Any) -> None:
        """A receiver reported an error (``reportError``)."""
        self.receiver_stopped(*_receiver_text(event, "lastErrorMessage"))

    def onReceiverStopped(self, event: Any) -> None:
        """A receiver stopped: at each restart too (its start, also at each retry before it
        connects, says nothing about data)."""
        self.receiver_stopped(*_receiver_text(event, "lastErrorMessage"))

    def onBatchCompleted(self, event: Any) -> None:
        """A batch ended: its record count tells whether the receiver gets data again."""
        try:
            info = event.batchInfo()
            records = int(info.numRecords())
            batch_ms = int(info.batchTime().milliseconds())
        except Exception:
            return
        self.batch_completed(records, batch_ms)

    def receiver_stopped(self, message: str, error: str) -> None:
        """A receiver stopped or reported an error: said once per series of stops.

        Every stop, said or not, moves the time of the loss: the receiver's next connection
        begins ``delay_s`` after its latest stop at the earliest."""
        if self.stopping:
            return
        self._lost_at_ms = time.time() * 1000
        if self.lost:
            return
        self.lost = True
        self.notice(
            f"lost the connection to {self.source}: {_one_line(message, error)}; the receiver "
            f"retries every {self.delay_s:g} s, quietly (Ctrl-C or --duration stops)"
        )

    def batch_completed(self, records: int, batch_ms: int | None = None) -> None:
        """A batch ended: records received after a loss mean the receiver is connected again.

        ``batch_ms`` is the batch's time (the end of its interval, epoch ms). A new connection
        starts no sooner than ``delay_s`` after the latest stop (Spark's
        ``spark.streaming.receiverRestartDelay``), so a batch whose interval began before that
        holds records received before the loss: on a busy machine the receiver's last block
        can be stored a second or more after its stop. It says nothing about a new
        connection."""
        if batch_ms is not None:
            if self._last_batch_ms is not None and batch_ms > self._last_batch_ms:
                step = batch_ms - self._last_batch_ms
                self._interval_ms = min(step, self._interval_ms or step)
            self._last_batch_ms = batch_ms
            began = batch_ms - (self._interval_ms or 0)
            if self._lost_at_ms is not None and began < self._lost_at_ms + self.delay_s * 1000:
                return
        if self.lost and records > 0 and not self.stopping:
            self.lost = False
            self.notice(f"receiving from {self.source} again")


def watch_receiver(
    ssc: StreamingContext, source: str, notice: Callable[[str], Any]
) -> ReceiverWatch:
    """Report a socket receiver's lost connection once, and silence Spark's log line per
    restart (:data:`QUIET_LOGGERS`); returns the listener (set its ``stopping`` before
    stopping the context)."""
    sc = ssc.sparkContext
    jvm = sc._jvm  # type: ignore[attr-defined]
    try:
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in QUIET_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception as exc:  # another logging backend: the restarts stay in the log
        notice(f"could not quiet the receiver's restart logs ({type(exc).__name__})")
    delay_ms = sc.getConf().get("spark.streaming.receiverRestartDelay", "2000")
    try:
        delay_s = int(delay_ms) / 1000
    except ValueError:
        delay_s = 2.0
    watch = ReceiverWatch(source, notice, delay_s)
    ssc.addStreamingListener(watch)  # type: ignore[arg-type]
    return watch
