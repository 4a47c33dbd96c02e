"""Nothing of the page is clipped at a 1400 px wide window, devices row included (issue 37,
item 7), in Debian's Chromium: every tile, title, table and panel fits its box, the charts are
wide enough, and no chart title runs under its legend."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logstream.dashboard.server import _listen
from tests.dashboard.helpers import alert_row, chromium, client_rows, commit, filled_store
from tests.dashboard.test_tiles import progress

WAIT_MS = 30_000
DEVICES = [("sensor-datatest-01", "office-north-2"), ("sensor-datatest2-02", "office-south-1")]


def parquet(folder: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as one Parquet file committed in a Spark file-sink log (``_spark_metadata``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    data = folder / "part-00000.snappy.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    (folder / "_spark_metadata").mkdir()
    entry = f'{{"path":"{data.as_uri()}","size":{data.stat().st_size},"action":"add"}}'
    (folder / "_spark_metadata" / "0").write_text(f"v1\n{entry}\n")


def device_outputs(out: Path) -> Path:
    """The outputs of ``logstream devices run --model`` for two devices over an hour."""
    t0 = datetime(2015, 2, 11, 14, 0, tzinfo=UTC)
    windows, alerts, near = [], [], []
    for d, (device, room) in enumerate(DEVICES):
        for k in range(60):
            windows.append(
                {
                    "device": device,
                    "room": room,
                    "window_start": t0 + timedelta(minutes=k),
                    "temperature_mean": 21.5 + d,
                    "co2_mean": 1024.5 + 10 * k,
                    "predicted_readings": 60,
                    "tp": 30,
                    "fp": 1,
                    "tn": 28,
                    "fn": 1,
                    "accuracy": 58 / 60,
                }
            )
        for k in range(12):
            alerts.append(
                {
                    "device": device,
                    "event_time": t0 + timedelta(minutes=5 * k),
                    "metric": "co2",
                    "value": 1234.5,
                    "threshold": 1000.0,
                }
            )
            near.append(
                {
                    "alert_time": t0 + timedelta(minutes=5 * k),
                    "device": device,
                    "metric": "co2",
                    "occupancy": "occupied",
                    "changed_at": t0 + timedelta(minutes=5 * k, seconds=-40),
                    "offset_s": 40.0,
                }
            )
    events = [
        {"device": device, "kind": kind, "at": t0, "to_state": state}
        for device, _ in DEVICES
        for kind, state in (("status", "online"), ("occupancy", "occupied"))
    ]
    parquet(out / "device_windows", windows)
    parquet(out / "device_events", events)
    parquet(out / "device_alerts", alerts)
    parquet(out / "alerts_near_changes", near)
    parquet(out / "predictions", [{"model_version": "occupancy-v1-20151102"}])
    return out


@pytest.fixture(scope="module")
def page_url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fit")
    store = filled_store(tmp / "s.db", minutes=240)
    commit(store, 1, clients=client_rows(235, {"piweba3y.prodigy.com": (120, 3_456_789)}))
    store.commit_alerts(1, [alert_row(200, value=999.0)])
    store.record_progress([progress(0), progress(1)])
    server = _listen(
        tmp / "s.db", "127.0.0.1", 0, refresh_s=1.0, devices_dir=device_outputs(tmp / "dev")
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}/"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


#: Elements whose content must fit their box: scrollWidth > clientWidth means clipped or
#: spilling out.
FITTING = ".kpi, .kpi .value, .kpi .label, .kpi .detail, .panel, .panel h2, .panel h3, table"

CLIPPED = """(selector) => [...document.querySelectorAll(selector)]
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.tagName}#${e.id || e.className}: ${e.scrollWidth} > ${e.clientWidth}`)"""

GRAPHS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(g => {
    const box = (sel) => { const e = g.querySelector(sel); if (!e) return null;
        const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {id: g.parentElement.id || g.id, width: g.getBoundingClientRect().width,
            title: box('.gtitle'), legend: box('.legend'),
            svg: box('.main-svg')};
})"""


def overlap(a: list[float] | None, b: list[float] | None) -> bool:
    if a is None or b is None:
        return False
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_nothing_is_clipped_at_1400_px(page_url, tmp_path):
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(page_url)
        page.wait_for_selector("#kpi-last-batch", timeout=WAIT_MS)
        page.wait_for_selector("#devices-table", timeout=WAIT_MS)
        page.wait_for_selector("#graph-device-accuracy .main-svg", timeout=WAIT_MS)
        page.check("#range input[value='all']")
        page.wait_for_timeout(2500)  # let plotly draw every chart at its size
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        assert page.evaluate(CLIPPED, FITTING) == []
        graphs = {g["id"]: g for g in page.evaluate(GRAPHS)}
        context.close()
    assert {"graph-requests", "graph-devices", "graph-device-accuracy"} <= set(graphs)
    narrow = {i: round(g["width"]) for i, g in graphs.items() if g["width"] < 400}
    assert narrow == {}
    under_legend = [i for i, g in graphs.items() if overlap(g["title"], g["legend"])]
    assert under_legend == []
    cut = [i for i, g in graphs.items() if g["title"] and g["title"][2] > g["svg"][2] + 1]
    assert cut == []
