"""A throwaway PostgreSQL server for the serving-store tests (Debian's ``postgresql``).

The session-scoped ``postgres_server`` fixture runs ``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/*/bin`` on a free localhost port, with trust authentication and its
socket in its own directory; it stops the server (``pg_ctl stop -m fast``) and removes the
cluster afterwards. ``initdb`` refuses to run as root, so as root (CI) the cluster belongs to
the ``postgres`` system user (``runuser -u postgres``). Missing binaries fail the tests: CI
installs them (``.ci/run``).
"""

from __future__ import annotations

import getpass
import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import free_port

#: Seconds to wait for the server to accept connections.
START_TIMEOUT_S = 60


@dataclass
class PostgresServer:
    """A running test cluster: ``url(db)`` names one of its databases; :meth:`pg_ctl`
    stops, starts or restarts it (the fault tests)."""

    port: int
    user: str
    bin_dir: Path
    as_user: list[str]
    data: Path | None = None
    options: str = ""

    def pg_ctl(self, action: str) -> None:
        """``pg_ctl stop|start|restart`` of the cluster (``-m fast``: connections are cut,
        as a service restart does), waiting until it is done; the port stays the same. A
        server already as asked (started, or stopped) is left so."""
        assert self.data is not None
        status = [*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "status"]
        running = subprocess.run(status, capture_output=True, timeout=60).returncode == 0
        if action in ("start", "stop") and running == (action == "start"):  # already so
            return
        done = subprocess.run(
            [*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast",
             "-l", str(self.data.parent / "server.log"), "-w", "-t", str(START_TIMEOUT_S),
             *(["-o", self.options] if action != "stop" else []), action],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"pg_ctl {action} failed: {done.stderr}{done.stdout}"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail(
            "PostgreSQL server binaries are missing (/usr/lib/postgresql/*/bin/initdb): "
            "install Debian's postgresql package (apt-get install postgresql; .ci/run does)",
            pytrace=False,
        )
    return Path(found[-1]).parent


@contextmanager
def postgres_cluster(durable: bool = False) -> Iterator[PostgresServer]:
    """Start a throwaway cluster on a free localhost port; stop and remove it on exit (also
    used by ``bench/bench_store.py``). Not ``durable`` (the tests): no fsync, asynchronous
    commits; ``durable``: the server's defaults."""
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="logstream-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
        as_user, user = ["runuser", "-u", "postgres", "--"], "postgres"
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    else:
        user = getpass.getuser()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)

    try:
        done = run(
            str(bin_dir / "initdb"), "-D", str(data), "-U", user, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        if done.returncode:
            pytest.fail(f"initdb failed: {done.stderr}", pytrace=False)
        port = free_port()
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c max_connections=60"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        done = run(
            str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
            "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start",
        )  # fmt: skip
        if done.returncode:
            log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
            pytest.fail(f"pg_ctl start failed: {done.stderr}{done.stdout}\n{log}", pytrace=False)
        server = PostgresServer(
            port=port, user=user, bin_dir=bin_dir, as_user=as_user, data=data, options=options
        )
        try:
            _wait_ready(server)
            yield server
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on a free localhost port for the whole session (trust auth)."""
    with postgres_cluster() as server:
        yield server


def _wait_ready(server: PostgresServer) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of a new empty database of the session's server."""
    return postgres_server.new_database()
