"""Spark Connect: logstream's commands against a remote Spark (``--remote sc://HOST:PORT``).

Spark Connect (Spark 3.4+, the way Spark 4 is used remotely) splits a Spark application in
two: a thin client builds unresolved plans and sends them over gRPC to a Spark Connect
server, which runs them on its own driver and streams the results back as Arrow batches
(Spark docs, "Spark Connect Overview"). ``logstream batch`` and ``logstream run`` take
``--remote sc://HOST:PORT`` and honour ``$SPARK_REMOTE`` as PySpark does
(:attr:`logstream.config.SparkSettings.remote`); :func:`remote_session` builds the session.

What a Connect client cannot do (no ``SparkContext``, no JVM of its own, no RDDs, no
streaming-query listener of the client's process) is asked with :func:`is_connect`, and what
logstream leaves out for that is said once, in one line, by :func:`not_through_connect`.
:mod:`logstream.connect.server` starts a server from PySpark's own jars
(``logstream connect-server``, ``make connect``).
"""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from logstream.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_PORT",
    "connect_address",
    "is_connect",
    "job_description",
    "not_through_connect",
    "remote_session",
]

#: Spark Connect's default port (``spark.connect.grpc.binding.port``).
DEFAULT_PORT = 15002
#: Seconds :func:`remote_session` waits for the server's port to accept a connection.
REACH_TIMEOUT_S = 5.0
_SAID: set[str] = set()


def connect_address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://HOST[:PORT][/;param=value…]``).

    Raises
    ------
    ConfigError
        When ``url`` is not an ``sc://`` URL with a host, or its port is not a number
        (the message names the value and the form).

    Examples
    --------
    >>> connect_address("sc://127.0.0.1:15002")
    ('127.0.0.1', 15002)
    >>> connect_address("sc://spark.example.org/;token=abc")
    ('spark.example.org', 15002)
    """
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        port = -1
    if parts.scheme != "sc" or not parts.hostname or port < 1:
        raise ConfigError(
            f"--remote {url!r} is not a Spark Connect URL: use sc://HOST:PORT "
            f"(e.g. sc://127.0.0.1:{DEFAULT_PORT}, the address `logstream connect-server` prints)"
        )
    return parts.hostname, port


def remote_session(url: str, conf: dict[str, str]) -> SparkSession:
    """A Spark Connect session to ``url`` with logstream's runtime SQL settings.

    Parameters
    ----------
    url : str
        ``sc://HOST:PORT`` (parameters after ``/;`` are passed to PySpark as they are).
    conf : dict of str to str
        :func:`logstream.session.session_conf`: the ``spark.sql.*`` keys are set on the
        remote session (UTC, ANSI, shuffle partitions, the RocksDB state store …); the
        others (driver memory, JVM options, UI, jars) are the server's own, set where it
        starts (``logstream connect-server --conf``), and are not sent.

    Returns
    -------
    pyspark.sql.SparkSession
        A ``pyspark.sql.connect.session.SparkSession`` whose time zone is UTC.

    Raises
    ------
    ConfigError
        When the URL is malformed, PySpark's Connect client is not installed, or nothing
        accepts a connection on its host and port within :data:`REACH_TIMEOUT_S`; the message
        names the address and how to start a server.
    """
    host, port = connect_address(url)
    try:
        import grpc  # noqa: F401  (PySpark's Connect client: pyspark[connect])
        import zstandard  # noqa: F401
        from google.rpc import status_pb2  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"Spark Connect needs PySpark's Connect client: pip install 'pyspark[connect]' ({exc})"
        ) from None
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(
            f"no Spark Connect server answers at {url} ({exc.strerror or exc}): start one "
            "with `logstream connect-server` (or `make connect`), or give its address"
        ) from None
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in conf.items():
        # a static SQL setting (the codegen cache's size) is the server's, like the others
        if key.startswith("spark.sql.") and spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` (a session, a DataFrame's ``sparkSession``) is a Spark Connect client
    session: it has no ``SparkContext`` and no JVM in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def not_through_connect(what: str) -> None:
    """Say once per process, in one line on standard error, that ``what`` is left out because
    it is not available through Spark Connect."""
    if what in _SAID:
        return
    _SAID.add(what)
    print(f"note: through Spark Connect, {what}", file=sys.stderr, flush=True)


def job_description(spark: Any, text: str | None) -> None:
    """Name the Spark jobs that follow in the Spark UI (``SparkContext.setJobDescription``;
    ``None`` clears it); through Spark Connect, which has no such call, the server's UI shows
    each operation's own description instead."""
    if not is_connect(spark):
        spark.sparkContext.setJobDescription(text)
