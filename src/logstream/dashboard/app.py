"""The Dash application: its layout and callbacks over the serving store.

The web process reads only the serving store, over read-only connections
(:func:`logstream.dashboard.data.read_snapshot`); it never imports Spark. Every asset is
served by the process itself (``serve_locally=True``, no external script or style sheet, the
style sheet is inlined), so the page works without internet access. An unexpected error of a
refresh is a line in the banner that names no exception (the log has it). Serving it is
:mod:`logstream.dashboard.server`'s (waitress, behind :mod:`logstream.dashboard.guard`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dash
from dash import Dash, Input, Output, State, html

from logstream.dashboard.data import DimensionTraffic, Filters, Snapshot, read_snapshot
from logstream.dashboard.devices import (
    devices_figure,
    devices_panel,
    devices_row,
    read_devices,
)
from logstream.dashboard.explore import explore_section, register_explore
from logstream.dashboard.figures import (
    bytes_figure,
    dimension_figure,
    errors_figure,
    health_figure,
    requests_figure,
    sessions_figure,
    visitors_figure,
)
from logstream.dashboard.layout import (
    INDEX_HTML,
    alerts_panel,
    banner,
    bots_panel,
    build_layout,
    examples_tables,
    goaccess_panel,
    health_table,
    kpi_cards,
    reference_panel,
    sessions_panel,
    top_clients_panel,
    trending_panel,
)
from logstream.dashboard.shared import SharedResults
from logstream.errors import ConfigError
from logstream.monitoring.prometheus import add_metrics_route
from logstream.serving import store_location
from logstream.serving.postgres import redact_url

__all__ = [
    "StoreWatch",
    "create_app",
    "refresh_outputs",
    "render",
    "safe_refresh",
]

log = logging.getLogger(__name__)

#: Spark UI port on the pipeline's host (Spark's default ``spark.ui.port``).
SPARK_UI_PORT = 4040


def _spark_ui_for_request() -> str:
    """``http://<host the browser used>:4040``: Spark's UI beside the dashboard."""
    import flask

    host = "127.0.0.1"
    if flask.has_request_context():
        host = urlsplit("//" + flask.request.host).hostname or host
    return _origin(host, SPARK_UI_PORT)


def _origin(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets.

    Examples
    --------
    >>> _origin("127.0.0.1", 8050), _origin("::1", 4040)
    ('http://127.0.0.1:8050', 'http://[::1]:4040')
    """
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# -- the store's state, logged once --------------------------------------------------------


class StoreWatch:
    """Logs what the page says about its store when it changes, not at every refresh.

    The page polls every second or two, from every open tab: a store that cannot be opened
    or read is logged once (a warning naming the store and the error) when it becomes so,
    and once more when it is readable again; an unexpected error of a refresh is logged
    with its traceback once per distinct error.
    """

    def __init__(self, store: Path | str) -> None:
        self.store = redact_url(str(store))
        self._lock = threading.Lock()
        self._state: str | None = None
        self._failure: str | None = None

    def observe(self, snap: Snapshot) -> None:
        """Log ``snap``'s state when it differs from the last one seen."""
        state = snap.state if snap.state in ("missing", "unreadable") else "readable"
        with self._lock:
            previous, self._state = self._state, state
            self._failure = None
        if state == previous:
            return
        if state == "unreadable":
            log.warning("dashboard: %s", snap.message)
        elif state == "missing":
            log.info("dashboard: %s", snap.message)
        elif previous in ("unreadable", "failed"):
            log.warning("dashboard: the store %s is readable again", self.store)

    def failed(self, exc: BaseException) -> None:
        """Log an unexpected error of a refresh (with its traceback) unless it is the same
        as the last one."""
        text = f"{type(exc).__name__}: {exc}"
        with self._lock:
            previous, self._failure = self._failure, text
            self._state = "failed"
        if text != previous:
            log.error("dashboard refresh of the store %s failed", self.store, exc_info=exc)


# -- the app ---------------------------------------------------------------------------------

_OUTPUTS = (
    ("banner", "children"),
    ("banner", "className"),
    ("updated", "children"),
    ("seen", "data"),
    ("kpis", "children"),
    ("trending", "children"),
    ("graph-requests", "figure"),
    ("graph-bytes", "figure"),
    ("graph-errors", "figure"),
    ("graph-visitors", "figure"),
    ("graph-health", "figure"),
    ("late", "children"),
    ("quarantine", "children"),
    ("health", "children"),
    ("alerts", "children"),
    ("top-clients", "children"),
    ("graph-sessions", "figure"),
    ("sessions", "children"),
    ("graph-sections", "figure"),
    ("graph-agents", "figure"),
    ("reference", "children"),
    ("goaccess", "children"),
    ("bots", "children"),
    ("section-filter", "options"),
    ("agent-filter", "options"),
)
#: What a refresh sends for the outputs after ``seen`` to leave them as they are (the store
#: has no new data and the controls did not change, or the refresh failed).
_UNCHANGED = (dash.no_update,) * (len(_OUTPUTS) - 4)


def _shown_path(store: Path | str) -> Path | str:
    """A store file as the page names it: relative to the working directory when it is
    under it (``out/demo/logstream.db``, as ``make run`` says it), else as it is."""
    if isinstance(store, Path):
        try:
            return store.absolute().relative_to(Path.cwd())
        except ValueError:
            return store
    return store


def refresh_outputs(
    store_path: Path | str,
    time_range: str | None,
    url_prefix: str | None,
    status_classes: list[str] | None,
    seen: Any = None,
    *,
    top: int | None = None,
    sections: list[str] | None = None,
    agent_classes: list[str] | None = None,
    watch: StoreWatch | None = None,
    zone: str | None = None,
    shared: SharedResults | None = None,
) -> tuple[Any, ...]:
    """Everything one refresh sends to the page (the body of the Dash callback).

    Parameters
    ----------
    store_path : Path or str
        The serving store.
    time_range, url_prefix, status_classes
        Values of the controls (see :meth:`Filters.build`).
    seen : object, optional
        What the previous refresh returned as its ``seen`` output; when the store's version
        and the controls are unchanged the charts and tables are left as they are
        (``dash.no_update``).
    top : int, optional
        Trending pages listed (default: the pipeline's ``--top`` recorded in the store).
    sections, agent_classes : list of str, optional
        Sections and agent classes drawn in the reference-data charts (None or empty: all).
    watch : StoreWatch, optional
        Told the state of the store at each refresh (it logs the changes).
    zone : {"log", "utc"}, optional
        The zone of the event times shown (:attr:`Filters.zone`; default: the log's offset).
    shared : SharedResults, optional
        The dashboard process's results (:mod:`logstream.dashboard.shared`): the store is
        read and the panels drawn once per store version and set of controls, whichever
        page asks first; None: this refresh reads and draws everything.

    Returns
    -------
    tuple
        One value per element of ``_OUTPUTS``: banner children and class, update time,
        ``seen`` key, KPI cards, trending panel, five figures, late / quarantine / health
        panels, alerts and top-clients panels, the sessions figure and panel, the section
        and agent-class figures, the reference panel, and the options of the section and
        agent-class filters.
    """
    filters = Filters.build(time_range, url_prefix, status_classes, sections, agent_classes, zone)
    snap = read_snapshot(store_path, filters, top=top, shared=shared)
    if watch is not None:
        watch.observe(snap)
    key = [snap.state, repr(snap.version), filters.time_range, filters.url_prefix]
    key.append(",".join(filters.status_classes))
    key += [",".join(filters.sections), ",".join(filters.agent_classes), filters.zone]
    children, cls = banner(snap)
    # the page is one snapshot: the header names its micro-batch, as the explore section does
    shown = snap.read_at if snap.batch is None else f"{snap.read_at} · micro-batch {snap.batch}"
    head = (children, cls, shown, key)
    if seen == key and snap.state == "ok":
        return head + _UNCHANGED
    if shared is None or snap.state != "ok":
        return head + render(snap)
    # the key names the store version and every control: one drawing per micro-batch for
    # every page showing the same controls
    return head + shared.get(("render", str(store_path), top, *key), lambda: render(snap))


def safe_refresh(
    store_path: Path | str,
    time_range: str | None,
    url_prefix: str | None,
    status_classes: list[str] | None,
    seen: Any = None,
    *,
    top: int | None = None,
    sections: list[str] | None = None,
    agent_classes: list[str] | None = None,
    watch: StoreWatch | None = None,
    zone: str | None = None,
    shared: SharedResults | None = None,
) -> tuple[Any, ...]:
    """:func:`refresh_outputs`, but an unexpected error becomes a message in the banner (the
    page never shows a stack trace or the error's text; the log has it, once per distinct
    error when ``watch`` is given) and the panels keep their content."""
    try:
        return refresh_outputs(
            store_path,
            time_range,
            url_prefix,
            status_classes,
            seen,
            top=top,
            sections=sections,
            agent_classes=agent_classes,
            watch=watch,
            zone=zone,
            shared=shared,
        )
    except Exception as exc:
        if watch is None:
            log.exception("dashboard refresh failed")
        else:
            watch.failed(exc)
        message = html.P(  # the error's text is in the log, not on the page
            f"Could not refresh the store {redact_url(str(store_path))} (an unexpected error: "
            "the dashboard's log has it); retrying at the next refresh."
        )
        return ([message], "banner unreadable", "–", None, *_UNCHANGED)


def render(snap: Snapshot) -> tuple[Any, ...]:
    """KPI cards, trending panel, figures and tables of a snapshot (``_OUTPUTS[4:]``)."""
    late, bad = examples_tables(snap)
    return (
        kpi_cards(snap),
        trending_panel(snap),
        requests_figure(snap),
        bytes_figure(snap),
        errors_figure(snap),
        visitors_figure(snap),
        health_figure(snap),
        late,
        bad,
        health_table(snap),
        alerts_panel(snap),
        top_clients_panel(snap),
        sessions_figure(snap),
        sessions_panel(snap),
        dimension_figure(snap, "sections"),
        dimension_figure(snap, "agents"),
        reference_panel(snap),
        goaccess_panel(snap),
        bots_panel(snap),
        _options(snap.sections),
        _options(snap.agents),
    )


def _options(d: DimensionTraffic | None) -> list[dict[str, str]]:
    """Dropdown options: the keys of a dimension in the range, by requests."""
    return [] if d is None else [{"label": k, "value": k} for k in d.requests]


def create_app(
    store_path: Path | str,
    *,
    refresh_s: float = 2.0,
    top: int | None = None,
    spark_ui_url: str | None = None,
    devices_dir: Path | str | None = None,
) -> Dash:
    """Build the Dash app reading ``store_path``.

    Parameters
    ----------
    store_path : Path or str
        The serving store in any form ``--store`` takes (:func:`logstream.serving.
        store_location`): ``sqlite:///relative.db``, ``sqlite:////absolute.db``, a plain path
        (the SQLite file may not exist yet: the page waits for it), or a ``postgresql://``
        URL. A reference that cannot name a store is not an exception here: the page says
        why, and the log says it once.
    refresh_s : float
        Seconds between refreshes of the page (1–2 s is the intended range).
    top : int, optional
        Trending pages listed (default: the pipeline's ``--top`` recorded in the store).
    spark_ui_url : str, optional
        Link to Spark's UI; default ``http://<host of the page>:4040``.
    devices_dir : Path or str, optional
        Output directory of ``logstream devices run``: adds the devices panel
        (:mod:`logstream.dashboard.devices`).
    """
    watch = StoreWatch(store_path)
    try:  # the SQLite file or the PostgreSQL URL, read as the pipeline reads --store
        store_path = store_location(store_path)
    except ConfigError:  # kept as given: every refresh shows why (read_snapshot)
        store_path = str(store_path)
        watch.observe(read_snapshot(store_path))  # logged now, even before a page is open
    app = Dash(
        __name__,
        serve_locally=True,
        external_scripts=[],
        external_stylesheets=[],
        include_assets_files=False,
        title="logstream — live",
        update_title=None,
        index_string=INDEX_HTML,
    )
    refresh_ms = max(250, int(refresh_s * 1000))
    shared = SharedResults()  # one read and drawing per micro-batch for every open page
    # Prometheus scrapes the same store at /metrics/prometheus/ (logstream.monitoring.prometheus)
    add_metrics_route(app.server, store_path)

    def layout() -> Any:
        label = redact_url(str(_shown_path(store_path)))
        page = build_layout(refresh_ms, spark_ui_url or _spark_ui_for_request(), label)
        page.children[1].children.insert(3, explore_section())  # after the KPIs
        if devices_dir is not None:
            page.children[1].children.insert(3, devices_row())  # after the KPIs
        return page

    app.layout = layout
    register_explore(app, store_path)

    if devices_dir is not None:

        @app.callback(
            Output("devices", "children"),
            Output("graph-devices", "figure"),
            Input("tick", "n_intervals"),
        )
        def refresh_devices(_n: int) -> tuple[Any, Any]:
            try:
                view = read_devices(devices_dir)
            except Exception as exc:  # a half-written log: the next refresh reads it whole
                log.warning("devices panel: %s", exc)
                return dash.no_update, dash.no_update
            return devices_panel(view), devices_figure(view)

    _register_refresh(app, store_path, top, watch, shared)
    return app


def _register_refresh(
    app: Dash,
    store_path: Path | str,
    top: int | None,
    watch: StoreWatch,
    shared: SharedResults,
) -> None:
    """The page's refresh callback (:func:`safe_refresh` on every tick and control change),
    and the watchdog that turns its timer back on."""

    @app.callback(
        [Output(i, p) for i, p in _OUTPUTS],
        Input("tick", "n_intervals"),
        Input("range", "value"),
        Input("url-prefix", "value"),
        Input("status-filter", "value"),
        Input("section-filter", "value"),
        Input("agent-filter", "value"),
        Input("zone", "value"),
        State("seen", "data"),
        # no tick while a refresh runs: on a loaded machine a refresh that outlasts the
        # period would otherwise be superseded by the next tick's, again and again, and the
        # page would never change (Dash drops a callback's older pending result)
        running=[(Output("tick", "disabled"), True, False)],
    )
    def refresh(
        _n: int,
        time_range: str,
        url_prefix: str,
        classes: list[str],
        sections: list[str] | None,
        agent_classes: list[str] | None,
        zone: str | None,
        seen: Any,
    ) -> tuple[Any, ...]:
        return safe_refresh(
            store_path,
            time_range,
            url_prefix,
            classes,
            seen,
            top=top,
            sections=sections,
            agent_classes=agent_classes,
            watch=watch,
            zone=zone,
            shared=shared,
        )

    # the refresh timer back on after a request that never got a response (layout.WATCHDOG_MS)
    app.clientside_callback(
        "function(n) { return false; }",
        Output("tick", "disabled", allow_duplicate=True),
        Input("tick-watchdog", "n_intervals"),
        prevent_initial_call=True,
    )
