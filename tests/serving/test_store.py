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
        clients=[("1995-07-09T04:00:00Z", "1995-07-09T04:05:00Z", "h", requests, 7 * requests)],
        late_examples=[(batch_id, "t", "w", "h", "/x", "f")],
        quarantine_examples=[(batch_id, "garbage", "f", "format_mismatch", None)],
    )


def test_a_replayed_batch_changes_nothing(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    assert store.commit_ingest_batch("ingest", batch(0)) is True
    assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is True
    before = store.query("SELECT * FROM traffic_per_minute"), store.counters()
    assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is False
    assert (store.query("SELECT * FROM traffic_per_minute"), store.counters()) == before
    # a batch carries the merged value of each window it changed: the newer one wins
    assert before[0][0]["requests"] == 5 and before[0][0]["bytes"] == 50
    assert before[1] == {
        "events": 8,
        "late_events": 2,
        "quarantined": 4,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }
    assert store.query("SELECT requests FROM trending_pages")[0]["requests"] == 5
    assert store.max_event_time_ms() == 1000
    assert store.is_committed("ingest", 1) and not store.is_committed("ingest", 2)


def test_windows_written_ahead_of_the_ledger_are_idempotent(tmp_path):
    """The ingest stage writes a micro-batch's windows before its ledger transaction: they
    show at once, the counters wait for the ledger, and a replay of either transaction
    leaves the store as one delivery does."""
    store, once = ServingStore(tmp_path / "s.db"), ServingStore(tmp_path / "once.db")
    for s in (store, once):
        assert s.commit_ingest_batch("ingest", batch(0)) is True
    early = batch(1, requests=5)
    assert store.commit_ingest_views("ingest", early) is True and early.views_committed
    assert store.query("SELECT requests FROM traffic_per_minute")[0]["requests"] == 5
    assert store.max_event_time_ms() == 1000
    assert store.counters()["events"] == 3 and not store.is_committed("ingest", 1)
    # a crash, then the replay writes the same windows again, then the ledger's transaction
    replay = batch(1, requests=5)
    assert store.commit_ingest_views("ingest", replay) is True
    assert store.commit_ingest_batch("ingest", replay) is True
    assert once.commit_ingest_batch("ingest", batch(1, requests=5)) is True
    assert store.counters() == once.counters() and store.counters()["events"] == 8
    for table in ("traffic_per_minute", "trending_pages", "unique_visitors", "top_clients"):
        assert store.query(f"SELECT * FROM {table}") == once.query(f"SELECT * FROM {table}")
    # a batch the ledger holds writes nothing, ahead or not
    stale = batch(1, requests=99)
    assert store.commit_ingest_views("ingest", stale) is False and not stale.views_committed
    assert store.commit_ingest_batch("ingest", stale) is False
    assert store.query("SELECT requests FROM traffic_per_minute")[0]["requests"] == 5
    # nor does an older batch after a newer one's windows (a zombie driver behind its
    # replacement, before the ledger holds its batch)
    assert store.commit_ingest_views("ingest", batch(3, requests=7)) is True
    assert store.commit_ingest_views("ingest", batch(2, requests=6)) is False
    assert store.query("SELECT requests FROM traffic_per_minute")[0]["requests"] == 7
    assert store.get_state("views_batch") == "3"


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
    assert ro.counters() == {
        "events": 0,
        "late_events": 0,
        "quarantined": 0,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }
    with pytest.raises(sqlite3.OperationalError):
        ro.commit_ingest_batch("ingest", batch(0))
    with pytest.raises(sqlite3.OperationalError):
        ServingStore(tmp_path / "missing.db", read_only=True).counters()


def test_client_counts_are_set_per_window_and_pruned_with_trending_windows(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    store.commit_ingest_batch("ingest", batch(0))
    store.commit_ingest_batch("ingest", batch(1, requests=5))
    assert store.query("SELECT client_host, requests, bytes FROM top_clients") == [
        {"client_host": "h", "requests": 5, "bytes": 35}
    ]
    late = batch(2)
    late.clients = []
    late.prune_trending_before = "1995-07-09T04:05:00Z"
    store.commit_ingest_batch("ingest", late)
    assert store.query("SELECT * FROM top_clients") == []


def test_duplicates_are_counted_once_per_micro_batch(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    store.record_duplicates(0, 4)
    store.record_duplicates(1, 3)
    # micro-batch 1 replayed after a crash reports its count again: kept once
    store.record_duplicates(1, 3)
    assert store.counters()["duplicates"] == 7
    # the progress rows are shown, not counted
    store.record_progress([{"query": "ingest", "batch_id": 2, "duplicates_dropped": 9}])
    assert store.counters()["duplicates"] == 7


def test_a_store_of_the_previous_version_gains_the_new_progress_column(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE progress (seq INTEGER PRIMARY KEY AUTOINCREMENT, query TEXT, "
            "batch_id INTEGER, timestamp TEXT, input_rows_per_s REAL, processed_rows_per_s "
            "REAL, batch_duration_ms INTEGER, num_input_rows INTEGER, watermark TEXT, "
            "max_event_time TEXT, state_rows INTEGER, state_memory_bytes INTEGER, "
            "dropped_by_watermark INTEGER)"
        )
    store = ServingStore(path)
    store.record_progress([{"query": "ingest", "batch_id": 0, "duplicates_dropped": 2}])
    assert store.query("SELECT duplicates_dropped FROM progress") == [{"duplicates_dropped": 2}]


SESSION = ("h", None, "1995-07-09T04:00:00Z", "1995-07-09T04:10:00Z", 600, 3, 2, 30, "/a", "/b", 0)
STATS = ("1995-07-09T04:00:00Z", "1995-07-09T05:00:00Z", 1, 0, 2, 600, 600, b"kll")


def test_sessions_and_alerts_commit_exactly_once_through_the_ledger(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    assert store.commit_sessions(0, 1, [SESSION], [STATS]) is True
    assert store.commit_sessions(0, 1, [SESSION], [STATS]) is False
    assert store.query("SELECT COUNT(*) AS n FROM sessions") == [{"n": 1}]
    assert store.session_stats_rows(["1995-07-09T04:00:00Z", "other"]) == [(*STATS[:5], b"kll")]
    # merged statistics replace the stored row of their window
    assert store.commit_sessions(1, 1, [SESSION], [(*STATS[:2], 2, 1, 3, 300, 600, b"k2")])
    assert store.query("SELECT sessions, median_duration_s FROM session_stats") == [
        {"sessions": 2, "median_duration_s": 300}
    ]
    alert = ("site", "requests", "t0", "t1", 90.0, 10.0, 3.0, 26.7, "spike")
    assert store.commit_alerts(0, [alert]) is True
    assert store.commit_alerts(0, [alert]) is False
    assert store.query("SELECT series, z, direction FROM alerts") == [
        {"series": "site", "z": 26.7, "direction": "spike"}
    ]
    assert store.is_committed("sessions", 1) and store.is_committed("alerts", 0)
