"""``logstream dashboard``: options, errors with the value and the fix, no Spark in the process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import logstream.dashboard
from logstream.cli import main
from logstream.dashboard import is_loopback, start_dashboard_thread
from logstream.errors import ConfigError


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "mysql://db/live"], "store 'mysql://db/live' is not supported"),
        (["--store", "sqlite:/out/logstream.db"], "use sqlite:///PATH"),
        (["--port", "70000"], "port 70000 is not a TCP port: use 1–65535"),
        (["--refresh", "0.1"], "--refresh 0.1 is out of range"),
        (["--top", "0"], "--top 0 is out of range"),
    ],
)
def test_bad_options_exit_2_naming_the_value(args, message, capsys):
    assert main(["dashboard", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_port_in_use_is_a_config_error(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["dashboard", "--store", f"sqlite:///{tmp_path}/s.db", "--port", str(port)])
        err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "pick another --port" in err


def test_options_reach_the_server(monkeypatch, tmp_path, capsys):
    seen = {}

    def fake_serve(path, host, port, **kw):
        seen.update(path=path, host=host, port=port, **kw)
        kw["on_ready"](f"http://{host}:{port}/")

    monkeypatch.setattr(logstream.dashboard, "serve_dashboard", fake_serve)
    store = tmp_path / "live.db"
    args = ["dashboard", "--store", f"sqlite:///{store}", "--port", "9001", "--refresh", "1"]
    assert main([*args, "--top", "5", "--spark-ui", "http://spark:4040"]) == 0
    assert seen["path"] == store and (seen["host"], seen["port"]) == ("127.0.0.1", 9001)
    assert (seen["refresh_s"], seen["top"], seen["spark_ui_url"]) == (1.0, 5, "http://spark:4040")
    err = capsys.readouterr().err
    assert "http://127.0.0.1:9001/" in err and "does not exist yet" in err


def test_the_default_store_is_the_one_logstream_run_writes_by_default(monkeypatch, capsys):
    """Issue 54 item 18: ``run`` wrote out/stream/logstream.db and ``dashboard`` read
    out/logstream.db, so with the defaults the page waited forever."""
    from logstream.pipeline.config import PipelineConfig

    seen = {}

    def fake_serve(path, *args, **kw):
        seen.update(p=path)
        kw["on_ready"]("http://127.0.0.1:8050/")

    monkeypatch.setattr(logstream.dashboard, "serve_dashboard", fake_serve)
    assert main(["dashboard"]) == 0
    run_default = PipelineConfig.build(source="dir", input_dir=Path("landing")).store_path
    assert Path(seen["p"]).absolute() == run_default.absolute()
    assert str(seen["p"]) in capsys.readouterr().err


def test_a_plain_path_is_a_sqlite_store(monkeypatch, tmp_path, capsys):
    """``--store out/stream/logstream.db`` is read as the SQLite file, as ``sqlite:///…``."""
    seen = {}
    monkeypatch.setattr(logstream.dashboard, "serve_dashboard", lambda p, *a, **k: seen.update(p=p))
    store = tmp_path / "live.db"
    assert main(["dashboard", "--store", str(store)]) == 0
    assert seen["p"] == store
    assert main(["dashboard", "--store", f"sqlite:///{store}"]) == 0
    assert seen["p"] == store


def test_help_names_the_options(capsys):
    assert main(["dashboard", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(o in out for o in ("--store", "--host", "--port", "--refresh", "--spark-ui"))


def test_other_addresses_than_loopback_print_a_warning(tmp_path, capsys):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with start_dashboard_thread(tmp_path / "s.db", host="0.0.0.0", port=0, no_auth=True) as server:
        assert server.port > 0
        page = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=10).read()
    assert b"logstream" in page
    assert "warning: the dashboard listens on 0.0.0.0" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"--host 0\.0\.0\.0 lets other machines reach"):
        start_dashboard_thread(tmp_path / "s.db", host="0.0.0.0", port=0)
    with pytest.raises(ConfigError, match="not a TCP port"):
        start_dashboard_thread(tmp_path / "s.db", port=-1)


def test_the_page_is_served_without_external_assets(tmp_path):
    with start_dashboard_thread(tmp_path / "s.db") as server:
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
        raw = urllib.request.urlopen(server.url + "_dash-layout", timeout=10).read()
    layout = json.loads(raw)
    link = layout["props"]["children"][0]["props"]["children"][-1]["props"]
    assert "/_dash-component-suites/" in page and "<style>" in page
    for cdn in ("unpkg.com", "cdn.plot.ly", "jsdelivr", "googleapis", "https://"):
        assert cdn not in page
    assert link["id"] == "spark-ui-link" and link["href"] == "http://127.0.0.1:4040"


def test_the_web_process_does_not_import_spark():
    code = (
        "import sys, logstream.cli, logstream.dashboard, logstream.dashboard.app;"
        "from logstream.dashboard import create_app; create_app('/nonexistent.db');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
