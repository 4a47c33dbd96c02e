"""A local run listens on the loopback interface only (issue 36, item 5): Spark's UI, the
driver's RPC and block-manager ports, PySpark's gateway and callback server, and the
dashboard. Before, the UI listened on every interface (``*:4040``) and the driver's ports on
the machine's external address, and ``/jobs/`` answered another host without authentication.
``--conf spark.driver.bindAddress=0.0.0.0`` opens them again (docs/operations.md)."""

from __future__ import annotations

import ipaddress
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from tests.conftest import NASA_JUL_2000, data_file, free_port


def listening(pids: set[int]) -> list[tuple[str, str, int]]:
    """(process, address, port) of every listening TCP socket of these processes."""
    found = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            for conn in process.net_connections("tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((process.name(), conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            pass
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # Java's sockets: ::ffff:127.0.0.1
    return ip.is_loopback


def test_a_local_run_listens_on_the_loopback_only(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "access.log.gz").write_bytes(data_file(NASA_JUL_2000).read_bytes())
    out = tmp_path / "out"
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "true"}  # the tests switch it off elsewhere
    env.pop("SPARK_LOCAL_IP", None)  # what a user's shell has, not a test's choice
    port, ui_port = free_port(), free_port()  # 4040 may be another run's
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "logstream", "run", "--input-dir", str(landing)),
            *("--output-dir", str(out), "--state-dir", str(tmp_path / "state")),
            *("--store", f"sqlite:///{out / 'store.db'}", "--format", "common"),
            *("--trigger", "1 second", "--queries", "none", "--dashboard", "--port", str(port)),
            *("--conf", f"spark.ui.port={ui_port}"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not _committed(out / "store.db"):  # every server of the run is up by then
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no micro-batch within 5 minutes"
            time.sleep(0.2)
        pids = {proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))}
        sockets = listening(pids)
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/jobs/", timeout=30) as resp:
            ui_status = resp.status  # the UI is there, on the loopback
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    ports = {port for _, _, port in sockets}
    assert {ui_port, port} <= ports, sockets  # Spark's UI and the dashboard were listed
    assert len({name for name, _, _ in sockets}) >= 2, sockets  # the driver's and the JVM's
    assert [s for s in sockets if not is_loopback(s[1])] == [], sockets
    assert ui_status == 200


def _committed(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] > 0
    except sqlite3.Error:
        return False
