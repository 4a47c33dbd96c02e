"""The devices panel: the device pipeline's outputs (``logstream devices run``) on the page.

The device pipeline writes Parquet with Spark's file sink, whose log (``_spark_metadata/``)
lists the files of every committed micro-batch; :func:`read_devices` reads only those (a file
being written is never read), with pyarrow — no Spark in the dashboard. The outputs are small
(a row per device and window, per alert, per change).

When the pipeline scores the readings (``logstream devices run --model``), ``device_windows``
carries each window's confusion matrix (``predicted_readings``, ``tp``, ``fp``, ``tn``,
``fn``, ``accuracy``): the panel then adds the model's running confusion matrix (the sums over
the committed windows) and a chart of the accuracy per window, one line per device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dash import dcc, html

from logstream.units import plural

__all__ = [
    "DevicesView",
    "accuracy_figure",
    "committed_files",
    "devices_figure",
    "devices_panel",
    "model_section",
    "read_devices",
]

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
    #: with a model: predicted_readings, tp, fp, tn, fn (int, summed over the committed
    #: windows), accuracy, precision, recall (0–1, None without labelled readings),
    #: versions (the model versions in ``predictions/``); None without a model
    model: dict[str, Any] | None = None
    #: with a model, per device: window starts (ISO) and each window's accuracy (None for a
    #: window without labelled readings)
    accuracy: dict[str, tuple[list[str], list[float | None]]] = field(default_factory=dict)


def _iso(t: Any) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


#: The confusion counts of a scored window.
CONFUSION = ("predicted_readings", "tp", "fp", "tn", "fn")


def _model_summary(windows: Any, output_dir: Path) -> dict[str, Any] | None:
    """The running confusion matrix over the windows, None when they are not scored."""
    import pyarrow.parquet as pq

    if windows.empty or "accuracy" not in windows.columns:
        return None
    out: dict[str, Any] = {k: int(windows[k].sum()) for k in CONFUSION}
    tp, fp, tn, fn = (out[k] for k in ("tp", "fp", "tn", "fn"))
    n = out["predicted_readings"]
    out["accuracy"] = (tp + tn) / n if n else None
    out["precision"] = tp / (tp + fp) if tp + fp else None
    out["recall"] = tp / (tp + fn) if tp + fn else None
    versions: set[str] = set()
    for f in committed_files(output_dir / "predictions"):
        versions |= set(pq.read_table(f, columns=["model_version"]).column(0).to_pylist())
    out["versions"] = sorted(versions)
    return out


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
            if "accuracy" in w.columns:
                accuracy = [None if a != a else float(a) for a in w["accuracy"]]  # NaN: None
                view.accuracy[device] = ([_iso(t) for t in w["window_start"]], accuracy)
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
    view.model = _model_summary(windows, out)
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


def _time(text: str | None) -> str:
    """``2015-02-11T14:55:00Z`` → ``2015-02-11 14:55:00`` (UTC, as the rest of the page)."""
    return "–" if not text else text.replace("T", " ").removesuffix("Z")


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
                _time(d["status_since"]),
                d["occupancy"] or "–",
                _time(d["last_window"]),
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
            [
                _time(a["event_time"]),
                a["device"],
                a["metric"],
                _num(a["value"]),
                _num(a["threshold"]),
            ]
            for a in view.alerts
        ],
    )
    near = _table(
        "alerts-near-changes-table",
        ["alert", "device", "metric", "room became", "at", "offset s"],
        [
            [
                _time(a["alert_time"]),
                a["device"],
                a["metric"],
                a["occupancy"],
                _time(a["changed_at"]),
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
        *model_section(view),
    ]


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def model_section(view: DevicesView) -> list[Any]:
    """With a model: its running confusion matrix (predicted rows × true columns) and the
    accuracy per window; nothing without one."""
    m = view.model
    if m is None:
        return []
    versions = ", ".join(m["versions"]) or "–"
    matrix = _table(
        "device-confusion-table",
        ["predicted \\ true", "occupied", "free"],
        [
            ["occupied", f"{m['tp']:,}", f"{m['fp']:,}"],
            ["free", f"{m['fn']:,}", f"{m['tn']:,}"],
        ],
    )
    summary = html.P(
        f"{plural(m['predicted_readings'], 'labelled reading')} in the committed windows: "
        f"accuracy {_share(m['accuracy'])}, precision {_share(m['precision'])}, "
        f"recall {_share(m['recall'])}",
        id="device-model-summary",
    )
    graph = dcc.Graph(id="graph-device-accuracy", figure=accuracy_figure(view))
    return [
        html.Div(
            [
                html.Div([html.H3(f"Occupancy model {versions}"), matrix, summary]),
                html.Div(graph),
            ],
            className="pair",
        )
    ]


def _per_device_figure(
    series: dict[str, tuple[list[Any], list[Any]]] | None,
    title: str,
    empty: str,
    **layout: Any,
) -> dict[str, Any]:
    """A line per device of ``series`` (device → (x, y)); ``empty`` as the text without one."""
    if not series:
        from logstream.dashboard.figures import empty_figure

        return empty_figure(empty, title)
    data = [
        {"type": "scatter", "mode": "lines", "name": device, "x": x, "y": y}
        for device, (x, y) in series.items()
    ]
    return {"data": data, "layout": {"title": {"text": title}, "height": 300, **layout}}


def accuracy_figure(view: DevicesView | None) -> dict[str, Any]:
    """The model's accuracy per window, one line per device."""
    return _per_device_figure(
        None if view is None else view.accuracy,
        "Occupancy model: accuracy per window, per device",
        "No scored device windows (devices run --model).",
        yaxis={"range": [0, 1.02]},
    )


def devices_figure(view: DevicesView | None) -> dict[str, Any]:
    """CO2 mean per window, one line per device."""
    return _per_device_figure(
        None if view is None else view.co2,
        "CO2 per window (mean, ppm), per device",
        "No device windows yet.",
    )


def devices_row() -> html.Div:
    """The page's devices rows: the panel, then the CO2 chart (filled by the refresh), each
    the page's width: the devices table has nine columns, the panel a model section beside
    its chart, which half a 1400 px page clipped."""
    return html.Div(
        [
            html.Div(html.Div(id="devices", className="panel"), className="grid1"),
            html.Div(
                html.Div(dcc.Graph(id="graph-devices", figure={"data": []}), className="panel"),
                className="grid1",
            ),
        ]
    )
