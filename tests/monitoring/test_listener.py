"""The progress listener never blocks Spark and hands every row to the store, in order."""

from __future__ import annotations

import json
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
        sources=[SimpleNamespace(endOffset='{"logOffset": 3}')],
    )


def test_the_follow_sources_losses_reach_the_store_as_running_totals(tmp_path):
    """The follow source's end offset carries its loss counts; the store keeps the largest
    (a progress event lost in a crash is made good by the next one)."""
    losses = {"truncations": 2, "lost_bytes": 1204, "lost_lines": 12, "lost_files": 1}
    event = progress(4, name="ingest")
    event.sources = [SimpleNamespace(endOffset=json.dumps({"v": 2, "files": [], **losses}))]
    row = progress_row(event)
    assert row["follow_losses"] == losses
    assert progress_row(progress(5))["follow_losses"] is None  # another source
    store = ServingStore(tmp_path / "s.db")
    listener = ProgressListener(store)
    listener.onQueryProgress(SimpleNamespace(progress=event))
    older = progress(3, name="ingest")
    older.sources = [SimpleNamespace(endOffset=json.dumps({"files": [], "lost_bytes": 5}))]
    listener.onQueryProgress(SimpleNamespace(progress=older))
    listener.flush()
    assert store.follow_losses() == {
        "follow_truncations": 2,
        "follow_lost_bytes": 1204,
        "follow_lost_lines": 12,
        "follow_lost_files": 1,
    }
    assert ServingStore(tmp_path / "t.db").follow_losses()["follow_lost_bytes"] == 0


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


def test_the_first_micro_batch_s_input_rate_is_unmeasured_not_zero():
    """Issue 54 item 12: batch 0 of 4,450 rows showed "in 0/s" (Spark reports 0 when no
    earlier trigger exists to time the input against). It is None, and shown as "–" with the
    reason, in the terminal and on the dashboard (tests/dashboard/test_tiles.py)."""
    from rich.console import Console

    from logstream.cli.run_progress import progress_printer

    first = progress(0, name="ingest")
    first.inputRowsPerSecond, first.numInputRows = 0.0, 4450
    row = progress_row(first)
    assert row["input_rows_per_s"] is None and row["num_input_rows"] == 4450
    idle = progress(3, name="ingest")
    idle.inputRowsPerSecond, idle.numInputRows = 0.0, 0
    assert progress_row(idle)["input_rows_per_s"] == 0.0  # no rows: a rate of 0 is true
    console = Console(record=True, width=200)
    totals = SimpleNamespace(
        events=4450, late_events=0, quarantined=0, filtered=0, watermark_ms=None, batches=1
    )
    pipeline = SimpleNamespace(totals=totals, ingest=None)
    progress_printer(console, [pipeline])(row)
    line = console.export_text()
    assert "4,450 rows, in –/s (first micro-batch: no earlier trigger to time it)" in line
