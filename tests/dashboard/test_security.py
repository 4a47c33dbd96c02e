"""The dashboard as a service: a hostile URL cannot crash it, foreign hosts are refused, every
response carries its security headers, an exposed dashboard asks for a password.

A 20,000-item ``IN`` in the filter (a 40 KB URL, which a link or an iframe sends) used to kill
the dashboard process with SIGSEGV: Arrow's C++ overflowed its stack on an OR of one equality
per item. Now the filter is refused in one line and the server keeps serving.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import sys
import urllib.parse

import pytest

from logstream.cli import main
from logstream.dashboard import start_dashboard_thread
from logstream.dashboard.guard import PASSWORD_ENV, Credentials, Guard
from tests.conftest import REPO
from tests.dashboard.helpers import filled_store

_EXPLORE = [
    ("explore-message", "children"),
    ("explore-live", "children"),
    ("explore-sites", "children"),
    ("explore-compare", "children"),
    ("explore-site", "options"),
]


def _explore_request(search: str) -> bytes:
    """The request the page sends when its URL (``search``) changes: the explore section's
    refresh callback."""
    return json.dumps(
        {
            "output": ".." + "...".join(f"{i}.{p}" for i, p in _EXPLORE) + "..",
            "outputs": [{"id": i, "property": p} for i, p in _EXPLORE],
            "inputs": [
                {"id": "explore-tick", "property": "n_intervals", "value": 0},
                {"id": "explore-url", "property": "search", "value": search},
                {"id": "zone", "property": "value", "value": "log"},
            ],
            "changedPropIds": ["explore-url.search"],
            "state": [],
        }
    ).encode()


def _ask(port: int, method: str, path: str, body: bytes | None = None, **headers: str):
    """One request; (status, headers (any case), body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        sent = {"Host": f"127.0.0.1:{port}", **{k.replace("_", "-"): v for k, v in headers.items()}}
        if body is not None:
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def test_a_20000_item_filter_is_refused_and_the_live_dashboard_keeps_serving(tmp_path):
    filled_store(tmp_path / "s.db")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop(PASSWORD_ENV, None)
    argv = [sys.executable, "-m", "logstream", "dashboard", "--store", str(tmp_path / "s.db")]
    server = subprocess.Popen(
        [*argv, "--port", "0"], env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert server.stderr is not None
        ready = server.stderr.readline()
        assert ready.startswith("dashboard on http://127.0.0.1:"), ready
        port = int(ready.split()[2].rstrip("/").rsplit(":", 1)[1])
        items = ",".join(["200"] * 20_000)
        query = "?" + urllib.parse.urlencode({"filter": f"status IN ({items})"})
        assert _ask(port, "GET", "/" + query)[0] == 431  # the 120 KB link: headers too large
        status, headers, _ = _ask(port, "GET", "/")
        assert status == 200
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["Content-Security-Policy"] == "frame-ancestors 'none'"
        assert headers["X-Content-Type-Options"] == "nosniff"
        for search, refusal in (
            (query, "80,011 characters, longer than a filter may be (10,000)"),  # a POST
            (f"?filter=status+IN+({','.join(['200'] * 1_001)})", "IN lists 1,001 items"),
            ("?filter=reflect('java.io.File','createTempFile','a','b')+IS+NULL", "reflect()"),
        ):
            status, _, body = _ask(
                port, "POST", "/_dash-update-component", _explore_request(search)
            )
            message = json.loads(body)["response"]["explore-message"]["children"]
            assert status == 200 and refusal in message, message
        with socket.create_connection(("127.0.0.1", port), timeout=60) as big:  # a 2 MiB body
            big.sendall(
                f"POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {2 << 20}\r\n\r\n".encode()
            )
            assert big.recv(64).startswith(b"HTTP/1.1 413 ")  # before its body is read
        for path in ("/", "/metrics/prometheus/"):  # DNS rebinding: another site's name
            status, headers, body = _ask(port, "GET", path, Host="attacker.example")
            assert status == 400 and b"logstream" not in body
            assert headers["X-Frame-Options"] == "DENY"
        assert _ask(port, "GET", "/", Host=f"localhost:{port}")[0] == 200
        status, _, metrics = _ask(port, "GET", "/metrics/prometheus/")
        assert status == 200 and b"logstream_events_total" in metrics
        assert server.poll() is None  # alive, serving
    finally:
        server.terminate()
        server.wait(30)


def test_an_exposed_dashboard_needs_a_password_or_no_auth(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    store = ["--store", str(tmp_path / "s.db"), "--port", "0"]
    assert main(["dashboard", *store, "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 lets other machines reach the dashboard" in err and PASSWORD_ENV in err
    assert main(["dashboard", *store, "--allowed-host", "http://a.example/"]) == 2
    assert "--allowed-host 'http://a.example/' is not a host name" in capsys.readouterr().err
    code = (
        "import sys\nfrom pyspark import SparkContext\nfrom logstream.cli import main\n"
        "status = main(sys.argv[1:])\n"
        "print('jvm' if SparkContext._gateway is not None else 'no-jvm', file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    run = ["run", "--input-dir", str(tmp_path), "--format", "common", "--dashboard"]
    done = subprocess.run(
        [sys.executable, "-c", code, *run, "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "COLUMNS": "300"},
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines[-1] == "no-jvm", done.stderr
    assert "--host 0.0.0.0 lets other machines reach the dashboard" in lines[0]


def test_with_a_password_every_route_asks_for_it(tmp_path):
    filled_store(tmp_path / "s.db")
    right = "Basic " + base64.b64encode(b"logstream:s3cret").decode()
    wrong = "Basic " + base64.b64encode(b"logstream:guess").decode()
    with start_dashboard_thread(
        tmp_path / "s.db", credentials=Credentials("logstream", "s3cret")
    ) as server:
        for path in ("/", "/_dash-layout", "/metrics/prometheus/"):
            for header in ({}, {"Authorization": wrong}, {"Authorization": "Basic %%%"}):
                status, headers, _ = _ask(server.port, "GET", path, **header)
                assert status == 401 and headers["WWW-Authenticate"].startswith("Basic ")
            assert _ask(server.port, "GET", path, Authorization=right)[0] == 200


def test_an_exception_of_the_app_is_a_plain_500_without_its_text():
    def app(environ, start_response):
        raise RuntimeError("secret detail /etc/shadow")

    said = []
    body = Guard(app, frozenset({"localhost"}))(
        {"HTTP_HOST": "localhost:8050", "REQUEST_METHOD": "GET", "PATH_INFO": "/"},
        lambda status, headers, exc_info=None: said.append((status, dict(headers))),
    )
    assert said[0][0].startswith("500") and said[0][1]["X-Frame-Options"] == "DENY"
    assert b"secret" not in b"".join(body) and b"RuntimeError" not in b"".join(body)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8050", True),
        ("localhost", True),
        ("[::1]:8050", True),
        ("dash.example.org", True),
        ("attacker.example", False),
        ("127.0.0.1.attacker.example", False),
        ("x@127.0.0.1", False),
        ("", False),
    ],
)
def test_the_host_header_decides(host, allowed):
    def app(environ, start_response):
        start_response("200 OK", [("X-Frame-Options", "SAMEORIGIN")])
        return [b"page"]

    guard = Guard(app, frozenset({"127.0.0.1", "localhost", "::1", "dash.example.org"}))
    said = []
    guard(
        {"HTTP_HOST": host}, lambda status, headers, exc_info=None: said.append((status, headers))
    )
    assert said[0][0].startswith("200" if allowed else "400")
    assert [v for k, v in said[0][1] if k == "X-Frame-Options"] == ["DENY"]


@pytest.fixture
def events_store(tmp_path):
    """A store whose pipeline wrote Parquet events: 40,000 in the store's hour, 1 in 8 a 503,
    in 8 files (so a scan has several record batches)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.dashboard.helpers import T0

    store = filled_store(tmp_path / "s.db")
    store.set_state({"output_dir": str(tmp_path / "out"), "output_format": "parquet"})
    (tmp_path / "out" / "events").mkdir(parents=True)
    start = int(T0.timestamp() * 1_000_000)
    for part in range(8):
        n = range(part * 5_000, (part + 1) * 5_000)
        pq.write_table(
            pa.table(
                {
                    "event_time": pa.array(
                        [start + i * 80_000 for i in n], pa.timestamp("us", "UTC")
                    ),
                    "client_host": [f"h{i % 7}" for i in n],
                    "url_path": [f"/p{i % 13}" for i in n],
                    "status": [503 if i % 8 == 0 else 200 for i in n],
                    "bytes_sent": [100] * len(n),
                    "virtual_host": [None] * len(n),
                }
            ),
            tmp_path / "out" / "events" / f"part-{part}.parquet",
        )
    return tmp_path / "s.db"


def test_a_filter_scan_is_bounded_in_time_and_its_errors_say_no_internals(
    events_store, monkeypatch
):
    from logstream.dashboard import explore_data
    from logstream.dashboard.explore_data import Explore, read_explore

    view = read_explore(events_store, Explore(filter="status >= 500"))
    assert view.message == "" and view.totals["total_requests"] == 40_000 // 8
    monkeypatch.setattr(explore_data, "SCAN_TIMEOUT_S", 0.0)
    view = read_explore(events_store, Explore(filter="status >= 500"))
    assert "scan of the events took longer than 0 s and was stopped" in view.message
    assert not view.comparison
    monkeypatch.undo()

    def broken(*args):
        raise OSError("/secret/path: Input/output error")

    monkeypatch.setattr(explore_data, "_event_period", broken)
    view = read_explore(events_store, Explore(filter="status >= 500"))
    assert "could not be read" in view.message and "secret" not in view.message
