"""Alerts, sessions, top clients and the duplicates counter: from rows written into a store
to the snapshot and the rendered panels, without a browser."""

from __future__ import annotations

from typing import Any

import dash
import pytest

from logstream.dashboard.app import _OUTPUTS, refresh_outputs
from logstream.dashboard.data import ALERTS_SHOWN, Filters, read_snapshot
from logstream.dashboard.figures import ALERT_TRACE
from logstream.serving import IngestBatchWrite, ServingStore
from tests.dashboard.helpers import (
    alert_row,
    client_rows,
    commit,
    filled_store,
    minute,
    session_row,
    stats_row,
)

# -- reading the rendered page ----------------------------------------------------------------


def output(outputs: tuple[Any, ...], element: str, prop: str = "children") -> Any:
    return outputs[_OUTPUTS.index((element, prop))]


def find(node: Any, wanted: str) -> Any:
    """The component with id ``wanted`` in a tree of Dash components (None if absent)."""
    if isinstance(node, list | tuple):
        for child in node:
            hit = find(child, wanted)
            if hit is not None:
                return hit
        return None
    if getattr(node, "id", None) == wanted:
        return node
    children = getattr(node, "children", None)
    return None if children is None or isinstance(children, str) else find(children, wanted)


def text(node: Any) -> str:
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return str(node)
    if isinstance(node, list | tuple):
        return "".join(text(c) for c in node)
    return text(getattr(node, "children", None))


def rows(panel: Any, table_id: str) -> list[list[str]]:
    """Cell texts of the body rows of table ``table_id``."""
    table = find(panel, table_id)
    assert table is not None, f"no #{table_id}"
    body = table.children[1]
    return [[text(td) for td in tr.children] for tr in body.children]


def kpi_value(outputs: tuple[Any, ...], name: str) -> str:
    card = find(output(outputs, "kpis"), f"kpi-{name}")
    assert card is not None, f"no card {name}"
    return text(card.children[1])


# -- alerts ------------------------------------------------------------------------------------


def test_alerts_are_listed_newest_first_with_value_mean_std_and_z(tmp_path):
    store = filled_store(tmp_path / "s.db")  # newest event 04:59:59
    written = [
        alert_row(30, value=160.0, mean=40.0, std=12.0),
        alert_row(40, series="/a.html", value=2.0, mean=60.0, std=10.0, direction="drop"),
        alert_row(50, metric="error_rate", value=0.25, mean=0.01, std=0.02),
    ]
    assert store.commit_alerts(0, written)
    assert store.commit_alerts(1, [alert_row(55, value=300.0, mean=50.0, std=25.0)])

    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    al = snap.alerts
    assert al.kept == 4
    latest = [(a.window_start, a.series, a.metric, a.value, a.mean, a.std, a.z) for a in al.latest]
    assert latest == [
        (minute(55)[0], "site", "requests", 300.0, 50.0, 25.0, 10.0),
        (minute(50)[0], "site", "error_rate", 0.25, 0.01, 0.02, pytest.approx(12.0)),
        (minute(40)[0], "/a.html", "requests", 2.0, 60.0, 10.0, -5.8),
        (minute(30)[0], "site", "requests", 160.0, 40.0, 12.0, 10.0),
    ]
    assert [a.window_start for a in al.site_requests] == [minute(30)[0], minute(55)[0]]

    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert rows(output(out, "alerts"), "alerts-table") == [
        ["1995-07-09 04:55:00", "site", "requests", "▲ spike", "300/min", "50.0 ± 25.0", "+10.0"],
        ["1995-07-09 04:50:00", "site", "error rate", "▲ spike", "25.0 %", "1.0 ± 2.0 %", "+12.0"],
        ["1995-07-09 04:40:00", "/a.html", "requests", "▼ drop", "2/min", "60.0 ± 10.0", "−5.8"],
        ["1995-07-09 04:30:00", "site", "requests", "▲ spike", "160/min", "40.0 ± 12.0", "+10.0"],
    ]
    # the site-wide request alerts are marked on the requests chart, at their request count
    marks = [t for t in output(out, "graph-requests", "figure")["data"] if t["name"] == ALERT_TRACE]
    assert len(marks) == 1
    assert marks[0]["x"] == ["1995-07-09 04:30:00", "1995-07-09 04:55:00"]
    assert marks[0]["y"] == [160.0, 300.0]
    assert marks[0]["marker"]["symbol"] == ["triangle-up", "triangle-up"]


def test_alert_marks_follow_the_time_range_but_the_list_does_not(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.commit_alerts(0, [alert_row(30), alert_row(50)])
    snap = read_snapshot(tmp_path / "s.db", Filters.build("15m"))  # from 04:44:59
    assert [a.window_start for a in snap.alerts.site_requests] == [minute(50)[0]]
    assert len(snap.alerts.latest) == 2


def test_only_the_newest_alerts_are_listed(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.commit_alerts(0, [alert_row(k, value=100.0 + k) for k in range(ALERTS_SHOWN + 5)])
    snap = read_snapshot(tmp_path / "s.db")
    assert snap.alerts.kept == ALERTS_SHOWN + 5
    assert [a.value for a in snap.alerts.latest] == [
        100.0 + k for k in range(ALERTS_SHOWN + 4, 4, -1)
    ]
    panel = output(refresh_outputs(tmp_path / "s.db", None, None, None), "alerts")
    assert f"({ALERTS_SHOWN} newest of {ALERTS_SHOWN + 5} kept)" in text(panel[0])


def test_new_alerts_are_sent_to_a_page_that_saw_the_old_state(tmp_path):
    store = filled_store(tmp_path / "s.db")
    first = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert find(output(first, "alerts"), "alerts-empty") is not None
    store.commit_alerts(0, [alert_row(45, value=999.0)])
    moved = refresh_outputs(tmp_path / "s.db", "all", "", None, seen=first[3])
    assert rows(output(moved, "alerts"), "alerts-table")[0][4] == "999/min"


# -- sessions ----------------------------------------------------------------------------------


def test_sessions_per_window_bounce_rate_and_the_longest_sessions(tmp_path):
    store = filled_store(tmp_path / "s.db")
    sessions = [
        session_row("short.example", 0, 0, 1, 1),
        session_row("long.example", 1, 1800, 40, 12, size=2_000_000),
        session_row("mid.example", 2, 600, 9, 4),
    ]
    stats = [stats_row(-1, 10, 4, 30, 90, 900), stats_row(0, 3, 1, 17, 600, 1800)]
    assert store.commit_sessions(0, 3, sessions, stats)

    se = read_snapshot(tmp_path / "s.db", Filters.build("all")).sessions
    assert se.window_s == 3600 and se.kept == 3
    got = [(w.window_start, w.sessions, w.bounces, w.median_duration_s) for w in se.windows]
    assert got == [
        ("1995-07-09T03:00:00Z", 10, 4, 90),
        ("1995-07-09T04:00:00Z", 3, 1, 600),
    ]
    assert se.sessions == 13 and se.bounce_rate == pytest.approx(100 * 5 / 13)
    assert se.windows[1].bounce_rate == pytest.approx(100 / 3)
    assert [(s.client_host, s.duration_s, s.bounce) for s in se.longest] == [
        ("long.example", 1800, False),
        ("mid.example", 600, False),
        ("short.example", 0, True),
    ]

    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    figure = output(out, "graph-sessions", "figure")
    bars, median, p95 = figure["data"]
    assert bars["y"] == [10, 3] and median["y"] == [1.5, 10.0] and p95["y"] == [15.0, 30.0]
    assert bars["x"] == ["1995-07-09 03:30:00.000", "1995-07-09 04:30:00.000"]
    panel = output(out, "sessions")
    summary = find(panel, "sessions-summary")
    assert text(summary).startswith("13 sessions started in the 2 windows shown")
    assert "bounce rate 38.5 %" in text(summary) and "median 10.0 min" in text(summary)
    assert rows(panel, "sessions-table")[0] == [
        "long.example",
        "1995-07-09 04:01:00",
        "30.0 min",
        "40",
        "12",
        "1.9 MiB",
    ]
    assert (
        "entry /entry.html → exit /exit.html"
        in find(panel, "sessions-table").children[1].children[0].title
    )


def test_session_windows_overlapping_the_range_are_shown(tmp_path):
    store = filled_store(tmp_path / "s.db")  # newest event 04:59:59
    store.commit_sessions(0, 2, [], [stats_row(h, 5, 1, 9, 60, 120) for h in (-3, -2, -1, 0)])
    se = read_snapshot(tmp_path / "s.db", Filters.build("1h")).sessions  # from 03:59:59
    assert [w.window_start for w in se.windows] == ["1995-07-09T03:00:00Z", "1995-07-09T04:00:00Z"]
    assert len(read_snapshot(tmp_path / "s.db", Filters.build("all")).sessions.windows) == 4


# -- top clients -------------------------------------------------------------------------------


def commit_clients(store: ServingStore, batch_id: int, rows: list[tuple]) -> None:
    assert store.commit_ingest_batch("ingest", IngestBatchWrite(batch_id=batch_id, clients=rows))


def test_top_clients_of_the_latest_complete_window_by_requests_and_by_bytes(tmp_path):
    store = filled_store(tmp_path / "s.db")  # watermark 04:49:59
    counts = {"a.example": (50, 1_000), "b.example": (20, 9_000_000), "c.example": (30, 5_000)}
    commit_clients(store, 1, client_rows(40, {"old.example": (999, 1)}))
    commit_clients(store, 2, client_rows(45, counts))
    commit_clients(store, 3, client_rows(50, {"open.example": (5_000, 5)}))  # not complete

    tc = read_snapshot(tmp_path / "s.db").top_clients
    assert (tc.window_start, tc.window_end, tc.complete) == (
        "1995-07-09T04:40:00Z",
        "1995-07-09T04:45:00Z",
        True,
    )
    assert [(c.rank, c.client_host, c.requests) for c in tc.by_requests] == [
        (1, "a.example", 50),
        (2, "c.example", 30),
        (3, "b.example", 20),
    ]
    assert [(c.client_host, c.bytes) for c in tc.by_bytes] == [
        ("b.example", 9_000_000),
        ("c.example", 5_000),
        ("a.example", 1_000),
    ]
    assert (tc.clients, tc.requests, tc.bytes) == (3, 100, 9_006_000)

    panel = output(refresh_outputs(tmp_path / "s.db", None, None, None), "top-clients")
    assert find(panel, "clients-window").to_plotly_json()["props"]["data-end"] == tc.window_end
    assert rows(panel, "clients-requests-table") == [
        ["1", "a.example", "50", "50.0 %"],
        ["2", "c.example", "30", "30.0 %"],
        ["3", "b.example", "20", "20.0 %"],
    ]
    assert rows(panel, "clients-bytes-table")[0] == ["1", "b.example", "8.6 MiB", "99.9 %"]

    two = read_snapshot(tmp_path / "s.db", top=2).top_clients
    assert len(two.by_requests) == len(two.by_bytes) == 2


def test_top_clients_before_any_complete_window_show_the_open_one(tmp_path):
    store = filled_store(tmp_path / "s.db")
    commit_clients(store, 1, client_rows(55, {"x.example": (3, 300)}))
    tc = read_snapshot(tmp_path / "s.db").top_clients
    assert tc.complete is False and tc.window_end == "1995-07-09T04:55:00Z"
    panel = output(refresh_outputs(tmp_path / "s.db", None, None, None), "top-clients")
    assert "still open" in text(panel)


# -- duplicates --------------------------------------------------------------------------------


def test_duplicates_are_counted_as_the_store_counts_them(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.record_duplicates(1000, 4)
    store.record_duplicates(1000, 4)  # the progress of a replayed micro-batch: kept once
    snap = read_snapshot(tmp_path / "s.db")
    assert snap.counters["duplicates"] == store.counters()["duplicates"] == 4
    store.record_duplicates(1001, 7)
    assert read_snapshot(tmp_path / "s.db").counters["duplicates"] == 11
    out = refresh_outputs(tmp_path / "s.db", None, None, None)
    assert kpi_value(out, "duplicates") == "11"


def test_duplicates_card_says_when_deduplication_is_off(tmp_path):
    store = filled_store(tmp_path / "s.db")
    out = refresh_outputs(tmp_path / "s.db", None, None, None)
    assert kpi_value(out, "duplicates") == "0"
    store.set_state({"dedup": "false"})
    card = find(
        output(refresh_outputs(tmp_path / "s.db", None, None, None), "kpis"), "kpi-duplicates"
    )
    assert text(card.children[2]) == "deduplication is off"


# -- empty tables ------------------------------------------------------------------------------


def test_empty_tables_show_empty_states(tmp_path):
    filled_store(tmp_path / "s.db")
    snap = read_snapshot(tmp_path / "s.db", Filters.build("all"))
    assert not snap.notes  # empty tables are not an older store
    assert snap.alerts.latest == [] and snap.alerts.kept == 0 and snap.top_clients is None
    assert snap.sessions.windows == [] and snap.sessions.longest == []
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert "No anomaly alert so far." in text(find(output(out, "alerts"), "alerts-empty"))
    assert find(output(out, "top-clients"), "clients-empty") is not None
    assert "No closed session yet" in text(find(output(out, "sessions"), "sessions-empty"))
    figure = output(out, "graph-sessions", "figure")
    assert figure["layout"]["annotations"][0]["text"] == "No closed session in this time range yet."
    requests = output(out, "graph-requests", "figure")
    assert ALERT_TRACE not in [t["name"] for t in requests["data"]]


def test_panels_of_queries_left_out_say_so(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.set_state({"queries": "traffic_per_minute,trending_pages,sessions"})
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    off = "The alerts query is off (logstream run --queries)."
    assert text(find(output(out, "alerts"), "alerts-empty")) == off
    # sessions run: no session closed yet, not "off"
    assert "No closed session yet" in text(find(output(out, "sessions"), "sessions-empty"))
    store.set_state({"queries": "none"})
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    off = "The sessions query is off (logstream run --queries)."
    assert text(find(output(out, "sessions"), "sessions-empty")) == off
    assert output(out, "graph-sessions", "figure")["layout"]["annotations"][0]["text"] == off


def test_the_new_panels_wait_with_the_rest_of_the_page(tmp_path):
    out = refresh_outputs(tmp_path / "none.db", None, None, None)
    assert output(out, "graph-sessions", "figure")["layout"]["annotations"][0]["text"] == (
        "Waiting for data…"
    )
    for element, empty in (
        ("alerts", "alerts-empty"),
        ("top-clients", "clients-empty"),
        ("sessions", "sessions-empty"),
    ):
        assert find(output(out, element), empty) is not None
    ServingStore(tmp_path / "schema.db")
    out = refresh_outputs(tmp_path / "schema.db", None, None, None)
    assert find(output(out, "alerts"), "alerts-empty") is not None


def test_unchanged_store_leaves_the_new_panels_alone(tmp_path):
    filled_store(tmp_path / "s.db")
    first = refresh_outputs(tmp_path / "s.db", "all", "", None)
    again = refresh_outputs(tmp_path / "s.db", "all", "", None, seen=first[3])
    for element, prop in (
        ("alerts", "children"),
        ("top-clients", "children"),
        ("graph-sessions", "figure"),
        ("sessions", "children"),
    ):
        assert output(again, element, prop) is dash.no_update


# -- reference data: sections, agent classes, networks ------------------------------------------


def dimension_rows(dimension: str, counts: dict[str, list[int]]) -> list[tuple]:
    """``traffic_by_dimension`` rows: ``counts[key][k]`` requests in minute k (errors: one in
    ten, rounded down)."""
    return [
        (dimension, key, *minute(k), n, n * 100, 0, n, 0, n // 10, 0, n // 10)
        for key, per_minute in counts.items()
        for k, n in enumerate(per_minute)
    ]


def test_reference_panel_and_filters(tmp_path):
    store = filled_store(tmp_path / "s.db", minutes=10)
    agents = {"browser": [30] * 10, "crawler": [10] * 10, "unknown": [0] * 9 + [20]}
    sections = {"/shuttle/": [5] * 10, "/history/": [2] * 10, "/images/": [9] * 10}
    dims = dimension_rows("agents", agents) + dimension_rows("sections", sections)
    dims += dimension_rows("networks", {"Google": [4] * 10})
    commit(store, 1, traffic=[], dimensions=dims, max_event_time_ms=None, events=1)
    out = refresh_outputs(tmp_path / "s.db", "all", "", None, None, sections=["/history/"])
    sections_figure = output(out, "graph-sections", "figure")
    assert [t["name"] for t in sections_figure["data"]] == ["/history/"]  # the filter
    assert sections_figure["data"][0]["y"] == [2.0] * 10  # requests per minute
    agents_figure = output(out, "graph-agents", "figure")
    assert [t["name"] for t in agents_figure["data"]] == ["browser", "crawler", "unknown"]
    panel = output(out, "reference")
    assert "Crawler share: 23.8%" in text(find(panel, "crawler-share"))  # 100 of 420
    assert rows(panel, "agents-table")[0] == ["browser", "300", "71.4 %", "30", "10.0 %"]
    assert [r[0] for r in rows(panel, "sections-table")] == ["/images/", "/shuttle/", "/history/"]
    assert rows(panel, "networks-table") == [["Google", "40", "100.0 %", "0", "0.0 %"]]
    options = output(out, "section-filter", "options")
    assert [o["value"] for o in options] == ["/images/", "/shuttle/", "/history/"]
    # changing a filter changes the seen key: the charts are redrawn
    again = refresh_outputs(tmp_path / "s.db", "all", "", None, out[3], sections=["/images/"])
    assert output(again, "graph-sections", "figure")["data"][0]["name"] == "/images/"
