"""Serving the dashboard: waitress, a production WSGI server, behind :class:`~logstream.
dashboard.guard.Guard`; blocking (``logstream dashboard``) or from a background thread.

`waitress <https://docs.pylonsproject.org/projects/waitress/>`_ serves the Dash app with a fixed
pool of :data:`THREADS` threads (a request beyond them waits in its queue), at most
:data:`CONNECTION_LIMIT` open connections, request bodies up to :data:`MAX_BODY_BYTES` and
request lines and headers up to :data:`MAX_HEADER_BYTES` (larger ones get 413 or 431 and
reach nothing), idle connections closed after :data:`CHANNEL_TIMEOUT_S`, no traceback in a
response and no ``X-Forwarded-*`` header believed. Before the app, the guard answers 400 to
a foreign ``Host``, 401 without the credentials when there are some, and adds the security
headers to every response.

:func:`serve_dashboard` blocks until Ctrl-C (SIGINT); :func:`start_dashboard_thread` returns a
:class:`DashboardServer` whose :meth:`~DashboardServer.stop` shuts it down. The listening
socket is bound here (one socket, the address family of ``host``), so a port in use is a
:class:`~logstream.errors.ConfigError` naming it.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waitress import wasyncore
from waitress.server import create_server

from logstream.dashboard.app import _origin, create_app
from logstream.dashboard.guard import (
    PASSWORD_ENV,
    Credentials,
    Guard,
    allowed_hosts,
    check_exposure,
    is_loopback,
)
from logstream.errors import ConfigError

__all__ = [
    "CONNECTION_LIMIT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "THREADS",
    "DashboardServer",
    "WsgiServer",
    "serve_dashboard",
    "start_dashboard_thread",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
#: Threads answering requests (a page's refresh, a scan of the events: one each).
THREADS = 4
#: Open connections at most; past it, new ones wait in the socket's backlog.
CONNECTION_LIMIT = 100
#: The largest request body: a callback's JSON is a few kilobytes, a filter at most 10,000
#: characters.
MAX_BODY_BYTES = 1 << 20
#: The largest request line and headers: a shared view's URL carries its filter.
MAX_HEADER_BYTES = 64 << 10
#: Seconds an idle connection is kept open.
CHANNEL_TIMEOUT_S = 60


class WsgiServer:
    """A waitress server on one bound socket, served by :meth:`serve_forever` until
    :meth:`shutdown`.

    Parameters
    ----------
    app : WSGI application
        What it serves.
    sock : socket.socket
        A bound socket (waitress listens on it and closes it).
    """

    def __init__(self, app: Any, sock: socket.socket) -> None:
        self._map: dict[int, Any] = {}
        self.server = create_server(
            app,
            map=self._map,
            sockets=[sock],
            threads=THREADS,
            connection_limit=CONNECTION_LIMIT,
            max_request_body_size=MAX_BODY_BYTES,
            max_request_header_size=MAX_HEADER_BYTES,
            channel_timeout=CHANNEL_TIMEOUT_S,
            expose_tracebacks=False,
            clear_untrusted_proxy_headers=True,
            asyncore_use_poll=True,
            ident="logstream",
        )
        self.port = int(self.server.effective_port)
        self._stop = threading.Event()
        self._closed = threading.Lock()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`shutdown` (its effect within ``poll_interval`` seconds) or
        Ctrl-C; then close the socket and the threads."""
        try:
            while not self._stop.is_set() and self._map:
                wasyncore.loop(timeout=poll_interval, map=self._map, use_poll=True, count=1)
        finally:
            self.server_close()

    def shutdown(self) -> None:
        """Make :meth:`serve_forever` return."""
        self._stop.set()

    def server_close(self) -> None:
        """Close the socket and every connection, stop the threads (idempotent)."""
        if not self._closed.acquire(blocking=False):
            return
        self.server.task_dispatcher.shutdown(timeout=2)
        wasyncore.close_all(self._map, ignore_all=True)


@dataclass
class DashboardServer:
    """A dashboard served from a background thread; :meth:`stop` shuts it down.

    Attributes
    ----------
    host : str
        Bound address.
    port : int
        Bound port (the real one when 0 was asked).
    url : str
        ``http://host:port/``.
    """

    server: WsgiServer
    thread: threading.Thread
    host: str
    port: int
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        """Address of the page."""
        return _origin(self.host, self.port) + "/"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and release the port (idempotent)."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.server.shutdown()
        self.thread.join(timeout)
        self.server.server_close()

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bind(app: Any, host: str, port: int) -> WsgiServer:
    """Bind the listening socket ourselves: one socket, and a refusal as a ConfigError."""
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"port {port} is not a TCP port: use 1–65535 (e.g. --port 8050), or 0 for any free port"
        )
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        return WsgiServer(app, sock)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): pick another --port "
            "(e.g. --port 8051) or --host"
        ) from exc


def _listen(
    store_path: Path | str,
    host: str,
    port: int,
    *,
    allowed: Sequence[str] = (),
    credentials: Credentials | None = None,
    no_auth: bool = False,
    **options: Any,
) -> WsgiServer:
    """The dashboard of ``store_path`` (``options``: as :func:`~logstream.dashboard.app.
    create_app`) behind its guard, bound to ``host``:``port``, not serving yet; a warning
    when other machines can reach it without a password.

    Raises
    ------
    ConfigError
        An address other machines reach without ``credentials`` or ``no_auth``
        (:func:`~logstream.dashboard.guard.check_exposure`), a bad ``--allowed-host``, a
        port out of range or in use.
    """
    check_exposure(host, credentials, no_auth)
    hosts = allowed_hosts(host, allowed)
    # waitress says "Task queue depth is N" whenever a request waits for a thread: pages that
    # poll every second or two would fill the log (and a run's terminal) with it
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    app = create_app(store_path, **options)
    server = _bind(Guard(app.server, hosts, credentials), host, port)
    _warn_if_exposed(host, credentials)
    return server


def _warn_if_exposed(host: str, credentials: Credentials | None) -> str | None:
    if is_loopback(host) or credentials is not None:
        return None
    message = (
        f"warning: the dashboard listens on {host}, reachable from other machines, without "
        f"authentication (--no-auth): set {PASSWORD_ENV} unless a reverse proxy in front of "
        "it authenticates"
    )
    print(message, file=sys.stderr)
    return message


def start_dashboard_thread(
    store_path: Path | str,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    refresh_s: float = 2.0,
    top: int | None = None,
    spark_ui_url: str | None = None,
    allowed: Sequence[str] = (),
    credentials: Credentials | None = None,
    no_auth: bool = False,
) -> DashboardServer:
    """Serve the dashboard from a daemon thread and return at once.

    Parameters
    ----------
    store_path : Path or str
        The serving store.
    host : str
        Address to bind; one that other machines reach needs ``credentials`` or
        ``no_auth``.
    port : int
        Port; 0 picks a free one (see :attr:`DashboardServer.port`).
    refresh_s, top, spark_ui_url
        As :func:`~logstream.dashboard.app.create_app`.
    allowed : sequence of str
        Host names it answers to besides ``host`` and this machine's (``--allowed-host``).
    credentials : Credentials, optional
        HTTP basic authentication for every request.
    no_auth : bool
        Listen on an address other machines reach without credentials.

    Returns
    -------
    DashboardServer
        Call :meth:`DashboardServer.stop` (or use it as a context manager) to stop it.

    Raises
    ------
    ConfigError
        As :func:`_listen`.
    """
    server = _listen(
        store_path,
        host,
        port,
        allowed=allowed,
        credentials=credentials,
        no_auth=no_auth,
        refresh_s=refresh_s,
        top=top,
        spark_ui_url=spark_ui_url,
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="logstream-dashboard"
    )
    thread.daemon = True
    thread.start()
    return DashboardServer(server=server, thread=thread, host=host, port=server.port)


def serve_dashboard(
    store_path: Path | str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    refresh_s: float = 2.0,
    top: int | None = None,
    spark_ui_url: str | None = None,
    on_ready: Any = None,
    devices_dir: Path | str | None = None,
    allowed: Sequence[str] = (),
    credentials: Credentials | None = None,
    no_auth: bool = False,
) -> None:
    """Serve the dashboard in this thread until Ctrl-C (``logstream dashboard``).

    Parameters
    ----------
    store_path, host, port, refresh_s, top, spark_ui_url, allowed, credentials, no_auth
        As :func:`start_dashboard_thread` (default port 8050).
    on_ready : callable, optional
        Called with the page's URL once the port is bound.
    devices_dir : Path or str, optional
        As :func:`~logstream.dashboard.app.create_app`.

    Raises
    ------
    ConfigError
        As :func:`_listen`.
    """
    server = _listen(
        store_path,
        host,
        port,
        allowed=allowed,
        credentials=credentials,
        no_auth=no_auth,
        refresh_s=refresh_s,
        top=top,
        spark_ui_url=spark_ui_url,
        devices_dir=devices_dir,
    )
    if on_ready is not None:
        on_ready(_origin(host, server.port) + "/")
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
