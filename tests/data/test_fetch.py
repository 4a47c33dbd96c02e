"""Download, resume and checksum against a local HTTP server (these machines have no internet)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from logstream.cli import main
from logstream.data import DATASETS, DataFetchError, fetch, find_logs

BODY = gzip.compress(
    b"".join(
        f'h{i} - - [01/Jul/1995:00:00:{i % 60:02d} -0400] "GET /{i}.html HTTP/1.0" 200 1\n'.encode()
        for i in range(20000)
    ),
    mtime=0,
)


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves BODY with Range support; ``/cut`` stops half way through the first answer."""

    cut_once = threading.Event()

    def do_GET(self):
        start = 0
        if rng := self.headers.get("Range"):
            start = int(rng.removeprefix("bytes=").split("-")[0])
        if start >= len(BODY):
            self.send_response(416)
            self.end_headers()
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(BODY) - start))
        self.end_headers()
        payload = BODY[start:]
        if self.path == "/cut" and not self.cut_once.is_set():
            self.cut_once.set()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    RangeHandler.cut_once.clear()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_download_is_verified_and_cached(server, tmp_path):
    path = fetch(DATASETS["nasa"], tmp_path, url=f"{server}/full", show_progress=False)
    assert path.read_bytes() == BODY
    assert (tmp_path / (path.name + ".sha256")).read_text().strip() == hashlib.sha256(
        BODY
    ).hexdigest()
    assert not (tmp_path / (path.name + ".part")).exists()
    # a second call uses the verified file, without the server
    assert (
        fetch(DATASETS["nasa"], tmp_path, url="http://127.0.0.1:9/none", show_progress=False)
        == path
    )


def test_interrupted_download_resumes_where_it_stopped(server, tmp_path):
    with pytest.raises(DataFetchError, match="run the same command again to resume"):
        fetch(DATASETS["nasa"], tmp_path, url=f"{server}/cut", show_progress=False)
    part = tmp_path / "NASA_access_log_Jul95.gz.part"
    assert 0 < part.stat().st_size < len(BODY)
    path = fetch(DATASETS["nasa"], tmp_path, url=f"{server}/cut", show_progress=False)
    assert path.read_bytes() == BODY


def test_checksum_mismatch_removes_the_file(server, tmp_path):
    with pytest.raises(DataFetchError, match="does not match the expected"):
        fetch(
            DATASETS["nasa"], tmp_path, url=f"{server}/full", sha256="0" * 64, show_progress=False
        )
    assert list(tmp_path.iterdir()) == []


def test_no_network_is_said_plainly(tmp_path):
    with pytest.raises(DataFetchError, match="no network"):
        fetch(
            DATASETS["nasa"], tmp_path, url="http://127.0.0.1:9/x", show_progress=False, timeout_s=2
        )


def test_cli_fetch_prints_the_path(server, tmp_path, capsys):
    assert main(["data", "fetch", "nasa", "--dest", str(tmp_path), "--url", f"{server}/x"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "NASA_access_log_Jul95.gz")
    assert main(["data", "fetch", "nope"]) == 2


def test_find_logs_prefers_explicit_then_data_dir_then_cache(tmp_path, monkeypatch, nasa_day):
    monkeypatch.setenv("LOGSTREAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(nasa_day.parent))
    assert find_logs([nasa_day]) == ([nasa_day], "explicit")
    assert find_logs() == ([nasa_day], "data-dir")
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(tmp_path / "nowhere"))
    assert find_logs() == ([], "none")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "NASA_access_log_Jul95.gz").write_bytes(BODY)
    assert find_logs() == ([tmp_path / "cache" / "NASA_access_log_Jul95.gz"], "cache")
    with pytest.raises(DataFetchError, match="does not exist"):
        find_logs([Path("/nonexistent.log")])
