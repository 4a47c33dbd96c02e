"""The serving store applies a micro-batch exactly once."""

from __future__ import annotations

import sqlite3

import pytest

from logstream.serving import EXAMPLES_KEPT, IngestBatchWrite, ServingStore


def batch(batch_id: int, requests: int = 3) -> IngestBatchWrite:
    return IngestBatchWrite(
        batch_id=batch_id,
        events=requests,
        late_events=1,
        quarantined=2,
        max_event_time_ms=1000 * batch_id,
        traffic=[
            (
                "1995-07-09T04:00:00Z",
                "1995-07-09T04:01:00Z",
                requests,
                10 * requests,
                0,
                requests,
                0,
                0,
                0,
                0,
            )
        ],
        pages=[("1995-07-09T04:00:00Z", "1995-07-09T04:05:00Z", "/a.html", requests)],
        visitors=[("1995-07-09T04:00:00Z", "1995-07-09T04:01:00Z", 2, b"sketch")],
        late_examples=[(batch_id, "t", "w", "h", "/x", "f")],
        quarantine_examples=[(batch_id, "garbage", "f", "format_mismatch")],
    )


def test_a_replayed_batch_changes_nothing(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    assert store.commit_ingest_batch("ingest", batch(0)) is True
    assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is True
    before = store.query("SELECT * FROM traffic_per_minute"), store.counters()
    assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is False
    assert (store.query("SELECT * FROM traffic_per_minute"), store.counters()) == before
    assert before[0][0]["requests"] == 8 and before[0][0]["bytes"] == 80
    assert before[1] == {"events": 8, "late_events": 2, "quarantined": 4}
    assert store.query("SELECT requests FROM trending_pages")[0]["requests"] == 8
    assert store.max_event_time_ms() == 1000
    assert store.is_committed("ingest", 1) and not store.is_committed("ingest", 2)


def test_a_failed_transaction_leaves_no_trace(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    broken = batch(0)
    broken.pages = [("1995-07-09T04:00:00Z", None, "/a.html", 1)]  # NOT NULL violation
    with pytest.raises(sqlite3.IntegrityError):
        store.commit_ingest_batch("ingest", broken)
    assert store.query("SELECT COUNT(*) AS n FROM traffic_per_minute")[0]["n"] == 0
    assert not store.is_committed("ingest", 0)
    assert store.commit_ingest_batch("ingest", batch(0)) is True


def test_examples_keep_only_the_latest(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    for i in range(EXAMPLES_KEPT + 7):
        store.commit_ingest_batch("ingest", batch(i))
    rows = store.query("SELECT batch_id FROM late_examples ORDER BY seq")
    assert [r["batch_id"] for r in rows] == list(range(7, EXAMPLES_KEPT + 7))


def test_read_only_store_refuses_writes_and_missing_files(tmp_path):
    ServingStore(tmp_path / "s.db")
    ro = ServingStore(tmp_path / "s.db", read_only=True)
    assert ro.counters() == {"events": 0, "late_events": 0, "quarantined": 0}
    with pytest.raises(sqlite3.OperationalError):
        ro.commit_ingest_batch("ingest", batch(0))
    with pytest.raises(sqlite3.OperationalError):
        ServingStore(tmp_path / "missing.db", read_only=True).counters()
