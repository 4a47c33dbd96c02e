"""What the dashboard's web server lets through: host names, credentials, response headers.

:class:`Guard` is a WSGI middleware around the whole Dash app, so every route passes it: the
page, its callbacks and assets, and ``/metrics/prometheus/``.

* **Allowed hosts.** A request whose ``Host`` header names another host than the address the
  dashboard is bound to, ``localhost`` and the loopback addresses, or a name added with
  ``--allowed-host``, is answered 400 and reaches nothing: a page of another site whose name
  its DNS server points at this machine (DNS rebinding) cannot read the dashboard or its
  metrics. A reverse proxy that passes its own public name needs that name added.
* **Authentication.** With :class:`Credentials` (from the environment,
  :func:`credentials_from_env`: ``LOGSTREAM_DASHBOARD_PASSWORD``, and the user
  ``LOGSTREAM_DASHBOARD_USER`` or ``logstream``), every request needs HTTP basic
  authentication, compared in constant time (:func:`hmac.compare_digest`); any other gets 401.
  :func:`check_exposure` refuses to listen on an address that other machines reach without
  credentials, unless ``--no-auth`` says something in front of the dashboard authenticates.
* **Headers** on every response that passes: ``X-Frame-Options: DENY`` and the CSP
  ``frame-ancestors 'none'`` (no page of another site can frame the dashboard),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``.
* **No exception text.** An exception the app lets out is logged with its traceback, and the
  visitor gets a plain 500 (Flask, without debug, shows none either).

Why not dash-auth (Plotly's): its 2.3.0 (its latest release) parses the JSON body of a
callback request before it checks the credentials, answers a malformed ``Authorization``
header with a 500, compares passwords with ``==``, and logs a warning at every request of an
app without a Flask secret key; and host names and headers need a middleware anyway. Basic
authentication is a few lines of the standard library (``base64``, ``hmac``).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logstream.errors import ConfigError

__all__ = [
    "PASSWORD_ENV",
    "SECURITY_HEADERS",
    "USER_ENV",
    "Credentials",
    "Guard",
    "allowed_hosts",
    "check_allowed_host",
    "check_exposure",
    "credentials_from_env",
    "is_loopback",
]

log = logging.getLogger(__name__)

#: The environment variable whose value is the dashboard's password (never a command-line
#: option: every user of the machine can read a command line).
PASSWORD_ENV = "LOGSTREAM_DASHBOARD_PASSWORD"
#: The environment variable of the user name, ``logstream`` when unset.
USER_ENV = "LOGSTREAM_DASHBOARD_USER"
DEFAULT_USER = "logstream"
#: Headers of every response.
SECURITY_HEADERS = (
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)
_REPLACED = {name.lower() for name, _ in SECURITY_HEADERS}
#: Names every dashboard answers to: this machine's own.
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("", "0.0.0.0", "::")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")
#: A ``Host`` header: a name or an IPv4 address, or an IPv6 address in brackets, and a port.
_HOST_HEADER = re.compile(r"^(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::\d{1,5})?$")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine.

    Examples
    --------
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Credentials:
    """The user and password HTTP basic authentication asks for."""

    user: str
    password: str = field(repr=False)

    def accept(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries these credentials (compared in
        constant time; a malformed header is no).

        Examples
        --------
        >>> c = Credentials("logstream", "s3cret")
        >>> c.accept("Basic " + base64.b64encode(b"logstream:s3cret").decode())
        True
        >>> c.accept("Basic !!"), c.accept("Bearer s3cret"), c.accept(None)
        (False, False, False)
        """
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        user, colon, password = text.partition(":")
        same_user = hmac.compare_digest(user.encode(), self.user.encode())
        same_password = hmac.compare_digest(password.encode(), self.password.encode())
        return bool(colon) and same_user and same_password


def credentials_from_env(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials :data:`PASSWORD_ENV` and :data:`USER_ENV` give (None without a
    password)."""
    env = os.environ if environ is None else environ
    password = env.get(PASSWORD_ENV, "")
    if not password:
        return None
    return Credentials(env.get(USER_ENV, "") or DEFAULT_USER, password)


def check_exposure(host: str, credentials: Credentials | None, no_auth: bool) -> None:
    """Refuse to listen on an address other machines reach without credentials, unless
    ``no_auth`` (``--no-auth``) says so.

    Raises
    ------
    ConfigError
        Naming the address and the two ways on.
    """
    if is_loopback(host) or credentials is not None or no_auth:
        return
    raise ConfigError(
        f"--host {host} lets other machines reach the dashboard, which then needs a password: "
        f"set {PASSWORD_ENV} (HTTP basic authentication, user {DEFAULT_USER} or ${USER_ENV}), "
        "or give --no-auth if a reverse proxy in front of it authenticates"
    )


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``[::1]:8050`` → ``::1``), lower case, an IP address
    in its short form; None when the header is not a host and a port.

    Examples
    --------
    >>> _host_name("Example.ORG:8050"), _host_name("[0:0::1]"), _host_name("a@127.0.0.1")
    ('example.org', '::1', None)
    """
    match = _HOST_HEADER.match(value.strip().lower())
    if match is None:
        return None
    host = match["v6"] or match["name"]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None if match["v6"] else host.rstrip(".")


def check_allowed_host(value: str) -> str:
    """An ``--allowed-host``: a host name or an IP address, as a ``Host`` header names it.

    Raises
    ------
    ConfigError
        When it is not one (a URL, a path, a port).

    Examples
    --------
    >>> check_allowed_host("Dash.Example.org"), check_allowed_host("[::1]")
    ('dash.example.org', '::1')
    """
    name = value.strip().lower().strip("[]")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if len(name) > 253 or not _HOST_NAME.match(name):
        raise ConfigError(
            f"--allowed-host {value!r} is not a host name: give the name only, without "
            "scheme, port or path (e.g. --allowed-host dash.example.org)"
        )
    return name.rstrip(".")


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names a dashboard bound to ``bound`` answers to: that address (unless it is
    a wildcard such as ``0.0.0.0``), this machine's loopback names, and ``extra``.

    Examples
    --------
    >>> sorted(allowed_hosts("0.0.0.0", ["dash.example.org"]))
    ['127.0.0.1', '::1', 'dash.example.org', 'localhost']
    """
    names = {*_LOOPBACK_NAMES, *(check_allowed_host(h) for h in extra)}
    if bound.strip("[]") not in _WILDCARDS:
        try:
            names.add(check_allowed_host(bound))
        except ConfigError:  # a name the resolver takes and a Host header cannot carry
            names.add(bound.lower())
    return frozenset(names)


StartResponse = Callable[..., Any]


class Guard:
    """The WSGI middleware of the module's docstring.

    Parameters
    ----------
    app : WSGI application
        The dashboard (its Flask server).
    hosts : frozenset of str
        The host names it answers to (:func:`allowed_hosts`).
    credentials : Credentials, optional
        When given, every request must carry them.
    """

    def __init__(
        self, app: Any, hosts: frozenset[str], credentials: Credentials | None = None
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.credentials = credentials

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        """Answer 400 for a foreign host and 401 without the credentials, else the app's
        response with :data:`SECURITY_HEADERS`."""
        host = _host_name(str(environ.get("HTTP_HOST") or ""))
        if host is None or host not in self.hosts:
            return _plain(
                start_response,
                "400 Bad Request",
                "This dashboard does not answer to that host name (--allowed-host adds one).\n",
            )
        if self.credentials is not None and not self.credentials.accept(
            environ.get("HTTP_AUTHORIZATION")
        ):
            challenge = ("WWW-Authenticate", 'Basic realm="logstream", charset="UTF-8"')
            return _plain(start_response, "401 Unauthorized", "Log in.\n", [challenge])

        def secured(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() not in _REPLACED]
            return start_response(status, kept + list(SECURITY_HEADERS), exc_info)

        try:
            return self.app(environ, secured)
        except Exception:
            log.exception(
                "dashboard: %s %s failed", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
            )
            return _plain(
                start_response,
                "500 Internal Server Error",
                "The dashboard failed to answer (its log has the error).\n",
                exc_info=sys.exc_info(),
            )


def _plain(
    start_response: StartResponse,
    status: str,
    text: str,
    headers: list[tuple[str, str]] | None = None,
    exc_info: Any = None,
) -> list[bytes]:
    body = text.encode()
    start_response(
        status,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            *(headers or []),
            *SECURITY_HEADERS,
        ],
        exc_info,
    )
    return [body]
