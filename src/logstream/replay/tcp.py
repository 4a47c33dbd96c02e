"""A TCP line server: the replay side of Spark's socket source.

Spark's ``socket`` source (``spark.readStream.format("socket")``) connects to a host and port
as a *client* and reads ``\\n``-terminated UTF-8 lines. :class:`TcpLineServer` listens, accepts
any number of clients, and sends every line to every connected client. A client that
disconnects (a restarted query) is dropped and the server carries on; a new client receives the
lines from the moment it connects (a socket source is not replayable).

Threads: one background thread only accepts connections and hands them over; every operation
on a client socket (send, disconnect check, close) happens in the thread that calls
:meth:`~TcpLineServer.flush`, so no socket is ever closed under another thread's feet.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time

from logstream.errors import ConfigError
from logstream.replay.reader import ENCODING, ENCODING_ERRORS
from logstream.replay.sinks import LineSink

__all__ = ["DEFAULT_HOST", "TcpLineServer", "parse_host_port"]

#: Bind address when none is given: loopback only (nothing is exposed to the network).
DEFAULT_HOST = "127.0.0.1"
_BUFFER_BYTES = 64 * 1024


def parse_host_port(spec: str, default_host: str = DEFAULT_HOST) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``localhost:9999``, ``[::1]:9999``, ``:9999``, ``9999``).

    Parameters
    ----------
    spec : str
        The address; a missing host means ``default_host``.
    default_host : str, default ``127.0.0.1``

    Returns
    -------
    tuple of (str, int)
        Host and port (0 … 65535; 0 lets the system pick a free port).

    Raises
    ------
    ConfigError
        When the port is not a number from 0 to 65535.
    """
    text = spec.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    elif ":" not in text:
        host, port_text = "", text
    else:
        raise ConfigError(f"address {spec!r}: write an IPv6 host in brackets, as in '[::1]:9999'")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"address {spec!r}: expected HOST:PORT with a port from 0 to 65535")
    return host or default_host, int(port_text)


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: unknown host ({exc.strerror})") from exc
    # IPv4 first: "localhost" must be reachable at 127.0.0.1, where Java clients look first.
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(backlog)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        return sock
    reason = last.strerror if last is not None else "no usable address"
    raise ConfigError(f"cannot listen on {host}:{port}: {reason}; choose another port")


class TcpLineServer(LineSink):
    """Serve lines to every connected TCP client.

    The socket is bound and listening when the constructor returns (see :attr:`address`).

    Parameters
    ----------
    host : str, default ``127.0.0.1``
        Address to bind; loopback by default.
    port : int, default 9999
        Port to bind; 0 picks a free one.
    wait_for_client : bool, default True
        When no client is connected, :meth:`start` and :meth:`flush` wait for one (lines are
        never sent into the void; the replay's schedule is pushed back by the wait). When
        False, lines sent with no client connected are counted in ``lines_dropped``.
    send_timeout_s : float, default 10.0
        A client that accepts no data for this long is disconnected.
    backlog : int, default 16
        Listen backlog.

    Raises
    ------
    ConfigError
        When the address cannot be bound (port in use, unknown host).
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = 9999,
        *,
        wait_for_client: bool = True,
        send_timeout_s: float = 10.0,
        backlog: int = 16,
    ) -> None:
        self.wait_for_client = wait_for_client
        self.send_timeout_s = send_timeout_s
        self._listener = _bind(host, port, backlog)
        self._listener.settimeout(0.1)
        bound = self._listener.getsockname()
        self.address: tuple[str, int] = (bound[0], bound[1])
        self._cond = threading.Condition()
        self._incoming: list[socket.socket] = []  # accepted, not yet adopted (under _cond)
        self._clients: list[socket.socket] = []  # owned by the flushing thread
        self._selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._buffer: list[str] = []
        self.clients_served = 0
        self.clients_lost = 0
        self.bytes_sent = 0
        self.lines_sent = 0
        self.lines_dropped = 0
        self._accepted = 0
        self._thread = threading.Thread(
            target=self._accept_loop, name="logstream-tcp-accept", daemon=True
        )
        self._thread.start()

    # -- accept thread -----------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # listener closed
                return
            conn.settimeout(self.send_timeout_s)
            with self._cond:
                self._incoming.append(conn)
                self._accepted += 1
                self._cond.notify_all()

    # -- flushing thread ---------------------------------------------------------------------
    def _adopt(self) -> None:
        with self._cond:
            new, self._incoming = self._incoming, []
        for conn in new:
            self._clients.append(conn)
            self._selector.register(conn, selectors.EVENT_READ)
            self.clients_served += 1

    def _drop(self, conn: socket.socket) -> None:
        if conn in self._clients:
            self._clients.remove(conn)
            self._selector.unregister(conn)
            self.clients_lost += 1
        with contextlib.suppress(OSError):
            conn.close()

    def _prune(self) -> None:
        """Drop clients that closed their end (readable with no data) or failed."""
        if not self._clients:
            return
        for key, _ in self._selector.select(timeout=0):
            conn = key.fileobj
            assert isinstance(conn, socket.socket)
            try:
                conn.setblocking(False)
                data = conn.recv(65536)  # anything a client sends is ignored
            except BlockingIOError:
                data = b"?"
            except OSError:
                data = b""
            finally:
                with contextlib.suppress(OSError):
                    conn.settimeout(self.send_timeout_s)
            if not data:
                self._drop(conn)

    def _wait_for_any_client(self) -> float:
        """Block until a client is connected or the server stops; return the seconds waited."""
        started = time.monotonic()
        with self._cond:
            while not self._incoming and not self._stopping.is_set():
                self._cond.wait(0.2)
        self._adopt()
        return time.monotonic() - started

    @property
    def clients_connected(self) -> int:
        """Clients connected now (including ones accepted but not yet sent to)."""
        with self._cond:
            return len(self._clients) + len(self._incoming)

    def wait_for_clients(self, count: int = 1, timeout_s: float | None = None) -> bool:
        """Wait until ``count`` clients have ever connected; return whether they did in time."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._accepted < count:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.2 if remaining is None else min(0.2, remaining))
        return True

    def start(self) -> None:
        """Wait for the first client when ``wait_for_client`` is set."""
        self._adopt()
        if self.wait_for_client and not self._clients:
            self._wait_for_any_client()

    def write(self, line: str) -> None:
        """Buffer ``line`` (sent by the next :meth:`flush`)."""
        self._buffer.append(line)

    def flush(self) -> float:
        """Send the buffered lines to every connected client.

        Returns
        -------
        float
            Seconds spent waiting for a client (0.0 when one was connected).
        """
        if not self._buffer:
            return 0.0
        data = ("\n".join(self._buffer) + "\n").encode(ENCODING, ENCODING_ERRORS)
        count = len(self._buffer)
        self._buffer.clear()
        waited = 0.0
        while True:
            self._adopt()
            self._prune()
            if not self._clients:
                if not self.wait_for_client or self._stopping.is_set():
                    self.lines_dropped += count
                    return waited
                waited += self._wait_for_any_client()
                continue
            delivered = 0
            for conn in list(self._clients):
                try:
                    conn.sendall(data)
                    delivered += 1
                except OSError:  # reset, broken pipe, timeout
                    self._drop(conn)
            if delivered or not self.wait_for_client:
                break
        if delivered:
            self.lines_sent += count
            self.bytes_sent += len(data)
        else:
            self.lines_dropped += count
        return waited

    def stop(self) -> None:
        """Ask waits to end (safe from any thread, e.g. a signal handler)."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Send what is buffered, end every connection (clients see end of stream), stop."""
        try:
            self.flush()
        finally:
            self.stop()
            self._thread.join(timeout=2.0)
            with contextlib.suppress(OSError):
                self._listener.close()
            self._adopt()
            for conn in list(self._clients):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                with contextlib.suppress(OSError):
                    conn.close()
                self._selector.unregister(conn)
            self._clients.clear()
            self._selector.close()

    def status(self) -> str:
        """``N client(s) on HOST:PORT``."""
        n = len(self._clients)
        return f"{n} client{'s' if n != 1 else ''} on {self.address[0]}:{self.address[1]}"

    def info(self) -> dict[str, object]:
        """Address and client/line counters for the replay summary."""
        return {
            "address": f"{self.address[0]}:{self.address[1]}",
            "clients_served": self.clients_served,
            "clients_lost": self.clients_lost,
            "lines_sent": self.lines_sent,
            "lines_dropped": self.lines_dropped,
            "bytes_sent": self.bytes_sent,
        }
