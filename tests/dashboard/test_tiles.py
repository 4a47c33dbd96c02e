"""The tiles and the streaming-queries table describe one committed micro-batch, read in one
snapshot of the store (issue 37, items 1 and 3), without a browser."""

from __future__ import annotations

from typing import Any

from logstream.dashboard.app import refresh_outputs
from logstream.dashboard.data import Filters, read_snapshot
from logstream.serving import IngestBatchWrite
from tests.dashboard.helpers import T0, commit, iso, new_store, traffic_row
from tests.dashboard.test_panels import find, output, rows, text

MINUTE_MS = 60_000
T0_MS = int(T0.timestamp() * 1000)


def progress(batch_id: int, query: str = "ingest", **values: Any) -> dict[str, Any]:
    """A progress row of ``batch_id`` whose numbers all differ from another batch's."""
    return {
        "query": query,
        "batch_id": batch_id,
        "timestamp": f"2025-01-01T10:00:{10 + batch_id:02d}.000Z",
        "input_rows_per_s": 1000.0 + batch_id,
        "processed_rows_per_s": 2000.0 + batch_id,
        "batch_duration_ms": 300 + batch_id,
        "num_input_rows": 40 + batch_id,
        "watermark": None,
        "state_rows": None,
        **values,
    }


def kpi(outputs: tuple[Any, ...], name: str) -> tuple[str, str]:
    """Value and detail of tile ``kpi-<name>``."""
    card = find(output(outputs, "kpis"), f"kpi-{name}")
    assert card is not None, f"no kpi-{name}"
    return text(card.children[1]), text(card.children[2])


def two_batches_and_a_third_ahead(path, progress_of_2: bool = True):
    """Batches 0 and 1 committed (their max event times: minutes 10 and 20 after T0);
    batch 2's windows written ahead of its ledger row (minute 30); progress rows of 0, 1 and
    (``progress_of_2``) 2, the queries interleaved."""
    store = new_store(path, analytics_state_rows="7")
    for batch, k in ((0, 10), (1, 20)):
        commit(store, batch, traffic=[traffic_row(k, 5)], max_event_time_ms=T0_MS + k * MINUTE_MS)
    ahead = IngestBatchWrite(batch_id=2, events=5, traffic=[traffic_row(30, 5)])
    ahead.max_event_time_ms = T0_MS + 30 * MINUTE_MS
    assert store.commit_ingest_views("ingest", ahead)
    store.record_progress([progress(0), progress(0, "other"), progress(1)])
    store.record_progress([progress(1, "other"), *([progress(2)] if progress_of_2 else [])])
    return store


def test_every_tile_is_of_the_newest_committed_micro_batch(tmp_path):
    two_batches_and_a_third_ahead(tmp_path / "s.db")
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "last-batch")[0] == "#1"
    assert kpi(out, "batch-duration") == ("301 ms", "41 rows in batch #1")
    assert kpi(out, "input-rate") == ("1,001", "events/s, batch #1")
    assert kpi(out, "processing-rate") == ("2,001", "events/s, batch #1")
    # batch 1's newest event (minute 20), not batch 2's written ahead (minute 30)
    newest = T0_MS + 20 * MINUTE_MS
    assert kpi(out, "newest")[0] == iso_tile(newest)
    assert kpi(out, "watermark")[0] == iso_tile(newest - 600_000)
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert snap.health.last_batch_id == 1 and snap.health.num_input_rows == 41
    # the windows written ahead are drawn all the same
    assert snap.traffic.total_requests == 15


def test_the_progress_tiles_wait_for_the_committed_batch_not_show_an_older_one(tmp_path):
    store = two_batches_and_a_third_ahead(tmp_path / "s.db", progress_of_2=False)
    write = IngestBatchWrite(batch_id=2, events=5, traffic=[traffic_row(30, 5)])
    write.max_event_time_ms, write.views_committed = T0_MS + 30 * MINUTE_MS, True
    store.commit_ingest_batch("ingest", write)  # batch 2 committed; its progress not yet
    store.set_state({"analytics_state_rows": "9"})
    # a progress row of batch 2 from another query is not batch 2's ingest progress
    store.record_progress([progress(2, "other")])
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "last-batch")[0] == "#2"
    assert kpi(out, "batch-duration") == ("–", "batch #2: progress reported when it ends")
    assert kpi(out, "input-rate")[0] == kpi(out, "processing-rate")[0] == "–"
    assert kpi(out, "watermark")[0] == iso_tile(T0_MS + 30 * MINUTE_MS - 600_000)
    store.record_progress([progress(2)])
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "batch-duration") == ("302 ms", "42 rows in batch #2")


def test_the_queries_table_shows_the_watermark_and_state_rows_of_the_tiles(tmp_path):
    store = two_batches_and_a_third_ahead(tmp_path / "s.db")
    store.record_progress([progress(1, state_rows=5, watermark="1970-01-02T00:00:00.000Z")])
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    table = {r[0]: r for r in rows(output(out, "health"), "health-table")}
    ingest = table["ingest"]
    assert ingest[1] == "1"  # the tiles' micro-batch, not the newer no-ledger batch 2
    watermark = kpi(out, "watermark")[0]
    assert watermark != "–" and ingest[7] == watermark.removesuffix(" UTC")
    # the analytics snapshot's 7 rows plus Spark's 5, as on the tile
    assert ingest[8] == "12" and kpi(out, "state-rows")[0] == "12"


def test_a_single_batch_of_an_older_store_without_the_ledger_event_time(tmp_path):
    """A store of an older logstream has no ledger_max_event_time_ms: the newest event time
    of the windows is used, as before."""
    store = new_store(tmp_path / "s.db")
    commit(store, 0, traffic=[traffic_row(5, 3)], max_event_time_ms=T0_MS + 5 * MINUTE_MS)
    with store.transaction() as conn:
        conn.execute("DELETE FROM pipeline_state WHERE key = 'ledger_max_event_time_ms'")
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert snap.newest_event == iso(T0.replace(minute=5))


def iso_tile(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- a store of the DStream edition (issue 37, item 6) -----------------------------------------


def dstream_store(path):
    """A store written as ``logstream dstream run`` writes it: its tables, the trending pages
    under its ledger key, status classes per batch and its listener's progress rows."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from logstream.dstream.weblog import (
        TRENDING_QUERY,
        commit_status_batch,
        dstream_store_schema,
        progress_listener,
    )
    from logstream.serving import ServingStore

    store = ServingStore(path)
    dstream_store_schema(path)
    listener = progress_listener(path)
    start = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    for k, (ok, missing, bad) in enumerate(((20_000, 1_500, 3), (8_000, 47, 5))):
        t = start + timedelta(seconds=2 * k)
        when = t.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        classes = [("2xx", (ok, 11 + k)), ("4xx", (missing, 7 + k))]
        assert commit_status_batch(str(path), when, f"{k}:ab", classes, bad)
        store.commit_batch(TRENDING_QUERY, int(t.timestamp() * 1000), 1, lambda conn: None)
        ms = int(t.timestamp() * 1000)
        info = SimpleNamespace(
            numRecords=lambda n=ok + missing: n,
            processingDelay=lambda: 850,
            schedulingDelay=lambda k=k: 12 + k,
            batchTime=lambda ms=ms: SimpleNamespace(milliseconds=lambda: ms),
        )
        listener.onBatchCompleted(SimpleNamespace(batchInfo=lambda info=info: info))
    return store


def test_a_dstream_store_is_read_as_one(tmp_path):
    dstream_store(tmp_path / "d.db")
    snap = read_snapshot(tmp_path / "d.db", Filters.build("all"))
    # no watermark delay to assume, and the parsed lines are not "all quarantined"
    assert snap.state == "ok" and not snap.notes and "quarantined" not in snap.message
    assert "29,547 requests parsed and 5 unparseable lines in 2 batches" in snap.message
    assert snap.counters["events"] == 29_547 and snap.counters["quarantined"] == 5
    out = refresh_outputs(tmp_path / "d.db", "all", "", None)
    banner = " ".join(text(p) for p in out[0])
    assert "DStream edition" in banner and "assuming 10 minutes" not in banner
    table = rows(output(out, "health"), "health-table")
    assert [r[0] for r in table] == ["dstream"]
    assert table[0][7] == "none (DStream); scheduling delay 13 ms"
    assert kpi(out, "watermark")[0] == "–" and kpi(out, "last-batch")[0] != "–"
    assert snap.edition == "dstream"


# -- one micro-batch, one point (issue 37, item 4) -------------------------------------------


def test_a_single_point_gets_an_axis_of_seconds_not_of_its_millisecond(tmp_path):
    from logstream.dashboard.figures import health_figure, requests_figure

    store = new_store(tmp_path / "s.db")
    commit(store, 0, traffic=[traffic_row(0, 5)])
    store.record_progress([progress(0, timestamp="2025-01-01T07:24:41.501Z")])
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    axis = health_figure(snap)["layout"]["xaxis"]
    assert axis["range"] == ["2025-01-01 07:24:11", "2025-01-01 07:25:11"]
    assert axis["tickformat"] == "%H:%M:%S"
    traffic = requests_figure(snap)["layout"]["xaxis"]  # one minute of traffic
    assert traffic["range"] == ["1995-07-09 03:59:00", "1995-07-09 04:01:00"]
    # two points: plotly's own range
    store.record_progress([progress(1, timestamp="2025-01-01T07:24:43.501Z")])
    commit(store, 1, traffic=[traffic_row(1, 5)])
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert "range" not in health_figure(snap)["layout"]["xaxis"]
    assert "range" not in requests_figure(snap)["layout"]["xaxis"]


def test_the_first_micro_batch_s_input_rate_is_a_dash_with_its_reason(tmp_path):
    """Issue 54 item 12: the dashboard showed "Input rate 0 events/s" for batch 0 of 4,450
    rows; Spark cannot time the first micro-batch's input against an earlier trigger."""
    store = new_store(tmp_path / "s.db")
    commit(store, 0, traffic=[traffic_row(10, 5)], max_event_time_ms=T0_MS + 10 * MINUTE_MS)
    store.record_progress([progress(0, input_rows_per_s=None, num_input_rows=4450)])
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "input-rate") == (
        "–",
        "events/s, batch #0: the first of the run, no earlier trigger to time it",
    )
