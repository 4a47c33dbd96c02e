"""The devices panel: the device pipeline's outputs (``logstream devices run``) on the page.

The device pipeline writes Parquet with Spark's file sink, whose log (``_spark_metadata/``)
lists the files of every committed micro-batch; :func:`read_devices` reads only those (a file
being written is never read), with pyarrow — no Spark in the dashboard. The outputs are small
(a row per device and window, per alert, per change).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dash import dcc, html

__all__ = ["DevicesView", "committed_files", "devices_figure", "devices_panel", "read_devices"]

#: Alerts and joined alert–change pairs listed (the newest).
LISTED = 10


def committed_files(output: Path) -> list[Path]:
    """The Parquet files of ``output`` that Spark's file sink committed (its
    ``_spark_metadata`` log: ``add`` entries of every batch and compaction file)."""
    log = output / "_spark_metadata"
    if not log.is_dir():
        return []
    added: set[str] = set()
    deleted: set[str] = set()
    for entry in sorted(log.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith(".tmp"):
            continue
        for line in entry.read_text(encoding="utf-8").splitlines()[1:]:  # after "v1"
            if not line.strip():
                continue
            record = json.loads(line)
            (added if record.get("action", "add") == "add" else deleted).add(record["path"])
    paths = [Path(unquote(urlparse(p).path)) for p in sorted(added - deleted)]
    return [p for p in paths if p.exists()]


def _read(output: Path) -> Any:
    import pandas as pd
    import pyarrow.parquet as pq

    files = committed_files(output)
    if not files:
        return pd.DataFrame()
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


@dataclass
class DevicesView:
    """What the devices panel shows."""

    output_dir: Path
    #: one row per device: device, room, status, status_since, occupancy, last_window,
    #: temperature_mean, co2_mean, alerts
    devices: list[dict[str, Any]] = field(default_factory=list)
    #: per device: window starts (ISO) and the CO2 mean of each window
    co2: dict[str, tuple[list[str], list[float]]] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)  #: the newest first
    near_changes: list[dict[str, Any]] = field(default_factory=list)  #: the newest first


def _iso(t: Any) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def read_devices(output_dir: Path | str) -> DevicesView:
    """Read the committed device outputs under ``output_dir`` (see the module docstring).

    Returns
    -------
    DevicesView
        Empty lists while the pipeline has committed nothing.
    """
    out = Path(output_dir)
    view = DevicesView(out)
    windows = _read(out / "device_windows")
    events = _read(out / "device_events")
    alerts = _read(out / "device_alerts")
    near = _read(out / "alerts_near_changes")
    if windows.empty and events.empty:
        return view
    names = set(windows["device"]) if not windows.empty else set()
    names |= set(events["device"]) if not events.empty else set()
    for device in sorted(names):
        row: dict[str, Any] = {"device": device, "room": "unknown", "status": "online"}
        row.update(status_since=None, occupancy=None, last_window=None, alerts=0)
        row.update(temperature_mean=None, co2_mean=None)
        w = windows[windows["device"] == device] if not windows.empty else windows
        if not w.empty:
            w = w.sort_values("window_start")
            last = w.iloc[-1]
            row.update(room=last["room"], last_window=_iso(last["window_start"]))
            row.update(temperature_mean=last["temperature_mean"], co2_mean=last["co2_mean"])
            view.co2[device] = ([_iso(t) for t in w["window_start"]], w["co2_mean"].tolist())
        e = events[events["device"] == device] if not events.empty else events
        for kind, key in (("status", "status"), ("occupancy", "occupancy")):
            k = e[e["kind"] == kind].sort_values("at") if not e.empty else e
            if not k.empty:
                row[key] = k.iloc[-1]["to_state"]
                if kind == "status":
                    row["status_since"] = _iso(k.iloc[-1]["at"])
        if not alerts.empty:
            row["alerts"] = int((alerts["device"] == device).sum())
        view.devices.append(row)
    if not alerts.empty:
        newest = alerts.sort_values("event_time", ascending=False).head(LISTED)
        view.alerts = [
            {**r, "event_time": _iso(r["event_time"])} for r in newest.to_dict("records")
        ]
    if not near.empty:
        newest = near.sort_values("alert_time", ascending=False).head(LISTED)
        view.near_changes = [
            {**r, "alert_time": _iso(r["alert_time"]), "changed_at": _iso(r["changed_at"])}
            for r in newest.to_dict("records")
        ]
    return view


def _num(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _table(tid: str, heads: list[str], rows: list[list[Any]]) -> html.Table:
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in heads])),
            html.Tbody([html.Tr([html.Td(c) for c in r]) for r in rows]),
        ],
        id=tid,
    )


def devices_panel(view: DevicesView | None) -> list[Any]:
    """The devices table, the newest threshold alerts and the alerts near occupancy changes."""
    heading = html.H2("Devices")
    if view is None or not view.devices:
        what = "No device output yet (logstream devices run --output-dir …)."
        return [heading, html.Div(what, className="empty", id="devices-empty")]
    devices = _table(
        "devices-table",
        [
            "device",
            "room",
            "status",
            "since",
            "occupancy",
            "last window",
            "°C",
            "CO2 ppm",
            "alerts",
        ],
        [
            [
                d["device"],
                d["room"],
                d["status"],
                d["status_since"] or "–",
                d["occupancy"] or "–",
                d["last_window"] or "–",
                _num(d["temperature_mean"]),
                _num(d["co2_mean"], 0),
                f"{d['alerts']:,}",
            ]
            for d in view.devices
        ],
    )
    alerts = _table(
        "device-alerts-table",
        ["time", "device", "metric", "value", "threshold"],
        [
            [a["event_time"], a["device"], a["metric"], _num(a["value"]), _num(a["threshold"])]
            for a in view.alerts
        ],
    )
    near = _table(
        "alerts-near-changes-table",
        ["alert", "device", "metric", "room became", "at", "offset s"],
        [
            [
                a["alert_time"],
                a["device"],
                a["metric"],
                a["occupancy"],
                a["changed_at"],
                _num(a["offset_s"], 0),
            ]
            for a in view.near_changes
        ],
    )
    return [
        heading,
        devices,
        html.Div(
            [
                html.Div([html.H3("Threshold alerts (newest)"), alerts]),
                html.Div([html.H3("Alerts near an occupancy change"), near]),
            ],
            className="pair",
        ),
    ]


def devices_figure(view: DevicesView | None) -> dict[str, Any]:
    """CO2 mean per window, one line per device."""
    title = "CO2 per window (mean, ppm), per device"
    if view is None or not view.co2:
        from logstream.dashboard.figures import empty_figure

        return empty_figure("No device windows yet.", title)
    data = [
        {"type": "scatter", "mode": "lines", "name": device, "x": x, "y": y}
        for device, (x, y) in view.co2.items()
    ]
    return {"data": data, "layout": {"title": {"text": title}, "height": 300}}


def devices_row() -> html.Div:
    """The page's devices row: the panel and the CO2 chart (filled by the refresh)."""
    return html.Div(
        [
            html.Div(id="devices", className="panel"),
            html.Div(dcc.Graph(id="graph-devices", figure={"data": []}), className="panel"),
        ],
        className="grid2",
    )
