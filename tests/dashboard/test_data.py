"""The dashboard's data layer, without a browser: numbers, filters and every store state."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import dash
import pytest

from logstream.dashboard.app import _OUTPUTS, refresh_outputs
from logstream.dashboard.data import Filters, read_snapshot, store_path_from_url
from logstream.errors import ConfigError
from logstream.serving import IngestBatchWrite, ServingStore
from tests.dashboard.helpers import (
    T0,
    commit,
    filled_store,
    iso,
    minute,
    new_store,
    page_rows,
    traffic_row,
)


def banner_text(outputs) -> str:
    return " ".join(str(p.children) for p in outputs[0])


# -- states ------------------------------------------------------------------------------------


def test_a_store_that_does_not_exist_yet_is_waited_for(tmp_path):
    snap = read_snapshot(tmp_path / "later.db")
    assert snap.state == "missing"
    assert "Waiting for data" in snap.message and "does not exist yet" in snap.message
    out = refresh_outputs(tmp_path / "later.db", None, None, None)
    assert "does not exist yet" in banner_text(out) and out[1] == "banner missing"
    assert not (tmp_path / "later.db").exists()  # reading never creates it


def test_an_empty_file_and_a_store_without_batches_are_waiting(tmp_path):
    (tmp_path / "empty.db").touch()
    snap = read_snapshot(tmp_path / "empty.db")
    assert snap.state == "waiting" and "no tables yet" in snap.message
    ServingStore(tmp_path / "schema.db")
    snap = read_snapshot(tmp_path / "schema.db")
    assert snap.state == "waiting" and "has not committed a micro-batch" in snap.message
    out = refresh_outputs(tmp_path / "schema.db", "all", "", ["2xx"])
    assert "Waiting for data" in banner_text(out) and out[1] == "banner waiting"


def test_a_file_that_is_not_a_store_is_reported_not_raised(tmp_path):
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all " * 200)
    snap = read_snapshot(tmp_path / "junk.db")
    assert snap.state == "unreadable" and "logstream serving store" in snap.message
    out = refresh_outputs(tmp_path / "junk.db", None, None, None)
    assert out[1] == "banner unreadable"


def test_only_quarantined_lines_so_far(tmp_path):
    store = new_store(tmp_path / "s.db")
    junk = (0, "junk", "f.log", "format_mismatch", None)
    commit(store, 0, quarantined=4, quarantine_examples=[junk])
    snap = read_snapshot(tmp_path / "s.db")
    assert snap.state == "ok" and "quarantined" in snap.message
    assert snap.counters["quarantined"] == 4 and snap.quarantine_examples[0]["raw_line"] == "junk"
    refresh_outputs(tmp_path / "s.db", None, None, None)  # renders without data


def test_windows_served_ahead_of_the_ledger_are_shown(tmp_path):
    """A micro-batch's windows reach the store before its ledger row and counters
    (ServingStore.commit_ingest_views): the dashboard shows them, even the first's."""
    store = new_store(tmp_path / "s.db")
    waiting = read_snapshot(tmp_path / "s.db")
    assert waiting.state == "waiting"
    ahead = IngestBatchWrite(batch_id=0, events=5, traffic=[traffic_row(0, 5)])
    ahead.max_event_time_ms = int(T0.timestamp() * 1000) + 59_000
    assert store.commit_ingest_views("ingest", ahead)
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert snap.state == "ok" and snap.version != waiting.version
    assert snap.traffic.total_requests == 5 and snap.counters["events"] == 0
    again = IngestBatchWrite(batch_id=1, events=3, traffic=[traffic_row(0, 8)])
    again.max_event_time_ms = ahead.max_event_time_ms
    assert store.commit_ingest_views("ingest", again)  # same newest event, a new batch
    later = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert later.version != snap.version and later.traffic.total_requests == 8


# -- numbers -----------------------------------------------------------------------------------


def test_traffic_totals_and_per_minute_points(tmp_path):
    filled_store(tmp_path / "s.db")
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    t = snap.traffic
    assert snap.state == "ok" and snap.stale is None and not snap.notes
    assert snap.newest_event == "1995-07-09T04:59:59Z" and snap.watermark == "1995-07-09T04:49:59Z"
    assert t.bucket_s == 60 and len(t.times) == 60 and t.times[0] == "1995-07-09T04:00:00Z"
    assert t.total_all == t.total_requests == sum(range(1, 61)) + 6
    assert t.requests_per_min[:2] == [2.0, 2.0] and t.per_class["4xx"][:2] == [1.0, 0.0]
    assert t.bytes_per_min[1] == 200.0 and t.error_rate[0] == pytest.approx(50.0)
    assert snap.visitors.mean[:3] == [2.0, 3.0, 4.0]
    assert snap.counters == {
        "events": sum(range(1, 61)) + 6,
        "late_events": 0,
        "quarantined": 0,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }


def test_time_range_counts_back_from_the_newest_event(tmp_path):
    filled_store(tmp_path / "s.db")
    snap = read_snapshot(tmp_path / "s.db", Filters.build("15m"))
    # newest 04:59:59 → windows starting at or after 04:44:59, i.e. 04:45 … 04:59
    assert snap.range_start == "1995-07-09T04:44:59Z"
    assert snap.traffic.times[0] == "1995-07-09T04:45:00Z" and len(snap.traffic.times) == 15
    assert snap.traffic.total_all == sum(range(46, 61)) + 1
    assert snap.visitors.times[0] == "1995-07-09T04:45:00Z"


def test_status_filter_narrows_requests_but_not_bytes(tmp_path):
    filled_store(tmp_path / "s.db")
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all", "", ["4xx"]))
    t = snap.traffic
    assert list(t.per_class) == ["4xx"] and t.total_requests == 6
    assert t.total_all == sum(range(1, 61)) + 6 and t.total_bytes == t.total_all * 100
    none = read_snapshot(tmp_path / "s.db", Filters.build("all", "", []))
    assert none.traffic.total_requests == 0 and none.traffic.per_class == {}
    refresh_outputs(tmp_path / "s.db", "all", "", [])  # "no status class selected"


def test_trending_shows_the_latest_complete_window_with_trend(tmp_path):
    filled_store(tmp_path / "s.db")
    tr = read_snapshot(tmp_path / "s.db").trending
    # watermark 04:49:59: the window 04:44–04:49 is the latest complete one (k = 48)
    assert (tr.window_start, tr.window_end, tr.complete) == (
        "1995-07-09T04:44:00Z",
        "1995-07-09T04:49:00Z",
        True,
    )
    assert [(p.url_path, p.requests, p.previous) for p in tr.pages] == [
        ("/a.html", 49, 48),
        ("/b/", 3, 3),
        ("/b/c.html", 2, 2),
    ]
    a = tr.pages[0]
    assert len(a.trend) == 30 and a.trend[-1] == 49 and a.trend[-5:] == [45, 46, 47, 48, 49]
    assert tr.trend_ends[-1] == tr.window_end and tr.matching_pages == 3


def test_url_prefix_filters_trending_pages(tmp_path):
    filled_store(tmp_path / "s.db")
    tr = read_snapshot(tmp_path / "s.db", Filters.build(None, " /b/ ")).trending
    assert [(p.url_path, p.requests) for p in tr.pages] == [("/b/", 3), ("/b/c.html", 2)]
    assert tr.matching_pages == 2
    none = read_snapshot(tmp_path / "s.db", Filters.build(None, "/B/")).trending  # case matters
    assert none.pages == [] and none.matching_pages == 0
    like = read_snapshot(tmp_path / "s.db", Filters.build(None, "/%")).trending  # not a pattern
    assert like.pages == []


def test_top_defaults_to_the_pipelines_setting(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.set_state({"top": "2"})
    assert [p.url_path for p in read_snapshot(tmp_path / "s.db").trending.pages] == [
        "/a.html",
        "/b/",
    ]
    assert len(read_snapshot(tmp_path / "s.db", top=1).trending.pages) == 1


def test_before_any_complete_window_the_open_one_is_shown(tmp_path):
    store = new_store(tmp_path / "s.db")
    commit(
        store,
        0,
        traffic=[traffic_row(k, 5) for k in range(8)],
        pages=page_rows(7, {"/x.html": 4}),
    )
    tr = read_snapshot(tmp_path / "s.db").trending
    assert tr.complete is False and tr.window_end == "1995-07-09T04:08:00Z"
    assert tr.pages[0].url_path == "/x.html"


def test_long_ranges_are_bucketed_without_losing_requests(tmp_path):
    store = new_store(tmp_path / "s.db")
    rows = [traffic_row(k, 1 + k % 7) for k in range(2 * 24 * 60)]
    commit(store, 0, traffic=rows)
    t = read_snapshot(tmp_path / "s.db", Filters.build("all")).traffic
    assert t.bucket_s == 120 and len(t.times) == 24 * 60
    assert t.total_all == sum(r[2] for r in rows)
    assert t.requests_per_min[0] == (rows[0][2] + rows[1][2]) / 2
    week = read_snapshot(tmp_path / "s.db", Filters.build("24h")).traffic
    assert week.bucket_s == 60 and len(week.times) == 24 * 60


def test_filters_are_cleaned():
    assert Filters.build("bogus", None, None) == Filters()
    f = Filters.build("1h", "  /a ", ["5xx", "2xx", "9xx"])
    assert (f.time_range, f.url_prefix, f.status_classes) == ("1h", "/a", ("2xx", "5xx"))


def test_store_url():
    assert str(store_path_from_url("sqlite:////tmp/x.db")) == "/tmp/x.db"
    for bad in ("postgres://db/x", "out/logstream.db", "sqlite:///"):
        with pytest.raises(ConfigError, match="use sqlite:///PATH"):
            store_path_from_url(bad)


# -- older runs, concurrent writers --------------------------------------------------------------


def test_a_store_from_an_older_run_is_shown_with_what_it_lacks(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(
            """
            CREATE TABLE ledger (query TEXT, batch_id INTEGER, committed_at TEXT, events INTEGER,
                late_events INTEGER, quarantined INTEGER);
            CREATE TABLE pipeline_state (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE traffic_per_minute (window_start TEXT PRIMARY KEY, window_end TEXT,
                requests INTEGER, bytes INTEGER, status_1xx INTEGER, status_2xx INTEGER,
                status_3xx INTEGER, status_4xx INTEGER, status_5xx INTEGER, errors INTEGER);
            CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER);
            """
        )
        conn.execute(
            "INSERT INTO ledger VALUES ('ingest', 0, '2020-01-01T00:00:00.000000Z', 3, 0, 0)"
        )
        conn.execute("INSERT INTO counters VALUES ('events', 3)")
        conn.execute(
            f"INSERT INTO traffic_per_minute VALUES ({','.join('?' * 10)})", traffic_row(0, 3)
        )
    conn.close()
    snap = read_snapshot(path, Filters.build("all"))
    assert snap.state == "ok" and snap.traffic.total_all == 3
    assert "No micro-batch committed for" in snap.stale and "2020-01-01" in snap.stale
    text = " ".join(snap.notes)
    for missing in (
        "trending_pages",
        "unique_visitors",
        "progress",
        "late_examples",
        "alerts",
        "top_clients",
        "session_stats",
    ):
        assert missing in text
    assert snap.alerts is None and snap.sessions is None and snap.top_clients is None
    assert "watermark delay" in text and snap.watermark == "1995-07-09T03:51:00Z"
    out = refresh_outputs(path, "all", "", None)
    assert out[1] == "banner stale" and "older logstream" in banner_text(out)


def test_a_store_written_concurrently_reads_consistently(tmp_path):
    """A writer creates the store and commits batches while the page reads it: every read is
    a consistent snapshot (the request total equals the event counter) and never raises."""
    path = tmp_path / "live.db"
    batches = 120
    states: set[str] = set()
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            store = new_store(path)
            for b in range(batches):
                commit(
                    store, b, traffic=[traffic_row(b, 3, s4=b % 2)], pages=page_rows(b, {"/": b})
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    while not done.is_set() or reads < 5:
        snap = read_snapshot(path, Filters.build("all"))
        states.add(snap.state)
        assert snap.state in ("missing", "waiting", "ok"), snap.message
        if snap.state == "ok":
            assert snap.traffic.total_all == snap.counters["events"]
            assert snap.traffic.total_errors == sum(snap.traffic.per_class["4xx"])
        reads += 1
    writer.join()
    assert not errors
    final = read_snapshot(path, Filters.build("all"))
    assert final.counters["events"] == 3 * batches + batches // 2 and "ok" in states


def test_a_store_replaced_by_a_new_run_is_picked_up(tmp_path):
    path = tmp_path / "s.db"
    filled_store(path, minutes=20)
    assert read_snapshot(path, Filters.build("all")).traffic.total_all > 100
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"s.db{suffix}").unlink(missing_ok=True)
    store = new_store(path)
    commit(store, 0, traffic=[traffic_row(0, 7)])
    assert read_snapshot(path, Filters.build("all")).traffic.total_all == 7


def test_stale_after_some_idle_time(tmp_path):
    filled_store(tmp_path / "s.db")
    later = datetime.now(UTC) + timedelta(minutes=10)
    snap = read_snapshot(tmp_path / "s.db", now=later)
    assert snap.stale and "10 min" in snap.stale
    assert read_snapshot(tmp_path / "s.db", now=later, stale_after_s=3600).stale is None


def test_unchanged_store_is_not_resent(tmp_path):
    store = filled_store(tmp_path / "s.db")
    first = refresh_outputs(tmp_path / "s.db", "all", "", None)
    again = refresh_outputs(tmp_path / "s.db", "all", "", None, seen=first[3])
    assert all(v is dash.no_update for v in again[4:])
    other = refresh_outputs(tmp_path / "s.db", "1h", "", None, seen=first[3])
    assert other[4] is not dash.no_update
    start, end = minute(100)
    commit(store, 1, traffic=[(start, end, 1, 1, 0, 1, 0, 0, 0, 0)])
    moved = refresh_outputs(tmp_path / "s.db", "all", "", None, seen=first[3])
    assert moved[4] is not dash.no_update
    assert moved[6]["data"][0]["x"][0] == iso(T0).replace("T", " ").removesuffix("Z")


def test_an_unexpected_error_becomes_a_message(tmp_path, monkeypatch, caplog):
    import logstream.dashboard.app as app_module

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(app_module, "read_snapshot", broken)
    out = app_module.safe_refresh(tmp_path / "s.db", None, None, None)
    assert out[1] == "banner unreadable" and "the dashboard's log has it" in banner_text(out)
    assert "disk on fire" not in banner_text(out)  # no exception text for visitors
    assert all(v is dash.no_update for v in out[4:])
    assert "dashboard refresh failed" in caplog.text and "disk on fire" in caplog.text


def test_charts_say_waiting_before_data(tmp_path):
    out = refresh_outputs(tmp_path / "none.db", None, None, None)
    names = [name for name, prop in _OUTPUTS if prop == "figure"]
    by_name = dict(zip([name for name, _ in _OUTPUTS], out, strict=True))
    assert len(names) == 8  # requests, bytes, errors, visitors, health, sessions, sections, agents
    for figure in (by_name[name] for name in names):
        assert figure["layout"]["annotations"][0]["text"] == "Waiting for data…"


def test_synthetic_data_is_labelled_on_the_page(tmp_path):
    store = filled_store(tmp_path / "s.db")
    banner_children, _, *_ = refresh_outputs(tmp_path / "s.db", "all", None, None)
    assert not any("SYNTHETIC" in str(c) for c in banner_children)
    store.set_state(
        {"source_label": "SYNTHETIC traffic (logstream generate, seed 1995)", "synthetic": "True"}
    )
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert snap.synthetic and snap.source_label.startswith("SYNTHETIC")
    banner_children, banner_class, *_ = refresh_outputs(tmp_path / "s.db", "all", None, None)
    assert "SYNTHETIC data, not real logs" in str(banner_children[0])
    assert banner_class == "banner notes"
