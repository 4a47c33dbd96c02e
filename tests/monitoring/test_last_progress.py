"""The last micro-batch's progress reaches the listener, the terminal line and the store when
the pipeline stops (issue 37, item 2), without Spark: a query that behaves as Spark's
``MicroBatchExecution`` does around the stop."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from tests.monitoring.test_listener import progress

from logstream.monitoring import ProgressListener
from logstream.pipeline import Pipeline
from logstream.sinks.gate import StopGate, StopRequested


class SparkLikeQuery:
    """A streaming query run as Spark runs one: each trigger calls the ``foreachBatch``
    function, then writes the commit log (``commit_s``), then sets ``lastProgress`` and posts
    the progress event, and only then leaves the trigger (``isTriggerActive``).
    :meth:`stop` interrupts the stream thread wherever it is, as ``StreamingQuery.stop``
    does."""

    name = "ingest"

    def __init__(self, writer: Any, listener: ProgressListener, commit_s: float = 0.4) -> None:
        self.writer, self.listener, self.commit_s = writer, listener, commit_s
        self.lastProgress: dict[str, Any] | None = None
        self.recentProgress: list[dict[str, Any]] = []
        self.isActive = True
        self.trigger_active = False
        self.delivered: list[int] = []
        self._interrupted = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def status(self) -> dict[str, Any]:
        return {"message": "", "isDataAvailable": True, "isTriggerActive": self.trigger_active}

    def _run(self) -> None:
        batch = 0
        while not self._interrupted.is_set():
            self.trigger_active = True
            try:
                self.writer(None, batch)
            except StopRequested:
                self.isActive = self.trigger_active = False
                return
            self.delivered.append(batch)
            if self._interrupted.wait(self.commit_s):  # the commit log, cut by stop()
                return
            self.lastProgress = {"batchId": batch, "durationMs": {"addBatch": 1}}
            self.recentProgress.append(self.lastProgress)
            event = progress(batch, name="ingest")
            self.listener.onQueryProgress(SimpleNamespace(progress=event))
            self.trigger_active = False
            batch += 1
            self._interrupted.wait(0.05)  # the trigger interval

    def stop(self) -> None:
        self._interrupted.set()
        self._thread.join(5)
        self.isActive = False

    def exception(self) -> None:
        return None


def test_the_last_delivered_micro_batch_has_its_progress_line_after_a_stop():
    printed: list[int] = []
    listener = ProgressListener(on_row=lambda row: printed.append(row["batch_id"]))
    pipeline = Pipeline.__new__(Pipeline)  # the stop path only: no Spark, no store
    pipeline.gate = StopGate()
    pipeline.stop_requested = threading.Event()
    pipeline.listener = listener
    context = SimpleNamespace(setLogLevel=lambda level: None)
    streams = SimpleNamespace(removeListener=lambda listener: None)
    pipeline.spark = SimpleNamespace(sparkContext=context, streams=streams)
    started = threading.Event()

    def deliver(_df: Any, batch_id: int) -> None:
        if batch_id == 2:
            started.set()
        threading.Event().wait(0.1)  # the micro-batch's work

    query = SparkLikeQuery(pipeline.gate.wrap("ingest", deliver), listener)
    pipeline.queries = [query]
    assert started.wait(10)
    pipeline.stop()  # while micro-batch 2 is delivered, or just after
    assert query.delivered, "no micro-batch was delivered"
    last = query.delivered[-1]
    assert query.lastProgress["batchId"] == last
    listener.flush()
    assert printed == list(range(last + 1))  # a line per micro-batch, the last one included
