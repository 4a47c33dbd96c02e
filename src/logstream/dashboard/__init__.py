"""Live dashboard: what the stream knows, on a web page that refreshes itself.

A Plotly Dash app that reads only the serving store (:mod:`logstream.serving`) over read-only
connections; no Spark in the web process. :func:`serve_dashboard` serves it until Ctrl-C
(``logstream dashboard``); :func:`start_dashboard_thread` serves it from a background thread
and returns a stoppable :class:`DashboardServer` (waitress, behind
:mod:`logstream.dashboard.guard`: allowed hosts, authentication, security headers). The
queries are in
:mod:`logstream.dashboard.data` (usable without a browser), the page in
:mod:`logstream.dashboard.layout` and :mod:`logstream.dashboard.figures`.
"""

from logstream.dashboard.app import create_app
from logstream.dashboard.data import Filters, Snapshot, read_snapshot, store_path_from_url
from logstream.dashboard.guard import is_loopback
from logstream.dashboard.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DashboardServer,
    serve_dashboard,
    start_dashboard_thread,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DashboardServer",
    "Filters",
    "Snapshot",
    "create_app",
    "is_loopback",
    "read_snapshot",
    "serve_dashboard",
    "start_dashboard_thread",
    "store_path_from_url",
]
