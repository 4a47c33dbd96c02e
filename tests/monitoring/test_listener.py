"""The progress listener never blocks Spark and hands every row to the store, in order."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from logstream.monitoring import ProgressListener, progress_row
from logstream.serving import ServingStore


def progress(batch_id: int, name: str = "traffic_per_minute", rows: int = 7):
    op = SimpleNamespace(
        numRowsTotal=rows, memoryUsedBytes=1024, numRowsDroppedByWatermark=0, customMetrics={}
    )
    return SimpleNamespace(
        name=name,
        id="x",
        batchId=batch_id,
        timestamp="2026-11-20T00:00:00.000Z",
        inputRowsPerSecond=float("nan"),
        processedRowsPerSecond=250.0,
        batchDuration=40,
        numInputRows=10,
        eventTime={"watermark": "1970-01-01T00:00:00.000Z", "max": "1995-07-09T04:00:00.000Z"},
        stateOperators=[op, op],
    )


def test_progress_rows_are_flattened_with_units_and_no_epoch_watermark():
    row = progress_row(progress(3))
    assert row["query"] == "traffic_per_minute" and row["batch_id"] == 3
    assert row["input_rows_per_s"] is None  # NaN is not a rate
    assert row["processed_rows_per_s"] == 250.0 and row["batch_duration_ms"] == 40
    assert row["watermark"] is None and row["max_event_time"] == "1995-07-09T04:00:00.000Z"
    assert (row["state_rows"], row["state_memory_bytes"], row["dropped_by_watermark"]) == (
        14,
        2048,
        0,
    )
    assert row["duplicates_dropped"] is None  # no deduplication operator


def test_the_deduplication_operator_reports_the_rows_it_dropped():
    p = progress(3, name="ingest")
    p.stateOperators = [
        SimpleNamespace(
            numRowsTotal=5,
            memoryUsedBytes=1,
            numRowsDroppedByWatermark=0,
            customMetrics={"numDroppedDuplicateRows": 12, "rocksdbPutCount": 3},
        )
    ]
    assert progress_row(p)["duplicates_dropped"] == 12


def test_rows_reach_the_store_and_flush_waits_for_them(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    seen = []
    listener = ProgressListener(store, seen.append)
    for i in range(50):
        listener.onQueryProgress(SimpleNamespace(progress=progress(i)))
    listener.flush(timeout=5)
    assert [r["batch_id"] for r in seen] == list(range(50))
    assert [
        r["batch_id"] for r in store.query("SELECT batch_id FROM progress ORDER BY seq")
    ] == list(range(50))


def test_a_full_queue_drops_instead_of_blocking_spark():
    gate = threading.Event()
    listener = ProgressListener(None, lambda row: gate.wait(5), capacity=2)
    for i in range(10):  # the worker is stuck on row 0; the queue holds 2
        listener.onQueryProgress(SimpleNamespace(progress=progress(i)))
    assert listener.dropped >= 7
    gate.set()


def test_a_broken_progress_event_is_swallowed():
    listener = ProgressListener()
    listener.onQueryProgress(SimpleNamespace(progress=None))  # must not raise into Spark
    listener.flush(timeout=5)
    assert listener.history == []
