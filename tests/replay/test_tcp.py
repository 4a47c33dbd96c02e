"""The TCP line server end to end on loopback: exact lines, in order, on time; disconnects."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from logstream.errors import ConfigError
from logstream.replay import (
    Replayer,
    ReplayOptions,
    TcpLineServer,
    iter_file_records,
    iter_lines,
    parse_host_port,
)
from tests.conftest import NASA_JUL_2000, data_file

JUL_2000_SPAN_S = 2034  # 01/Jul/1995:00:00:01 … 00:33:55


class Client(threading.Thread):
    """Connects, reads until the server closes (or ``stop_after`` lines), timing each line."""

    def __init__(self, address: tuple[str, int], stop_after: int | None = None) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(address, timeout=30)
        self.stop_after = stop_after
        self.lines: list[str] = []
        self.first_at = self.last_at = 0.0

    def run(self) -> None:
        buffer = b""
        with self.sock:
            while self.stop_after is None or len(self.lines) < self.stop_after:
                data = self.sock.recv(65536)
                if not data:
                    break
                now = time.monotonic()
                buffer += data
                *complete, buffer = buffer.split(b"\n")
                if complete and not self.lines:
                    self.first_at = now
                if complete:
                    self.last_at = now
                self.lines.extend(line.decode() for line in complete)


@pytest.fixture(scope="module")
def jul_2000():
    return data_file(NASA_JUL_2000)


def test_a_client_gets_exactly_the_files_lines_in_order_on_schedule(jul_2000):
    speedup = JUL_2000_SPAN_S / 2.0  # two seconds of wall time
    server = TcpLineServer("127.0.0.1", 0)
    client = Client(server.address)
    client.start()
    summary = Replayer(
        lambda: iter_file_records([jul_2000]), server, ReplayOptions(speedup=speedup)
    ).run()
    client.join(timeout=30)
    assert client.lines == list(iter_lines(jul_2000))
    assert client.last_at - client.first_at == pytest.approx(2.0, rel=0.10)
    assert summary.sink["clients_served"] == 1 and summary.sink["lines_dropped"] == 0


def test_every_connected_client_gets_every_line(jul_2000):
    server = TcpLineServer("127.0.0.1", 0)
    clients = [Client(server.address) for _ in range(3)]
    for c in clients:
        c.start()
    assert server.wait_for_clients(3, timeout_s=5)
    Replayer(lambda: iter_file_records([jul_2000]), server, ReplayOptions(rate_per_s=20_000)).run()
    expected = list(iter_lines(jul_2000))
    for c in clients:
        c.join(timeout=30)
        assert c.lines == expected


def test_the_server_survives_a_disconnect_and_serves_the_next_client(jul_2000):
    server = TcpLineServer("127.0.0.1", 0)
    first = Client(server.address, stop_after=100)
    first.start()
    result = {}
    replay = threading.Thread(
        target=lambda: result.update(
            summary=Replayer(
                lambda: iter_file_records([jul_2000]), server, ReplayOptions(rate_per_s=2000)
            ).run()
        )
    )
    replay.start()
    first.join(timeout=30)
    time.sleep(0.3)  # nobody is connected now: the replay must wait, not send into the void
    second = Client(server.address)
    second.start()
    replay.join(timeout=30)
    second.join(timeout=30)

    expected = list(iter_lines(jul_2000))
    assert len(first.lines) >= 100 and first.lines == expected[: len(first.lines)]
    assert second.lines, "the second client got nothing"
    start = expected.index(second.lines[0])
    assert second.lines == expected[start:]  # a contiguous suffix, to the last line
    summary = result["summary"]
    assert summary.completed and summary.sink["clients_served"] == 2
    assert summary.sink["clients_lost"] == 1
    assert summary.sink["lines_dropped"] == 0
    assert summary.wall_seconds > 1999 / 2000 + 0.25  # the pause was waited out


def test_without_wait_lines_with_no_client_are_counted_as_dropped(jul_2000):
    server = TcpLineServer("127.0.0.1", 0, wait_for_client=False)
    summary = Replayer(
        lambda: iter_file_records([jul_2000]), server, ReplayOptions(rate_per_s=1e6)
    ).run()
    assert summary.lines_sent == 2000 and summary.sink["lines_dropped"] == 2000


def test_a_busy_port_is_a_config_error():
    first = TcpLineServer("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1"):
            TcpLineServer("127.0.0.1", first.address[1])
    finally:
        first.stop()
        first.close()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("localhost:9999", ("localhost", 9999)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        (":9999", ("127.0.0.1", 9999)),
        ("9999", ("127.0.0.1", 9999)),
        ("[::1]:9999", ("::1", 9999)),
    ],
)
def test_host_port(spec, expected):
    assert parse_host_port(spec) == expected


@pytest.mark.parametrize("spec", ["localhost:http", "host:70000", "::1:9999", "host:"])
def test_bad_host_port(spec):
    with pytest.raises(ConfigError):
        parse_host_port(spec)
